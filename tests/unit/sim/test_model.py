"""Sim profile, calibration, answers, /metrics text and the virtual-clock prediction."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from loadproof.engines.vllm import VLLM_METRICS
from loadproof.errors import UsageError
from loadproof.metrics.capacity import evaluate_capacity
from loadproof.predict.calibrate import calibrate, nnls
from loadproof.predict.capacity import predict_capacity
from loadproof.predict.points import DecodePoint, TtftPoint, parse_decode, parse_ttft
from loadproof.sim import text
from loadproof.sim.config import CostModel, SimConfig, dump_sim_config, is_sim_profile, load_sim_config
from loadproof.sim.metrics import render_metrics
from loadproof.sim.scheduler import Scheduler, SimRequest
from loadproof.telemetry.server_metrics import parse_metrics
from loadproof.workloads.answer_window import states


def test_profile_round_trips_through_toml(tmp_path: Path):
    cfg = SimConfig(num_gpu_blocks=123, cost=CostModel(prefill_s_per_token=2.5e-5), source='a "quoted" source')
    path = tmp_path / "sim.toml"
    path.write_text(dump_sim_config(cfg))
    assert load_sim_config(path) == cfg
    assert is_sim_profile(path)


def test_profile_errors_are_one_line(tmp_path: Path):
    path = tmp_path / "bad.toml"
    path.write_text("num_gpu_blocks = -1\nbogus = 2\n")
    with pytest.raises(UsageError) as info:
        load_sim_config(path)
    assert "num_gpu_blocks" in str(info.value) and "bogus" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(UsageError):
        load_sim_config(tmp_path / "missing.toml")


def test_packaged_profiles_are_not_sim_profiles():
    profiles = Path(__file__).parents[3] / "src" / "loadproof" / "profiles"
    assert not any(is_sim_profile(p) for p in profiles.glob("*.toml"))


def test_calibration_recovers_a_known_cost_model():
    truth = CostModel(
        step_overhead_s=0.02,
        prefill_s_per_token=8e-4,
        prefill_s_per_token_ctx=5e-8,
        decode_s_per_seq=1e-3,
        decode_s_per_ctx_token=2e-7,
        request_overhead_s=0.05,
    )
    budget = 2048
    ttft = [
        TtftPoint(
            L,
            truth.request_overhead_s
            + math.ceil(L / budget) * truth.step_overhead_s
            + truth.prefill_s_per_token * L
            + truth.prefill_s_per_token_ctx * L * L / 2,
            "truth",
        )
        for L in (512, 2048, 4096, 8192)
    ]
    decode = [
        DecodePoint(
            b, ctx, truth.step_overhead_s + truth.decode_s_per_seq * b + truth.decode_s_per_ctx_token * b * ctx, "truth"
        )
        for b, ctx in ((1, 200), (4, 200), (8, 300), (1, 4000))
    ]
    cal = calibrate(ttft, decode, SimConfig(max_num_batched_tokens=budget))
    got = cal.config.cost
    for field in CostModel.model_fields:
        if isinstance(getattr(truth, field), str):  # structure (pipeline_batching), not fitted
            assert getattr(got, field) == getattr(truth, field), field
            continue
        assert getattr(got, field) == pytest.approx(getattr(truth, field), rel=1e-6, abs=1e-12), field
    assert not cal.assumptions


def test_calibration_from_one_point_each_says_what_it_assumed():
    cal = calibrate(
        [parse_ttft("1000004:61.17")],
        [parse_decode("1:1000004:416.32")],
        SimConfig(max_num_batched_tokens=8192, max_model_len=1_048_576),
    )
    c = cal.config.cost
    assert c.prefill_s_per_token * 1_000_004 + math.ceil(1_000_004 / 8192) * c.step_overhead_s == pytest.approx(61.17)
    assert c.step_overhead_s + c.decode_s_per_ctx_token * 1_000_004 == pytest.approx(1 / 416.32)
    assert len(cal.assumptions) == 2 and "assumed" in cal.config.source


def test_bad_points_are_usage_errors():
    for bad in ("61.17", "x:1", "1:2:3"):
        with pytest.raises(UsageError):
            parse_ttft(bad)
    with pytest.raises(UsageError):
        parse_decode("1:2:0")
    with pytest.raises(UsageError):
        calibrate([], [parse_decode("1:10:10")], SimConfig())


def test_nnls_clamps_negative_coefficients():
    rows = [[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]]
    assert nnls(rows, [3.0, 2.0, 1.0]) == pytest.approx([2.0, 0.0])


def test_answers_state_the_planted_code_and_a_wrong_one_under_the_fault():
    prompt = (
        "salt\nThe secret code of session 7 is 0012345.\nfiller\n"
        "Question: What is the secret code of session 7?\nAnswer: The secret code of session 7 is"
    )
    right, _ = text.answer(prompt)
    wrong, _ = text.answer(prompt, wrong=True)
    assert right.startswith(" 0012345.") and not states(wrong, "0012345")
    followup, _ = text.answer(
        "The secret code of s1 is 7654321.\nQuestion: One more time: what is the secret code "
        "of s1? State the code first, then keep writing."
    )
    assert "7654321" in followup[:20]
    unknown, _ = text.answer("Question: What is the secret code of nobody?")
    assert "I do not know" in unknown


def test_the_packaged_tokenizer_counts_bytes_as_the_sim_does():
    tok = Tokenizer.from_file(str(text.tokenizer_path()))
    sample = "Hello, 世界! code = 42\n"
    assert len(tok.encode(sample, add_special_tokens=False).ids) == text.count_tokens(sample)


def test_block_hashes_change_with_the_salt_and_chain_through_blocks():
    data = b"x" * 64
    assert text.block_hashes(data, 16, "a") != text.block_hashes(data, 16, "b")
    assert text.block_hashes(data, 16, None)[:2] == text.block_hashes(data + b"y" * 16, 16, None)[:2]
    assert len(text.block_hashes(data + b"z", 16, None)) == 4


def test_metrics_text_parses_with_vllm_names():
    s = Scheduler(SimConfig())
    s.add(SimRequest("a", 100, 2))
    step = s.schedule()
    s.complete(step, 0.5)
    values = parse_metrics(render_metrics("sim", s), VLLM_METRICS)
    assert values["num_requests_running"] == 1 and values["prompt_tokens_total"] == 100
    assert values["generation_tokens_total"] == 1 and values["kv_cache_usage_perc"] > 0


def test_prediction_orders_long_prompts_and_judges_them_like_a_run():
    cost = CostModel(step_overhead_s=0.01, prefill_s_per_token=1e-3, decode_s_per_seq=0.0, decode_s_per_ctx_token=0.0)
    cfg = SimConfig(max_model_len=8192, num_gpu_blocks=4096, max_num_batched_tokens=1024, cost=cost)
    pred = predict_capacity(cfg, 4, 4096, 5.0)
    ttfts = sorted(r.first_token_ns / 1e9 for r in pred.records)
    # each prompt costs 4.096 s of prefill, one at a time: the i-th waits for i of them, plus at most one
    # budget's worth (1.024 s) of the next prompt, which shares the step that finishes it, plus 10 ms per step
    assert ttfts[0] == pytest.approx(4.096 + 4 * 0.01)
    for i, t in enumerate(ttfts, start=1):
        assert 4.096 * i - 1e-9 <= t <= 4.096 * i + 1.024 + 0.01 * (5 * i + 1) + 1e-9
    result = evaluate_capacity(pred.plan, pred.records, pred.samples, pred.events)
    assert result.verdict == "PASS", result.reason


def test_prediction_fails_when_one_more_session_than_max_num_seqs_waits():
    cfg = SimConfig(max_model_len=8192, num_gpu_blocks=4096, max_num_seqs=3, max_num_batched_tokens=1024)
    pred = predict_capacity(cfg, 4, 1024, 2.0, first_token_timeout_s=600)
    result = evaluate_capacity(pred.plan, pred.records, pred.samples, pred.events)
    assert result.verdict == "FAIL"
    failed = {c.name for c in result.criteria if c.failed}
    assert "all_streams_started" in failed or "waiting" in failed


def test_a_throughput_runs_one_at_a_time_requests_are_one_median_ttft_point():
    # the one-H200 engine's throughput run: its first requests after start took 0.72 s (kernels compiled on
    # first use), the rest about 0.02 s; those few must not each pull the prefill fit
    from loadproof.predict.points import points_from_runs

    run = (
        Path(__file__).parents[3]
        / "docs"
        / "runs"
        / "h200-2026-12-01"
        / "mla-2l-throughput"
        / "runs"
        / "throughput-20261201-055720-20c6"
    )
    ttft, decode, _ = points_from_runs([run])
    assert len(ttft) == 1 and "median of" in ttft[0].origin
    assert ttft[0].ttft_s < 0.1 and 80 <= ttft[0].input_tokens <= 120
    assert {p.batch for p in decode} == {1, 8}
