"""Throughput figures (docs/scenarios.md, 'throughput'), as pure functions of RequestRecords.

Only successful records count toward a rate; a batch with any failed request has no aggregate (its
load was not the load asked for) and is counted under `failed_batches` instead.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence

from loadproof.metrics.claims import Claim, count, number
from loadproof.metrics.constraints import constraint_claims
from loadproof.metrics.figures import BarPlot, Bars, Panel, Span, Table, headline
from loadproof.metrics.latency import span_s
from loadproof.metrics.latency_figures import distribution_panels
from loadproof.metrics.reasoning import reasoning_claims
from loadproof.metrics.slo import slo_claims
from loadproof.metrics.spec_decode import SpecWindow, spec_claims, spec_gauge_claims, spec_window, unavailable_claims
from loadproof.metrics.steady_state import steady_claims, steady_spans
from loadproof.metrics.timeline import engine_panels, latency_panels, token_rate_panel
from loadproof.metrics.uncertainty import mean_interval, stat_interval
from loadproof.plans.throughput import ThroughputPlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S

DECODE_FORMULA = "median over requests of (output_tokens - 1) / (t_last_token - t_first_token)"
AGGREGATE_FORMULA = (
    "median over batches of sum(output_tokens) / (last completion - first send); "
    "all streams together, not any one user's rate"
)
TTFT_FORMULA = "median over requests of (t_first_token - t_send)"


def decode_rate_per_s(record: RequestRecord) -> float | None:
    """(output_tokens - 1) / (t_last_token - t_first_token) in tokens/s; None when undefined."""
    if not record.ok or record.output_tokens is None or record.output_tokens < 2:
        return None
    if record.first_token_ns is None or record.last_token_ns is None:
        return None
    span_ns = record.last_token_ns - record.first_token_ns
    if span_ns <= 0:
        return None
    return (record.output_tokens - 1) * NS_PER_S / span_ns


def batch_aggregate_per_s(batch: Sequence[RequestRecord]) -> float | None:
    """sum(output_tokens) / (last completion - first send) in tokens/s; None if any request failed."""
    if not batch or not all(r.ok and r.output_tokens is not None for r in batch):
        return None
    span_ns = max(r.end_ns for r in batch) - min(r.send_ns for r in batch)
    if span_ns <= 0:
        return None
    return sum(r.output_tokens or 0 for r in batch) * NS_PER_S / span_ns


def throughput_claims(records: Iterable[RequestRecord]) -> list[Claim]:
    """Claims `throughput.<family>.c<N>.*` for every family and concurrency level present."""
    groups: dict[tuple[str, int], list[RequestRecord]] = defaultdict(list)
    for record in records:
        if record.scenario == "throughput":
            groups[(record.family, record.concurrency)].append(record)
    claims: list[Claim] = []
    family_order = {family: i for i, (family, _) in reversed(list(enumerate(groups)))}
    for (family, conc), group in sorted(groups.items(), key=lambda kv: (family_order[kv[0][0]], kv[0][1])):
        level, parts = "throughput.<family>.c<N>", {"family": family, "N": conc}
        rates = [r for r in (decode_rate_per_s(rec) for rec in group) if r is not None]
        ttfts = [rec.ttft_ns / NS_PER_S for rec in group if rec.ok and rec.ttft_ns is not None]
        failed = sum(1 for rec in group if not rec.ok)
        if rates:
            # c1: one user's rate; cN: each stream's among N (documented apart)
            name, name_parts, formula = (
                ("throughput.<family>.c1.decode_tokens_per_s", {"family": family}, DECODE_FORMULA)
                if conc == 1
                else (f"{level}.decode_tokens_per_s", parts, DECODE_FORMULA + f", each stream among {conc}")
            )
            claims.append(
                number(
                    name,
                    statistics.median(rates),
                    "tokens/s",
                    formula,
                    direction="higher",
                    parts=name_parts,
                    interval=stat_interval(rates, "p50"),
                )
            )
        if ttfts:
            claims.append(
                number(
                    f"{level}.ttft_median_s",
                    statistics.median(ttfts),
                    "s",
                    TTFT_FORMULA,
                    3,
                    direction="lower",
                    parts=parts,
                    interval=stat_interval(ttfts, "p50"),
                )
            )
        if conc > 1:
            batches: dict[tuple[int, int], list[RequestRecord]] = defaultdict(list)
            for rec in group:
                batches[(rec.repeat, rec.batch)].append(rec)
            aggregates = [batch_aggregate_per_s(b) for _, b in sorted(batches.items())]
            valid = [a for a in aggregates if a is not None]
            if valid:
                claims.append(
                    number(
                        f"{level}.aggregate_tokens_per_s",
                        statistics.median(valid),
                        "tokens/s",
                        AGGREGATE_FORMULA,
                        direction="higher",
                        parts=parts,
                        interval=stat_interval(valid, "p50"),  # over batches, each one whole load
                    )
                )
            claims.append(
                count(
                    f"{level}.failed_batches",
                    len(aggregates) - len(valid),
                    "batches",
                    "count of batches with a failed request",
                    direction="lower",
                    parts=parts,
                )
            )
        claims.append(
            count(
                f"{level}.failed_requests",
                failed,
                "requests",
                "count of records with ok == false",
                direction="lower",
                parts=parts,
            )
        )
        out_tokens = [rec.output_tokens for rec in group if rec.ok and rec.output_tokens is not None]
        if out_tokens:
            claims.append(
                number(
                    f"{level}.mean_output_tokens",
                    statistics.fmean(out_tokens),
                    "tokens",
                    "mean of usage.completion_tokens over successful requests",
                    direction="neither",
                    parts=parts,
                    interval=mean_interval([float(t) for t in out_tokens]),
                )
            )
        claims += reasoning_claims(level, group, parts)
    return claims


def claims_of_run(run: Run, plan: ThroughputPlan) -> list[Claim]:
    """The claims are pure functions of the records (a run splits by `repeat` for compare); the plan
    (families, concurrency, settings) only says what was asked."""
    drafts = spec_decode_claims(run.records, run.samples)
    return (
        throughput_claims(run.records)
        + drafts
        + unavailable_claims(run, drafts)
        + constraint_claims("throughput", run.records, run.manifest.options)
        + slo_claims(run.records, plan.slo, span_s(run.records), "throughput")
        + (level_steady_claims(run.records) if plan.steady_window else [])
    )


LEVEL = "throughput.<family>.c<N>"


def level_steady_claims(records: Sequence[RequestRecord]) -> list[Claim]:
    """`throughput.<family>.c<N>.steady.*` (metrics.steady_state) of each level, its window from its first send
    to its last end: MSER-5 on its successful requests' output tokens per second, the output token rate over
    the steady window."""
    claims: list[Claim] = []
    for (family, conc), (start, end) in level_spans(records).items():
        ok = [r for r in records if r.scenario == "throughput" and (r.family, r.concurrency) == (family, conc)]
        ok = [r for r in ok if r.ok and r.send_ns]
        claims += steady_claims(
            LEVEL,
            [r.end_ns for r in ok],
            [float(r.output_tokens or 0) for r in ok],
            start,
            (end - start) / NS_PER_S,
            "the level's first send",
            requests=False,
            parts={"family": family, "N": conc},
        )
    return claims


def spec_decode_claims(records: Iterable[RequestRecord], samples: Sequence[EngineSample]) -> list[Claim]:
    """`throughput.<family>.c<N>.spec_decode.*` (metrics.spec_decode) for each family and concurrency level,
    the window from its first send to its last end (the scenario samples /metrics between levels, which run one
    after another); none where the engine drafts nothing."""
    claims: list[Claim] = []
    started = level_started(records)
    spans = level_spans(records)
    for (family, conc), window in level_spec_windows(records, samples).items():
        parts = {"family": family, "N": conc}
        claims += (
            spec_claims(
                "throughput.<family>.c<N>",
                parts,
                window,
                "the level's first send to its last end",
                started[(family, conc)],
            )
            if window is not None
            else spec_gauge_claims("throughput.<family>.c<N>", parts, samples, spans[(family, conc)][1])
        )
    return claims


def level_started(records: Iterable[RequestRecord]) -> dict[tuple[str, int], int]:
    """Each (family, concurrency) level's requests that got a first token (their first tokens come from
    prefill, not from a decode step)."""
    started: dict[tuple[str, int], int] = defaultdict(int)
    for record in records:
        if record.scenario == "throughput" and record.send_ns and record.first_token_ns is not None:
            started[(record.family, record.concurrency)] += 1
    return started


def level_spans(records: Iterable[RequestRecord]) -> dict[tuple[str, int], tuple[int, int]]:
    """Each (family, concurrency) level's first send and last end (the levels run one after another)."""
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    for record in records:
        if record.scenario == "throughput" and record.send_ns:
            key = (record.family, record.concurrency)
            start, end = spans.get(key, (record.send_ns, record.end_ns))
            spans[key] = (min(start, record.send_ns), max(end, record.end_ns))
    return spans


