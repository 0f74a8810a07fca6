"""A disaggregated pair's figures from hand-built records (expected values worked out by hand), and the
interference scenario's worst stall."""

from pathlib import Path

from loadproof.metrics import compute_claims
from loadproof.metrics.disaggregation import disaggregation_claims, request_claims
from loadproof.metrics.engine_agreement import agreement_claims
from loadproof.metrics.interference import longest_gap
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.store.run_dir import load_run

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


def test_the_ttft_crosscheck_says_its_client_figure_is_the_decode_side_behind_a_pair():
    """The crosscheck's client figure behind a pair is TTFT - the prefill hop, the decode side's mean (what the
    decode instance's histogram measures): its label says so, not the client's TTFT (issue #37)."""
    records = [rec("a", 0, 2.0, hop=1.5), rec("b", 10, 11.0, hop=0.5)]
    for r in records:
        r.end_ns = r.first_token_ns + S
    samples = [
        EngineSample(t_ns=0, values={"ttft_seconds_sum": 0.0, "ttft_seconds_count": 0}),
        EngineSample(t_ns=13 * S, values={"ttft_seconds_sum": 0.9, "ttft_seconds_count": 2}),
    ]
    check = {c.name: c for c in agreement_claims(records, samples)}
    pd = {c.name: c for c in disaggregation_claims(records, "interference")}
    client = check["crosscheck.ttft_mean_s.client"]
    assert client.value == pd["interference.pd.decode_side_s.mean"].value == (0.5 + 0.5) / 2
    assert "TTFT - the prefill hop" in client.formula and "decode side" in client.formula
    assert "not the client's TTFT" in client.formula
    colocated = {c.name: c for c in agreement_claims([rec("c", 0, 2.0)], samples)}["crosscheck.ttft_mean_s.client"]
    assert colocated.value == 2.0 and "prefill hop" not in colocated.formula and "decode" not in colocated.formula


def test_the_published_pd_run_labels_its_crosscheck_as_the_decode_side():
    """The published H200 P/D bundle: its crosscheck value is the decode side's mean, now labelled so; the
    colocated run beside it keeps the client's TTFT."""
    runs = Path(__file__).resolve().parents[3] / "docs" / "runs" / "h200-2026-12-02-pd"
    pd = {c.name: c for c in compute_claims(load_run(next((runs / "6-pd" / "runs").iterdir())))}
    client = pd["crosscheck.ttft_mean_s.client"]
    assert client.printed == pd["interference.pd.decode_side_s.mean"].printed == "1.484"
    assert "decode side" in client.formula
    colocated = {c.name: c for c in compute_claims(load_run(next((runs / "1-colocated" / "runs").iterdir())))}
    assert colocated["crosscheck.ttft_mean_s.client"].formula == "client: mean over requests of t_first_token - t_send"
