"""Predictions in process (`predict.load`, `predict.capacity`, `predict.replay`): the figures are the load scenario's formulas applied to the
predicted records, attainment is a fraction everywhere, and `plan --simulate` runs without a temporary
profile or a re-invoked command line."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from loadproof.cli import app
from loadproof.config.profile import SchedulerSpec
from loadproof.errors import ConfigError, UsageError
from loadproof.metrics.latency import samples_ns, succeeded
from loadproof.metrics.slo import meets, slo_values
from loadproof.predict.capacity import capacity_options, predict_capacity_run
from loadproof.predict.deployment import deployment_config
from loadproof.predict.load import (
    load_cli_options,
    parse_rates,
    predict_load,
    predict_load_sweep,
    rate_sweep,
    read_attainment,
)
from loadproof.predict.replay import predict_replay_trace, replay_options
from loadproof.predict.whatif import check_applies
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.options import cli_options
from loadproof.sim.config import CostModel, SimConfig, dump_sim_config
from loadproof.workloads.arrivals import ALL_AT_ONCE, ArrivalSpec, intended_offsets
from loadproof.workloads.synthetic import draw_lengths, parse_lengths

COST = CostModel(step_overhead_s=0.01, prefill_s_per_token=1e-4, decode_s_per_seq=1e-3, request_overhead_s=0.02)
CFG = SimConfig(max_num_batched_tokens=512, num_gpu_blocks=4000, max_model_len=4096, cost=COST)


def p(values: list[float], q: float) -> float:
    """numpy's default (linear) percentile, computed here without the metrics module."""
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def test_each_rate_gives_the_figures_of_the_load_formulas_on_the_same_schedule_and_records():
    sweep = rate_sweep(
        {
            "rate": "64,2",
            "num_requests": 40,
            "input_tokens": "uniform:100:300",
            "output_tokens": "8",
            "slo": "ttft=100ms",
            "attainment": 0.9,
            "seed": 5,
        }
    )
    assert sweep.rates_rps == (2.0, 64.0) and sweep.notes == ()
    forecast = predict_load_sweep(CFG, sweep)
    for predicted in forecast.rates:
        # the same schedule and lengths `run load` draws with this seed, sent on the virtual clock
        offsets = intended_offsets(ArrivalSpec(rate_rps=predicted.rate_rps, num_requests=40), 5)
        inputs = draw_lengths(parse_lengths("uniform:100:300"), 40, 5, "input")
        records = predict_load(CFG, offsets, inputs, [8] * 40).records
        ok = [r for r in records if succeeded(r)]
        duration_s = (max(r.end_ns for r in records) - min(r.intended_send_ns for r in records)) / 1e9
        values = samples_ns(records)
        run = predicted.run
        assert run.num_ok == len(ok) == 40
        assert run.value("load.output_tokens_per_s") == pytest.approx(8 * 40 / duration_s, rel=1e-12)
        for name in ("ttft_s", "tpot_s", "itl_s", "e2el_s"):
            for q in (50, 99):
                assert run.value(f"load.{name}.p{q}") == pytest.approx(p(values[name], q) / 1e9, rel=1e-9), (name, q)
        good = sum(meets(slo_values(r), {"ttft": 0.1}) for r in records)
        assert run.value("load.goodput_rps") == pytest.approx(good / duration_s, rel=1e-12)
        assert run.value("load.slo_attainment_pct") == pytest.approx(100 * good / 40)
        assert predicted.meets_slo == (good / 40 >= 0.9)
    assert forecast.rates[0].meets_slo and not forecast.rates[1].meets_slo  # at 64/s prefills queue past 100 ms
    assert forecast.best_rate_rps == 2.0


def test_a_lone_request_has_the_closed_form_latencies():
    forecast = predict_load_sweep(
        CFG,
        rate_sweep(
            {"rate": "0.1", "num_requests": 5, "input_tokens": "256", "output_tokens": "8", "arrival": "constant"}
        ),
    )
    run = forecast.rates[0].run
    assert run.value("load.ttft_s.p50") == pytest.approx(0.02 + 0.01 + 256e-4)  # overhead, one step, the prefill
    assert run.value("load.tpot_s.p99") == pytest.approx(0.011)  # one decode step of one sequence
    assert run.value("load.goodput_rps") is None  # no SLO, no goodput
    assert forecast.best_rate_rps is None and not forecast.rates[0].meets_slo


