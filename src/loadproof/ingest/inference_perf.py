"""inference-perf's lifecycle metrics (0.7, `inference_perf/reportgen/base.py`), a folder as its local storage
writes it: `summary_lifecycle_metrics.json` (the whole run), `stage_N_lifecycle_metrics.json` (each load stage:
`load_summary` with the requested and achieved rate, `successes` with latency percentiles in seconds and
throughputs, `failures`), `per_request_lifecycle_metrics.json` where `report.request_lifecycle.per_request` was
on (each request's start and end, `info.response_metrics.output_token_times` and `server_usage`, its error), and
`config.yaml`, the configuration it ran with (the load type, each stage's rate, the lengths' distributions, the
server). The files state no version of inference-perf: they are read as the 0.7 shape when every stage file has
the keys that version writes, and refused as another version's otherwise.

Each stage becomes a run. With the per-request file its requests are split among the stages in the order they
were sent (each stage file counts its own, `load_summary.count`; stages run one after another), each request's
token-bearing chunks the distinct times of `output_token_times`; without it a run holds the stage file's figures.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from loadproof.ingest.parsed import Length, ParsedRun, Request, Workload
from loadproof.ingest.reading import Refused, get, number, parse_json, read_bytes, sha256_of, shape_error
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

TOOL = "inference-perf"
VERSION = "0.7 shape"
SUMMARY = "summary_lifecycle_metrics.json"
PER_REQUEST = "per_request_lifecycle_metrics.json"
CONFIG = "config.yaml"
_STAGE = re.compile(r"^stage_(\d+)_lifecycle_metrics\.json$")
SHAPE = ("benchmark_time_seconds", "load_summary", "successes", "failures")
LATENCIES = {
    "time_to_first_token": TTFT,
    "inter_token_latency": ITL,
    "time_per_output_token": TPOT,
    "request_latency": E2EL,
}
THROUGHPUTS = {
    "requests_per_sec": REQUEST_RATE,
    "output_tokens_per_sec": OUTPUT_RATE,
    "input_tokens_per_sec": INPUT_RATE,
}


def is_folder(path: Path) -> bool:
    return path.is_dir() and ((path / SUMMARY).is_file() or any(_STAGE.match(p.name) for p in path.iterdir()))


def read_folder(folder: Path) -> list[ParsedRun]:
    stages = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _STAGE.match(p.name)))
    if not stages:
        raise Refused(f"{folder}: no stage_N_lifecycle_metrics.json: inference-perf writes one per stage")
    config = _config(folder / CONFIG)
    per_request = None
    if (folder / PER_REQUEST).is_file():
        raw = read_bytes(folder / PER_REQUEST)
        per_request = parse_json(raw, str(folder / PER_REQUEST))
        if not isinstance(per_request, list):
            raise Refused(f"{folder / PER_REQUEST}: not a list of requests")
    runs = []
    taken = 0
    ordered = sorted(per_request, key=_start) if per_request is not None else None
    for stage, path in stages:
        raw = read_bytes(path)
        data = parse_json(raw, str(path))
        if not isinstance(data, dict):
            raise Refused(f"{path}: not an inference-perf stage report (a JSON object)")
        missing = [k for k in SHAPE if k not in data]
        if missing:
            raise shape_error(str(path), TOOL, VERSION, missing)
        count = int(number(get(data, "load_summary", str(path)), "count", str(path)))
        requests = None
        if ordered is not None:
            requests = [_request(row, PER_REQUEST) for row in ordered[taken : taken + count]]
            taken += count
        runs.append(
            ParsedRun(
                tool=TOOL,
                version=VERSION,
                file=path.name,
                sha256=sha256_of(raw),
                workload=_workload(config, stage, data),
                model=_text(config, "server", "model_name"),
                url=_text(config, "server", "base_url"),
                requests=requests,
                stated=_stated(data, str(path)),
                part=f"stage {stage}" if len(stages) > 1 else "",
            )
        )
    if ordered is not None and taken != len(ordered):
        raise Refused(f"{folder}: the stage files count {taken} requests, {PER_REQUEST} holds {len(ordered)}")
    return runs


def _start(row: Any) -> float:
    if not isinstance(row, dict) or not isinstance(row.get("start_time"), (int, float)):
        raise Refused(f"{PER_REQUEST}: a request without a start_time: not inference-perf 0.7's per-request shape")
    return float(row["start_time"])


def _request(row: dict[str, Any], name: str) -> Request:
    end = number(row, "end_time", name)
    error = row.get("error")
    response = (row.get("info") or {}).get("response_metrics") or {}
    usage = response.get("server_usage") or {}
    times = response.get("output_token_times") or []
    chunks = sorted({float(t) for t in times if isinstance(t, (int, float))})
    input_tokens = usage.get(
        "prompt_tokens", ((row.get("info") or {}).get("request_metrics") or {}).get("text", {}).get("input_tokens")
    )
    output_tokens = usage.get("completion_tokens", response.get("output_tokens"))
    return Request.streamed(
        _start(row),
        end,
        chunks if error is None else [],
        prompt_tokens=int(input_tokens) if isinstance(input_tokens, (int, float)) else None,
        output_tokens=int(output_tokens) if isinstance(output_tokens, (int, float)) else None,
        error=None if error is None else str((error or {}).get("error_msg") or error),
    )


def _stated(data: dict[str, Any], name: str) -> list[StatedFigure]:
    successes = get(data, "successes", name)
    failed = int(number(get(data, "failures", name), "count", name))
    load = get(data, "load_summary", name)
    out = [
        StatedFigure(figure=REQUESTS, value=number(load, "count", name), where="load_summary.count"),
        StatedFigure(figure=FAILED, value=failed, where="failures.count"),
        StatedFigure(
            figure=DURATION, value=number(data, "benchmark_time_seconds", name), where="benchmark_time_seconds"
        ),
    ]
    for key, figure in THROUGHPUTS.items():
        value = (successes.get("throughput") or {}).get(key)
        if isinstance(value, (int, float)):
            out.append(StatedFigure(figure=figure, value=float(value), where=f"successes.throughput.{key}"))
    for key, figure in LATENCIES.items():
        stats = (successes.get("latency") or {}).get(key) or {}
        for stat, value in stats.items():
            if not isinstance(value, (int, float)):
                continue
            ours = {"mean": "mean", "median": "p50", "min": "min", "max": "max"}.get(stat)
            if ours is None and re.fullmatch(r"p\d+(\.\d+)?", stat):
                ours = stat_name(float(stat[1:]))
            if ours is not None:
                out.append(
                    StatedFigure(figure=figure, stat=ours, value=float(value), where=f"successes.latency.{key}.{stat}")
                )
    return out


def _config(path: Path) -> dict[str, Any]:
    """config.yaml as inference-perf dumped it; {} where the folder has none (the workload is then the stage's rate)."""
    if not path.is_file():
        return {}
    import yaml  # type: ignore[import-untyped]  # PyYAML: inference-perf writes its configuration as YAML

    try:
        data = yaml.safe_load(read_bytes(path).decode("utf-8", errors="replace"))
    except yaml.YAMLError as exc:
        raise Refused(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    return data if isinstance(data, dict) else {}


def _text(config: dict[str, Any], section: str, key: str) -> str | None:
    value = (config.get(section) or {}).get(key)
    return str(value) if value is not None else None


def _workload(config: dict[str, Any], stage: int, data: dict[str, Any]) -> Workload:
    load = config.get("load") or {}
    stages = load.get("stages") or []
    given = stages[stage] if stage < len(stages) and isinstance(stages[stage], dict) else {}
    kind = str(load.get("type") or "constant")
    rate = data["load_summary"].get("requested_rate", given.get("rate"))
    streams = given.get("concurrency_level") if kind == "concurrent" else None
    inputs = (config.get("data") or {}).get("input_distribution")
    outputs = (config.get("data") or {}).get("output_distribution")
    return Workload(
        arrival={"poisson": "poisson", "constant": "constant", "concurrent": "concurrent"}.get(kind, kind),
        rate_rps=None if kind == "concurrent" or not isinstance(rate, (int, float)) else float(rate),
        max_concurrency=int(streams) if isinstance(streams, int) else None,
        num_requests=given.get("num_requests") if isinstance(given.get("num_requests"), int) else None,
        duration_s=float(given["duration"]) if isinstance(given.get("duration"), (int, float)) else None,
        input_tokens=_length(inputs),
        output_tokens=_length(outputs),
        endpoint="chat" if (config.get("api") or {}).get("type") == "chat" else "completions",
        ignore_eos=bool((config.get("server") or {}).get("ignore_eos")),
        seed=int(load["base_seed"]) % 2**31 if isinstance(load.get("base_seed"), int) else 0,
    )


def _length(spec: Any) -> Length:
    """An inference-perf distribution (normal, fixed, uniform... between min and max)."""
    if not isinstance(spec, dict):
        return Length()
    kind, mean, std = spec.get("type", "normal"), spec.get("mean"), spec.get("std_dev") or 0.0
    if not isinstance(mean, (int, float)):
        return Length()
    if kind == "fixed" or std == 0:
        return Length("fixed", float(mean))
    if kind == "uniform":
        return Length("uniform", float(spec.get("min", mean)), float(spec.get("max", mean)))
    return Length(str(kind), float(mean), float(std))
