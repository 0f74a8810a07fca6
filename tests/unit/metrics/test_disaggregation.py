"""A disaggregated pair's figures from hand-built records (expected values worked out by hand), and the
interference scenario's worst stall."""

from loadproof.metrics.disaggregation import disaggregation_claims, request_claims
from loadproof.metrics.interference import longest_gap
from loadproof.records import RequestRecord

S = 1_000_000_000


def rec(rid, send, first, hop=None, kv=None, ok=True, chunks=()):
    return RequestRecord(
        request_id=rid,
        endpoint="completions",
        ok=ok,
        send_ns=int(send * S),
        first_token_ns=int(first * S) if first is not None else None,
        prefill_hop_ns=int(hop * S) if hop is not None else None,
        kv_bytes=kv,
        chunk_ns=[int(t * S) for t in chunks],
    )


def test_the_first_token_splits_into_the_prefill_hop_and_the_decode_side():
    records = [
        rec("a", 0, 2.0, hop=1.5, kv=4_000_000_000),
        rec("b", 10, 11.0, hop=0.5, kv=1_000_000_000),
        rec("c", 20, 21.0, hop=0.25),  # no bytes known for it
        rec("d", 30, None, hop=0.1, ok=False),  # no first token: not counted
        rec("e", 40, 40.5, hop=0.2, ok=False),
    ]  # cancelled after its first token: counted
    claims = {c.name: c.value for c in disaggregation_claims(records, "interference")}
    assert claims["interference.pd.requests"] == 4
    assert claims["interference.pd.prefill_hop_s.mean"] == (1.5 + 0.5 + 0.25 + 0.2) / 4
    assert claims["interference.pd.prefill_hop_s.max"] == 1.5
    assert claims["interference.pd.decode_side_s.mean"] == (0.5 + 0.5 + 0.75 + 0.3) / 4
    assert claims["interference.pd.decode_side_s.max"] == 0.75
    assert claims["interference.pd.kv_bytes_per_request"] == 2.5e9  # a and b
    assert claims["interference.pd.kv_gb_per_s"] == 5.0  # 5e9 bytes over 0.5 + 0.5 s


def test_a_colocated_run_has_no_pair_figures():
    assert disaggregation_claims([rec("a", 0, 2.0)], "interference") == []
    assert request_claims(rec("a", 0, 2.0), "interference.newcomer") == []


def test_one_requests_split():
    claims = {c.name: c.value for c in request_claims(rec("n", 5, 9.0, hop=3.0, kv=123), "interference.newcomer")}
    assert claims == {
        "interference.newcomer_prefill_hop_s": 3.0,
        "interference.newcomer_decode_side_s": 1.0,
        "interference.newcomer_kv_bytes": 123,
    }


def test_longest_gap_is_the_worst_stall_overlapping_the_span():
    streams = [rec("m0", 0, 1, chunks=[1, 1.5, 2, 2.5, 3]), rec("m1", 0, 1, chunks=[1, 1.2, 2.9, 3.0, 6.0])]
    assert longest_gap(streams, int(1.1 * S), int(3.5 * S)) == int(3.0 * S)  # m1's 3.0 -> 6.0 starts inside
    assert longest_gap(streams, int(1.1 * S), int(2.8 * S)) == int(1.7 * S)  # m1's 1.2 -> 2.9
    assert longest_gap(streams, int(7 * S), int(8 * S)) == 0
