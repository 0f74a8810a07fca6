"""GuideLLM's benchmarks file (0.8, `--output kind=json`, `benchmarks.json`): `metadata` (`version` 2 of its
format, `guidellm_version`), and `benchmarks`, one per strategy it ran, each with its `config.strategy` (type:
synchronous, concurrent, throughput, constant or poisson, with its streams or rate), `metrics` (each a
distribution of `successful`, `errored` and `total` requests: mean, median, std_dev, percentiles p001 ... p999)
and `requests` (`successful`, `errored`, `incomplete`: each request's start and end, prompt and output tokens,
and `info.timings`: `targeted_start`, `first_token_iteration`, `last_token_iteration`; wall-clock seconds).

GuideLLM keeps no time per chunk, so an imported request has its first and last token but no gaps between
chunks: TTFT, TPOT and E2EL are recomputed, ITL is not claimed. Its `inter_token_latency_ms` is (last token -
first token) / (output tokens - 1), loadproof's TPOT; its `time_per_output_token_ms` (request latency / output
tokens) has no loadproof claim and is not carried. Each benchmark becomes a run.
"""

from __future__ import annotations

from typing import Any

from loadproof.ingest.parsed import Length, ParsedRun, Request, Workload, unix_time
from loadproof.ingest.reading import Refused, get, shape_error
from loadproof.metrics.imported import DURATION, E2EL, FAILED, OUTPUT_RATE, REQUEST_RATE, REQUESTS, TPOT, TTFT
from loadproof.rundir.source import StatedFigure

