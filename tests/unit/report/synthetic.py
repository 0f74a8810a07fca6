"""Synthetic run directories for report tests: written with RunWriter, read back with load_run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loadproof.records import RequestRecord
from loadproof.store.run_dir import RunWriter

S = 1_000_000_000


def stream(
    request_id: str,
    *,
    send: float,
    first: float,
    rate: float,
    tokens: int = 11,
    family: str = "english",
    scenario: str = "throughput",
    concurrency: int = 1,
    repeat: int = 0,
    batch: int = 0,
    ok: bool = True,
    prompt_id: str = "",
) -> RequestRecord:
    """A streamed request: first token at `first`, then one token per chunk at `rate` tokens/s.

    Its decode rate is exactly `rate` up to nanosecond rounding: (tokens - 1) / (last - first).
    """
    chunk_s = [first + i / rate for i in range(tokens)]
    chunk_ns = [round(t * S) for t in chunk_s]
    return RequestRecord(
        request_id=request_id,
        endpoint="completions",
        scenario=scenario,
        family=family,
        prompt_id=prompt_id,
        concurrency=concurrency,
        repeat=repeat,
        batch=batch,
        ok=ok,
        send_ns=round(send * S),
        first_token_ns=chunk_ns[0],
        last_token_ns=chunk_ns[-1],
        end_ns=chunk_ns[-1] + 1000,
        prompt_tokens=20,
        output_tokens=tokens,
        chunk_ns=chunk_ns,
        chunk_tokens=[1] * tokens,
        error_kind=None if ok else "cancelled",
    )


def throughput_plan(records: list[RequestRecord]) -> dict[str, Any]:
    """The plan a throughput run of these records writes (`plans.throughput.ThroughputPlan`)."""
    return {
        "plan_version": 2,
        "plan": {
            "families": list(dict.fromkeys(r.family for r in records)) or ["english"],
            "concurrency": sorted({r.concurrency for r in records}) or [1],
            "max_tokens": 16,
        },
    }


def write_run(
    root: Path,
    name: str,
    scenario: str,
    records: list[RequestRecord],
    manifest: dict[str, Any] | None = None,
    telemetry: list[dict[str, Any]] | None = None,
) -> Path:
    planned = throughput_plan(records) if scenario == "throughput" else {}
    with RunWriter(root / name) as writer:
        writer.write_manifest(
            {
                "run_id": name,
                "scenario": scenario,
                "target": {"model": "tiny", "endpoint": "completions"},
                **planned,
                **(manifest or {}),
            }
        )
        for record in records:
            writer.append(record)
    if telemetry:
        with open(root / name / "telemetry.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in telemetry)
    return root / name


def throughput_run(root: Path, name: str, rates: list[float], families: tuple[str, ...] = ("english",)) -> Path:
    """One c1 request per repeat and family at the given decode rates (repeat i gets rates[i])."""
    records = [
        stream(f"{fam}-{i}", send=10.0 * i, first=10.0 * i + 0.1, rate=rate, family=fam, repeat=i)
        for fam in families
        for i, rate in enumerate(rates)
    ]
    return write_run(root, name, "throughput", records)
