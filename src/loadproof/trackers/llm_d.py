"""`loadproof track RUN --llm-d FILE`: the run as an llm-d benchmark report, version 0.2.1 (trackers/llm_d_schema.py),
written as JSON and checked against the schema's types before it is written.

What goes where:

- `run`: `uid` the run id, `description` "<model> [<run id>]" (llm-d's own default label), `time` the first send to
  the last end (ISO-8601, UTC; the duration `PT<seconds>S`). No user name.
- `scenario.stack`: one `inference_engine` component when the run recorded its engine or version: the engine's
  kind and version (`unknown` where not recorded), role `replica`, its replicas (a fleet's count, else 1), the
  model, the GPUs telemetry saw (their name and count; `unknown` and 0 without telemetry) and the profile's tensor
  and pipeline parallelism; `native.config` the profile as `publish` sanitizes it.
- `scenario.load`: tool `loadproof` and its version, source `unknown` (loadproof's prompts are authored, drawn or
  a user's data set: the run's plan says which), the input and output lengths the server counted (`fixed` where
  every request had the same, else `other` with their mean, min and max), `native.args` the command's options as
  `publish` sanitizes them.
- `results.request_performance.aggregate`: requests (total recorded, failures, input and output lengths of the
  successful ones), latency (time_to_first_token, time_per_output_token, inter_token_latency and request_latency,
  in s and s/token: the samples loadproof's own latency claims summarize, metrics/latency.py, so each p50 ... p99.9,
  mean and max equals the run's `load.*` claim of a load run; stddev the population's; percentiles linear,
  numpy's default) and throughput (input, output and total tokens and successful requests per second over the
  run's span, its first send to its last end: a mean only).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from loadproof.errors import UsageError
from loadproof.metrics.distribution import percentile, summarize
from loadproof.metrics.latency import samples_ns, span_s, succeeded
from loadproof.trackers import llm_d_schema as br
from loadproof.trackers.source import TrackedRun
from loadproof.units import NS_PER_S

TOOL = "loadproof"
# Statistics' percentiles loadproof's summaries (metrics/distribution.py) do not hold, by the schema's field name
LOWER = {"p0p1": 0.1, "p1": 1.0, "p5": 5.0, "p10": 10.0, "p25": 25.0, "p75": 75.0}
SUMMARIZED = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p99p9": "p99_9"}


def check_target(path: Path) -> None:
    """Before anything is read: a new file in a folder that exists."""
    if path.exists():
        raise UsageError(f"--llm-d {path}: the file exists; give a new path")
    if not path.parent.is_dir():
        raise UsageError(f"--llm-d {path}: no folder {path.parent}")


def statistics(values: Sequence[float], units: br.Units, per: float = 1.0) -> br.Statistics | None:
    """The schema's Statistics of `values`, each divided by `per` as loadproof's claims divide them (None for no
    values)."""
    summary = summarize(values)
    if summary is None:
        return None
    ordered = sorted(values)
    fields: dict[str, Any] = {k: percentile(ordered, p) / per for k, p in LOWER.items()}
    fields.update({k: summary.percentiles[ours] / per for k, ours in SUMMARIZED.items()})
    return br.Statistics(
        units=units,
        mean=summary.mean / per,
        stddev=summary.std / per,
        min=ordered[0] / per,
        max=summary.max / per,
        **fields,
    )


def sequence_length(values: Sequence[int]) -> br.SequenceLength | None:
    if not values:
        return None
    low, high = min(values), max(values)
    if low == high:
        return br.SequenceLength(distribution="fixed", value=float(low))
    return br.SequenceLength(
        distribution="other", value=math.fsum(values) / len(values), min=low, max=high if high >= 1 else None
    )


def _iso(wall_ns: int | None) -> str | None:
    if wall_ns is None:
        return None
    return datetime.fromtimestamp(wall_ns / NS_PER_S, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _stack(tracked: TrackedRun) -> list[br.Component] | None:
    manifest = tracked.run.manifest
    if tracked.engine_kind is None and tracked.engine_version is None:
        return None
    profile = tracked.published.get("profile") if isinstance(tracked.published.get("profile"), dict) else None
    parallel = (profile or {}).get("parallel") or {}
    telemetry = manifest.telemetry
    names = [n for n in (telemetry.names or []) if n] if telemetry is not None else []
    fleet = manifest.target.fleet
    engine = br.InferenceEngine(
        tool=tracked.engine_kind or "unknown",
        tool_version=tracked.engine_version or "unknown",
        role="replica",
        replicas=max(1, len(fleet.replicas)) if fleet is not None else 1,
        model=br.Model(name=tracked.model or "unknown"),
        accelerator=br.Accelerator(
            model=names[0] if names else "unknown",
            count=telemetry.gpus if telemetry is not None else 0,
            parallelism=br.Parallelism(tp=int(parallel.get("tensor") or 1), pp=int(parallel.get("pipeline") or 1)),
        ),
    )
    return [
        br.Component(
            metadata=br.ComponentMetadata(label=tracked.engine_kind or "engine", cfg_id=_digest(profile or {})),
            standardized=engine,
            native=br.Native(config=profile),
        )
    ]


def _load(tracked: TrackedRun) -> br.Load | None:
    ok = [r for r in tracked.run.records if succeeded(r)]
    input_len = sequence_length([r.prompt_tokens for r in ok if r.prompt_tokens is not None])
    if input_len is None:
        return None
    options = tracked.published.get("options") if isinstance(tracked.published.get("options"), dict) else {}
    version = (tracked.run.manifest.versions or {}).get("loadproof") or "unknown"
    workers = tracked.run.manifest.workers
    return br.Load(
        metadata=br.LoadMetadata(cfg_id=_digest(options), description=f"loadproof {tracked.scenario}"),
        standardized=br.LoadStandardized(
            tool=TOOL,
            tool_version=version,
            parallelism=max(1, workers.count) if workers is not None else 1,
            source="unknown",
            input_seq_len=input_len,
            output_seq_len=sequence_length([r.output_tokens for r in ok if r.output_tokens is not None]),
        ),
        native=br.Native(args=options or None),
    )


def _performance(tracked: TrackedRun) -> br.RequestPerformance:
    records = tracked.run.records
    ok = [r for r in records if succeeded(r)]
    values = samples_ns(records)
    inputs = [float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None]
    outputs = [float(r.output_tokens) for r in ok if r.output_tokens is not None]
    duration = span_s(records)

    def rate(total: float, units: br.Units) -> br.Statistics | None:
        return br.Statistics(units=units, mean=total / duration) if duration > 0 else None

    return br.RequestPerformance(
        aggregate=br.AggregateRequestPerformance(
            requests=br.AggregateRequests(
                total=len(records),
                failures=sum(1 for r in records if not r.ok),
                input_length=statistics(inputs, "count"),
                output_length=statistics(outputs, "count"),
            ),
            latency=br.AggregateLatency(
                time_to_first_token=statistics(values["ttft_s"], "s", NS_PER_S),
                time_per_output_token=statistics(values["tpot_s"], "s/token", NS_PER_S),
                inter_token_latency=statistics(values["itl_s"], "s/token", NS_PER_S),
                request_latency=statistics(values["e2el_s"], "s", NS_PER_S),
            ),
            throughput=br.AggregateThroughput(
                input_token_rate=rate(math.fsum(inputs), "tokens/s"),
                output_token_rate=rate(math.fsum(outputs), "tokens/s"),
                total_token_rate=rate(math.fsum(inputs) + math.fsum(outputs), "tokens/s"),
                request_rate=rate(len(ok), "queries/s"),
            ),
        )
    )


def report(tracked: TrackedRun) -> br.BenchmarkReport:
    """The run as a benchmark report (see the module's docstring), checked against the schema's types."""
    start, end = tracked.start_ns(), tracked.end_ns()
    duration = f"PT{(end - start) / NS_PER_S:.6f}S" if start is not None and end is not None else None
    out = br.BenchmarkReport(
        run=br.Run(
            uid=tracked.run_id,
            description=f"{tracked.model or 'unknown'} [{tracked.run_id}]",
            time=br.RunTime(start=_iso(start), end=_iso(end), duration=duration),
        ),
        scenario=br.Scenario(stack=_stack(tracked), load=_load(tracked)),
        results=br.Results(request_performance=_performance(tracked)),
    )
    br.check(out)
    return out


def write(tracked: TrackedRun, path: Path) -> br.BenchmarkReport:
    """`report(tracked)` written to `path` (a new file) as indented JSON."""
    check_target(path)
    made = report(tracked)
    path.write_bytes(msgspec.json.format(msgspec.json.encode(made), indent=2) + b"\n")
    return made