TOOL = "guidellm"
VERSIONS = ("0.8.",)
FORMAT = 2  # metadata.version: the format of the file
BENCHMARK_SHAPE = ("config", "metrics", "requests", "start_time", "end_time", "duration")
# GuideLLM's distribution of a metric -> (the figure, its scale to loadproof's unit)
LATENCIES = {
    "time_to_first_token_ms": (TTFT, 1e-3),
    "inter_token_latency_ms": (TPOT, 1e-3),
    "request_latency": (E2EL, 1.0),
}
RATES = {"requests_per_second": REQUEST_RATE, "output_tokens_per_second": OUTPUT_RATE}
PERCENTILES = {"p001": "p0_1", "p01": "p1", "p05": "p5", "p10": "p10", "p25": "p25", "p50": "p50"}
PERCENTILES |= {"p75": "p75", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99_9"}


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and "benchmarks" in data and "metadata" in data


def read(data: Any, name: str, sha256: str) -> list[ParsedRun]:
    meta = get(data, "metadata", name)
    version = str(meta.get("guidellm_version", "?"))
    if meta.get("version") != FORMAT or not version.startswith(VERSIONS):
        raise Refused(
            f"{name}: GuideLLM {version} (format {meta.get('version')}): another version's shape; this loadproof "
            f"reads GuideLLM {', '.join(v + 'x' for v in VERSIONS)} (format {FORMAT})"
        )
    benchmarks = data["benchmarks"]
    if not isinstance(benchmarks, list) or not benchmarks:
        raise Refused(f"{name}: no benchmarks in it")
    runs = []
    for i, bench in enumerate(benchmarks):
        missing = [k for k in BENCHMARK_SHAPE if not isinstance(bench, dict) or k not in bench]
        if missing:
            raise shape_error(f"{name} benchmark {i + 1}", "GuideLLM", "0.8 benchmark", missing)
        runs.append(
            ParsedRun(
                tool=TOOL,
                version=version,
                file=name,
                sha256=sha256,
                workload=_workload(bench, data),
                model=_backend(data).get("model"),
                url=_backend(data).get("target"),
                requests=_requests(bench, name),
                stated=_stated(bench),
                part=f"benchmark {i + 1}" if len(benchmarks) > 1 else "",
                **_dates(bench, i),
            )
        )
    return runs


def _dates(bench: dict[str, Any], i: int) -> dict[str, Any]:
    """When the benchmark ran: its `start_time` and `end_time`, Unix times (seconds, UTC: `time.time()`)."""
    started, ended = unix_time(bench.get("start_time")), unix_time(bench.get("end_time"))
    if started is None:
        return {}
    return {"started": started, "ended": ended, "dated": f"benchmarks[{i}].start_time and end_time (Unix time)"}


def _requests(bench: dict[str, Any], name: str) -> list[Request]:
    groups = bench["requests"]
    if not isinstance(groups, dict):
        raise Refused(f"{name}: requests is not a table of successful, errored and incomplete requests")
    out = []
    for group in ("successful", "errored", "incomplete"):
        for row in groups.get(group) or []:
            timings = ((row.get("info") or {}).get("timings")) or {}
            start = row.get("request_start_time") or timings.get("request_start")
            if not isinstance(start, (int, float)):
                raise Refused(f"{name}: a request without a start time: not GuideLLM 0.8's per-request shape")
            end = row.get("request_end_time") or timings.get("request_end")
            end_s = float(end) if isinstance(end, (int, float)) else float(start)
            first, last = timings.get("first_token_iteration"), timings.get("last_token_iteration")
            ok = group == "successful" and isinstance(first, (int, float)) and isinstance(last, (int, float))
            first_s = float(first) if ok and isinstance(first, (int, float)) else None
            last_s = float(last) if ok and isinstance(last, (int, float)) else None
            error = (row.get("info") or {}).get("error")
            out.append(
                Request(
                    start_s=float(start),
                    end_s=end_s,
                    ok=ok,
                    scheduled_s=timings.get("targeted_start"),
                    first_s=first_s,
                    last_s=last_s,
                    prompt_tokens=row.get("prompt_tokens"),
                    output_tokens=row.get("output_tokens") if ok else None,
                    error=None if ok else str(error or f"{group} (GuideLLM)"),
                )
            )
    return out


def _stated(bench: dict[str, Any]) -> list[StatedFigure]:
    metrics = bench["metrics"]
    totals = metrics.get("request_totals") or {}
    out = [
        StatedFigure(figure=REQUESTS, value=float(totals.get("total", 0)), where="metrics.request_totals.total"),
        StatedFigure(
            figure=FAILED,
            value=float(totals.get("errored", 0)) + float(totals.get("incomplete", 0)),
            where="metrics.request_totals.errored + incomplete",
        ),
        StatedFigure(figure=DURATION, value=float(bench["duration"]), where="duration"),
    ]
    for key, figure in RATES.items():
        mean = ((metrics.get(key) or {}).get("successful") or {}).get("mean")
        if isinstance(mean, (int, float)):
            out.append(StatedFigure(figure=figure, value=float(mean), where=f"metrics.{key}.successful.mean"))
    for key, (figure, scale) in LATENCIES.items():
        dist = (metrics.get(key) or {}).get("successful") or {}
        for stat, ours in (("mean", "mean"), ("std_dev", "std"), ("min", "min"), ("max", "max")):
            if isinstance(dist.get(stat), (int, float)):
                out.append(
                    StatedFigure(
                        figure=figure, stat=ours, value=dist[stat] * scale, where=f"metrics.{key}.successful.{stat}"
                    )
                )
        for stat, value in (dist.get("percentiles") or {}).items():
            if stat in PERCENTILES and isinstance(value, (int, float)):
                out.append(
                    StatedFigure(
                        figure=figure,
                        stat=PERCENTILES[stat],
                        value=value * scale,
                        where=f"metrics.{key}.successful.percentiles.{stat}",
                    )
                )
    return out


def _backend(data: dict[str, Any]) -> dict[str, Any]:
    """The backend's arguments as the file's `config.spec.backend` keeps them (target URL, model, request format)."""
    config = data.get("config")
    spec = config.get("spec") if isinstance(config, dict) else None
    backend = spec.get("backend") if isinstance(spec, dict) else None
    found = backend if isinstance(backend, dict) else {}
    return {k: str(v) for k, v in found.items() if k in ("model", "target", "request_format") and v is not None}


def _workload(bench: dict[str, Any], data: dict[str, Any]) -> Workload:
    strategy = (bench["config"] or {}).get("strategy") or {}
    kind = str(strategy.get("type_", ""))
    rate = strategy.get("rate")
    streams = strategy.get("streams") or strategy.get("max_concurrency")
    count = ((bench["config"].get("constraints") or {}).get("max_requests") or {}).get("args", {}).get("count")
    arrival = {"constant": "constant", "poisson": "poisson"}.get(kind, "concurrent")
    return Workload(
        arrival=arrival,
        rate_rps=float(rate) if arrival != "concurrent" and isinstance(rate, (int, float)) else None,
        max_concurrency=int(streams) if arrival == "concurrent" and isinstance(streams, int) else None,
        num_requests=int(count) if isinstance(count, int) else None,
        input_tokens=Length(),
        output_tokens=Length(),
        endpoint="chat" if "chat" in _backend(data).get("request_format", "") else "completions",
        ignore_eos=True,
    )
