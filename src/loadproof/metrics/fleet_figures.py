"""A fleet's report panels (docs/fleet.md): a table of the replicas (report.md, the console with `-v`), the
recovery timeline where a replica went away and each replica's prefix hits around it, and, for report.html, each
replica's finished requests and prefix-hit rate over the run. Every number in the tables is a claim's printed
figure (`metrics.fleet`, `metrics.fleet_timeline`, `metrics.fleet_expectation`); the plots read the fleet's rows.
"""

from __future__ import annotations

from typing import Any

from loadproof.metrics.claims import Claim
from loadproof.metrics.figures import LinePlot, Mark, Panel, Series, Table, thin
from loadproof.metrics.fleet_rows import HITS, QUERIES, FleetRows, fleet_rows, window
from loadproof.metrics.fleet_timeline import PHASES
from loadproof.rundir.fleet_keys import replica_source
from loadproof.units import NS_PER_S

# (column, the claim's suffix after fleet.<replica>.), each cell the claim's printed figure
REPLICA_COLUMNS = (
    ("requests (engine)", "requests"),
    ("sent by the router", "router_requests"),
    ("prompt tokens", "prompt_tokens"),
    ("prefix hits %", "prefix_hit_pct"),
    ("expected %", "prefix_hit_pct.expected"),
    ("KV mean %", "kv_usage_mean_pct"),
    ("KV max %", "kv_usage_max_pct"),
    ("waiting mean", "waiting_mean"),
    ("waiting max", "waiting_max"),
)
# the recovery timeline's events: (the claim's suffix after fleet.<replica>.outage<k>., what happened)
EVENTS = (
    ("silent_from_s", "its /metrics stopped answering"),
    ("router_unhealthy_s", "the router marked it unhealthy"),
    ("router_cb_open_s", "the router's circuit breaker for it opened"),
    ("router_last_sent_s", "the router's last row still sending it requests"),
    ("back_s", "its /metrics answered again"),
    ("router_resumed_s", "the router sent it requests again"),
)
WINDOW_ROWS = 5  # a hit-rate point every this many of a replica's rows


def fleet_panels(run: Any, claims: list[Claim]) -> list[Panel]:
    """The fleet's panels; none for a run without replica rows."""
    rows = fleet_rows(run.fleet_samples, run.manifest)
    if rows is None:
        return []
    by_name = {c.name: c for c in claims}
    return (
        _replica_table(rows, by_name)
        + _recovery_tables(rows, by_name)
        + _plots(rows, run.records, [c for c in claims if c.pattern.endswith("outage<k>.silent_from_s")])
    )


def _cell(claim: Claim | None) -> str:
    return "" if claim is None else claim.printed


def _replica_table(rows: FleetRows, by_name: dict[str, Claim]) -> list[Panel]:
    shown = []
    columns = [
        (label, suffix)
        for label, suffix in REPLICA_COLUMNS
        if any(f"fleet.{replica_source(i)}.{suffix}" in by_name for i in range(len(rows.replicas)))
    ]
    for i in range(len(rows.replicas)):
        names = [f"fleet.{replica_source(i)}.{suffix}" for _, suffix in columns]
        shown += [n for n in names if n in by_name]
    table_rows = [
        [replica_source(i), *(_cell(by_name.get(f"fleet.{replica_source(i)}.{suffix}")) for _, suffix in columns)]
        for i in range(len(rows.replicas))
    ]
    intro = []
    for name, label in (
        ("fleet.prefix_hit_pct", "fleet prefix hits"),
        ("fleet.prefix_hit_pct.expected", "expected"),
        ("fleet.balance.max_share_over_even", "busiest replica's share over an even one"),
        ("fleet.balance.cv", "coefficient of variation of the requests"),
        ("fleet.expected.policy", "policy"),
        ("fleet.expected.skipped", "no expectation"),
    ):
        claim = by_name.get(name)
        if claim is not None:
            intro.append(f"- {label}: {claim.printed}{claim.unit if claim.unit == '%' else ''}")
            shown.append(name)
    return [
        Table(
            title="Fleet: the replicas",
            header=["replica", *(label for label, _ in columns)],
            rows=table_rows,
            intro=intro,
            console="Fleet",
            claims=shown,
        )
    ]


