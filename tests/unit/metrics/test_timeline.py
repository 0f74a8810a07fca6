"""A run over time and its latency distributions as report panels: every plotted value checked by hand, and
the percentile marks where the claims put them."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.figures import TTFT_CDF, Headline, Histogram, LinePlot, panels_of
from loadproof.metrics.latency_figures import cdf_points, distribution_panels, histogram_bins
from loadproof.metrics.timeline import bin_width, engine_panels, latency_panels, per_second, rate_panel
from tests import rundir_values as rv
from tests.unit.metrics.test_load import EVENTS, RECORDS, T0, S, plan, rec


def test_bins_are_a_second_until_a_run_is_long():
    assert bin_width(12.0) == 1.0 and bin_width(150.0) == 1.0
    assert bin_width(151.0) == 2.0 and bin_width(3600.0) == 30.0


def test_per_second_counts_each_bin_and_leaves_out_a_short_last_one():
    times = [T0 + round(t * S) for t in (0.1, 0.5, 0.9, 1.2, 2.5, 2.6)]
    assert per_second(times, T0, T0 + 3 * S, 1.0) == [(0.5, 3.0), (1.5, 1.0), (2.5, 2.0)]
    # the run ends 0.2 s into its fourth second: that bin is too short to read as a rate
    assert per_second(times, T0, T0 + round(3.2 * S), 1.0) == [(0.5, 3.0), (1.5, 1.0), (2.5, 2.0)]
    # 0.6 s of a last bin: its events over its own length; none where whole bins are asked for
    assert per_second(times + [T0 + round(3.1 * S)], T0, T0 + round(3.6 * S), 1.0)[-1] == pytest.approx((3.3, 1 / 0.6))
    assert len(per_second(times, T0, T0 + round(3.6 * S), 1.0, whole=True)) == 3


def constant_rate(n: int = 20, rate: float = 4.0) -> list:
    """n requests asked every 1/rate s, each sent 1 ms late, TTFT 0.1 s, three gaps of 20 ms."""
    return [rec(i, i / rate, i / rate + 0.001, 0.1, (0.02, 0.02, 0.02)) for i in range(n)]


def test_the_rate_asked_sent_and_completed_per_second():
    records = constant_rate()
    (panel,) = rate_panel(records, T0, max(r.end_ns for r in records))
    assert isinstance(panel, LinePlot) and panel.key == "rate-over-time"
    asked, sent, completed = (s.points for s in panel.series)
    # 20 sends in 4.75 s: four whole seconds (the fifth ends at the last send, which would read as 5.3/s)
    assert asked == [(0.5, 4.0), (1.5, 4.0), (2.5, 4.0), (3.5, 4.0)] and [y for _, y in sent] == [4.0] * 4
    # each ends 0.171 s after its send (TTFT, three gaps, 10 ms to the end): the last at 4.921 s, with the run
    assert [y for _, y in completed[:4]] == [4.0] * 4 and completed[4] == pytest.approx((4.4605, 4 / 0.921))
    assert rate_panel([msgspec.structs.replace(r, intended_send_ns=None) for r in records], T0, T0 + 5 * S) == []


def test_ttft_and_itl_over_the_run():
    records = constant_rate()
    ttft, itl = latency_panels(records, T0)
    each, p50, p99 = ttft.series
    assert not each.line and len(each.points) == 20
    assert {round(y, 6) for _, y in each.points} == {100.0}  # milliseconds: every TTFT is under a second
    assert ttft.y_label.endswith(", ms") and all(y == pytest.approx(100.0) for _, y in p50.points + p99.points)
    assert itl.key == "itl-over-time" and all(y == pytest.approx(20.0) for s in itl.series for _, y in s.points)


def test_the_engine_state_needs_samples_taken_during_the_run():
    around = rv.samples([{"t_ns": T0 - S, "values": {"num_requests_running": 0.0}}, {"t_ns": T0 + 9 * S, "values": {}}])
    assert engine_panels(around, T0, T0 + 8 * S) == []  # read before and after only: nothing over time
    during = rv.samples(
        [
            {
                "t_ns": T0 + i * S,
                "values": {
                    "num_requests_running": float(i),
                    "num_requests_waiting": 0.0,
                    "kv_cache_usage_perc": i / 10,
                },
            }
            for i in range(5)
        ]
    )
    queue, kv = engine_panels(during, T0, T0 + 4 * S)
    assert [s.name for s in queue.series] == ["running", "waiting"] and queue.series[0].points[-1] == (4.0, 4.0)
    assert kv.key == "engine-kv" and kv.series[0].points[-1] == pytest.approx((4.0, 40.0))


def test_cdf_points_step_to_one_and_stay_few():
    assert cdf_points([1.0, 2.0, 4.0]) == [(1.0, 0.0), (1.0, 1 / 3), (2.0, 2 / 3), (4.0, 1.0)]
    many = cdf_points([float(i) for i in range(10_000)], limit=100)
    assert len(many) == 101 and many[-1] == (9999.0, 1.0) and many[1] == (99.0, 0.01)


def test_a_histogram_leaves_a_far_tail_beyond_its_last_bin_and_counts_it():
    values = sorted([1.0] * 50 + [2.0] * 49 + [1000.0])
    edges, counts, beyond = histogram_bins(values)
    assert sum(counts) + beyond == 100 and beyond == 1 and edges[-1] < 1000
    edges, counts, beyond = histogram_bins([1.0, 2.0, 3.0, 4.0])
    assert (edges[0], edges[-1], counts, beyond) == (1.0, 4.0, [2, 2], 0)


def test_the_distributions_mark_p50_and_p99_where_the_claims_put_them():
    panels = distribution_panels(RECORDS)
    assert [p.key for p in panels] == [
        TTFT_CDF,
        "ttft-histogram",
        "itl-cdf",
        "itl-histogram",
        "e2el-cdf",
        "e2el-histogram",
    ]
    manifest = {"run_id": "load-x", "scenario": "load", "plan": msgspec.to_builtins(plan()), "plan_version": 1}
    claims = {c.name: c.value for c in compute_claims(rv.run_of(Path("load-x"), manifest, RECORDS, events=EVENTS))}
    for panel, name in zip(panels[::2], ("ttft_s", "itl_s", "e2el_s")):
        assert isinstance(panel, LinePlot)
        assert [m.x for m in panel.marks] == pytest.approx(
            [claims[f"load.{name}.p50"] * 1000, claims[f"load.{name}.p99"] * 1000]
        )
    assert all(isinstance(p, Histogram) and sum(p.counts) for p in panels[1::2])


def test_a_load_run_has_its_headline_then_every_plot():
    samples = [
        {
            "t_ns": T0 + i * S,
            "values": {"num_requests_running": 1.0, "num_requests_waiting": 0.0, "kv_cache_usage_perc": 0.01},
        }
        for i in range(8)
    ]
    manifest = {"run_id": "load-x", "scenario": "load", "plan": msgspec.to_builtins(plan()), "plan_version": 1}
    run = rv.run_of(Path("load-x"), manifest, RECORDS, events=EVENTS, samples=samples)
    claims = compute_claims(run)
    panels = panels_of(run, claims)
    top = panels[0]
    assert isinstance(top, Headline) and top.note == "SLO: ttft <= 500 ms, tpot <= 100 ms"
    by_claim = {c.name: c.printed for c in claims}
    assert [(f.claim, f.printed) for f in top.figures] == [(f.claim, by_claim[f.claim]) for f in top.figures]
    assert [f.label for f in top.figures][:3] == ["requests/s sent", "requests/s completed", "output tokens/s"]
    assert [p.key for p in panels[1:]] == [
        "rate-over-time",
        "ttft-over-time",
        "itl-over-time",
        "engine-queue",
        "engine-kv",
        TTFT_CDF,
        "ttft-histogram",
        "itl-cdf",
        "itl-histogram",
        "e2el-cdf",
        "e2el-histogram",
    ]
    assert compute_claims(run) == claims  # drawing reads the run, changes nothing a claim is made of
