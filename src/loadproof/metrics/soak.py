"""Soak figures: errors, latency drift between the halves of the run, memory growth over time."""

from __future__ import annotations

import statistics
from collections import Counter

from loadproof.metrics.claims import Claim, Criterion, acceptance_claims, count, number
from loadproof.metrics.figures import LinePlot, Mark, Panel, Series, headline, thin
from loadproof.metrics.uncertainty import median_ratio_interval, share_interval, stat_interval
from loadproof.plans.soak import SoakPlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample, TelemetrySample
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S


def _outside_by_half(telemetry: list[TelemetrySample], middle_ns: int) -> str:
    """What else used the host's CPU in each half of the run (telemetry's cpu_outside_pct), for the drift
    criteria's evidence: a slower second half on a host that got busy is not the engine's drift alone."""
    halves: tuple[list[float], list[float]] = ([], [])
    for row in telemetry:
        value = row.host.cpu_outside_pct
        if value is not None:
            halves[row.t_ns >= middle_ns].append(value)
    if not halves[0] or not halves[1]:
        return ""
    a, b = (sum(h) / len(h) for h in halves)
    return f"; host CPU used outside loadproof: {a:.0f}% then {b:.0f}%"


def soak_claims(
    plan: SoakPlan,
    records: list[RequestRecord],
    samples: list[EngineSample],
    telemetry: list[TelemetrySample] | None = None,
) -> list[Claim]:
    records = sorted((r for r in records if r.scenario == "soak"), key=lambda r: r.send_ns)
    if not records:
        return acceptance_claims("soak", [Criterion("requests", "FAIL", "no request was recorded")])
    failed = [r for r in records if not r.ok]
    kinds = Counter(r.error_kind for r in failed)
    rate = len(failed) / len(records)
    claims = [
        count("soak.requests", len(records), "requests", "records of the run", direction="neither"),
        count("soak.errors", len(failed), "requests", "records with ok == false", direction="lower"),
        number(
            "soak.error_rate",
            rate,
            "",
            "errors / requests",
            4,
            direction="lower",
            interval=share_interval(len(failed), len(records), scale=1.0),
        ),
        number(
            "soak.duration_s",
            (max(r.end_ns for r in records) - records[0].send_ns) / NS_PER_S,
            "s",
            "last completion - first send",
            1,
            direction="neither",
        ),
    ]
    criteria = [
        Criterion(
            "errors",
            "PASS" if rate <= plan.max_error_rate else "FAIL",
            f"{len(failed)}/{len(records)} failed"
            + (f" ({dict(kinds)})" if kinds else "")
            + f"; bound {plan.max_error_rate:g}",
        )
    ]
    middle = records[0].send_ns + (records[-1].send_ns - records[0].send_ns) // 2
    host = _outside_by_half(telemetry or [], middle)
    for family in ("short", "long"):
        sent = [(r.send_ns, r.latency_ns) for r in records if r.ok and r.family == family]  # (send, send -> last token)
        first = [ns / NS_PER_S for t, ns in sent if ns is not None and t < middle]
        second = [ns / NS_PER_S for t, ns in sent if ns is not None and t >= middle]
        if len(first) >= 2 and len(second) >= 2:
            a, b = statistics.median(first), statistics.median(second)
            drift = (b - a) / a
            claims += [
                number(
                    f"soak.{family}.latency_median_first_half_s",
                    a,
                    "s",
                    "median send -> last token, first half",
                    3,
                    direction="lower",
                    interval=stat_interval(first, "p50"),
                ),
                number(
                    f"soak.{family}.latency_median_second_half_s",
                    b,
                    "s",
                    "median send -> last token, second half",
                    3,
                    direction="lower",
                    interval=stat_interval(second, "p50"),
                ),
                number(
                    f"soak.{family}.latency_drift",
                    drift,
                    "",
                    "(second - first) / first",
                    3,
                    direction="lower",
                    interval=median_ratio_interval(second, first, shift=-1.0),
                ),
            ]
            criteria.append(
                Criterion(
                    f"{family}_latency_drift",
                    "PASS" if drift <= plan.max_latency_drift else "FAIL",
                    f"median latency {a:.3f} s then {b:.3f} s ({drift:+.1%}); bound "
                    f"+{plan.max_latency_drift:.0%}{host}",
                )
            )
    for source in ("engine", "relay"):
        rss = [
            s.values["process_rss_bytes"]
            for s in sorted(samples, key=lambda s: s.t_ns)
            if s.source == source and "process_rss_bytes" in s.values
        ]
        if len(rss) >= 2:
            growth = (rss[-1] - rss[0]) / 1024**2
            claims += [
                number(
                    f"soak.{source}_rss_first_mib",
                    rss[0] / 1024**2,
                    "MiB",
                    "resident memory, first sample",
                    0,
                    direction="neither",
                ),
                number(
                    f"soak.{source}_rss_growth_mib",
                    growth,
                    "MiB",
                    "resident memory, last - first sample",
                    1,
                    direction="lower",
                ),
            ]
            criteria.append(
                Criterion(
                    f"{source}_memory",
                    "PASS" if growth <= plan.max_rss_growth_mib else "FAIL",
                    f"{source} RSS grew {growth:+.1f} MiB over {len(rss)} samples; bound "
                    f"{plan.max_rss_growth_mib:g} MiB",
                )
            )
    return claims + acceptance_claims("soak", criteria)


