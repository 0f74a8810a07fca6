"""Energy and cost per token (metrics.energy): the GPUs' counters interpolated at the run's window, summed
over GPUs, divided by output and SLO-good tokens; cost from either price; never a figure without a counter."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.energy import energy_window
from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics import test_load

S = 1_000_000_000


def row(t_s: float, *energy_mj: int | None) -> dict:
    return {
        "t_ns": int(t_s * S),
        "gpus": [{"index": i, "power_w": 300.0, "energy_mj": e} for i, e in enumerate(energy_mj)],
    }


def test_the_window_interpolates_each_gpus_counter_and_sums_them():
    rows = rv.telemetry([row(0, 0, 1_000), row(10, 4_000_000, 2_001_000), row(20, 6_000_000, 2_001_000)])
    window = energy_window(rows, 5 * S, 15 * S)  # GPU 0: 2,000 J at 5 s, 5,000 J at 15 s; GPU 1: 1,000 J to 2,000 J
    assert window is not None and window.joules_by_gpu == pytest.approx((3_000.0, 1_000.0))
    assert window.joules == pytest.approx(4_000.0) and window.seconds == pytest.approx(10.0)
    assert energy_window(rows, 0, 20 * S).joules_by_gpu == pytest.approx((6_000.0, 2_000.0))  # on the samples


def test_no_figure_outside_the_samples_or_without_a_counter():
    rows = rv.telemetry([row(0, 0), row(10, 1_000_000)])
    assert energy_window(rows, -1 * S, 5 * S) is None and energy_window(rows, 5 * S, 11 * S) is None
    assert energy_window(rv.telemetry([row(0, 0, None), row(10, 5, None)]), 1 * S, 9 * S) is None
    assert energy_window(rv.telemetry([{"t_ns": 0}, {"t_ns": 10 * S}]), 1 * S, 9 * S) is None  # no GPU at all


def run(telemetry: list[dict], info: dict, price: dict | None = None, slo: dict | None = None) -> Run:
    """The load test's records (sent from T0 over a few seconds), with telemetry around them; no SLO unless given."""
    plan = msgspec.to_builtins(test_load.plan(slo=slo or {}))
    manifest = {
        "run_id": "energy",
        "scenario": "load",
        "plan": plan,
        "telemetry": info,
        **({"price": price} if price else {}),
    }
    return rv.run_of(Path("energy"), manifest, test_load.RECORDS, events=test_load.EVENTS, telemetry=telemetry)


def span() -> tuple[float, float]:
    records: list[RequestRecord] = test_load.RECORDS
    return min(r.send_ns for r in records) / S, max(r.end_ns for r in records) / S


def gpu_run(price: dict | None = None, slo: dict | None = None) -> Run:
    """Two GPUs at a steady 200 W and 100 W from a second before the first send to a second after the end."""
    start, end = span()
    t0, t1 = start - 1, end + 1
    rows = [row(t0, 0, 0), row(t1, int(200_000 * (t1 - t0)), int(100_000 * (t1 - t0)))]
    return run(rows, {"gpus": 2, "names": ["H200", "H200"]}, price, slo)


def docs_runs(_tmp_path: Path) -> list[Run]:
    """For the docs-formulas test: every energy and cost claim's pattern."""
    return [
        gpu_run({"per_kwh": 0.3}, {"ttft": 10.0}),
        gpu_run({"per_gpu_hour": 2.0}),
        run([], {"gpus": 0, "energy_note": "no GPU energy counter: NVML sees no GPU"}),
    ]


