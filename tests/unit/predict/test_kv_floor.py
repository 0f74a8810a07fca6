"""The KV-read floor of a decode step (`CostModel.decode_kv_floor_s_per_token`) and the kv_read_efficiency
assumption that run calibrations set it from (`calibration.kv_read_floor`), on hand-worked numbers and on
the published H200 grid of 2026-12-02, whose fit saw no cost of context."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadproof.predict.calibrate import Calibration
from loadproof.predict.calibration import CalibrationLimits, FitShares, calibrate_from_runs, kv_read_floor
from loadproof.predict.capacity import capacity_options, predict_capacity_run
from loadproof.predict.points import DecodePoint
from loadproof.sim.config import CostModel, SimConfig

GRID = Path(__file__).resolve().parents[3] / "docs" / "runs" / "h200-2026-12-02-contract" / "grid" / "runs"
GIB = 2**30


def test_the_floor_binds_a_decode_only_step_once_the_kv_read_outlasts_the_host_work():
    cost = CostModel(step_overhead_s=0.005, decode_s_per_seq=0.0, decode_kv_floor_s_per_token=1e-9)
    assert cost.step_s([], [1_000_000]) == pytest.approx(0.005)  # 1 ms of KV read hides under 5 ms
    assert cost.step_s([], [4_000_000, 4_000_000]) == pytest.approx(0.008)  # 8 ms of KV read: the floor
    assert cost.step_s([(0, 512)], [4_000_000, 4_000_000]) == pytest.approx(
        0.005 + 1e-3 * 512
    )  # a prefill step: no floor


def calibration(points: list[DecodePoint], kv_tokens: int = 1 << 20) -> Calibration:
    config = SimConfig(
        block_size=16,
        num_gpu_blocks=kv_tokens // 16,
        max_model_len=1 << 20,
        cost=CostModel(step_overhead_s=0.005, decode_s_per_seq=0.0),
    )
    return Calibration(config=config, ttft_points=[], decode_points=points)


def test_the_point_is_the_least_efficiency_no_decode_point_contradicts():
    # 1 GiB for 2^20 tokens: 1,024 bytes a token; at 4.8 TB/s a token's read is 213.3 ps at e = 1
    per_token = 1024 / 4.8e12
    fast = DecodePoint(batch=8, context_tokens=500_000, s_per_token=0.0011, origin="fast")  # needs e >= 0.776
    cal = calibration([DecodePoint(batch=1, context_tokens=8_000, s_per_token=0.005, origin="short"), fast])
    found, said, cost = kv_read_floor(cal, {"gpu_model": "NVIDIA H200", "kv_budget_gib_per_gpu": 1.0})
    assert found is not None and not found.pinned_by
    assert found.point == 0.8 and found.values == ["fit", 0.8, 0.9]  # 0.6 and 0.7 would make "fast" slower
    assert cost["decode_kv_floor_s_per_token"] == pytest.approx(per_token / 0.8)
    assert "fast needs 78%" in said[0]
    by_value = {v.value: v.overrides for v in found.variants}
    assert by_value["fit"] == {"cost.decode_kv_floor_s_per_token": 0.0} and by_value[0.8] == {}
    assert by_value[0.9]["cost.decode_kv_floor_s_per_token"] == pytest.approx(per_token / 0.9)


def test_runs_faster_than_any_plausible_efficiency_pin_the_fit_and_no_gpu_leaves_a_note():
    too_fast = DecodePoint(batch=8, context_tokens=1_000_000, s_per_token=0.001, origin="too fast")  # needs 1.7
    found, _, cost = kv_read_floor(calibration([too_fast]), {"gpu_model": "NVIDIA H200", "kv_budget_gib_per_gpu": 1.0})
    assert found is not None and found.point == "fit" and "too fast" in found.pinned_by and cost == {}
    found, said, cost = kv_read_floor(calibration([too_fast]), {"gpu_model": "cpu", "kv_budget_gib_per_gpu": 1.0})
    assert found is None and cost == {} and "extrapolation" in said[0]


def test_the_h200_grid_of_2026_12_02_bounds_the_headlines_window_from_the_kv_read(tmp_path: Path):
    """The grid decoded 24 x 525K fastest, so its fit charged nothing for context; its 24 x 1M window then
    came out 30% fast. With the floor, the window at 24 x 1,000,004 drops to the KV read's bound, and the
    fit's value stays the range's other end."""
    limits = CalibrationLimits(
        kv_tokens=25_981_696, block_size=64, max_num_batched_tokens=16_384, max_num_seqs=24, max_model_len=1_048_576
    )
    done = calibrate_from_runs(sorted(GRID.iterdir()), [], [], tmp_path / "sim.toml", limits, FitShares())
    config = done.calibration.config
    (assumption,) = [a for a in config.assumptions if a.name == "kv_read_efficiency"]
    assert assumption.point == 0.6 and assumption.values == ["fit", 0.6, 0.7, 0.8, 0.9]
    floor = window(config)
    free = window(
        config.model_copy(update={"cost": config.cost.model_copy(update={"decode_kv_floor_s_per_token": 0.0})})
    )
    # 24 x 1,000,068 resident at 400 ps a token: 9.6 ms a step, 24 tokens a step
    assert floor == pytest.approx(24 / (24 * 1_000_068 * 1152 / (4.8e12 * 0.6)), rel=0.01)
    assert free > 1.4 * floor


def window(config: SimConfig) -> float:
    forecast = predict_capacity_run(config, capacity_options(24, 1_000_004, 60.0))
    return next(c.value for c in forecast.claims if c.name == "capacity.window_aggregate_tokens_per_s")
