"""The interval helpers every scenario's figures share (metrics/uncertainty.py): a statistic's, a ratio of sums'
and a ratio of two medians'; each holds the figure it is an interval of, and each is none when the values are
too few for one at 95%."""

import random
import statistics

import msgspec
import pytest
from msgspec import convert

from loadproof.metrics.adapter_churn import churn_claims, cold_flags
from loadproof.metrics.adapter_wait import wait_claims
from loadproof.metrics.capacity import Window, window_rate_interval, window_tokens
from loadproof.metrics.constraints import constraint_claims
from loadproof.metrics.disaggregation import disaggregation_claims
from loadproof.metrics.distribution import summarize
from loadproof.metrics.interference import interference_claims
from loadproof.metrics.intervals import min_count, wilson_interval
from loadproof.metrics.load import load_claims
from loadproof.metrics.media import media_claims
from loadproof.metrics.model_mix import model_claims
from loadproof.metrics.prefill import prefill_claims
from loadproof.metrics.quality import quality_claims, under_load_claims
from loadproof.metrics.reasoning import reasoning_claims
from loadproof.metrics.replay import claims_of_run as replay_claims
from loadproof.metrics.replay import prefix_claims
from loadproof.metrics.session_tier import transfer_claims
from loadproof.metrics.sessions import claims_of_run as sessions_claims
from loadproof.metrics.slo import slo_claims
from loadproof.metrics.soak import soak_claims
from loadproof.metrics.spec_decode import spec_claims, spec_window
from loadproof.metrics.throughput import throughput_claims
from loadproof.metrics.uncertainty import median_ratio_interval, ratio_interval, share_interval, stat_interval
from loadproof.plans.interference import InterferencePlan
from loadproof.plans.load import MediaPlan, MixedModel
from loadproof.plans.prefill import PrefillPlan
from loadproof.plans.replay import ReplayPlan
from loadproof.records import RequestRecord, ToolCall
from loadproof.rundir import EngineSample
from tests import rundir_values as rv
from tests.unit.metrics.test_agent_replay import kept
from tests.unit.metrics.test_agent_replay import plan as agent_plan
from tests.unit.metrics.test_agent_replay import run as agent_run
from tests.unit.metrics.test_load import plan as load_plan
from tests.unit.metrics.test_quality_under_load import ROWS as UNDER_LOAD_ROWS
from tests.unit.metrics.test_sessions import PLAN as SESSIONS_PLAN
from tests.unit.metrics.test_soak import PLAN as SOAK_PLAN


def test_a_statistic_interval_is_order_statistics_for_a_percentile_batch_means_for_the_mean_none_else():
    rng = random.Random(11)
    values = [rng.lognormvariate(0.0, 0.5) for _ in range(400)]
    summary = summarize(values)
    assert summary is not None
    for stat in ("p50", "p90", "p99", "mean"):
        interval = stat_interval(values, stat)
        assert interval is not None and interval.low <= summary.stat(stat) <= interval.high, stat
    assert "order statistics" in stat_interval(values, "p50").method
    assert "batch means" in stat_interval(values, "mean").method
    assert stat_interval(values, "max") is None and stat_interval(values, "std") is None
    assert stat_interval(values[: min_count(0.5) - 1], "p50") is None
    scaled = stat_interval(values, "p50", 1000.0)
    assert scaled.low == pytest.approx(1000 * stat_interval(values, "p50").low)


def test_a_median_of_an_even_count_lies_inside_its_interval():
    values = [float(v) for v in (3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8)]
    interval = stat_interval(values, "p50")
    assert interval is not None and interval.low <= statistics.median(values) <= interval.high


def test_a_share_as_a_fraction_is_wilsons():
    interval = share_interval(7, 20, scale=1.0)
    wilson = wilson_interval(7, 20)
    assert interval is not None and (interval.low, interval.high) == (wilson.low, wilson.high)
    assert interval.low < 7 / 20 < interval.high


