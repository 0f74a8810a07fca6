"""A run judged against its prediction contract (metrics.prediction), worked by hand."""

from __future__ import annotations

from loadproof.metrics.claims import number
from loadproof.metrics.prediction import prediction_claims
from loadproof.rundir.prediction import InputDigest, PredictedFigure, Prediction


def _contract(*figures: PredictedFigure, tolerance: float = 10.0) -> Prediction:
    return Prediction(
        scenario="capacity",
        options={"sessions": 2},
        tolerance_pct=tolerance,
        made_at="2026-12-02T00:00:00Z",
        sim_profile=InputDigest(name="sim.toml", sha256="0" * 64),
        figures=list(figures),
    )


def _by_name(claims):
    return {c.name: c for c in claims}


def test_each_figure_gets_its_error_its_range_and_a_criterion():
    measured = [
        number("capacity.cold_ttft_median_s", 11.0, "s", "f", 2, direction="lower"),
        number("capacity.window_aggregate_tokens_per_s", 150.0, "tokens/s", "f", 1, direction="higher"),
    ]
    contract = _contract(
        PredictedFigure(claim="capacity.cold_ttft_median_s", point=10.0, low=9.0, high=12.0),
        PredictedFigure(
            claim="capacity.window_aggregate_tokens_per_s",
            point=200.0,
            low=120.0,
            high=210.0,
            driver="pipeline_batching",
        ),
    )
    got = _by_name(prediction_claims(contract, measured))
    assert got["prediction.capacity.cold_ttft_median_s.error_pct"].value == 10.0  # (11 - 10) / 10
    assert got["prediction.capacity.cold_ttft_median_s.in_range"].value is True
    assert got["prediction.criteria.capacity_cold_ttft_median_s"].value == "PASS"  # 10% is within 10%
    assert got["prediction.capacity.window_aggregate_tokens_per_s.error_pct"].value == -25.0
    assert got["prediction.capacity.window_aggregate_tokens_per_s.in_range"].value is True
    failed = got["prediction.criteria.capacity_window_aggregate_tokens_per_s"]
    assert failed.value == "FAIL" and "error -25.0%" in failed.formula and "pipeline_batching" in failed.formula
    assert got["prediction.verdict"].value == "FAIL"
    assert got["prediction.tolerance_pct"].value == 10.0


def test_a_figure_the_run_does_not_have_fails_and_no_contract_adds_nothing():
    contract = _contract(PredictedFigure(claim="capacity.cold_ttft_max_s", point=1.0, low=1.0, high=1.0))
    got = _by_name(prediction_claims(contract, []))
    assert got["prediction.criteria.capacity_cold_ttft_max_s"].value == "FAIL"
    assert "no such figure" in got["prediction.criteria.capacity_cold_ttft_max_s"].formula
    assert prediction_claims(None, []) == []
