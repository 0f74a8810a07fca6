"""verify recomputes the intervals of a rescaled run conditioned on each batch's arrivals
(metrics/conditioning.py) and its steady window ended at the last send: a published bundle verifies, an interval
rewritten as the unconditioned one is a mismatch, and so is a plan rewritten as made before (`arrivals_known`
false: the recomputed intervals are then the unconditioned ones, not those published; `ends_known` false: the
whole run's rates conditioned on the sends, not on the ends with the drain). Each tamperer rewrites SHA256SUMS,
so only the recomputation can catch it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loadproof.publish import publish
from loadproof.verify import verify
from tests.unit.metrics.test_conditioning import CONDITIONED, bursty_records
from tests.unit.metrics.test_load import plan
from tests.unit.metrics.test_whole_run_rates import ENDS, WHOLE_RUN
from tests.unit.publish.synthetic import reseal
from tests.unit.verify.load_bundle import write_load_run

NAME = "load-20261206-130000-5eed"
RUN = f"runs/{NAME}"
RECORDS = bursty_records()


def write_run(root: Path) -> Path:
    p = plan(
        planned_requests=len(RECORDS),
        rate_rps=4.0,
        schedule_span_s=150.0,
        slo={"ttft": 0.1},
        rescaled=True,
        steady_window=True,
        arrivals_known=True,
        ends_known=True,
    )
    return write_load_run(root, NAME, p, RECORDS)


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("conditioned")
    publish([write_run(root / "src")], root / "bundle")
    return root / "bundle"


@pytest.fixture
def bundle(published, tmp_path):
    shutil.copytree(published, tmp_path / "bundle")
    return tmp_path / "bundle"


def claims_of(bundle: Path) -> list[dict]:
    return json.loads((bundle / RUN / "claims.json").read_text())["claims"]


def test_the_conditioned_intervals_are_recomputed(published):
    result = verify(published)
    assert not result.problems, result.problems
    conditioned = [
        c["name"] for c in claims_of(published) if CONDITIONED in (c.get("interval") or {}).get("method", "")
    ]
    for name in ("load.ttft_s.p50", "load.e2el_s.mean", "load.slo_attainment_pct", "load.steady.output_tokens_per_s"):
        assert name in conditioned
    checks = {c.name: c for c in result.checks}
    assert all(checks[name].ok for name in conditioned)


def test_an_interval_rewritten_as_the_unconditioned_one_is_a_mismatch(bundle):
    path = bundle / RUN / "claims.json"
    payload = json.loads(path.read_text())
    for claim in payload["claims"]:
        if claim["name"] == "load.e2el_s.mean":
            claim["interval"]["method"] = claim["interval"]["method"].replace(", " + CONDITIONED, "")
    path.write_text(json.dumps(payload))
    reseal(bundle)
    bad = {c.name: c.reason for c in verify(bundle).checks if not c.ok}
    assert list(bad) == ["load.e2el_s.mean"]
    assert "interval method" in bad["load.e2el_s.mean"]


def test_a_plan_rewritten_as_made_before_is_a_mismatch(bundle):
    path = bundle / RUN / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["plan"]["arrivals_known"]
    path.write_text(json.dumps(manifest))
    reseal(bundle)
    bad = {c.name for c in verify(bundle).checks if not c.ok}
    assert {"load.ttft_s.p50", "load.e2el_s.mean", "load.steady.end_s"} <= bad


def test_the_whole_runs_rates_are_recomputed_with_the_drain(published):
    result = verify(published)
    checks = {c.name: c for c in result.checks}
    by_name = {c["name"]: c for c in claims_of(published)}
    for name in WHOLE_RUN:
        assert ENDS in by_name[name]["interval"]["method"], name
        assert checks[name].ok


def test_a_drain_widened_by_hand_or_a_plan_without_it_is_a_mismatch(bundle):
    path = bundle / RUN / "claims.json"
    payload = json.loads(path.read_text())
    for claim in payload["claims"]:
        if claim["name"] == "load.request_throughput_rps":
            claim["interval"]["high"] *= 1.01
    path.write_text(json.dumps(payload))
    manifest_path = bundle / RUN / "manifest.json"
    reseal(bundle)
    assert {c.name for c in verify(bundle).checks if not c.ok} == {"load.request_throughput_rps"}
    manifest = json.loads(manifest_path.read_text())
    del manifest["plan"]["ends_known"]
    manifest_path.write_text(json.dumps(manifest))
    reseal(bundle)
    assert set(WHOLE_RUN) <= {c.name for c in verify(bundle).checks if not c.ok}
