"""AIPerf's profile export (0.13, schema 1.4): `profile_export_aiperf.json`, the run's statistics (each metric a
`{unit, avg, p50, ..., p99, min, max, std}` object in ms or per second), its `input_config` (the endpoint, the
phase: its type, concurrency or rate, requests) and `aiperf_version`; beside it `profile_export.jsonl`, one line a
request: `metadata` (`request_start_ns`, `request_end_ns`, `credit_issued_ns` on the wall clock in ns, whether it
was cancelled) and `metrics` (`time_to_first_token`, `inter_chunk_latency`: each gap between successive
token-bearing chunks, `usage_prompt_tokens`, `usage_completion_tokens`, in ms and tokens), or an `error`.

AIPerf's names differ from loadproof's where their meanings do: its `inter_token_latency` is (request latency -
TTFT) / (output tokens - 1), loadproof's TPOT; its `inter_chunk_latency` is loadproof's ITL. The version is the
file's own (`aiperf_version`); another one, or a schema other than 1.x, is refused as another version's shape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadproof.ingest.parsed import Length, ParsedRun, Request, Workload, local_time, local_zone
from loadproof.ingest.reading import Refused, parse_json_lines, read_bytes, shape_error
from loadproof.metrics.imported import (
    DURATION,
    E2EL,
    FAILED,
    INPUT_RATE,
    ITL,
    OUTPUT_RATE,
    REQUEST_RATE,
    REQUESTS,
    TPOT,
    TTFT,
    stat_name,
)
from loadproof.rundir.source import StatedFigure

TOOL = "aiperf"
VERSIONS = ("0.13.",)  # the releases whose export this reads
SUMMARY = "profile_export_aiperf.json"
RECORDS = "profile_export.jsonl"
SHAPE = (
    "aiperf_version",
    "schema_version",
    "input_config",
    "request_count",
    "time_to_first_token",
    "benchmark_duration",
)
LATENCIES = {
    "time_to_first_token": TTFT,
    "inter_chunk_latency": ITL,
    "inter_token_latency": TPOT,
    "request_latency": E2EL,
}
RATES = {
    "request_throughput": REQUEST_RATE,
    "output_token_throughput": OUTPUT_RATE,
    "input_token_throughput": INPUT_RATE,
}
MS = 1e-3


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and ("aiperf_version" in data or ("request_count" in data and "input_config" in data))


def read(data: Any, path: Path, sha256: str) -> list[ParsedRun]:
    name = str(path)
    missing = [k for k in SHAPE if k not in data]
    if missing:
        raise shape_error(name, "AIPerf", "0.13 export", missing)
    version = str(data["aiperf_version"])
    if not version.startswith(VERSIONS) or not str(data["schema_version"]).startswith("1."):
        raise Refused(
            f"{name}: AIPerf {version} (schema {data['schema_version']}): another version's shape; "
            f"this loadproof reads AIPerf {', '.join(v + 'x' for v in VERSIONS)}"
        )
    config = data["input_config"] if isinstance(data["input_config"], dict) else {}
    records = path.with_name(RECORDS)
    requests = _requests(records) if records.is_file() else None
    return [
        ParsedRun(
            tool=TOOL,
            version=version,
            file=path.name,
            sha256=sha256,
            workload=_workload(config),
            model=_model(config),
            url=((config.get("endpoint") or {}).get("urls") or [None])[0],
            requests=requests,
            stated=_stated(data),
            **_dates(data),
        )
    ]


def _dates(data: dict[str, Any]) -> dict[str, Any]:
    """When the run ran: AIPerf writes `start_time` and `end_time` as ISO 8601 local times without a zone
    (`datetime.fromtimestamp`), read in this machine's zone (docs/import.md)."""
    started, ended = local_time(data.get("start_time")), local_time(data.get("end_time"))
    if started is None:
        return {}
    zone = local_zone(started)
    return {"started": started, "ended": ended, "dated": f"start_time and end_time (local time, read as {zone})"}


