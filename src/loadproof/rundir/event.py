"""One scenario event, a row of `events.jsonl`: what happened (`kind`) and when (`t_ns`, on the run's
monotonic clock, where the moment matters to a claim).

Kinds a claim reads: `cancel` (a scenario cancelled its streams), `window_start`, `sessions_start`,
`admission_stalled` (with `evidence`), `schedule_start`/`schedule_end` (load, per worker), `engine_idle`,
`before_window`, `precision_stop` (load with --until-precision; `records`: how many its decision read). Every
other field of an event is kept in `fields`, as JSON (`planned`, `worker`, `waited_s`, ...): a row may carry
anything, and a kind no claim reads is still exported.

Version 1: a flat JSON object (`wall_time_s`, `kind`, then the fields), the shape every run has written.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from loadproof.rundir.json_value import JSONObject


class Event(msgspec.Struct, kw_only=True, omit_defaults=True):
    version: ClassVar[int] = 1

    kind: str
    t_ns: int | None = None
    wall_time_s: float | None = None
    evidence: str | None = None  # admission_stalled: what showed the engine stopped admitting
    fields: JSONObject = {}  # the kind's other fields


__all__ = ["Event"]
