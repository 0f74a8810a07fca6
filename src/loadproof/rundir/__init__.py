"""Typed contents of a run directory (docs/architecture.md, "The run directory"): what the measuring side
writes and the pure side reads, one msgspec type per file kind, each with a schema version.

- `manifest.Manifest`: manifest.json;
- `engine_sample.EngineSample`: one row of metrics.jsonl (an engine /metrics sample);
- `telemetry_sample.TelemetrySample`: one row of telemetry.jsonl (host and GPU);
- `event.Event`: one row of events.jsonl;
- `answer.Answer`: one row of answers.jsonl (quality runs).

Requests and chunks keep their type in `loadproof.records`. Each type's `version` is the schema version
it describes; `manifest.json` records the version of every file kind (`Manifest.schema`), and
`store.readers` holds one reader per version. Standard library and msgspec only: `verify` reaches here.
"""

from loadproof.rundir.answer import Answer
from loadproof.rundir.engine_sample import EngineSample
from loadproof.rundir.event import Event
from loadproof.rundir.json_value import JSONObject
from loadproof.rundir.manifest import Manifest
from loadproof.rundir.telemetry_sample import TelemetrySample

__all__ = ["Answer", "EngineSample", "Event", "JSONObject", "Manifest", "TelemetrySample"]