def _recovery_tables(rows: FleetRows, by_name: dict[str, Claim]) -> list[Panel]:
    events: list[tuple[float, str, str]] = []
    shown: list[str] = []
    for i in range(len(rows.replicas)):
        replica = replica_source(i)
        k = 1
        while f"fleet.{replica}.outage{k}.restarted" in by_name:
            base = f"fleet.{replica}.outage{k}"
            last = 0.0
            for suffix, what in EVENTS:
                claim = by_name.get(f"{base}.{suffix}")
                if claim is not None and isinstance(claim.value, (int, float)):
                    events.append((float(claim.value), claim.printed, f"{replica}: {what}"))
                    shown.append(claim.name)
                    last = max(last, float(claim.value))
            said = [
                f"restarted: {by_name[base + '.restarted'].printed}",
                *(
                    f"{label} {by_name[f'{base}.{suffix}'].printed}"
                    for suffix, label in (
                        ("router_sent", "requests the router sent it meanwhile"),
                        ("router_failures", "circuit-breaker failures"),
                        ("finished_requests", "requests finished meanwhile (any replica)"),
                        ("failed_requests", "failed"),
                        ("errors", "errors:"),
                    )
                    if f"{base}.{suffix}" in by_name
                ),
            ]
            events.append((last, "", f"{replica}, outage {k}: " + "; ".join(said)))
            k += 1
    if not events:
        return []
    out: list[Panel] = [
        Table(
            title="Fleet: a replica lost",
            header=["s after the first send", "what"],
            rows=[[printed, what] for _, printed, what in sorted(events, key=lambda e: e[0])],
            intro=[
                "From the replicas' and the router's /metrics rows and the requests' ends (fleet.<replica>.outage<k>.*)."
            ],
            console="Recovery",
            claims=shown,
        )
    ]
    phase_rows = []
    for i in range(len(rows.replicas)):
        cells = [_cell(by_name.get(f"fleet.{replica_source(i)}.prefix_hit_pct.{phase}")) for phase in PHASES]
        if any(cells):
            phase_rows.append([replica_source(i), *cells])
    if phase_rows:
        out.append(
            Table(
                title="Fleet: prefix hits around the outage",
                header=["replica", "before, %", "during, %", "after the return, %"],
                rows=phase_rows,
                intro=[
                    "Each replica's prefix_cache_hits growth over its queries' growth in each phase of the first outage."
                ],
                console="Prefix hits around the outage",
                claims=[
                    f"fleet.{replica_source(i)}.prefix_hit_pct.{phase}"
                    for i in range(len(rows.replicas))
                    for phase in PHASES
                ],
            )
        )
    return out


def _plots(rows: FleetRows, records: list[Any], silences: list[Claim]) -> list[Panel]:
    span = window(records)
    if span is None:
        return []
    t0 = span[0]
    finished, hit_rates = [], []
    for i in range(len(rows.replicas)):
        answered = [s for s in rows.answered(i) if "request_success_total" in s.values]
        done = [((s.t_ns - t0) / NS_PER_S, s.values["request_success_total"]) for s in answered]
        finished.append(Series(replica_source(i), thin(done)))
        points = []
        have = [s for s in rows.answered(i) if HITS in s.values and QUERIES in s.values]
        for a, b in zip(have[::WINDOW_ROWS], have[WINDOW_ROWS::WINDOW_ROWS]):
            queries = b.values[QUERIES] - a.values[QUERIES]
            if queries > 0:  # a window across a restart (queries went back) has no point
                points.append(((b.t_ns - t0) / NS_PER_S, 100 * (b.values[HITS] - a.values[HITS]) / queries))
        hit_rates.append(Series(replica_source(i), thin(points)))
    marks = [Mark(float(c.value), c.name.split(".")[1] + " silent") for c in silences if isinstance(c.value, float)]
    return [
        LinePlot(
            title="Requests finished, by replica",
            key="fleet-requests",
            series=finished,
            x_label="seconds after the first send",
            y_label="request_success_total (its engine's count: a restart starts it again)",
            caption="Each replica's finished-requests counter as its /metrics answered; a gap is a silence.",
            marks=marks,
            half=True,
        ),
        LinePlot(
            title="Prefix hits, by replica",
            key="fleet-prefix-hits",
            series=hit_rates,
            x_label="seconds after the first send",
            y_label=f"% of the prompt tokens queried over {WINDOW_ROWS} rows",
            caption="Each replica's prefix-cache hits over its queries in consecutive windows of its rows: a "
            "replica's cache filling shows as its rate rising.",
            marks=marks,
            half=True,
        ),
    ]
