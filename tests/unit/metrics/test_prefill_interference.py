"""Prefill and interference figures from hand-built runs, expected values worked out by hand."""

from msgspec import convert

from loadproof.metrics.interference import interference_claims
from loadproof.metrics.prefill import counter_delta, prefill_claims
from loadproof.plans.interference import InterferencePlan
from loadproof.plans.prefill import PrefillPlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample

S = 1_000_000_000


def rec(rid, send, first, last, end, out=11, prompt=4096, chunks=None, text="", family="interference"):
    chunk_ns = chunks if chunks is not None else [int(first * S), int(last * S)]
    return RequestRecord(
        request_id=rid,
        endpoint="completions",
        ok=True,
        send_ns=int(send * S),
        first_token_ns=int(first * S),
        last_token_ns=int(last * S),
        end_ns=int(end * S),
        output_tokens=out,
        prompt_tokens=prompt,
        chunk_ns=chunk_ns,
        chunk_tokens=[1] * len(chunk_ns),
        output_text=text,
        family=family,
    )


def sample(t, hits):
    return EngineSample(t_ns=int(t * S), values={"prefix_cache_hits_total": hits})


def test_prefill_median_ttft_per_repeat_and_coldness():
    plan = convert({"input_tokens": 4096, "repeats": [{"request_id": f"r{i}"} for i in range(3)]}, PrefillPlan)
    records = [rec("r0", 0, 2.0, 4.0, 4.1), rec("r1", 10, 13.0, 15.0, 15.1), rec("r2", 20, 22.5, 24.5, 24.6)]
    samples = [sample(-1, 7), sample(5, 7), sample(9, 7), sample(16, 7), sample(19, 7), sample(25, 7)]
    claims = {c.name: c for c in prefill_claims(plan, records, samples)}
    assert claims["prefill.cold_ttft_median_s"].value == 2.5
    assert [claims[f"prefill.r{i}.ttft_s"].value for i in range(3)] == [2.0, 3.0, 2.5]
    assert claims["prefill.decode_tokens_per_s"].value == 5.0  # 10 tokens in 2 s
    assert claims["prefill.verdict"].value == "PASS"
    samples[3] = sample(16, 135)  # repeat r1 hit the prefix cache
    claims = {c.name: c for c in prefill_claims(plan, records, samples)}
    assert claims["prefill.verdict"].value == "FAIL"
    assert "r1: 128" in claims["prefill.criteria.cold_prefix_cache"].formula


def test_counter_delta_brackets_the_interval():
    samples = [sample(0, 1), sample(2, 5), sample(4, 9)]
    assert counter_delta(samples, "prefix_cache_hits_total", 1 * S, 3 * S) == 8
    assert counter_delta(samples, "prefix_cache_hits_total", 5 * S, 6 * S) is None


def test_interference_before_during_after():
    def every_half_second(a: float, b: float) -> list[int]:
        return [int(x * S / 2) for x in range(int(a * 2), int(b * 2) + 1)]

    plan = {
        "window_s": 2.0,
        "check_probes": True,
        "session_tokens": 1000,
        "newcomer_tokens": 9000,
        "sessions": [
            {"request_id": "m0", "followup_request_id": "m0f", "session_id": "m0", "expected": "1111111"},
            {"request_id": "m1", "followup_request_id": "m1f", "session_id": "m1", "expected": "2222222"},
        ],
        "newcomer": {"request_id": "new"},
    }
    # both streams from t=1 to 12 s: a token every 0.5 s, except m1 stalls during the newcomer's prefill (3..6 s)
    m0 = rec("m0", 0, 1.0, 12.0, 12.1, chunks=every_half_second(1, 12))
    m1 = rec("m1", 0, 1.0, 12.0, 12.1, chunks=[t for t in every_half_second(1, 12) if not 3.2 * S < t < 6 * S])
    new = rec("new", 3.0, 6.0, 8.0, 8.1, family="newcomer")
    f0 = rec("m0f", 13, 13.2, 14, 14.1, text=" 1111111.", family="followup")
    f1 = rec("m1f", 15, 15.2, 16, 16.1, text=" 9999999.", family="followup")
    samples = [sample(12.9, 0), sample(14.2, 896), sample(14.9, 896), sample(16.2, 896)]
    claims = {c.name: c for c in interference_claims(convert(plan, InterferencePlan), [m0, m1, new, f0, f1], samples)}
    # before [1, 3]: m0 5 chunks (1.0..3.0), m1 5 chunks -> 10 tokens / 2 s
    assert claims["interference.before_tokens_per_s"].value == 5.0
    # during [3, 6]: m0 7 chunks (3.0..6.0), m1 2 chunks (3.0, 6.0) -> 9 tokens / 3 s
    assert claims["interference.during_tokens_per_s"].value == 3.0
    # after [6, 8]: 5 + 5 chunks -> 10 / 2 s
    assert claims["interference.after_tokens_per_s"].value == 5.0
    assert claims["interference.newcomer_ttft_s"].value == 3.0
    assert claims["interference.followup_retrieved"].value == 1
    assert claims["interference.criteria.followup_warm"].value == "FAIL"  # m1's follow-up saw no hit
    assert claims["interference.verdict"].value == "FAIL"
