"""Per-model claims of a load run with a model mix, by hand: share, failures, TTFT, tokens/s and SLO
attainment of each model's records."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.plans.load import MixedModel
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics import test_load


def mixed_run(slo: dict[str, float] | None = None) -> tuple[Run, list]:
    records = [
        msgspec.structs.replace(r, model="adapter-a" if i % 2 else "base") for i, r in enumerate(test_load.RECORDS)
    ]
    plan = msgspec.structs.replace(
        test_load.plan(),
        model_mix=[MixedModel(model="base", weight=0.5), MixedModel(model="adapter-a", weight=0.5)],
        slo=slo if slo is not None else test_load.plan().slo,
    )
    run = rv.run_of(None, {"scenario": "load", "plan": msgspec.to_builtins(plan)}, records, events=test_load.EVENTS)
    return run, records


def test_each_models_figures_come_from_its_own_records():
    run, records = mixed_run()
    got = {c.name: c.value for c in compute_claims(run)}
    for model in ("base", "adapter-a"):
        rows = [r for r in records if r.model == model]
        ok = [r for r in rows if r.ok and r.first_token_ns is not None and r.last_token_ns is not None]
        assert got[f"load.model.{model}.requests"] == len(rows)
        assert got[f"load.model.{model}.share_pct"] == pytest.approx(100 * len(rows) / len(records))
        assert got[f"load.model.{model}.failed_requests"] == len(rows) - len(ok)
        tokens = sum(r.output_tokens or 0 for r in ok)
        assert got[f"load.model.{model}.output_tokens_per_s"] == pytest.approx(
            tokens / got["load.duration_s"], rel=1e-6
        )
        if len(ok) == 1:
            assert got[f"load.model.{model}.ttft_s.p50"] == pytest.approx((ok[0].first_token_ns - ok[0].send_ns) / 1e9)
    assert sum(got[f"load.model.{m}.requests"] for m in ("base", "adapter-a")) == got["load.requests"]


def test_no_mix_no_model_claims():
    assert not any(
        ".model." in c.name
        for c in compute_claims(
            rv.run_of(
                None,
                {"scenario": "load", "plan": msgspec.to_builtins(test_load.plan())},
                test_load.RECORDS,
                events=test_load.EVENTS,
            )
        )
    )


def docs_runs(_tmp_path) -> list[Run]:  # tests/unit/metrics/test_docs_formulas.py
    return [mixed_run({"ttft": 1.0})[0]]