def test_a_ratio_of_sums_interval_holds_the_ratio_and_stays_within_its_bounds():
    rng = random.Random(5)
    prompts = [float(rng.randint(100, 2000)) for _ in range(200)]
    cached = [p * rng.choice((0.0, 0.5, 0.9, 1.0)) for p in prompts]
    ratio = 100 * sum(cached) / sum(prompts)
    interval = ratio_interval(cached, prompts, 100.0, ceiling=100.0)
    assert interval is not None and interval.low < ratio < interval.high
    assert 0.0 <= interval.low and interval.high <= 100.0
    assert "linearized ratio" in interval.method
    everything = ratio_interval(prompts, prompts, 100.0, ceiling=100.0)  # every token a hit: no spread
    assert everything is not None and everything.low == pytest.approx(100.0) and everything.high == 100.0
    assert ratio_interval(cached[:5], prompts[:5]) is None  # too few for three batches
    assert ratio_interval([1.0] * 10, [0.0] * 10) is None


def test_a_ratio_of_medians_holds_the_ratio_and_needs_both_medians():
    rng = random.Random(9)
    first = [rng.uniform(1.0, 2.0) for _ in range(60)]
    second = [rng.uniform(1.2, 2.4) for _ in range(60)]
    drift = statistics.median(second) / statistics.median(first) - 1
    interval = median_ratio_interval(second, first, shift=-1.0)
    assert interval is not None and interval.low < drift < interval.high
    assert interval.confidence == 0.95 and "Bonferroni" in interval.method
    assert median_ratio_interval(second, first[:5]) is None
    assert median_ratio_interval(second, [0.0] * 60) is None


# --- the figures that carry them -------------------------------------------------------------------------

S = 1_000_000_000


def request(i: int, send_s: float, ttft_s: float, e2e_s: float, **fields) -> RequestRecord:
    """A successful load request of 10 output tokens; times in seconds."""
    send = round(send_s * S)
    base = dict(
        request_id=f"r{i}",
        endpoint="completions",
        scenario="load",
        batch=i,
        ok=True,
        send_ns=send,
        intended_send_ns=send,
        first_token_ns=send + round(ttft_s * S),
        last_token_ns=send + round(e2e_s * S),
        end_ns=send + round(e2e_s * S),
        prompt_tokens=100,
        output_tokens=10,
    )
    return RequestRecord(**{**base, **fields})


def steady(n: int = 240, seed: int = 1, **fields) -> list[RequestRecord]:
    """n requests, 4 a second, TTFTs from 0.1 to 0.6 s."""
    rng = random.Random(seed)
    return [request(i, i / 4, rng.uniform(0.1, 0.6), 1.0 + rng.uniform(0, 0.5), **fields) for i in range(n)]


def holds(claim) -> bool:
    return claim.interval is not None and claim.interval.low <= claim.value <= claim.interval.high


def test_goodput_carries_a_rate_interval_and_a_model_mix_its_own():
    records = steady()
    for r in records[::2]:
        r.model = "base"
    for r in records[1::2]:
        r.model = "lora-a"
    duration = (max(r.end_ns for r in records) - records[0].send_ns) / S
    claims = {c.name: c for c in slo_claims(records, {"ttft": 0.4}, duration)}
    assert holds(claims["load.goodput_rps"]) and "per-second series" in claims["load.goodput_rps"].interval.method
    mix = [MixedModel(model="base", weight=1.0), MixedModel(model="lora-a", weight=1.0)]
    mixed = {c.name: c for c in model_claims(records, mix, {"ttft": 0.4}, duration)}
    for name in ("ttft_s.p50", "ttft_s.p99", "tpot_s.p50", "output_tokens_per_s", "slo_attainment_pct"):
        assert holds(mixed[f"load.model.base.{name}"]) is (name != "ttft_s.p99"), name  # p99 of 120: too few
    assert mixed["load.model.base.share_pct"].interval is None  # the mix as drawn: the plan's


def test_valid_output_is_a_wilson_share_and_tool_calls_a_batch_means_mean():
    records = steady(60, output_valid=True)
    for r in records[::7]:
        r.output_valid = False
    for r in records[::3]:
        r.tool_calls = [ToolCall(name="f", id="1", arguments="{}")]
    claims = {c.name: c for c in constraint_claims("load", records, {"tools": "tools.json"})}
    valid = claims["load.output_valid_pct"]
    assert holds(valid) and valid.interval.method == "Wilson score"
    assert holds(claims["load.tool_calls_per_request"])


