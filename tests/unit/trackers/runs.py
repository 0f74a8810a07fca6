"""A small run directory for the trackers' tests: a throughput run written with RunWriter (tests/unit/report/
synthetic.py), its claims.json written as `loadproof report` writes it, one failed request, a private target URL
and a clock anchor; and claims.json rewritten by hand where a test needs a claim the run does not make."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loadproof.metrics import compute_claims
from loadproof.metrics.claims import claims_payload
from loadproof.store.run_dir import load_run, write_claims
from tests.unit.report.synthetic import stream, write_run

ANCHOR_WALL_NS = 1_796_105_503_000_000_000  # 2026-12-01T06:11:43Z
PRIVATE_HOST = "10.11.12.13"
MANIFEST: dict[str, Any] = {
    "clock_anchor": {"wall_time_ns": ANCHOR_WALL_NS, "perf_counter_ns": 0},
    "target": {"model": "tiny-model", "endpoint": "chat", "url": f"http://{PRIVATE_HOST}:8123"},
    "engine_version": "0.9.1",
    "options": {"url": f"http://{PRIVATE_HOST}:8123", "repeats": 3, "families": ["english"], "api_key_env": None},
}


def tracked_run(root: Path, name: str = "throughput-20261201-061143-abcd", failed: bool = True) -> Path:
    """Twelve streamed requests a second apart (the first sent 1 s after the anchor), one of them failed."""
    records = [
        stream(f"english-{i}", send=1.0 + i, first=1.1 + i + 0.01 * i, rate=40.0 + i, repeat=i, tokens=9 + i)
        for i in range(12)
    ]
    for r in records:
        r.endpoint, r.prompt_tokens, r.finish_reason, r.model = "chat", 20 + r.repeat, "length", "tiny-model"
    if failed:
        bad = records[5]
        bad.ok, bad.error_kind, bad.first_token_ns, bad.last_token_ns, bad.output_tokens = (
            False,
            "http",
            None,
            None,
            None,
        )
        bad.chunk_ns, bad.chunk_tokens, bad.http_status, bad.finish_reason = [], [], 500, None
    path = write_run(root, name, "throughput", records, manifest=MANIFEST)
    run = load_run(path)
    write_claims(path, claims_payload(run.run_id, compute_claims(run)))
    return path


def claims_of(path: Path) -> list[dict[str, Any]]:
    claims: list[dict[str, Any]] = json.loads((path / "claims.json").read_text())["claims"]
    return claims


def add_claims(path: Path, *extra: dict[str, Any]) -> None:
    """claims.json with `extra` claims appended (as report would write them)."""
    payload = json.loads((path / "claims.json").read_text())
    payload["claims"] += list(extra)
    (path / "claims.json").write_text(json.dumps(payload))
