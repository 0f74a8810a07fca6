"""The example scenario's claims and report panels, pure functions of its run (docs.md has the formulas)."""

from __future__ import annotations

import statistics

from loadproof.metrics.claims import Claim, Criterion, acceptance_claims, count, number
from loadproof.metrics.figures import LinePlot, Panel, Series, Table
from loadproof.metrics.throughput import decode_rate_per_s
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S
from tests.unit.example_scenario.plan import ExamplePlan

CONTRACT = ("example.ttft_median_s", "example.decode_tokens_per_s")  # what a prediction contract compares


def claims_of_run(run: Run, plan: ExamplePlan) -> list[Claim]:
    records = [r for r in run.records if r.scenario == "example"]
    ok = [r for r in records if r.ok]
    claims = [count("example.requests", len(records), "requests", "records of the run", direction="neither")]
    ttfts = [r.ttft_ns / NS_PER_S for r in ok if r.ttft_ns is not None]
    if ttfts:
        claims.append(
            number(
                "example.ttft_median_s",
                statistics.median(ttfts),
                "s",
                "median over requests of t_first_token - t_send",
                4,
                direction="lower",
            )
        )
    rates = [v for v in (decode_rate_per_s(r) for r in ok) if v is not None]
    if rates:
        claims.append(
            number(
                "example.decode_tokens_per_s",
                statistics.median(rates),
                "tokens/s",
                "median over requests of (output_tokens - 1) / (t_last_token - t_first_token)",
                direction="higher",
            )
        )
    planned = sum(len(ids) for ids in plan.rounds)
    completed = Criterion(
        "completed", "PASS" if len(ok) == planned else "FAIL", f"{len(ok)}/{planned} planned requests completed"
    )
    return claims + acceptance_claims("example", [completed])


def figures(run: Run, plan: ExamplePlan, claims: list[Claim]) -> list[Panel]:
    """A table of the requests (report.md, the console) and their TTFT in the order sent (report.html)."""
    by_id = {r.request_id: r for r in run.records}
    sent = [by_id[i] for ids in plan.rounds for i in ids if i in by_id]
    rows = [
        [
            r.request_id,
            str(r.repeat),
            f"{r.ttft_ns / 1e6:.1f}" if r.ttft_ns is not None else "n/a",
            str(r.output_tokens),
        ]
        for r in sent
    ]
    points = [(float(k), r.ttft_ns / NS_PER_S) for k, r in enumerate(sent) if r.ttft_ns is not None]
    return [
        Table(
            title="Example requests",
            intro=["One row per request, in the order sent."],
            header=["request", "round", "TTFT ms", "output tokens"],
            rows=rows,
            console="Example requests",
        ),
        LinePlot(
            title="Example TTFT by request",
            series=[Series("TTFT", points)],
            x_label="request, in order sent",
            y_label="s",
            dots=True,
            caption="t_first_token - t_send of each request.",
        ),
    ]