def level_spec_windows(
    records: Iterable[RequestRecord], samples: Sequence[EngineSample]
) -> dict[tuple[str, int], SpecWindow | None]:
    """Each (family, concurrency) level's draft counters, from its first send to its last end."""
    return {level: spec_window(samples, start, end) for level, (start, end) in level_spans(records).items()}


# --- report panels (catalog entry `figures`) ---------------------------------------------------------

TABLE_INTRO = [
    "c1 is the median single-request decode rate over the family's prompts. Columns c4, c8 are",
    "batch aggregate throughput: all streams together, not any one user's rate.",
]


def figures(run: Run, plan: ThroughputPlan, claims: list[Claim]) -> list[Panel]:
    """The family x concurrency table (report.md, the console); for report.html the headline (each family's
    one-stream decode rate and its aggregate at the highest concurrency), grouped bars of the aggregate rate
    and of one stream's decode rate, the output token rate, TTFT and ITL over the run, the engine's running,
    waiting and KV cache use, and the TTFT, ITL and E2E distributions."""
    table = throughput_table(claims)
    recs = [r for r in run.records if r.scenario == "throughput" and r.send_ns]
    over_time: list[Panel] = []
    if recs:
        t0, end = min(r.send_ns for r in recs), max(r.end_ns for r in recs)
        origin = "the first send"
        over_time = (
            token_rate_panel(recs, t0, origin, spans=level_steady_spans(recs, claims, t0))
            + latency_panels(recs, t0, origin)
            + engine_panels(run.samples, t0, end, origin)
            + distribution_panels(recs, "throughput")
        )
    return (
        throughput_headline(claims, plan) + ([table] if table.rows else []) + throughput_bars(run.records) + over_time
    )


