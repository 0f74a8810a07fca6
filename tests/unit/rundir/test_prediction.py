"""Reading a prediction contract (rundir.prediction): one line for what is wrong with it."""

from __future__ import annotations

import json

import pytest

from loadproof.errors import UsageError
from loadproof.rundir.prediction import (
    InputDigest,
    PredictedFigure,
    Prediction,
    encode,
    mismatched_options,
    read_prediction,
)


def _good() -> Prediction:
    return Prediction(
        scenario="capacity",
        options={"sessions": 24, "input_tokens": 1000004},
        tolerance_pct=10.0,
        made_at="2026-12-02T00:00:00Z",
        sim_profile=InputDigest(name="sim.toml", sha256="a" * 64),
        figures=[PredictedFigure(claim="capacity.cold_ttft_max_s", point=2.0, low=1.5, high=3.0)],
    )


def test_a_written_contract_reads_back(tmp_path):
    path = tmp_path / "p.json"
    path.write_bytes(encode(_good()))
    assert read_prediction(path) == _good()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"format": "other/9"}, "this loadproof reads loadproof.prediction/1"),
        ({"figures": []}, "predicts no figure"),
        ({"tolerance_pct": 0}, "not a percentage above 0"),
        ({"figures": [{"claim": "x", "point": 5.0, "low": 1.0, "high": 2.0}]}, "outside its range"),
        ({"surprise": 1}, "not a prediction file"),
    ],
)
def test_a_bad_contract_is_one_line_naming_the_problem(tmp_path, change, message):
    data = json.loads(encode(_good()))
    data.update(change)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match=message) as exc:
        read_prediction(path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)


def test_a_missing_or_huge_file_is_refused(tmp_path):
    with pytest.raises(UsageError, match="cannot read it"):
        read_prediction(tmp_path / "none.json")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (1 << 21))
    with pytest.raises(UsageError, match="not a prediction file"):
        read_prediction(big)


def test_a_run_must_repeat_the_options_it_was_predicted_for():
    assert mismatched_options(_good(), {"sessions": 24, "input_tokens": 1000004, "window_s": 60.0}) is None
    assert (
        mismatched_options(_good(), {"sessions": 10, "input_tokens": 1000004})
        == "predicted for sessions = 24, this run has 10"
    )