def streaming(rid: str, first_s: float, last_s: float, every_s: float, seed: int, **fields) -> RequestRecord:
    """A stream whose chunks, every `every_s`, carry 1 to 3 tokens."""
    rng = random.Random(seed)
    chunks = [round((first_s + k * every_s) * S) for k in range(int((last_s - first_s) / every_s) + 1)]
    base = dict(
        request_id=rid,
        endpoint="completions",
        ok=True,
        send_ns=0,
        first_token_ns=chunks[0],
        last_token_ns=chunks[-1],
        end_ns=chunks[-1],
        prompt_tokens=1000,
        output_tokens=len(chunks) * 2,
        chunk_ns=chunks,
        chunk_tokens=[rng.randint(1, 3) for _ in chunks],
    )
    return RequestRecord(**{**base, **fields})


def test_a_window_rate_is_batch_means_of_its_per_second_tokens():
    streams = [streaming(f"s{i}", 1.0 + i / 10, 60.0, 0.25, i) for i in range(3)]
    window = Window(5 * S, 35 * S)
    value = sum(window_tokens(r, window.start_ns, window.end_ns) for r in streams) / 30.0
    interval = window_rate_interval(streams, window, 30.0)
    assert interval is not None and interval.low <= value <= interval.high and interval.low < interval.high
    assert window_rate_interval(streams, Window(5 * S, 9 * S), 4.0) is None  # 4 seconds: too few for 3 batches


def test_prefill_medians_carry_order_statistics_from_six_repeats():
    def repeat(i: int, ttft: float) -> RequestRecord:
        return streaming(f"r{i}", 10 * i + ttft, 10 * i + ttft + 2.0, 0.2, i, send_ns=10 * i * S, output_tokens=11)

    ttfts = [2.0, 2.4, 2.1, 2.6, 2.2, 2.3, 2.5]
    plan = convert({"input_tokens": 4096, "repeats": [{"request_id": f"r{i}"} for i in range(7)]}, PrefillPlan)
    claims = {c.name: c for c in prefill_claims(plan, [repeat(i, t) for i, t in enumerate(ttfts)], [])}
    assert holds(claims["prefill.cold_ttft_median_s"]) and holds(claims["prefill.decode_tokens_per_s"])
    assert claims["prefill.r0.ttft_s"].interval is None  # one repeat, one value
    few = {c.name: c for c in prefill_claims(plan, [repeat(i, t) for i, t in enumerate(ttfts[:5])], [])}
    assert few["prefill.cold_ttft_median_s"].interval is None  # a median of 5 has no 95% interval


def test_interference_rates_carry_intervals_where_their_span_has_enough_seconds():
    plan = {
        "window_s": 20.0,
        "check_probes": False,
        "session_tokens": 1000,
        "newcomer_tokens": 9000,
        "sessions": [
            {"request_id": f"m{i}", "followup_request_id": f"m{i}f", "session_id": f"m{i}", "expected": "1"}
            for i in range(2)
        ],
        "newcomer": {"request_id": "new"},
    }
    streams = [streaming(f"m{i}", 1.0, 70.0, 0.25, i) for i in range(2)]
    newcomer = streaming("new", 23.0, 25.0, 0.25, 9, send_ns=22 * S, family="newcomer")
    claims = {c.name: c for c in interference_claims(convert(plan, InterferencePlan), [*streams, newcomer], [])}
    assert holds(claims["interference.before_tokens_per_s"]) and holds(claims["interference.after_tokens_per_s"])
    assert claims["interference.during_tokens_per_s"].interval is None  # a 1 s prefill: too short a series
    assert claims["interference.newcomer_ttft_s"].interval is None  # one request


def test_soak_drift_carries_the_medians_bonferroni_interval_and_errors_a_wilson_fraction():
    plan = msgspec.structs.replace(SOAK_PLAN, duration_s=60.0, max_error_rate=0.1)
    records = [
        request(i, i / 2, 0.1, 0.5 + (i % 7) / 20 + (0.2 if i >= 60 else 0.0), scenario="soak", family="short")
        for i in range(120)
    ]
    records[5] = msgspec.structs.replace(records[5], ok=False, error_kind="timeout")
    claims = {c.name: c for c in soak_claims(plan, records, [])}
    for name in ("error_rate", "short.latency_median_first_half_s", "short.latency_median_second_half_s"):
        assert holds(claims[f"soak.{name}"]), name
    drift = claims["soak.short.latency_drift"]
    assert holds(drift) and drift.interval.low > 0  # 0.2 s slower over the second half: a drift the interval shows
    assert claims["soak.duration_s"].interval is None and claims["soak.errors"].interval is None