def test_rates_take_run_loads_parser_and_all_at_once():
    assert parse_rates("4, 1,2,1") == (1.0, 2.0, 4.0)
    assert parse_rates("inf,2") == (2.0, ALL_AT_ONCE)
    for bad in ("0", "x", "", "1,-2"):
        with pytest.raises(ValueError):
            parse_rates(bad)
    with pytest.raises(ConfigError, match=r"^--rate 0: must be > 0"):
        rate_sweep({"rate": "0"})
    burst = predict_load_sweep(
        CFG, rate_sweep({"rate": "inf", "num_requests": 6, "input_tokens": "64", "output_tokens": "4"})
    )
    run = burst.rates[0].run  # six sent at 0 reach the engine together: one prefill step of 6 x 64 tokens
    assert run.num_ok == 6 and run.value("load.ttft_s.max") == pytest.approx(0.02 + 0.01 + 6 * 64e-4)


def test_attainment_is_a_fraction_and_the_old_percentage_still_reads():
    assert read_attainment(0.99) == (0.99, None)
    assert read_attainment(1) == (1, None)
    fraction, note = read_attainment(90)
    assert fraction == 0.9 and note is not None and note.startswith("deprecated: --attainment 90 is a percentage")
    old = rate_sweep({"rate": "1", "attainment": 90, "slo": "ttft=1s"})
    assert old.options.attainment == 0.9 and len(old.notes) == 1
    with pytest.raises(ConfigError, match="--attainment"):
        rate_sweep({"attainment": 0})


def test_predict_load_takes_run_loads_attainment_default(tmp_path: Path):
    """One default, LoadOptions.attainment's: the prediction judges a rate as `run load --search rate` would."""
    default = LoadOptions.model_fields["attainment"].default
    assert rate_sweep({}).options.attainment == default == LoadOptions(rate=1, num_requests=1).attainment == 0.99
    assert rate_sweep({"rate": "1", "slo": "ttft=1s"}).notes == ()
    run_load = {o.field: o.default for o in cli_options(LoadOptions)}
    assert {o.field: o.default for o in load_cli_options()}["attainment"] == run_load["attainment"] == default
    profile = tmp_path / "sim.toml"
    profile.write_text(dump_sim_config(CFG))
    args = ["--rate", "1", "-n", "10", "--input-tokens", "64", "--output-tokens", "4", "--slo", "ttft=5s"]
    result = CliRunner().invoke(app, ["sim", "predict-load", str(profile), *args])
    assert result.exit_code == 0, result.output
    assert f"highest rate meeting the SLO ({default * 100:g}% of requests)" in result.stdout


def test_the_load_options_are_run_loads_validated_once():
    sweep = rate_sweep({"rate": "1,2", "burstiness": 2.0, "arrival": "gamma", "max_concurrency": 3})
    assert type(sweep.options).__name__ == "LoadOptions" and sweep.options.max_concurrency == 3
    with pytest.raises(ConfigError, match="--burstiness applies to --arrival gamma"):
        rate_sweep({"burstiness": 2.0})
    with pytest.raises(UsageError, match="max_model_len"):
        predict_load_sweep(CFG, rate_sweep({"input_tokens": "4000", "output_tokens": "200", "num_requests": 2}))


def test_capacity_is_judged_as_a_run_and_prefill_is_one_session():
    options = capacity_options(3, 512, 5.0)
    capacity = predict_capacity_run(CFG, options)
    assert capacity.verdict == "PASS" and capacity.options.sessions == 3
    names = {c.name for c in capacity.claims}
    assert {"capacity.cold_ttft_median_s", "capacity.window_aggregate_tokens_per_s"} <= names
    prefill = predict_capacity_run(CFG, options, one_session=True)
    assert prefill.options.sessions == 1
    with pytest.raises(UsageError, match="does not fit max_model_len"):
        predict_capacity_run(CFG, capacity_options(1, 4096, 5.0))
    with pytest.raises(ConfigError, match="--sessions 0"):
        capacity_options(0, 512, 5.0)


