"""Samples a fleet: every replica's /metrics and the router's at each tick, and the fleet's own row built from the
replicas' (docs/fleet.md, "Measuring a fleet"; the rows' names: `rundir.fleet_keys`).

At each tick every replica and the router are read at once. Each replica's reading is stored as its own row
(`replica-<i>`, with `up` 1), the router's as `router` (per-worker series mapped to replicas:
`telemetry.router_metrics`); a source that does not answer gets a row with `up` 0 and nothing else. The fleet's
row (`engine`, what every single-engine claim and the live view read) is built from the replicas' readings of that
tick (`FleetTotals`):

- counters (names ending `_total`, `_sum` or `_count`, or split by a label: `..._total_<label>`): summed over the
  replicas, each replica's latest value carried while it does not answer, and a replica's counter that went back
  (its engine restarted) counted on from what it had reached: the fleet's counters never go back;
- ratio gauges (`kv_cache_usage_perc`, names ending `_perc`): the mean over the replicas that answered;
- the LoRA adapter listings (`lora_running_adapters`, `lora_waiting_adapters`): the most any replica listed;
- every other gauge (requests running, waiting): summed over the replicas that answered.

A tick at which no replica answers has no fleet row, as a single engine's failed scrape has no row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import aiohttp
import msgspec

from loadproof.errors import MetricsUnavailable
from loadproof.rundir import EngineSample
from loadproof.rundir.fleet_keys import FLEET_SOURCE, ROUTER_SOURCE, UP, replica_source
from loadproof.telemetry.fleet import Fleet
from loadproof.telemetry.router_metrics import parse_router
from loadproof.telemetry.server_metrics import MetricsScraper, MetricsSource

COUNTER_ENDINGS = ("_total", "_sum", "_count")
MOST = ("lora_running_adapters", "lora_waiting_adapters")


def kind_of(name: str) -> str:
    """How the fleet's row takes a value of this name from the replicas': `counter`, `ratio`, `most` or `sum`."""
    if name.endswith(COUNTER_ENDINGS) or "_total_" in name:
        return "counter"
    if name.endswith("_perc"):
        return "ratio"
    return "most" if name in MOST else "sum"


class FleetTotals:
    """The fleet's row from each tick's replica readings (the rules in the module's docstring); it remembers each
    replica's counters, to carry them while a replica is silent and across its restarts."""

    def __init__(self, replicas: int) -> None:
        self.last: list[dict[str, float]] = [{} for _ in range(replicas)]  # each replica's latest counters
        self.before: list[dict[str, float]] = [
            {} for _ in range(replicas)
        ]  # what its counters had reached before a reset

    def add(self, readings: list[dict[str, float] | None]) -> dict[str, float] | None:
        """The fleet's values for one tick (a replica's None: it did not answer); None when none answered."""
        answered = [values for values in readings if values is not None]
        if not answered:
            return None
        for i, values in enumerate(readings):
            for name, value in (values or {}).items():
                if kind_of(name) != "counter":
                    continue
                previous = self.last[i].get(name)
                if previous is not None and value < previous:  # the counter went back: its engine restarted
                    self.before[i][name] = self.before[i].get(name, 0.0) + previous
                self.last[i][name] = value
        out: dict[str, float] = {}
        for i, counters in enumerate(self.last):
            for name, value in counters.items():
                out[name] = out.get(name, 0.0) + value + self.before[i].get(name, 0.0)
        ratios: dict[str, list[float]] = {}
        for values in answered:
            for name, value in values.items():
                kind = kind_of(name)
                if kind == "sum":
                    out[name] = out.get(name, 0.0) + value
                elif kind == "most":
                    out[name] = max(out.get(name, value), value)
                elif kind == "ratio":
                    ratios.setdefault(name, []).append(value)
        out.update({name: sum(values) / len(values) for name, values in ratios.items()})
        return out


class FleetScraper(MetricsScraper):
    """`async with FleetScraper(fleet, names) as scraper:` samples every replica and the router every `interval_s`;
    `samples` holds the fleet's rows (what a scenario and the live view read, as of one engine) and `sink` gets
    every row, the replicas' and the router's too. No API key is sent: a replica's /metrics is not the router's
    API."""

    def __init__(
        self,
        fleet: Fleet,
        names: dict[str, str],
        *,
        interval_s: float | None = 0.5,
        sink: Callable[[EngineSample], None] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        super().__init__(fleet.replicas[0], names, interval_s=interval_s, sink=sink, clock=clock)
        self.fleet = fleet
        self.totals = FleetTotals(len(fleet.replicas))
        self._replica_urls = [source.url for source in fleet.replicas]

    async def sample(self) -> EngineSample | None:
        """One tick: every replica and the router read at once, each row sunk, and the fleet's row kept."""
        t_ns, wall = self._clock(), time.time()
        router = self.fleet.router
        replicas, router_values = await asyncio.gather(
            asyncio.gather(*(self._replica(source) for source in self.fleet.replicas)),
            self._router(router) if router is not None else _nothing(),
        )
        rows: list[EngineSample] = []
        failures: list[MetricsUnavailable] = []
        answered: list[dict[str, float] | None] = []
        for i, got in enumerate(replicas):
            if isinstance(got, MetricsUnavailable):
                failures.append(got)
                answered.append(None)
                rows.append(EngineSample(t_ns=t_ns, wall_time_s=wall, values={UP: 0.0}, source=replica_source(i)))
                continue
            answered.append(got.values)
            placed = (t_ns, wall) if self.fleet.replicas[i].kind == "exposition" else (got.t_ns, got.wall_time_s)
            rows.append(
                msgspec.structs.replace(
                    got, t_ns=placed[0], wall_time_s=placed[1], values={**got.values, UP: 1.0}, source=replica_source(i)
                )
            )
        if router is not None:
            up = {UP: 0.0} if router_values is None else {**router_values, UP: 1.0}
            rows.append(EngineSample(t_ns=t_ns, wall_time_s=wall, values=up, source=ROUTER_SOURCE))
        if self._sink is not None:
            for row in rows:
                self._sink(row)
        fleet = self.totals.add(answered)
        if fleet is None:
            self.errors += 1
            self.last_failure = failures[0] if failures else MetricsUnavailable("no replica answered")
            return None
        at = min(row.t_ns for row, values in zip(rows, answered) if values is not None)
        sample = EngineSample(t_ns=at, wall_time_s=wall, values=fleet, source=FLEET_SOURCE)
        self.samples.append(sample)
        if self._sink is not None:
            self._sink(sample)
        return sample

    async def _replica(self, source: MetricsSource) -> EngineSample | MetricsUnavailable:
        try:
            return await self.read_sample(source)
        except MetricsUnavailable as exc:
            return exc

    async def _router(self, source: MetricsSource) -> dict[str, float] | None:
        """The router's values, or None where its exposition did not answer."""
        assert self._session is not None
        try:
            async with self._session.get(source.url) as resp:
                text = await resp.text()
                if resp.status != 200:
                    return None
            return parse_router(text, self._replica_urls)
        except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError, ValueError):
            return None


async def _nothing() -> None:
    return None
