"""When a replica of a fleet goes away and comes back (docs/fleet.md, "A replica lost"): its outages, as its own
rows show them, what the router did meanwhile, the requests that failed, and every replica's prefix hits before,
during and after; pure functions of the fleet's rows (`metrics.fleet_rows`) and the records.

An outage of replica i begins at its first row whose /metrics did not answer (`up` 0) and ends at its next
answered row (`back`); it is also one where its counters went back between two answered rows (a restart faster
than a scrape: it has no silent stretch). `restarted`: its counters went back by the time it answered again (the
supervisor started a new engine). The stretch a claim of the outage counts over is from its last answered row
before it (or its first unanswered one) to its return (or the run's end). Times are seconds after the run's first
send.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.fleet_rows import HITS, QUERIES, FleetRows, growth
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.rundir.fleet_keys import CB_PREFIX, CB_STATE, HEALTH, PROCESSED, UP, replica_source, worker_key
from loadproof.units import NS_PER_S

OUTAGE = "fleet.<replica>.outage<k>"
PHASES = ("before_outage", "during_outage", "after_outage")


@dataclass(frozen=True)
class Outage:
    """One outage of a replica (the module's docstring), times in ns on the run's clock."""

    replica: int
    last_ns: int | None  # its last answered row before (None: silent from its first row)
    down_ns: int | None  # its first unanswered row (None: seen only as its counters going back)
    back_ns: int | None  # its first answered row after (None: not again in the run)
    restarted: bool

    @property
    def from_ns(self) -> int:
        """Where the outage's stretch begins: its last answered row, else its first silent one."""
        begin = self.last_ns if self.last_ns is not None else self.down_ns
        return begin if begin is not None else self.back_ns or 0


def went_back(before: dict[str, float], after: dict[str, float]) -> bool:
    """Whether a counter (a `_total` name) is lower in `after` than in `before`: the engine restarted."""
    return any(k.endswith("_total") and k in before and after[k] < before[k] for k in after)


def outages(rows: list[EngineSample], replica: int) -> list[Outage]:
    """A replica's outages in its rows' order."""
    found: list[Outage] = []
    last: EngineSample | None = None
    silent_since: int | None = None
    for row in rows:
        if not row.values.get(UP, 1.0):
            if silent_since is None:
                silent_since = row.t_ns
            continue
        reset = last is not None and went_back(last.values, row.values)
        if silent_since is not None or reset:
            found.append(Outage(replica, last.t_ns if last else None, silent_since, row.t_ns, reset))
        silent_since = None
        last = row
    if silent_since is not None:
        found.append(Outage(replica, last.t_ns if last else None, silent_since, None, False))
    return found


def run_outages(rows: FleetRows, start: int, end: int) -> list[Outage]:
    """Every replica's outages that overlap the run (first send to last end), in time order."""
    found = [o for i, replica in enumerate(rows.replicas) for o in outages(replica, i)]
    kept = [o for o in found if o.from_ns <= end and (o.back_ns is None or o.back_ns >= start)]
    return sorted(kept, key=lambda o: (o.from_ns, o.replica))


@dataclass(frozen=True)
class RouterView:
    """What the router's rows show of one replica over an outage's stretch (ns; None: not seen)."""

    sent: int | None = None  # requests it sent the replica over the stretch
    last_sent_ns: int | None = None  # its last row at which its count of requests sent to the replica had grown
    failures: int | None = None  # the circuit breaker's failures counted for the replica
    unhealthy_ns: int | None = None  # its first row marking the replica unhealthy
    resumed_ns: int | None = None  # after the return: its first row at which its count for the replica grew again
    cb_open_ns: int | None = None  # its first row with the replica's circuit breaker not closed


def router_view(router: list[EngineSample], outage: Outage, end: int) -> RouterView:
    i = outage.replica
    sent_key, fail_key, health_key = (
        worker_key(PROCESSED, i),
        worker_key(CB_PREFIX + "failure", i),
        worker_key(HEALTH, i),
    )
    upto = outage.back_ns if outage.back_ns is not None else end
    stretch = [s for s in router if outage.from_ns <= s.t_ns <= upto]
    sent = growth(router, sent_key, outage.from_ns, upto, absent=0.0)
    failures = growth(router, fail_key, outage.from_ns, upto, absent=0.0)
    grew = _grew(router, sent_key)
    last_sent = max((t for t in grew if outage.from_ns < t <= upto), default=None)
    resumed = min((t for t in grew if outage.back_ns is not None and t > outage.back_ns), default=None)
    unhealthy = next((s.t_ns for s in stretch if s.values.get(health_key, 1.0) == 0.0), None)
    opened = next((s.t_ns for s in stretch if s.values.get(worker_key(CB_STATE, i), 0.0) != 0.0), None)
    return RouterView(_whole(sent), last_sent, _whole(failures), unhealthy, resumed, opened)


def _whole(value: float | None) -> int | None:
    return None if value is None else int(round(value))


def _grew(rows: list[EngineSample], key: str) -> list[int]:
    """The times of the rows at which `key` is higher than in the row before (or lower: counted anew)."""
    have = [s for s in rows if key in s.values]
    return [b.t_ns for a, b in zip(have, have[1:]) if b.values[key] != a.values[key]]


def phase_bounds(outage: Outage, start: int) -> dict[str, tuple[int, int | None]]:
    """The run's stretches around its first outage: before it, during it, and after the return (to the end)."""
    back = outage.back_ns
    bounds: dict[str, tuple[int, int | None]] = {"before_outage": (start, outage.from_ns)}
    bounds["during_outage"] = (outage.from_ns, back)
    if back is not None:
        bounds["after_outage"] = (back, None)
    return bounds


def timeline_claims(rows: FleetRows, records: list[RequestRecord], start: int, end: int) -> list[Claim]:
    """Each outage's claims, and every replica's prefix-hit rate around the run's first one."""
    found = run_outages(rows, start, end)
    claims: list[Claim] = []
    ordinal: Counter[int] = Counter()
    for outage in found:
        ordinal[outage.replica] += 1
        parts: dict[str, object] = {"replica": replica_source(outage.replica), "k": ordinal[outage.replica]}
        claims += outage_claims(rows, outage, start, end, parts)
        claims += _requests_claims(records, outage, end, parts)
    if found:
        claims += phase_claims(rows, found[0], start)
    return claims


def outage_claims(rows: FleetRows, outage: Outage, start: int, end: int, parts: dict[str, object]) -> list[Claim]:
    """When the replica went silent and came back, whether it restarted, and what the router did meanwhile."""
    view = router_view(rows.router_answered, outage, end) if rows.router_answered else RouterView()
    times = (
        ("silent_from_s", outage.down_ns, "its first /metrics row that did not answer"),
        ("back_s", outage.back_ns, "its first answered row after the silence (or after its counters went back)"),
        (
            "router_last_sent_s",
            view.last_sent_ns,
            "the router's last row in the outage's stretch at which its count of requests sent to it had grown",
        ),
        ("router_unhealthy_s", view.unhealthy_ns, "the router's first row marking it unhealthy (worker_health 0)"),
        ("router_cb_open_s", view.cb_open_ns, "the router's first row with its circuit breaker not closed (cb_state)"),
        (
            "router_resumed_s",
            view.resumed_ns,
            "the router's first row after its return at which its count of requests sent to it grew",
        ),
    )
    out = [
        number(
            f"{OUTAGE}.{name}",
            (t - start) / NS_PER_S,
            "s",
            f"{what}, after the first send",
            1,
            direction="neither",
            parts=parts,
        )
        for name, t, what in times
        if t is not None
    ]
    if outage.down_ns is not None and outage.back_ns is not None:
        silent = (outage.back_ns - outage.down_ns) / NS_PER_S
        out.append(
            number(f"{OUTAGE}.silent_s", silent, "s", "back_s - silent_from_s", 1, direction="lower", parts=parts)
        )
    out.append(
        fact(f"{OUTAGE}.restarted", outage.restarted, "its counters went back by its return: a new engine", parts)
    )
    for name, value, what in (
        ("router_sent", view.sent, "requests the router sent it over the outage's stretch"),
        ("router_failures", view.failures, "its circuit breaker's failures counted over the outage's stretch"),
    ):
        if value is not None:
            out.append(count(f"{OUTAGE}.{name}", value, "requests", what, direction="neither", parts=parts))
    return out


def _requests_claims(records: list[RequestRecord], outage: Outage, end: int, parts: dict[str, object]) -> list[Claim]:
    """The run's requests that ended in an outage's stretch: finished and failed, and the failures' kinds."""
    upto = outage.back_ns if outage.back_ns is not None else end
    ended = [r for r in records if outage.from_ns <= r.end_ns <= upto]
    failed = [r for r in ended if not r.ok]
    out = [
        count(
            f"{OUTAGE}.finished_requests",
            len(ended) - len(failed),
            "requests",
            "the run's requests that ended well in the outage's stretch (any replica)",
            direction="neither",
            parts=parts,
        ),
        count(
            f"{OUTAGE}.failed_requests",
            len(failed),
            "requests",
            "the run's requests that failed, ending in the outage's stretch",
            direction="lower",
            parts=parts,
        ),
    ]
    if failed:
        kinds = Counter(r.error_kind or "error" for r in failed).most_common()
        out.append(
            fact(
                f"{OUTAGE}.errors",
                ", ".join(f"{kind} {n}" for kind, n in kinds),
                "the failed requests' error kinds, most frequent first",
                parts,
            )
        )
    return out


def phase_claims(rows: FleetRows, outage: Outage, start: int) -> list[Claim]:
    """Each replica's prefix-hit rate before, during and after the run's first outage (the other replicas' caches
    filling with what the lost one held, and the returned one's refilling)."""
    out: list[Claim] = []
    for i in range(len(rows.replicas)):
        answered = rows.answered(i)
        for phase, (a, b) in phase_bounds(outage, start).items():
            hits, queries = growth(answered, HITS, a, b), growth(answered, QUERIES, a, b)
            if hits is None or not queries:
                continue
            out.append(
                number(
                    "fleet.<replica>.prefix_hit_pct.<phase>",
                    100 * hits / queries,
                    "%",
                    "its prefix_cache_hits_total growth / prefix_cache_queries_total growth x 100 over the phase: "
                    "before_outage (first send to the first outage's stretch), during_outage (that stretch), "
                    "after_outage (the lost replica's return to the end)",
                    2,
                    direction="neither",
                    parts={"replica": replica_source(i), "phase": phase},
                )
            )
    return out
