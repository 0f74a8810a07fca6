"""Throughput claims from hand-built records; expected values worked out by hand, not by the code."""

from loadproof.metrics.throughput import batch_aggregate_per_s, decode_rate_per_s, throughput_claims
from loadproof.records import RequestRecord

S = 1_000_000_000


def rec(family="english", conc=1, batch=0, repeat=0, send=0.0, first=1.0, last=3.0, end=3.1, out=11, ok=True):
    return RequestRecord(
        request_id=f"{family}-{conc}-{batch}-{repeat}-{send}",
        endpoint="completions",
        scenario="throughput",
        family=family,
        concurrency=conc,
        batch=batch,
        repeat=repeat,
        ok=ok,
        send_ns=int(send * S),
        first_token_ns=int(first * S),
        last_token_ns=int(last * S),
        end_ns=int(end * S),
        output_tokens=out,
    )


def test_decode_rate_excludes_the_first_token():
    assert decode_rate_per_s(rec(first=1.0, last=3.0, out=11)) == 5.0  # 10 tokens after the first, in 2 s


def test_decode_rate_undefined_for_one_token_or_failure():
    assert decode_rate_per_s(rec(out=1)) is None
    assert decode_rate_per_s(rec(ok=False)) is None
    assert decode_rate_per_s(rec(first=2.0, last=2.0)) is None


def test_batch_aggregate_spans_first_send_to_last_completion():
    batch = [rec(send=0.0, end=4.0, out=10), rec(send=0.5, end=5.0, out=20)]
    assert batch_aggregate_per_s(batch) == 6.0  # 30 tokens / 5 s
    assert batch_aggregate_per_s(batch + [rec(ok=False)]) is None


def test_claims_use_contract_names_and_medians():
    records = [
        rec(first=1, last=3, out=11),
        rec(first=1, last=2, out=11),
        rec(first=1, last=5, out=11),  # 5, 10, 2.5
        rec(conc=4, repeat=0, send=0, end=2, out=10),
        rec(conc=4, repeat=0, send=0, end=2, out=10),  # 10/s
        rec(conc=4, repeat=1, send=10, end=14, out=10),
        rec(conc=4, repeat=1, send=10, end=14, out=10),  # 5/s
        rec(conc=4, repeat=2, send=20, end=21, out=10),
        rec(conc=4, repeat=2, send=20, end=21, ok=False),
    ]
    claims = {c.name: c for c in throughput_claims(records)}
    assert claims["throughput.english.c1.decode_tokens_per_s"].value == 5.0
    assert claims["throughput.english.c1.decode_tokens_per_s"].printed == "5.0"
    assert claims["throughput.english.c4.aggregate_tokens_per_s"].value == 7.5  # median of 10 and 5
    assert claims["throughput.english.c4.failed_batches"].value == 1
    assert claims["throughput.english.c4.failed_requests"].value == 1
    assert "throughput.english.c1.aggregate_tokens_per_s" not in claims
    assert all(c.formula and c.unit for c in claims.values())
