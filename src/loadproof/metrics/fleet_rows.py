"""A fleet's rows of metrics.jsonl as the fleet's claims read them (docs/fleet.md, "Measuring a fleet"): each
replica's and the router's in time order (`fleet_rows`), the run's window (`window`), and a counter's growth over a
stretch of time (`growth`).

A counter's growth is summed step by step over the rows a replica answered, from the last at or before the
stretch's start to the last at or before its end (to the run's end: its last row, the scraper's final one), and a
step where the counter went back (the engine restarted) counts the value it restarted to: a restart never takes
requests away. What a replica counted between its last answered row and its death is not seen.
Standard library and msgspec only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample, Manifest
from loadproof.rundir.fleet_keys import ROUTER_SOURCE, UP, replica_of

HITS, QUERIES = "prefix_cache_hits_total", "prefix_cache_queries_total"


@dataclass
class FleetRows:
    """A run's fleet rows: each replica's (every row, `up` 0 ones included) and the router's, in time order."""

    replicas: list[list[EngineSample]] = field(default_factory=list)
    router: list[EngineSample] = field(default_factory=list)

    def answered(self, i: int) -> list[EngineSample]:
        """Replica i's rows where its /metrics answered."""
        return [s for s in self.replicas[i] if s.values.get(UP, 1.0)]

    @property
    def router_answered(self) -> list[EngineSample]:
        return [s for s in self.router if s.values.get(UP, 1.0)]


def fleet_rows(samples: Iterable[EngineSample], manifest: Manifest) -> FleetRows | None:
    """The fleet's rows, one list a replica (as many as the manifest lists, or the highest index seen + 1); None
    without replica rows."""
    by_replica: dict[int, list[EngineSample]] = {}
    router: list[EngineSample] = []
    for s in samples:
        i = replica_of(s.source)
        if i is not None:
            by_replica.setdefault(i, []).append(s)
        elif s.source == ROUTER_SOURCE:
            router.append(s)
    if not by_replica:
        return None
    fleet = manifest.target.fleet
    n = max(len(fleet.replicas) if fleet is not None else 0, max(by_replica) + 1)
    replicas = [sorted(by_replica.get(i, []), key=lambda s: s.t_ns) for i in range(n)]
    return FleetRows(replicas, sorted(router, key=lambda s: s.t_ns))


def window(records: list[RequestRecord]) -> tuple[int, int] | None:
    """The run's first send and its last response's end."""
    if not records:
        return None
    return min(r.send_ns for r in records), max(r.end_ns for r in records)


def growth(
    rows: list[EngineSample], key: str, start: int, end: int | None = None, *, absent: float | None = None
) -> float | None:
    """How much counter `key` grew from `start` to `end` (None: to the last row, the run's end), as the module's
    docstring says; None without a row at or before `start`. `absent`: the value of a row without the key (the
    router's counters: vllm-router shows a series from its first count on, so a row without it had counted 0)."""
    have = [(s.t_ns, s.values.get(key, absent)) for s in rows if key in s.values or absent is not None]
    before = [k for k, (t, _) in enumerate(have) if t <= start]
    if not before:
        return None
    first = before[-1]
    last = len(have) - 1 if end is None else max(k for k, (t, _) in enumerate(have) if t <= end)
    grown = 0.0
    for (_, was), (_, now) in zip(have[first:last], have[first + 1 : last + 1]):
        assert was is not None and now is not None
        grown += now - was if now >= was else now
    return grown