def level_steady_spans(records: Sequence[RequestRecord], claims: list[Claim], t0: int) -> list[Span]:
    """Each level's steady window (its `steady.start_s` and `end_s`, from the level's first send), from `t0`."""
    spans: list[Span] = []
    for (family, conc), (start, _) in level_spans(records).items():
        prefix, label = f"throughput.{family}.c{conc}", f"steady, {family} c{conc}"
        spans += steady_spans(claims, prefix, (start - t0) / NS_PER_S, label)
    return spans


def throughput_headline(claims: list[Claim], plan: ThroughputPlan) -> list[Panel]:
    """Per family (the first three): one stream's decode rate at c1, all streams' at the highest level."""
    levels = sorted(plan.concurrency)
    shown = []
    for fam in plan.families[:3]:
        shown.append((f"{fam}: one stream, c1 decode", f"throughput.{fam}.c1.decode_tokens_per_s"))
        if levels and levels[-1] > 1:
            shown.append((f"{fam}: c{levels[-1]} aggregate", f"throughput.{fam}.c{levels[-1]}.aggregate_tokens_per_s"))
    return headline(claims, shown)


def throughput_table(claims: list[Claim]) -> Table:
    """Rows family x columns concurrency: c1 shows the single-request decode rate, N>1 the aggregate."""
    by_name = {c.name: c for c in claims}
    families: list[str] = []
    levels: list[int] = []
    for c in claims:  # a level's claims only, as their pattern says (throughput.slo.ttft.met_pct is none)
        if c.pattern.startswith("throughput.<family>.c<N>."):
            _, family, level_text = c.name.split(".")[:3]
            if family not in families:
                families.append(family)
            if int(level_text[1:]) not in levels:
                levels.append(int(level_text[1:]))
    levels.sort()
    header = ["family"] + [
        "c1 decode tok/s (one user)" if n == 1 else f"c{n} aggregate tok/s (all streams)" for n in levels
    ]
    rows = []
    for fam in families:
        row = [fam]
        for n in levels:
            key = "decode_tokens_per_s" if n == 1 else "aggregate_tokens_per_s"
            claim = by_name.get(f"throughput.{fam}.c{n}.{key}")
            row.append(claim.printed if claim else "n/a")
        rows.append(row)
    return Table(
        title="Throughput",
        intro=TABLE_INTRO,
        header=header,
        rows=rows,
        console="Throughput (tokens/s): c1 = one user's decode rate; c4, c8 = aggregate of all streams",
        claims=[c.name for c in claims if c.name.startswith("throughput.")],
    )


def throughput_bars(records: list[RequestRecord]) -> list[Panel]:
    """Grouped bars by concurrency and task family: aggregate rate, and one stream's decode rate."""
    recs = [r for r in records if r.scenario == "throughput"]
    if not recs:
        return []
    families = list(dict.fromkeys(r.family for r in recs))
    levels = sorted({r.concurrency for r in recs})
    batches: dict[tuple[str, int], dict[tuple[int, int], list[RequestRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in recs:
        batches[(r.family, r.concurrency)][(r.repeat, r.batch)].append(r)

    def aggregate(fam: str, n: int) -> float | None:
        values = [v for v in (batch_aggregate_per_s(b) for b in batches[(fam, n)].values()) if v is not None]
        return statistics.median(values) if values else None

    def decode(fam: str, n: int) -> float | None:
        values = [
            v for v in (decode_rate_per_s(r) for r in recs if r.family == fam and r.concurrency == n) if v is not None
        ]
        return statistics.median(values) if values else None

    groups = [f"c{n}" for n in levels]
    return [
        BarPlot(
            title="Aggregate throughput by concurrency and task family",
            groups=groups,
            series=[Bars(f, [aggregate(f, n) for n in levels]) for f in families],
            y_label="tokens/s, all streams",
            x_label="concurrency",
            key="aggregate-throughput",
            half=True,
            caption="Median over batches of output tokens / (last completion - first send): all streams together, "
            "not any one user's rate (at c1, one request from send to end).",
        ),
        BarPlot(
            title="One stream's decode rate by concurrency and task family",
            groups=groups,
            series=[Bars(f, [decode(f, n) for n in levels]) for f in families],
            y_label="tokens/s, one stream",
            x_label="concurrency",
            key="stream-decode-rate",
            half=True,
            caption="Median over requests of (output_tokens - 1) / (t_last_token - t_first_token).",
        ),
    ]
