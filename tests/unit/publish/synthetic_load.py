"""A synthetic open-loop load run for the tests of what is done with a claim's interval (verify, report,
export): written with RunWriter and RequestRecord as a load run writes them, with no randomness.

`REQUESTS` requests at `RATE_RPS` requests/s (constant arrival), each streaming `TOKENS` tokens, its TTFT and
gaps from fixed arithmetic patterns; an SLO on TTFT that some requests miss. So its claims carry intervals
where the count allows one: TTFT's p50, p90 and mean, ITL's every percentile up to p99 (`REQUESTS * (TOKENS -
1)` gaps), the request and token rates, the SLO shares; and TTFT's p99 has none (`REQUESTS` values, fewer than
the 368 a 95% interval of a p99 needs: metrics/intervals.py, `min_count`).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from loadproof.plans.load import LoadLengths, LoadPlan
from loadproof.records import RequestRecord
from loadproof.store.run_dir import RunWriter

S = 1_000_000_000
T0 = 50 * S  # the schedule's start on the run clock
REQUESTS, RATE_RPS, TOKENS = 60, 2.0, 8
SLO_TTFT_S = 0.2
LOAD_RUN = "load-20261205-120000-41aa"


def ttft_s(i: int) -> float:
    """Request i's TTFT: 0.080 to 0.276 s in steps of 4 ms, in a scrambled order."""
    return 0.08 + 0.004 * ((i * 37) % 50)


def gap_s(i: int, k: int) -> float:
    """The k-th gap between request i's chunks: 20 to 30 ms."""
    return 0.02 + 0.001 * ((i * 7 + k * 3) % 11)


def record(i: int) -> RequestRecord:
    intended = i / RATE_RPS
    send = intended + 0.0005
    t = send + ttft_s(i)
    chunks = [t]
    for k in range(TOKENS - 1):
        t += gap_s(i, k)
        chunks.append(t)
    chunk_ns = [T0 + round(c * S) for c in chunks]
    return RequestRecord(
        request_id=f"load-{i}",
        endpoint="completions",
        scenario="load",
        family="synthetic",
        batch=i,
        ok=True,
        http_status=200,
        finish_reason="length",
        send_ns=T0 + round(send * S),
        intended_send_ns=T0 + round(intended * S),
        dispatch_ns=T0 + round(intended * S),
        first_token_ns=chunk_ns[0],
        last_token_ns=chunk_ns[-1],
        end_ns=chunk_ns[-1] + S // 1000,
        prompt_tokens=64,
        output_tokens=TOKENS,
        num_chunks=TOKENS,
        chunk_ns=chunk_ns,
        chunk_tokens=[1] * TOKENS,
        planned_input_tokens=64,
        planned_output_tokens=TOKENS,
        output_text="a synthetic answer",
    )


def load_plan() -> LoadPlan:
    return LoadPlan(
        arrival="constant",
        rate_rps=RATE_RPS,
        num_requests=REQUESTS,
        seed=731,
        planned_requests=REQUESTS,
        rescaled=True,
        schedule_span_s=(REQUESTS - 1) / RATE_RPS,
        input_tokens=LoadLengths(kind="fixed", a=64, text="64"),
        output_tokens=LoadLengths(kind="fixed", a=TOKENS, text=str(TOKENS)),
        slo={"ttft": SLO_TTFT_S},
        endpoint="completions",
    )


def load_run(root: Path, name: str = LOAD_RUN) -> Path:
    """The run directory `root/name`, as a load run leaves it before its report."""
    records = [record(i) for i in range(REQUESTS)]
    end = max(r.end_ns for r in records)
    with RunWriter(root / name) as writer:
        writer.write_manifest(
            {
                "run_id": name,
                "scenario": "load",
                "target": {"model": "tiny", "endpoint": "completions"},
                "plan": msgspec.to_builtins(load_plan()),
                "plan_version": LoadPlan.version,
                "schedule": {
                    "planned": REQUESTS,
                    "dispatched": REQUESTS,
                    "recorded": REQUESTS,
                    "failed": 0,
                    "interrupted": False,
                    "last_intended_offset_s": (REQUESTS - 1) / RATE_RPS,
                    "elapsed_s": (end - T0) / S,
                },
            }
        )
        writer.event("schedule_start", t_ns=T0, worker=0, planned=REQUESTS)
        for r in records:
            writer.append(r)
        writer.event("schedule_end", t_ns=end, worker=0, planned=REQUESTS, dispatched=REQUESTS)
    return root / name
