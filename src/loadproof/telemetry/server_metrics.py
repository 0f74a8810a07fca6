"""Polls the engine's Prometheus `/metrics` in the background and stores samples in `metrics.jsonl`.

One parser (prometheus_client's). Values are read through the engine adapter's name mapping
(loadproof's vocabulary -> the engine's names), summed over label sets (vLLM labels by engine index
and model). Names the engine does not expose are absent from a sample, never guessed as zero.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

Sample = dict[str, Any]


def parse_metrics(text: str, names: dict[str, str]) -> dict[str, float]:
    """Our name -> value for every mapped metric present in a Prometheus text exposition."""
    wanted = {engine_name: ours for ours, engine_name in names.items()}
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            ours = wanted.get(sample.name)
            if ours is not None:
                values[ours] = values.get(ours, 0.0) + float(sample.value)
    return values


class MetricsScraper:
    """`async with MetricsScraper(...) as scraper:` samples every `interval_s` until the block ends."""

    def __init__(self, url: str, names: dict[str, str], *, interval_s: float | None = 0.5,
                 sink: Callable[[Sample], None] | None = None, api_key: str | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.url = url.rstrip("/") + "/metrics"
        self.names = names
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self.errors = 0
        self._sink = sink
        self._clock = clock
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> MetricsScraper:
        self._session = aiohttp.ClientSession(headers=self._headers, timeout=aiohttp.ClientTimeout(total=10))
        await self.sample()
        if self.interval_s is not None:  # None: samples only when a scenario asks for one
            self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        try:
            await self.sample()
        finally:
            if self._session is not None:
                await self._session.close()

    async def _loop(self) -> None:
        assert self.interval_s is not None
        while True:
            await asyncio.sleep(self.interval_s)
            await self.sample()

    async def sample(self) -> Sample | None:
        """Take one sample now (also used at the boundaries a scenario cares about)."""
        assert self._session is not None
        t_ns = self._clock()
        try:
            async with self._session.get(self.url) as resp:
                text = await resp.text()
        except (aiohttp.ClientError, asyncio.TimeoutError):
            self.errors += 1
            return None
        values = parse_metrics(text, self.names)
        sample: Sample = {"t_ns": t_ns, "wall_time_s": time.time(), "values": values}
        self.samples.append(sample)
        if self._sink is not None:
            self._sink(sample)
        return sample

    def latest(self) -> dict[str, float]:
        return self.samples[-1]["values"] if self.samples else {}
