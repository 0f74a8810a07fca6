"""A disaggregated prefill/decode pair's figures (docs/scenarios.md, "Disaggregated prefill/decode"), from what
loadproof's relay measured of each request's prefill hop (`RequestRecord.prefill_hop_ns`, `kv_bytes`).

A request's time to first token splits into
- the prefill hop: the relay's request to the prefill instance, sent -> answered (its queue, the prompt's
  prefill, the KV connector's save);
- the decode side: TTFT - the prefill hop (the decode instance's queue, the connector's load of the prompt's
  KV cache, its first step, and the client's and the relay's hops);
and the connector moved `kv_bytes` for it (what it wrote for the prompt, where the relay can read it).
"""

from __future__ import annotations

from loadproof.metrics.claims import Claim, count, number
from loadproof.metrics.uncertainty import mean_interval, ratio_interval
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S


def hops(records: list[RequestRecord]) -> list[RequestRecord]:
    """The requests that went through a prefill hop and had a first token (a stream cancelled later counts:
    interference cancels its streams once measured)."""
    return [r for r in records if r.prefill_hop_ns is not None and r.first_token_ns is not None]


def decode_side_ns(record: RequestRecord) -> int:
    """TTFT - the prefill hop: what the decode instance's side of the first token took (of a request `hops`
    keeps, which has both)."""
    assert record.first_token_ns is not None and record.prefill_hop_ns is not None, "not a request with a hop"
    return record.first_token_ns - record.send_ns - record.prefill_hop_ns


CLIENT_TTFT_MEAN = "mean over requests of t_first_token - t_send"
DECODE_SIDE_MEAN = (
    "mean over requests of TTFT - the prefill hop: the decode side's mean, not the client's TTFT (behind a "
    "disaggregated pair the engine read is the decode instance, whose TTFT begins when the relay sends it "
    "the request)"
)


def ttft_crosscheck_formula(records: list[RequestRecord]) -> str:
    """What the client's figure of the TTFT crosscheck (`crosscheck.ttft_mean_s.client`) is, said as it is:
    the client's mean TTFT, or, behind a disaggregated pair (a request with a prefill hop), the decode side's
    mean, which is what the decode instance's own TTFT histogram measures."""
    return DECODE_SIDE_MEAN if any(r.prefill_hop_ns is not None for r in records) else CLIENT_TTFT_MEAN


def disaggregation_claims(records: list[RequestRecord], prefix: str) -> list[Claim]:
    """`<prefix>.pd.*` over every request with a prefill hop; none when no request had one (colocated)."""
    done = hops(records)
    if not done:
        return []
    prefill = [r.prefill_hop_ns / NS_PER_S for r in done if r.prefill_hop_ns is not None]  # each: `hops` has them
    decode = [decode_side_ns(r) / NS_PER_S for r in done]
    claims = [
        count(
            f"{prefix}.pd.requests",
            len(done),
            "requests",
            "requests the relay prefilled on the prefill instance first that had a first token",
            direction="neither",
        ),
        number(
            f"{prefix}.pd.prefill_hop_s.mean",
            sum(prefill) / len(prefill),
            "s",
            "mean over those requests of the relay's prefill hop (sent to the prefill instance -> its answer)",
            3,
            direction="lower",
            interval=mean_interval(prefill),
        ),
        number(f"{prefix}.pd.prefill_hop_s.max", max(prefill), "s", "largest prefill hop", 3, direction="lower"),
        number(
            f"{prefix}.pd.decode_side_s.mean",
            sum(decode) / len(decode),
            "s",
            "mean of TTFT - prefill hop (the decode instance's queue, KV load and first step)",
            3,
            direction="lower",
            interval=mean_interval(decode),
        ),
        number(f"{prefix}.pd.decode_side_s.max", max(decode), "s", "largest TTFT - prefill hop", 3, direction="lower"),
    ]
    sized = [(r.kv_bytes, decode_side_ns(r)) for r in done if r.kv_bytes is not None]  # (KV bytes, decode side ns)
    if sized:
        total = sum(kv_bytes for kv_bytes, _ in sized)
        seconds = sum(ns for _, ns in sized) / NS_PER_S
        claims += [
            number(
                f"{prefix}.pd.kv_bytes_per_request",
                total / len(sized),
                "bytes",
                "mean over requests of the bytes the KV connector wrote for the prompt",
                0,
                direction="neither",
            ),
            number(
                f"{prefix}.pd.kv_gb_per_s",
                total / seconds / 1e9 if seconds > 0 else 0.0,
                "GB/s",
                "sum of KV bytes / sum of decode sides over those requests: the rate the decode side took the KV "
                "cache in at, a lower bound on the connector's read rate",
                2,
                direction="higher",
                interval=ratio_interval([b / 1e9 for b, _ in sized], [ns / NS_PER_S for _, ns in sized]),
            ),
        ]
    return claims


def request_claims(record: RequestRecord | None, name: str) -> list[Claim]:
    """One request's split (`<name>_prefill_hop_s`, `_decode_side_s`, `_kv_bytes`), where it had a hop."""
    if record is None or record.prefill_hop_ns is None or not hops([record]):
        return []
    claims = [
        number(
            f"{name}_prefill_hop_s",
            record.prefill_hop_ns / NS_PER_S,
            "s",
            "its prefill hop (relay -> prefill instance -> answer)",
            3,
            direction="lower",
        ),
        number(
            f"{name}_decode_side_s",
            decode_side_ns(record) / NS_PER_S,
            "s",
            "its TTFT - its prefill hop",
            3,
            direction="lower",
        ),
    ]
    if record.kv_bytes is not None:
        claims.append(
            count(
                f"{name}_kv_bytes",
                record.kv_bytes,
                "bytes",
                "the bytes the KV connector wrote for its prompt",
                direction="neither",
            )
        )
    return claims
