from loadproof.metrics.engine_agreement import agreement_claims
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample

S = 1_000_000_000


def rec(i: int, send: float, first: float | None, end: float, prompt: int, out: int) -> RequestRecord:
    return RequestRecord(
        request_id=f"r{i}",
        endpoint="completions",
        send_ns=int(send * S),
        first_token_ns=None if first is None else int(first * S),
        end_ns=int(end * S),
        prompt_tokens=prompt,
        output_tokens=out,
    )


def sample(t: float, **values: float) -> EngineSample:
    return EngineSample(t_ns=int(t * S), values=values)


def test_client_figures_beside_the_engine_counters():
    records = [rec(0, 1.0, 1.5, 3.0, 100, 10), rec(1, 1.0, 2.5, 4.0, 200, 20), rec(2, 2.0, None, 4.0, 300, 0)]
    samples = [
        sample(0.5, prompt_tokens_total=1000, generation_tokens_total=50, ttft_seconds_sum=10.0, ttft_seconds_count=4),
        sample(2.0, prompt_tokens_total=1100, generation_tokens_total=55),  # inside: not used
        sample(4.5, prompt_tokens_total=1300, generation_tokens_total=82, ttft_seconds_sum=11.9, ttft_seconds_count=6),
    ]
    got = {c.name: c.value for c in agreement_claims(records, samples)}
    assert got["crosscheck.prompt_tokens.client"] == 300  # the request with no first token is not counted
    assert got["crosscheck.prompt_tokens.engine"] == 300
    assert got["crosscheck.prompt_tokens.diff_pct"] == 0
    assert got["crosscheck.generation_tokens.client"] == 30
    assert got["crosscheck.generation_tokens.engine"] == 32
    assert abs(got["crosscheck.generation_tokens.diff_pct"] - (30 - 32) / 32 * 100) < 1e-9
    assert abs(got["crosscheck.ttft_mean_s.client"] - 1.0) < 1e-9  # (0.5 + 1.5) / 2
    assert abs(got["crosscheck.ttft_mean_s.engine"] - 0.95) < 1e-9  # 1.9 s over 2 requests
    assert got["crosscheck.ttft_count.engine"] == 2 and got["crosscheck.ttft_count.client"] == 2


def test_behind_a_disaggregated_pair_the_clients_ttft_drops_the_prefill_hop():
    """The engine read is the decode instance: its TTFT begins when the relay's prefill hop has ended."""
    records = [rec(0, 1.0, 3.5, 5.0, 100, 10), rec(1, 1.0, 4.0, 6.0, 200, 20)]
    records[0].prefill_hop_ns, records[1].prefill_hop_ns = int(2.0 * S), int(2.2 * S)
    samples = [
        sample(0.5, ttft_seconds_sum=0.0, ttft_seconds_count=0),
        sample(6.5, ttft_seconds_sum=1.3, ttft_seconds_count=2),
    ]
    got = {c.name: c.value for c in agreement_claims(records, samples)}
    assert abs(got["crosscheck.ttft_mean_s.client"] - 0.65) < 1e-9  # ((2.5 - 2.0) + (3.0 - 2.2)) / 2
    assert abs(got["crosscheck.ttft_mean_s.engine"] - 0.65) < 1e-9


def test_nothing_is_claimed_without_samples_around_the_run():
    records = [rec(0, 1.0, 1.5, 3.0, 100, 10)]
    assert agreement_claims(records, []) == []
    assert agreement_claims(records, [sample(2.0, prompt_tokens_total=1), sample(5.0, prompt_tokens_total=2)]) == []
