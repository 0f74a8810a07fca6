"""`vllm bench serve --save-result` (vLLM 0.32, `vllm/benchmarks/serve.py`): one JSON object, the traffic it was
asked for (`request_rate`, `burstiness`, `max_concurrency`, `num_prompts`), what it measured (`duration`,
`completed`, `failed`, the throughputs, `mean_/median_/std_/pNN_` of `ttft`, `tpot`, `itl` and `e2el` in ms), and,
with `--save-detailed`, every request: `start_times` (time.perf_counter at the send), `ttfts`, `itls` (each gap
between successive chunks), `input_lens`, `output_lens`, `errors`.

The file states no vLLM version: it is read as the 0.32 shape when it has every key that version writes
(`SHAPE`), and refused as another version's shape otherwise. With the detailed lists each request's chunk times
are rebuilt exactly as vLLM measured them: send + TTFT, then each ITL added; without them the run holds the
stated figures only.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

from loadproof.ingest.parsed import ParsedRun, Request, Workload, local_time, local_zone
from loadproof.ingest.reading import Refused, number, shape_error
from loadproof.metrics.imported import (
    DURATION,
    FAILED,
    OUTPUT_RATE,
    REQUEST_RATE,
    REQUESTS,
    STATED_LATENCIES,
    stat_name,
)
from loadproof.rundir.source import StatedFigure

TOOL = "vllm-bench"
VERSION = "0.32 shape"  # the file states none (see the module doc)
SHAPE = (
    "date",
    "backend",
    "model_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
)
DETAILED = ("start_times", "ttfts", "itls", "input_lens", "output_lens", "errors")
_STAT = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2el)_ms$")
CHAT_BACKENDS = ("openai-chat", "vllm-chat")


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and "request_throughput" in data and "backend" in data


def read(data: Any, name: str, sha256: str) -> list[ParsedRun]:
    if not isinstance(data, dict):
        raise Refused(f"{name}: not a vllm bench serve result (a JSON object)")
    missing = [k for k in SHAPE if k not in data]
    if missing:
        raise shape_error(name, "vllm bench serve", VERSION, missing)
    rate = data["request_rate"]
    burstiness = number(data, "burstiness", name)
    workload = Workload(
        arrival="poisson" if burstiness == 1.0 else "gamma",
        rate_rps=None if rate == "inf" else number(data, "request_rate", name),
        burstiness=burstiness,
        max_concurrency=int(data["max_concurrency"]) if data["max_concurrency"] is not None else None,
        num_requests=int(number(data, "num_prompts", name)),
        endpoint="chat" if data["backend"] in CHAT_BACKENDS else "completions",
    )
    completed, failed = int(number(data, "completed", name)), int(number(data, "failed", name))
    stated = [
        StatedFigure(figure=REQUESTS, value=completed + failed, where="completed + failed"),
        StatedFigure(figure=FAILED, value=failed, where="failed"),
        StatedFigure(figure=DURATION, value=number(data, "duration", name), where="duration"),
        StatedFigure(figure=REQUEST_RATE, value=number(data, "request_throughput", name), where="request_throughput"),
        StatedFigure(figure=OUTPUT_RATE, value=number(data, "output_throughput", name), where="output_throughput"),
    ]
    for key, value in data.items():
        match = _STAT.match(key)
        if match is None or not isinstance(value, (int, float)):
            continue
        stat = {"mean": "mean", "median": "p50", "std": "std"}.get(match.group(1)) or stat_name(float(match.group(2)))
        figure = f"{match.group(3)}_s"
        if figure in STATED_LATENCIES:
            stated.append(StatedFigure(figure=figure, stat=stat, value=value / 1000, where=key))
    detailed = [k for k in DETAILED if k in data]
    requests = _requests(data, name) if len(detailed) == len(DETAILED) else None
    return [
        ParsedRun(
            tool=TOOL,
            version=VERSION,
            file=name,
            sha256=sha256,
            workload=workload,
            model=str(data["model_id"]),
            requests=requests,
            stated=stated,
            **_dates(data),
        )
    ]


def _requests(data: dict[str, Any], name: str) -> list[Request]:
    columns = [data[k] for k in DETAILED]
    if not all(isinstance(c, list) for c in columns) or len({len(c) for c in columns}) != 1:
        raise Refused(f"{name}: its per-request lists ({', '.join(DETAILED)}) are not lists of one length")
    out = []
    for start, ttft, itls, prompt, output, error in zip(*columns):
        ok = not error and ttft is not None and ttft > 0
        chunks: list[float] = []
        if ok:
            t = start + ttft
            chunks.append(t)
            for gap in itls:
                t += gap
                chunks.append(t)
        out.append(
            Request.streamed(
                float(start),
                chunks[-1] if chunks else float(start),
                chunks,
                ok=ok,
                prompt_tokens=int(prompt) if prompt is not None else None,
                output_tokens=int(output) if ok and output is not None else None,
                error=str(error) if error else None,
            )
        )
    return out


def _dates(data: dict[str, Any]) -> dict[str, Any]:
    """When the run ran: vLLM writes `date` (YYYYMMDD-HHMMSS, its machine's local time, no zone) as it saves the
    result, after the benchmark, so it is the run's end, and its start is `date` less `duration` (to the second);
    read in this machine's zone (docs/import.md). Nothing where `date` is not such a time."""
    ended = local_time(data.get("date"), "%Y%m%d-%H%M%S")
    duration = data.get("duration")
    if ended is None or isinstance(duration, bool) or not isinstance(duration, (int, float)):
        return {}
    try:
        started = ended - timedelta(seconds=float(duration))
    except (OverflowError, ValueError):  # an infinite or absurd duration
        return {}
    if not 0 <= duration < math.inf:
        return {}
    return {
        "started": started,
        "ended": ended,
        "dated": f"date (local time as the result was saved, read as {local_zone(ended)}) less duration",
    }