def _requests(path: Path) -> list[Request]:
    out = []
    for row in parse_json_lines(read_bytes(path), str(path)):
        meta, metrics = (row.get("metadata") or {}), (row.get("metrics") or {})
        if not isinstance(meta.get("request_start_ns"), int):
            raise Refused(f"{path}: a record without metadata.request_start_ns: not AIPerf 0.13's per-request shape")
        start = meta["request_start_ns"] / 1e9
        end = (meta.get("request_end_ns") or meta["request_start_ns"]) / 1e9
        error = row.get("error")
        ttft = _value(metrics, "time_to_first_token")
        chunks: list[float] = []
        if error is None and not meta.get("was_cancelled") and ttft is not None:
            t = start + ttft * MS
            chunks.append(t)
            for gap in _value(metrics, "inter_chunk_latency", many=True) or []:
                t += gap * MS
                chunks.append(t)
        credit = meta.get("credit_issued_ns")
        out.append(
            Request.streamed(
                start,
                end,
                chunks,
                scheduled_s=credit / 1e9 if isinstance(credit, int) else None,
                prompt_tokens=_tokens(metrics, "usage_prompt_tokens", "input_sequence_length"),
                output_tokens=_tokens(metrics, "usage_completion_tokens", "output_sequence_length"),
                error=None if error is None else str(error.get("message") if isinstance(error, dict) else error),
            )
        )
    return out


def _value(metrics: dict[str, Any], key: str, many: bool = False) -> Any:
    value = (metrics.get(key) or {}).get("value")
    if many:
        return [float(v) for v in value] if isinstance(value, list) else None
    return float(value) if isinstance(value, (int, float)) else None


def _tokens(metrics: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = _value(metrics, key)
        if isinstance(value, float):
            return round(value)
    return None


def _stated(data: dict[str, Any]) -> list[StatedFigure]:
    out = []
    count = _avg(data, "request_count")
    errors = data.get("error_summary") or []
    failed = sum(int(e.get("count", 0)) for e in errors if isinstance(e, dict))
    if count is not None:
        out.append(
            StatedFigure(figure=REQUESTS, value=count + failed, where="request_count.avg + error_summary counts")
        )
    out.append(StatedFigure(figure=FAILED, value=failed, where="error_summary counts"))
    duration = _avg(data, "benchmark_duration")
    if duration is not None:
        out.append(StatedFigure(figure=DURATION, value=duration, where="benchmark_duration.avg"))
    for key, figure in RATES.items():
        value = _avg(data, key)
        if value is not None:
            out.append(StatedFigure(figure=figure, value=value, where=f"{key}.avg"))
    for key, figure in LATENCIES.items():
        stats = data.get(key)
        if not isinstance(stats, dict) or stats.get("unit") != "ms":
            continue
        for stat, value in stats.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            ours = {"avg": "mean", "std": "std", "min": "min", "max": "max"}.get(stat)
            if ours is None and stat[:1] == "p" and stat[1:].replace(".", "").isdigit():
                ours = stat_name(float(stat[1:]))
            if ours is not None:
                out.append(StatedFigure(figure=figure, stat=ours, value=value * MS, where=f"{key}.{stat}"))
    return out


def _avg(data: dict[str, Any], key: str) -> float | None:
    value = (data.get(key) or {}).get("avg") if isinstance(data.get(key), dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def _model(config: dict[str, Any]) -> str | None:
    items = (config.get("models") or {}).get("items") or []
    return str(items[0].get("name")) if items and isinstance(items[0], dict) else None


def _workload(config: dict[str, Any]) -> Workload:
    phases = [p for p in config.get("phases") or [] if isinstance(p, dict) and p.get("kind") == "profiling"]
    phase = phases[0] if phases else {}
    prompts = ((config.get("datasets") or [{}])[0] or {}).get("prompts") or {}
    rate = phase.get("request_rate") or phase.get("rate")
    concurrency = phase.get("concurrency")
    api = (config.get("endpoint") or {}).get("type")  # AIPerf's word for the API it called
    isl, osl = (prompts.get("isl") or {}), (prompts.get("osl") or {})
    return Workload(
        arrival="poisson" if isinstance(rate, (int, float)) else "concurrent",
        rate_rps=float(rate) if isinstance(rate, (int, float)) else None,
        max_concurrency=int(concurrency) if isinstance(concurrency, int) else None,
        num_requests=int(phase["requests"]) if isinstance(phase.get("requests"), int) else None,
        input_tokens=_length(isl),
        output_tokens=_length(osl),
        endpoint="chat" if api == "chat" else "completions",
    )


def _length(spec: dict[str, Any]) -> Length:
    mean, std = spec.get("mean"), spec.get("stddev") or spec.get("std") or 0
    if not isinstance(mean, (int, float)):
        return Length()
    return Length("fixed", float(mean)) if not std else Length("normal", float(mean), float(std))