def claims_of_run(run: Run, plan: SoakPlan) -> list[Claim]:
    return soak_claims(plan, run.records, run.samples, run.telemetry)


# --- report panels (catalog entry `figures`) ---------------------------------------------------------

HEADLINE = (
    ("requests", "soak.requests"),
    ("errors", "soak.errors"),
    ("short: latency drift", "soak.short.latency_drift"),
    ("long: latency drift", "soak.long.latency_drift"),
    ("engine memory growth", "soak.engine_rss_growth_mib"),
    ("relay memory growth", "soak.relay_rss_growth_mib"),
)


def figures(run: Run, plan: SoakPlan, claims: list[Claim]) -> list[Panel]:
    """The headline; each request's latency (send to last token) by its send time, one colour per family, the
    halves the drift compares marked, and the failed requests apart; the engine's and the relay's resident
    memory over the run (report.html)."""
    top = headline(claims, HEADLINE)
    records = sorted((r for r in run.records if r.scenario == "soak"), key=lambda r: r.send_ns)
    if not records:
        return top
    t0 = records[0].send_ns
    middle = (t0 + (records[-1].send_ns - t0) // 2 - t0) / NS_PER_S
    series = [
        Series(
            family,
            [
                ((r.send_ns - t0) / NS_PER_S, r.latency_ns / NS_PER_S)
                for r in records
                if r.ok and r.family == family and r.latency_ns is not None
            ],
            line=False,
        )
        for family in dict.fromkeys(r.family for r in records)
    ]
    failed = [((r.send_ns - t0) / NS_PER_S, (r.end_ns - r.send_ns) / NS_PER_S) for r in records if not r.ok]
    if failed:
        series.append(Series("failed (send to end)", failed, line=False, color="#b3261e"))
    panels: list[Panel] = [
        LinePlot(
            title="Latency of each request over the run",
            key="latency-over-time",
            series=[s for s in series if s.points],
            x_label="send time, seconds since the first send",
            y_label="send to last token, s",
            marks=[Mark(middle, "second half")],
            caption="Each request at its send time: send to its last token, by family; the drift criteria compare "
            "each family's median in the first half with the second (soak.<family>.latency_drift).",
        )
    ]
    rss = [
        Series(
            source,
            thin(
                [
                    ((s.t_ns - t0) / NS_PER_S, s.values["process_rss_bytes"] / 1024**2)
                    for s in sorted(run.samples, key=lambda s: s.t_ns)
                    if s.source == source and "process_rss_bytes" in s.values
                ]
            ),
        )
        for source in ("engine", "relay")
    ]
    rss = [s for s in rss if len(s.points) >= 2]
    if rss:
        panels.append(
            LinePlot(
                title="Resident memory over the run",
                key="memory-over-time",
                series=rss,
                x_label="seconds since the first send",
                y_label="MiB",
                dots=True,
                y_from_zero=False,
                caption="process_rss_bytes of the engine (and the relay, where it ran) in each /metrics sample; "
                "the memory criteria bound last - first (soak.<source>_rss_growth_mib).",
            )
        )
    return top + panels
