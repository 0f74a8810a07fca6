"""--until-precision's figures, stopping rule and claims on synthetic records: the interval that stops a run is
the one the published claim of the same records carries, the rule waits for its minimum counts, and the claims
are recomputed from the records and the stop event alone."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.intervals import min_count
from loadproof.metrics.latency import latency_claims
from loadproof.metrics.precision import (
    FIGURES,
    MIN_REQUESTS,
    STOP_EVENT,
    estimates,
    met,
    minimum_of,
    precision_claims,
)
from loadproof.metrics.slo import slo_claims
from loadproof.records import RequestRecord
from tests import rundir_values as rv
from tests.unit.metrics.test_docs_formulas import docs_text, undocumented
from tests.unit.metrics.test_load import EVENTS, T0, plan, rec

S = 1_000_000_000


def records(n: int, seed: int = 7, spread: float = 0.3) -> list[RequestRecord]:
    """n successful requests, one a second, each with a lognormal TTFT around 0.2 s (`spread`: its sigma) and
    three gaps around 20 ms, in the order they ended."""
    draw = random.Random(seed)
    out = []
    for i in range(n):
        ttft = 0.2 * draw.lognormvariate(0, spread)
        gaps = tuple(0.02 * draw.lognormvariate(0, spread) for _ in range(3))
        out.append(rec(i, float(i), float(i) + 0.001, ttft, gaps))
    return sorted(out, key=lambda r: r.end_ns)


def test_every_figure_is_a_latency_stat_or_attainment():
    assert "ttft_p99" in FIGURES and "itl_p50" in FIGURES and "e2el_mean" in FIGURES and "attainment" in FIGURES
    assert "ttft_std" not in FIGURES and "ttft_max" not in FIGURES  # no interval to stop on
    assert minimum_of("ttft_p99") == min_count(0.99) == 368  # LoadGen-style: the two-sided interval's fewest
    assert minimum_of("itl_p50") == MIN_REQUESTS  # a median's own minimum (6) is below the floor
    assert minimum_of("e2el_mean") == minimum_of("attainment") == MIN_REQUESTS


@pytest.mark.parametrize("figure", ["ttft_p50", "ttft_p90", "itl_p50", "tpot_p95", "e2el_mean", "itl_mean"])
def test_the_interval_that_stops_a_run_is_the_published_claims(figure):
    rs = records(400)
    (e,) = estimates(rs, {figure: 5.0}, {})
    latency, stat = figure.rsplit("_", 1)
    (claim,) = [c for c in latency_claims(rs) if c.name == f"load.{latency}_s.{stat}"]
    assert e.value == claim.value and e.interval == claim.interval
    assert e.relative_pct == pytest.approx((claim.interval.high - claim.interval.low) / 2 / claim.value * 100)


def test_attainment_is_the_published_shares_interval():
    rs = records(100)
    slo = {"ttft": 0.22}
    (e,) = estimates(rs, {"attainment": 5.0}, slo)
    (claim,) = [c for c in slo_claims(rs, slo, 100.0) if c.name == "load.slo_attainment_pct"]
    assert e.value == pytest.approx(claim.value) and e.interval == claim.interval
    assert 0 < e.value < 100 and e.values == 100


def test_a_narrow_interval_does_not_stop_a_run_before_its_minimum_count():
    # every TTFT the same: an interval of width 0 from the first values on
    same = [rec(i, float(i), float(i), 0.2, (0.02,)) for i in range(400)]
    for n in (MIN_REQUESTS - 1, MIN_REQUESTS):
        (e,) = estimates(same[:n], {"ttft_p50": 1.0}, {})
        assert e.relative_pct == 0.0
        assert e.reached(1.0) is (n >= MIN_REQUESTS)
    assert estimates(same[:367], {"ttft_p99": 1.0}, {})[0].interval is None  # a p99 of 367 has none
    assert not met(same[:367], {"ttft_p99": 1.0}, {})
    assert met(same[:368], {"ttft_p99": 1.0}, {})


def test_an_itl_pooled_over_few_requests_waits_for_enough_requests():
    rs = records(MIN_REQUESTS - 1, spread=0.01)  # 87 near-equal gaps from 29 requests
    (e,) = estimates(rs, {"itl_p50": 5.0}, {})
    assert e.values == 3 * len(rs) >= MIN_REQUESTS and e.relative_pct is not None and e.relative_pct < 5.0
    assert not e.reached(5.0) and e.requests == MIN_REQUESTS - 1


def test_the_rule_needs_every_figure_and_more_requests_narrow_it():
    rs = records(2000)
    asked = {"ttft_p50": 3.0, "itl_p50": 3.0}
    first = next(n for n in range(MIN_REQUESTS, 2001, 10) if met(rs[:n], asked, {}))
    assert MIN_REQUESTS <= first < 2000
    assert not met(rs[: first - 10], asked, {})
    widths = [estimates(rs[:n], {"ttft_p50": 3.0}, {})[0].relative_pct for n in (100, 400, 1600)]
    assert widths[0] > widths[1] > widths[2]  # about 1 / sqrt(n)
    assert not met(rs, {"ttft_p50": 3.0, "ttft_p99": 0.1}, {})  # one figure short: no stop


def claim_values(rs, asked, events, slo=None) -> dict[str, object]:
    return {c.name: c for c in precision_claims(rs, asked, slo or {}, rv.events(events), T0)}


def test_a_run_stopped_on_precision_claims_what_the_decision_read():
    rs = records(600)
    asked = {"ttft_p50": 4.0, "itl_p50": 4.0}
    k = next(n for n in range(MIN_REQUESTS, 600) if met(rs[:n], asked, {}))
    stop_ns = rs[k - 1].end_ns + S // 2
    got = claim_values(rs[: k + 5], asked, [*EVENTS, {"kind": STOP_EVENT, "t_ns": stop_ns, "records": k}])
    assert got["load.precision.stopped_by"].value == "precision"
    assert got["load.precision.requests"].value == k + 5  # those in flight at the stop finished
    assert got["load.precision.requests_at_stop"].value == k
    assert got["load.precision.decided_s"].value == pytest.approx((stop_ns - T0) / S)
    at_stop = {e.figure: e.relative_pct for e in estimates(rs[:k], asked, {})}
    final = {e.figure: e.relative_pct for e in estimates(rs[: k + 5], asked, {})}
    for figure in asked:
        assert got[f"load.precision.{figure}.asked_pct"].value == 4.0
        assert got[f"load.precision.{figure}.at_stop_pct"].value == pytest.approx(at_stop[figure])
        assert got[f"load.precision.{figure}.reached_pct"].value == pytest.approx(final[figure])
        assert got[f"load.precision.criteria.{figure}"].value == "PASS"
    assert got["load.precision.verdict"].value == "PASS"


def test_a_run_that_reached_its_ceiling_without_the_precision_is_no_pass():
    rs = records(60)
    got = claim_values(rs, {"ttft_p50": 0.5, "ttft_p99": 5.0}, EVENTS)
    assert got["load.precision.stopped_by"].value == "ceiling"
    assert "load.precision.requests_at_stop" not in got and "load.precision.decided_s" not in got
    assert got["load.precision.verdict"].value == "FAIL"
    assert got["load.precision.criteria.ttft_p50"].value == "FAIL"
    assert got["load.precision.ttft_p50.reached_pct"].value > 0.5
    p99 = got["load.precision.criteria.ttft_p99"]
    assert p99.value == "FAIL" and "no 95% interval" in p99.formula and "368" in p99.formula
    assert "load.precision.ttft_p99.reached_pct" not in got  # 60 values: no p99 interval


def test_a_run_that_asked_no_precision_has_no_precision_claims():
    assert precision_claims(records(50), {}, {}, rv.events(EVENTS), T0) == []


def test_the_claims_come_from_the_stored_run_and_are_documented():
    rs = records(400)
    asked = {"ttft_p50": 5.0, "attainment": 5.0}
    k = 200
    events = [*EVENTS, {"kind": STOP_EVENT, "t_ns": rs[k - 1].end_ns, "records": k}]
    p = msgspec.structs.replace(plan(planned_requests=1000, slo={"ttft": 0.3}), until_precision=asked)
    manifest = {"run_id": "load-precision", "scenario": "load", "plan": msgspec.to_builtins(p)}
    run = rv.run_of(Path("load-precision"), manifest, rs, events=events)
    claims = compute_claims(run)
    names = {c.name for c in claims}
    assert {"load.precision.attainment.at_stop_pct", "load.precision.criteria.attainment"} <= names
    assert "load.precision.verdict" in names
    assert undocumented([c for c in claims if c.name.startswith("load.precision.")], docs_text()) == []