def test_sessions_latencies_and_reported_hits_carry_intervals_and_the_expectations_none():
    plan = msgspec.structs.replace(SESSIONS_PLAN, users=40)
    rng = random.Random(3)
    records = []
    for user in range(40):
        for t in range(3):
            prompt = 100 + 24 * t
            records.append(
                request(
                    100 * user + t,
                    user * 0.3 + 2 * t,
                    rng.uniform(0.8, 1.2) if t == 0 else rng.uniform(0.15, 0.4),
                    1.5,
                    scenario="sessions",
                    prompt_id=f"u{user}",
                    batch=t,
                    prompt_tokens=prompt,
                    cached_tokens=0 if t == 0 else rng.choice((0, 96, 112)),
                )
            )
    run = rv.run_of(None, {"scenario": "sessions", "plan": msgspec.to_builtins(plan)}, records)
    claims = {c.name: c for c in sessions_claims(run, plan)}
    for name in (
        "ttft_s.cold.p50",
        "ttft_s.warm.mean",
        "ttft_s.warm.p90",
        "warm_over_cold_ttft_p50",
        "turn1.ttft_s.p50",
        "turn2.engine_hit_pct",
        "engine_hit_pct.warm",
        "engine_hit_pct.all",
        "session_s.p50",
        "session_s.mean",
    ):
        assert holds(claims[f"sessions.{name}"]), name
    assert claims["sessions.warm_over_cold_ttft_p50"].interval.high < 1  # warm turns are faster: the ratio says so
    hits = claims["sessions.engine_hit_pct.all"].interval
    assert hits.high <= 100 and "linearized ratio" in hits.method
    for name in ("ttft_s.warm.max", "prefix_hit_rate.reusable_pct", "turn0.context_tokens_mean"):
        assert claims[f"sessions.{name}"].interval is None, name


def test_a_tier_bound_share_is_wilson_and_the_cold_prefill_rate_a_ratio_of_sums():
    plan = msgspec.structs.replace(SESSIONS_PLAN, users=30, turns=2, kv_bytes_per_token=1000, h2d_gbps=10.0)
    rng = random.Random(4)
    ok = [
        request(
            10 * u + t,
            u + 2 * t,
            rng.uniform(0.5, 1.0) if t == 0 else rng.uniform(0.1, 0.3),
            1.0,
            batch=t,
            prompt_tokens=400 + rng.randint(0, 200),
            cached_tokens=0 if t == 0 else 256,
        )
        for u in range(30)
        for t in range(2)
    ]
    claims = {c.name: c for c in transfer_claims(ok, plan)}
    for name in ("cold_s_per_token", "within_bound_pct", "ttft_over_bound.p50"):
        assert holds(claims[f"sessions.tier.{name}"]), name
    for name in ("floor_s", "transfer_s.p50", "bound_s.p50", "ttft_over_bound.max"):
        assert claims[f"sessions.tier.{name}"].interval is None, name


def test_a_replays_reported_hits_carry_a_ratio_interval_and_its_expectation_none():
    n = 80
    rng = random.Random(8)
    plan = ReplayPlan(
        trace="t.jsonl",
        format="mooncake",
        sha256="ab" * 32,
        trace_rows=n,
        planned_requests=n,
        schedule_span_s=40.0,
        block_tokens=16,
        overhead_tokens=0,
        text_tokens=[64] * n,
        hash_ids=[[1, 2, rng.randint(3, 9), 100 + i] for i in range(n)],
    )
    records = [
        request(i, i / 2, 0.2, 0.5, scenario="replay", batch=i, prompt_tokens=64, cached_tokens=rng.choice((0, 32, 48)))
        for i in range(n)
    ]
    claims = {c.name: c for c in prefix_claims(records, plan, [], [])}
    assert holds(claims["replay.prefix_hit_rate.reported_pct"])
    assert claims["replay.prefix_hit_rate.expected_pct"].interval is None


def test_an_agent_replays_median_send_delay_carries_order_statistics():
    claims = {c.name: c for c in replay_claims(agent_run(kept()), agent_plan())}
    assert holds(claims["replay.agent.send_delay_s.p50"])  # six requests: the fewest a median's interval takes
    assert claims["replay.agent.send_delay_s.max"].interval is None


