"""The assumptions a calibration leaves open (sim.assumptions) and the ranges over them (sim.ranges)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from loadproof.predict.capacity import capacity_options, predict_capacity_run
from loadproof.predict.ranges import predict_ranges
from loadproof.sim.assumptions import Assumption, Variant, differences, scheduler_assumptions, with_overrides
from loadproof.sim.config import CostModel, SimConfig


def test_an_assumptions_point_is_one_of_its_values_and_a_pinned_one_has_one_value():
    with pytest.raises(ValidationError, match="not among its values"):
        Assumption(name="kv_read_efficiency", point=0.8, variants=[Variant(value=0.7)])
    with pytest.raises(ValidationError, match="one value"):
        Assumption(
            name="kv_read_efficiency", point=0.8, variants=[Variant(value=0.8), Variant(value=0.7)], pinned_by="a run"
        )
    with pytest.raises(ValidationError, match="unknown assumption"):
        Assumption(name="luck", point=1, variants=[Variant(value=1)])


def test_overrides_change_only_what_they_name_and_differences_find_them_back():
    base = SimConfig(max_num_batched_tokens=8192, cost=CostModel(pipeline_stages=2))
    other = with_overrides(base, {"long_prefill_token_threshold": 4096, "cost.pipeline_batching": "one_batch"})
    assert other.long_prefill_token_threshold == 4096 and other.cost.pipeline_batching == "one_batch"
    assert other.cost.step_overhead_s == base.cost.step_overhead_s
    assert differences(base, other) == {"long_prefill_token_threshold": 4096, "cost.pipeline_batching": "one_batch"}
    with pytest.raises(ValidationError):
        with_overrides(base, {"cost.pipeline_batching": "sideways"})


def test_the_schedulers_assumptions_turn_concurrent_prefills_into_vllms_threshold():
    found = scheduler_assumptions(SimConfig(max_num_batched_tokens=8192, cost=CostModel(pipeline_stages=2)))
    prefills, batching = found
    assert prefills.point == 1 and prefills.values == [1, 2, 4]
    assert [v.overrides for v in prefills.variants] == [
        {},
        {"long_prefill_token_threshold": 4096},
        {"long_prefill_token_threshold": 2048},
    ]
    assert batching.values == ["alternating", "one_batch"]
    one_stage = scheduler_assumptions(SimConfig(), prefills_pinned_by="the runs' engine settings")
    assert [a.name for a in one_stage] == ["concurrent_long_prefills"] and not one_stage[0].open


def _window(config: SimConfig, sessions: int = 4) -> float:
    forecast = predict_capacity_run(config, capacity_options(sessions, 2048, 5.0))
    return next(c.value for c in forecast.claims if c.name == "capacity.window_aggregate_tokens_per_s")


def test_one_batch_pipelining_is_slower_than_alternating_micro_batches():
    # per token: alternating, 2 groups of 2 each cost t0 + 2 s in flight together; one batch, t0 + 4 s per
    # round trip through both stages
    cost = CostModel(step_overhead_s=0.01, decode_s_per_seq=0.005, prefill_s_per_token=1e-6, pipeline_stages=2)
    config = SimConfig(max_num_batched_tokens=4096, cost=cost)
    alternating = _window(config)
    one_batch = _window(with_overrides(config, {"cost.pipeline_batching": "one_batch"}))
    assert alternating / one_batch == pytest.approx((0.01 + 4 * 0.005) / (0.01 + 2 * 0.005), rel=0.05)


def test_concurrent_prefills_raise_the_median_cold_ttft():
    cost = CostModel(step_overhead_s=0.001, prefill_s_per_token=1e-4, decode_s_per_seq=1e-3)
    config = SimConfig(max_model_len=16_384, max_num_batched_tokens=1024, cost=cost)
    one = predict_capacity_run(config, capacity_options(4, 4096, 2.0)).claims
    four = predict_capacity_run(
        with_overrides(config, {"long_prefill_token_threshold": 256}), capacity_options(4, 4096, 2.0)
    ).claims
    median = "capacity.cold_ttft_median_s"
    assert next(c.value for c in four if c.name == median) > 1.3 * next(c.value for c in one if c.name == median)


def test_a_range_spans_every_value_and_names_the_assumption_that_drives_it():
    a = Assumption(
        name="kv_read_efficiency",
        point=0.8,
        variants=[
            Variant(value=0.6, overrides={"cost.decode_s_per_seq": 3.0}),
            Variant(value=0.8),
            Variant(value=0.9, overrides={"cost.decode_s_per_seq": 1.5}),
        ],
    )
    b = Assumption(
        name="concurrent_long_prefills",
        point=1,
        variants=[Variant(value=1), Variant(value=2, overrides={"max_num_seqs": 10})],
    )
    pinned = Assumption(name="frontend_s_per_token", point=0.0, variants=[Variant(value=0.0)], pinned_by="run x")
    config = SimConfig(max_num_seqs=5, cost=CostModel(decode_s_per_seq=2.0), assumptions=[a, b, pinned])
    calls = []

    def predict(cfg: SimConfig) -> dict[str, float | None]:
        calls.append(cfg)
        return {"y": cfg.cost.decode_s_per_seq * 10 + cfg.max_num_seqs, "z": float(cfg.max_num_seqs)}

    got = predict_ranges(config, predict)
    y, z = got.figures
    assert (y.point, y.low, y.high, y.driver) == (25.0, 20.0, 40.0, "kv_read_efficiency")  # 1.5*10+5 .. 3*10+10
    assert (z.point, z.low, z.high, z.driver) == (5.0, 5.0, 10.0, "concurrent_long_prefills")
    assert y.spreads == {"kv_read_efficiency": (20.0, 35.0), "concurrent_long_prefills": (25.0, 30.0)}
    assert 1 + 3 <= got.predictions == len(calls)  # the point, three variants, and the distinct corners
