"""The simulator takes speculative decoding as a run measured it (sim.spec): the profile's draft schedule and
the acceptance by position pooled over the levels whose batches drafted that far; tokens per step follow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadproof.config.profile import packaged_profile
from loadproof.errors import UsageError
from loadproof.predict.deployment import UNBOUNDED
from loadproof.predict.throughput import measured_drafts
from loadproof.records import RequestRecord
from loadproof.sim.config import CostModel
from tests.unit.report.synthetic import write_run

S = 1_000_000_000


def counters(t_s: float, drafts: float, *by_pos: float) -> dict:
    values = {
        "spec_decode_num_drafts_total": drafts,
        "spec_decode_num_draft_tokens_total": 3 * drafts,
        "spec_decode_num_accepted_tokens_total": sum(by_pos),
    }
    values.update({f"spec_decode_num_accepted_tokens_per_pos_total_{k}": v for k, v in enumerate(by_pos)})
    return {"t_ns": int(t_s * S), "values": values}


def spec_run(tmp_path: Path, profile: dict | None, generated: tuple[float, ...] | None = None) -> Path:
    records = [
        RequestRecord(
            request_id=f"c{c}-{i}",
            endpoint="chat",
            scenario="throughput",
            family="code",
            concurrency=c,
            batch=0,
            ok=True,
            send_ns=int(t0 * S),
            first_token_ns=int((t0 + 1) * S),
            last_token_ns=int((t0 + 5) * S),
            end_ns=int((t0 + 5) * S),
            output_tokens=64,
        )
        for c, t0 in ((1, 1.0), (8, 11.0))
        for i in range(c)
    ]
    path = write_run(tmp_path, "spec", "throughput", records, {"profile": profile} if profile else None)
    # c1 (K5): 100 drafts, accepted 90, 80, 70, 60, 50 by position; c8 (K3): 200 drafts, 150, 120, 90, 0, 0
    rows = [
        counters(0, 0, 0, 0, 0, 0, 0),
        counters(10, 100, 90, 80, 70, 60, 50),
        counters(20, 300, 240, 200, 160, 60, 50),
    ]
    for row, value in zip(rows, generated or ()):
        row["values"]["generation_tokens_total"] = value
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def reference_profile() -> dict:
    profile = packaged_profile("reference-tp4pp2").model_dump()
    profile["speculative"] = {"method": "ngram", "draft_tokens": 5, "draft_schedule": {"1-4": 5, "5-32": 3}}
    return profile


def test_each_position_pools_only_the_levels_that_drafted_that_far(tmp_path: Path):
    drafts = measured_drafts(spec_run(tmp_path, reference_profile()))
    assert drafts.accepted_by_pos == pytest.approx([240 / 300, 200 / 300, 160 / 300, 60 / 100, 50 / 100])
    assert drafts.draft_by_batch == [[4, 5], [UNBOUNDED, 3]]
    cost = CostModel(spec_draft_by_batch=drafts.draft_by_batch, spec_accepted_by_pos=drafts.accepted_by_pos)
    assert cost.tokens_per_step(1) == pytest.approx(1 + (240 + 200 + 160) / 300 + 0.6 + 0.5)
    assert cost.tokens_per_step(8) == pytest.approx(1 + (240 + 200 + 160) / 300)
    assert cost.tokens_per_step(500) == pytest.approx(cost.tokens_per_step(8))  # the last length holds beyond
    assert CostModel(spec_accepted_by_pos=[0.9]).tokens_per_step(4) == 1.0  # no drafts: one token a step


def test_the_drafted_share_counts_the_steps_that_drafted_nothing(tmp_path: Path):
    # c1: 1 request, 350 accepted in 100 drafted steps and 50 undrafted: 501 generated (its first token from the
    # prefill); c8: 8 requests, 360 accepted in 200 drafted steps and 40 undrafted: 608 more
    drafts = measured_drafts(spec_run(tmp_path, reference_profile(), generated=(0.0, 501.0, 1109.0)))
    assert drafts.drafted_share == pytest.approx(300 / 390)
    assert "76.9% of decode steps drafted" in drafts.source
    cost = CostModel(
        spec_draft_by_batch=drafts.draft_by_batch,
        spec_accepted_by_pos=drafts.accepted_by_pos,
        spec_drafted_share=drafts.drafted_share,
    )
    assert cost.tokens_per_step(8) == pytest.approx(1 + 300 / 390 * (240 + 200 + 160) / 300)


def test_a_run_that_cannot_say_is_one_line(tmp_path: Path):
    with pytest.raises(UsageError, match="names no profile with \\[speculative\\]"):
        measured_drafts(spec_run(tmp_path / "a", None))
    with pytest.raises(UsageError, match="no run directory"):
        measured_drafts(tmp_path / "nowhere")