def test_quality_accuracies_and_the_changed_share_are_wilson_over_items():
    gsm8k = [
        {
            "suite": "gsm8k",
            "item_id": f"g{i}",
            "mode": "plain",
            "extracted_strict": "18" if i % 3 else None,
            "extracted_flexible": "18" if i % 4 else "7",
            "expected": "18",
            "correct_strict": None,
            "correct_flexible": None,
        }
        for i in range(40)
    ]
    claims = {c.name: c for c in quality_claims(rv.answers(gsm8k))}
    for name in ("accuracy", "accuracy_strict"):
        accuracy = claims[f"quality.gsm8k.{name}"]
        assert holds(accuracy) and accuracy.interval.method == "Wilson score" and accuracy.interval.high <= 1.0
    assert claims["quality.gsm8k.items"].interval is None
    loaded = {c.name: c for c in under_load_claims(rv.answers(UNDER_LOAD_ROWS))}
    for name in ("changed_share", "accuracy_idle", "accuracy"):
        assert holds(loaded[f"quality.under_load.{name}"]), name


def test_media_rates_and_the_real_time_factor_carry_intervals_and_the_plans_echoes_none():
    rng = random.Random(12)
    records = [
        request(
            i,
            i / 4,
            0.2,
            rng.uniform(0.5, 1.5),
            images=2,
            audio_s=2.0,
            media_pixels=2 * 64 * 64,
            media_hashes=f"h{i % 9},h{i}",
        )
        for i in range(200)
    ]
    end = max(r.end_ns for r in records)
    media = MediaPlan(images="2:64x64", audio_s=2.0, media_alone=True)
    claims = {c.name: c for c in media_claims(records, media, end / S, [], 0, end)}
    assert holds(claims["load.media.images_per_s"]) and holds(claims["load.media.audio_s_per_s"])
    assert holds(claims["load.media.real_time_factor"])
    for name in ("pixels_per_request", "reused_pct"):
        assert claims[f"load.media.{name}"].interval is None, name


def test_reasoning_percentiles_and_token_means_carry_intervals():
    rng = random.Random(13)
    records = []
    for i in range(80):
        r = request(i, i / 4, rng.uniform(0.1, 0.3), 3.0, output_tokens=200, reasoning_tokens=rng.randint(50, 150))
        r.first_answer_ns = r.first_token_ns + round(rng.uniform(0.5, 1.5) * S)
        records.append(r)
    claims = {c.name: c for c in reasoning_claims("load", records)}
    for name in ("ttft_s.p50", "ttfa_s.p90", "answer_tpot_s.p50", "reasoning_tokens_mean", "answer_tokens_mean"):
        assert holds(claims[f"load.reasoning.{name}"]), name
    assert claims["load.reasoning.ttfa_s.p99"].interval is None  # 80 values: too few for a p99


def test_draft_acceptance_carries_a_ratio_interval_over_the_counters_growth_between_samples():
    rng = random.Random(14)
    totals = {"spec_decode_num_drafts_total": 0.0, "spec_decode_num_draft_tokens_total": 0.0}
    totals |= {"spec_decode_num_accepted_tokens_total": 0.0, "spec_decode_num_accepted_tokens_per_pos_total_0": 0.0}
    samples = []
    for t in range(40):
        samples.append(EngineSample(t_ns=t * S, values=dict(totals)))
        drafts = 0 if t in (10, 11) else rng.randint(80, 120)  # two idle seconds: no item
        first = sum(rng.random() < 0.7 for _ in range(drafts))
        totals["spec_decode_num_drafts_total"] += drafts
        totals["spec_decode_num_draft_tokens_total"] += 3 * drafts
        totals["spec_decode_num_accepted_tokens_total"] += first + sum(rng.random() < 0.5 for _ in range(first))
        totals["spec_decode_num_accepted_tokens_per_pos_total_0"] += first
    window = spec_window(samples, 0, 39 * S)
    assert window is not None and len(window.steps) == 37
    claims = {c.name: c for c in spec_claims("load", {}, window, "the run")}
    for name in ("acceptance_pct", "mean_accepted_length", "pos0.acceptance_pct"):
        assert holds(claims[f"load.spec_decode.{name}"]), name
    assert claims["load.spec_decode.mean_draft_length"].interval is None  # the drafts' length: a setting
    one = spec_window(samples[:2], 0, S)  # one stretch between two samples: no spread to measure
    assert {c.name: c for c in spec_claims("load", {}, one, "x")}["load.spec_decode.acceptance_pct"].interval is None