def test_claims_per_token_per_good_token_and_cost():
    start, end = span()
    claims = {c.name: c.value for c in compute_claims(gpu_run({"per_kwh": 0.3}, {"ttft": 10.0}))}
    ok = [r for r in test_load.RECORDS if r.ok]
    tokens = sum(r.output_tokens or 0 for r in ok)
    assert claims["energy.window_s"] == pytest.approx(end - start)
    assert claims["energy.joules"] == pytest.approx(300 * (end - start), rel=1e-5)
    assert claims["energy.gpu1.joules"] == pytest.approx(100 * (end - start), rel=1e-5)
    assert claims["energy.avg_power_w"] == pytest.approx(300, rel=1e-5)
    assert claims["energy.joules_per_output_token"] == pytest.approx(300 * (end - start) / tokens, rel=1e-5)
    good = sum(r.output_tokens or 0 for r in ok if r.ttft_ns is not None and r.ttft_ns <= 10 * S)
    assert (
        0 < good < tokens
        or good == tokens
        and claims["energy.joules_per_good_token"] == pytest.approx(300 * (end - start) / good, rel=1e-5)
    )
    cost = 300 * (end - start) / 3.6e6 * 0.3
    assert claims["cost.total"] == pytest.approx(cost, rel=1e-5)
    assert claims["cost.per_million_good_tokens"] == pytest.approx(cost / good * 1e6, rel=1e-5)
    hourly = {c.name: c.value for c in compute_claims(gpu_run({"per_gpu_hour": 2.0}))}
    assert hourly["cost.total"] == pytest.approx(2 * (end - start) / 3600 * 2.0)
    assert "cost.per_million_good_tokens" not in hourly and "energy.joules_per_good_token" not in hourly  # no SLO


def test_without_a_counter_the_run_says_why_and_no_figure_is_made_up():
    claims = {c.name: c for c in compute_claims(run([], {"gpus": 0, "energy_note": "no GPU energy counter: x"}))}
    assert claims["energy.unavailable"].value == "no GPU energy counter: x"
    assert not any(name.startswith(("energy.joules", "cost.")) for name in claims)
    old = {c.name for c in compute_claims(run([row(0, None)], {"gpus": 1}))}  # before the counter was read
    assert not any(name.startswith(("energy.", "cost.")) for name in old)
    short = {
        c.name: c.value for c in compute_claims(run([row(span()[0] + 0.5, 0), row(span()[1] + 1, 9)], {"gpus": 1}))
    }
    assert "do not cover" in short["energy.unavailable"]
    strict = {c.name: c.value for c in compute_claims(gpu_run({"per_kwh": 0.3}, {"ttft": 0.5}))}
    met = sum(r.output_tokens or 0 for r in ok_records() if r.ttft_ns is not None and r.ttft_ns <= S // 2)
    assert strict["energy.joules_per_good_token"] == pytest.approx(strict["energy.joules"] / met)
    assert strict["energy.joules_per_good_token"] > strict["energy.joules_per_output_token"]  # some missed the SLO


def ok_records() -> list[RequestRecord]:
    return [r for r in test_load.RECORDS if r.ok]


def test_a_published_gpu_run_keeps_its_energy_and_price_and_verifies(tmp_path: Path):
    from loadproof.publish import publish
    from loadproof.verify import verify
    from tests.unit.report.synthetic import write_run

    start, end = span()
    rows = [row(start - 1, 0, 0), row(end + 1, int(200_000 * (end - start + 2)), int(100_000 * (end - start + 2)))]
    plan = msgspec.to_builtins(test_load.plan())
    path = write_run(
        tmp_path / "src",
        "load-gpu",
        "load",
        test_load.RECORDS,
        {
            "plan": plan,
            "price": {"per_gpu_hour": 3.5},
            "telemetry": {"gpus": 2, "names": ["NVIDIA H200", "NVIDIA H200"]},
        },
        telemetry=rows,
    )
    nogpu = write_run(
        tmp_path / "src",
        "load-cpu",
        "load",
        test_load.RECORDS,
        {"plan": plan, "telemetry": {"gpus": 0, "energy_note": "no GPU energy counter: NVML sees no GPU"}},
    )
    publish([path, nogpu], tmp_path / "bundle")
    result = verify(tmp_path / "bundle")
    assert result.ok, result
    claims = {c.name: c for run in result.runs for c in run.checks}
    assert any(name.endswith("cost.per_million_good_tokens") for name in claims)
    assert any(name.endswith("energy.unavailable") for name in claims)