def test_a_deployment_takes_the_engines_reported_kv_tokens_where_a_log_gave_them():
    profile = SimpleNamespace(name="p", scheduler=SchedulerSpec(max_num_seqs=32), speculative=None)
    dep = SimpleNamespace(max_model_len=8192, block_size=16)
    planned = SimpleNamespace(deployment=dep, plan=SimpleNamespace(kv_cache_tokens=16_000), reported=None)
    assert deployment_config(profile, planned, CFG).num_gpu_blocks == 1000
    planned.reported = SimpleNamespace(kv_cache_tokens=32_000)
    cfg = deployment_config(profile, planned, CFG)
    assert (cfg.num_gpu_blocks, cfg.max_model_len, cfg.max_num_seqs, cfg.max_num_batched_tokens) == (
        2000,
        8192,
        32,
        512,
    )
    # the profile states the scheduler: concurrent long prefills are pinned, not a range
    [prefills] = [a for a in cfg.assumptions if a.name == "concurrent_long_prefills"]
    assert prefills.pinned_by == "the profile's scheduler (p)" and cfg.long_prefill_token_threshold == 0
    profile.scheduler = SchedulerSpec(max_num_seqs=32, max_num_partial_prefills=2)  # vLLM 0.26: the threshold's
    assert deployment_config(profile, planned, CFG).long_prefill_token_threshold == 327  # default: 4% of the context
    profile.scheduler = SchedulerSpec(max_num_seqs=32, max_num_partial_prefills=2, long_prefill_token_threshold=128)
    assert deployment_config(profile, planned, CFG).long_prefill_token_threshold == 128


def test_an_option_of_one_prediction_is_refused_by_another():
    check_applies("load", {"rate", "slo"})
    check_applies("replay", {"trace", "slo"})
    with pytest.raises(UsageError, match="^--rate applies to --simulate load$"):
        check_applies("capacity", {"rate"})
    with pytest.raises(UsageError, match="^--trace applies to --simulate replay$"):
        check_applies("load", {"trace"})


BLOCKS = [
    [0, 1, 2],
    [0, 1, 3],
    [0, 1, 2, 4],
    [5, 6],
    [5, 6, 7],
    [0, 8],
    [5, 6, 7, 9],
    [10, 11, 12],
    [10, 11, 12],
    [0, 1, 2, 4, 13],
]  # test_replay_prediction.py's trace: 2,304 of 4,096 text tokens are expected hits


def _trace(tmp_path: Path) -> Path:
    trace = tmp_path / "tiny.jsonl"
    trace.write_text(
        "".join(
            json.dumps({"timestamp": 10_000 * i, "input_length": 512 * len(ids), "output_length": 2, "hash_ids": ids})
            + "\n"
            for i, ids in enumerate(BLOCKS)
        )
    )
    return trace


def test_replay_predicts_the_trace_hits_in_process(tmp_path: Path):
    cfg = SimConfig(block_size=128, num_gpu_blocks=1000, max_model_len=4096)
    forecast = predict_replay_trace(
        cfg, *replay_options({"trace": str(_trace(tmp_path)), "block_tokens": 128, "slo": "ttft=1s"})
    )
    assert forecast.num_requests == 10 and forecast.run.num_ok == 10
    assert round(forecast.expected_hit_pct, 2) == round(forecast.modeled_hit_pct, 2) == 56.11
    assert forecast.run.value("load.slo_attainment_pct") == 100.0
    with pytest.raises(ConfigError, match="give --trace FILE"):
        replay_options({})


def test_plan_simulate_load_runs_in_process_with_the_deprecated_attainment(tmp_path: Path, monkeypatch):
    profile = tmp_path / "sim.toml"
    profile.write_text(dump_sim_config(CFG))
    monkeypatch.setattr("tempfile.TemporaryDirectory", None)  # no temporary profile is written
    runner = CliRunner()
    args = ["--rate", "1,2", "-n", "20", "--output-tokens", "8", "--slo", "ttft=5s", "--attainment", "90"]
    planned = runner.invoke(app, ["plan", str(profile), "--simulate", "load", "-l", "256", *args])
    direct = runner.invoke(app, ["sim", "predict-load", str(profile), "--input-tokens", "256", *args])
    for result in (planned, direct):
        assert result.exit_code == 0, result.output
        assert "input 256, output 8" in result.stdout
        assert "highest rate meeting the SLO (90% of requests): 2 requests/s" in result.stdout
        assert result.stderr.strip().splitlines() == [
            "deprecated: --attainment 90 is a percentage; give a fraction, as `run load` takes it: --attainment 0.9"
        ]
    fraction = runner.invoke(app, ["sim", "predict-load", str(profile), "--input-tokens", "256", *args[:-1], "0.9"])
    assert fraction.exit_code == 0 and fraction.stderr == ""
    misplaced = runner.invoke(app, ["plan", str(profile), "--simulate", "capacity", "--rate", "2"])
    assert isinstance(misplaced.exception, UsageError) and "--rate applies to --simulate load" in str(
        misplaced.exception
    )