def test_an_adapters_cold_cost_carries_the_medians_difference_and_its_wait_over_the_base_order_statistics():
    rng = random.Random(15)
    models = [rng.choice("abcd") for _ in range(120)] + ["base"] * 40
    rng.shuffle(models)
    plain = [request(i, i / 4, 0.1, 1.0, model=m) for i, m in enumerate(models)]
    cold = {r.request_id: c for r, c in cold_flags(plain, set("abcd"), 2)}
    records = [
        msgspec.structs.replace(
            r, first_token_ns=r.send_ns + round((0.9 if cold.get(r.request_id) else 0.1) * S * rng.uniform(0.9, 1.1))
        )
        for r in plain
    ]
    profile = {"name": "p", "engine": "vllm", "lora": {"adapters": {m: f"/{m}" for m in "abcd"}, "max_loras": 2}}
    churn = {c.name: c for c in churn_claims(records, profile)}
    for name in ("cold_ttft_s.p50", "warm_ttft_s.p50", "cold_cost_s"):
        assert holds(churn[f"load.lora.{name}"]), name
    assert (
        churn["load.lora.cold_cost_s"].interval.low > 0
        and "difference" in churn["load.lora.cold_cost_s"].interval.method
    )
    wait = {c.name: c for c in wait_claims(records, ["base", *"abcd"], "base", [])}
    assert holds(wait["load.model.a.ttft_over_base_s.p50"])
    assert (
        wait["load.model.a.ttft_over_base_s.max"].interval is None and wait["load.model.a.unstarted_s"].interval is None
    )


def test_a_disaggregated_pairs_means_and_kv_rate_carry_intervals():
    rng = random.Random(16)
    records = [
        request(i, i / 4, 0.3, 1.0, prefill_hop_ns=round(rng.uniform(0.1, 0.2) * S), kv_bytes=rng.randint(1, 9) * 10**6)
        for i in range(60)
    ]
    claims = {c.name: c for c in disaggregation_claims(records, "load")}
    for name in ("prefill_hop_s.mean", "decode_side_s.mean", "kv_gb_per_s"):
        assert holds(claims[f"load.pd.{name}"]), name
    assert (
        claims["load.pd.prefill_hop_s.max"].interval is None and claims["load.pd.kv_bytes_per_request"].interval is None
    )


def test_throughput_medians_carry_order_statistics_over_requests_and_batches():
    rng = random.Random(17)
    records = []
    for level, batches in ((1, 12), (4, 8)):
        for b in range(batches):
            for _ in range(level):
                start = 100.0 * level + 5 * b
                first = start + rng.uniform(0.1, 0.3)
                records.append(
                    request(
                        len(records),
                        start,
                        first - start,
                        first - start + rng.uniform(2.0, 2.5),
                        scenario="throughput",
                        family="english",
                        concurrency=level,
                        batch=b,
                        output_tokens=101,
                    )
                )
    claims = {c.name: c for c in throughput_claims(records)}
    for name in ("c1.decode_tokens_per_s", "c1.ttft_median_s", "c4.decode_tokens_per_s", "c4.aggregate_tokens_per_s"):
        assert holds(claims[f"throughput.english.{name}"]), name
    assert holds(claims["throughput.english.c4.mean_output_tokens"])  # every answer 101 tokens: a zero width
    assert claims["throughput.english.c4.failed_batches"].interval is None


def test_an_embeddings_runs_rates_carry_intervals_and_its_items_per_request_none():
    records = steady(160, endpoint="embeddings", vectors=3, output_tokens=None, prompt_tokens=150)
    plan = load_plan(endpoint="embeddings", inputs_per_request=3, planned_requests=160, slo={})
    claims = {c.name: c for c in load_claims(records, plan, [], [])}
    assert holds(claims["load.input_tokens_per_s"]) and holds(claims["load.embeddings.vectors_per_s"])
    assert claims["load.embeddings.vectors_per_request"].interval is None  # the plan's inputs a request
