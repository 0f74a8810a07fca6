"""Samples the engine's metrics in the background and stores them in `metrics.jsonl`.

Where they come from is a `MetricsSource` (`--engine-metrics`):

- a Prometheus text exposition, the engine's own `/metrics` (or a gateway's path to it, such as the
  relay's `/engine/metrics`), parsed with prometheus_client's parser;
- a Prometheus server's HTTP API (`prometheus+http://HOST:9090?job=vllm`), asked at each sample for every
  mapped metric at once, with the URL's query parameters as label matchers.

A Prometheus server holds what it scraped last, up to a scrape interval old. So a sample from it waits for
the first scrape made after the sample was asked for (polling, up to `FRESH_WAIT_S`), and is placed at
that scrape's time, measured on Prometheus's own clock (evaluation time - scrape time), not at the time it
was read: a boundary sample (before the sessions are sent, at the window's start, after the drain) then
shows the engine as it was at or after that boundary, never before it. Use a scrape interval well under
the windows a scenario measures.

Either way values are read through the engine adapter's name mapping (loadproof's vocabulary -> the
engine's names) and summed over label sets (vLLM labels by engine index and model; Prometheus adds
`job` and `instance`). Names the engine does not expose are absent from a sample, never guessed as zero.
An engine name written `metric{label}` keeps its series apart by that label instead: one value per label
value, under our name + `_` + the value (vLLM's accepted draft tokens by draft position:
`spec_decode_num_accepted_tokens_per_pos_total_0`, `_1`, ...; a value other than 1 to 16 letters, digits or
underscores is left out). One written `metric[label]` is an info gauge whose series carry a list in a label and
whose value is the time it was set (vLLM's `lora_requests_info`, a series per set of running and waiting
adapters): its value is how many comma-separated names that label lists in the latest series (the highest
value).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from loadproof.errors import MetricsUnavailable
from loadproof.protocol.urls import url_of
from loadproof.rundir import EngineSample

NS = 1_000_000_000
FRESH_WAIT_S = 60.0  # a Prometheus that has not scraped the engine for this long is no source
_SCRAPE_TIME = "scrape_time"  # the label of the one extra series the Prometheus query returns
PROMETHEUS_SCHEME = "prometheus+"
_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_METRIC = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_SPLIT = re.compile(r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\{(?P<label>[A-Za-z_][A-Za-z0-9_]*)\}")
_SPLIT_VALUE = re.compile(r"[A-Za-z0-9_]{1,16}")
_LISTING = re.compile(r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\[(?P<label>[A-Za-z_][A-Za-z0-9_]*)\]")


@dataclass(frozen=True)
class Wanted:
    """How one engine metric is read: under our name, split by a label, or counting a label's list."""

    ours: str
    label: str | None = None  # `metric{label}`: one value per label value; `metric[label]`: the list's length
    listing: bool = False


def split_name(engine_name: str) -> tuple[str, str | None]:
    """`metric{label}` or `metric[label]` -> ("metric", "label"); a plain name -> (name, None)."""
    m = _SPLIT.fullmatch(engine_name) or _LISTING.fullmatch(engine_name)
    return (m["name"], m["label"]) if m else (engine_name, None)


def _wanted(names: dict[str, str]) -> dict[str, list[Wanted]]:
    """The engine's bare name -> every way it is read (one info gauge may list two labels)."""
    out: dict[str, list[Wanted]] = {}
    for ours, engine_name in names.items():
        bare, label = split_name(engine_name)
        out.setdefault(bare, []).append(Wanted(ours, label, _LISTING.fullmatch(engine_name) is not None))
    return out


class _Values:
    """A reading's values as its series are added: summed per key; a listing, its latest series' names counted."""

    def __init__(self, names: dict[str, str]) -> None:
        self.wanted = _wanted(names)
        self.values: dict[str, float] = {}
        self._latest: dict[str, tuple[float, float]] = {}  # a listing's (highest value, names it listed)

    def add(self, name: str | None, labels: dict[str, str], value: float) -> None:
        if name is None or not math.isfinite(value):  # no NaN, no infinity: metrics.jsonl is JSON
            return
        for way in self.wanted.get(name, ()):
            if way.listing:
                listed = labels.get(way.label or "")
                if listed is not None and value >= self._latest.get(way.ours, (-math.inf, 0.0))[0]:
                    self._latest[way.ours] = (value, float(sum(bool(n.strip()) for n in listed.split(","))))
                continue
            key = _key(way.ours, way.label, labels)
            if key is not None:
                self.values[key] = self.values.get(key, 0.0) + value

    def result(self) -> dict[str, float]:
        return {**self.values, **{ours: listed for ours, (_, listed) in self._latest.items()}}


def _key(ours: str, label: str | None, labels: dict[str, str]) -> str | None:
    """Where a series' value goes: our name, or for a split name our name + `_` + its label's value (None:
    no such label, or a value that is no short plain word)."""
    if label is None:
        return ours
    value = labels.get(label)
    return f"{ours}_{value}" if value is not None and _SPLIT_VALUE.fullmatch(value) else None


def parse_metrics(text: str, names: dict[str, str]) -> dict[str, float]:
    """Our name -> value for every mapped metric present in a Prometheus text exposition (a NaN or an
    infinity left out: metrics.jsonl is JSON, which has no such number, and its reader would refuse the run)."""
    values = _Values(names)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values.add(sample.name, sample.labels, float(sample.value))
    return values.result()


@dataclass(frozen=True)
class MetricsSource:
    """Where an engine's metrics are read: `kind` "exposition" (`url` is the /metrics URL itself) or
    "prometheus" (`url` is the Prometheus server's base URL, `matchers` the label matchers of every query).
    `spec` is what was given, as the manifest records it."""

    kind: Literal["exposition", "prometheus"]
    url: str
    matchers: tuple[tuple[str, str], ...] = ()
    spec: str = ""

    @classmethod
    def parse(cls, spec: str) -> MetricsSource:
        """`http(s)://HOST[:PORT]/PATH` (the exposition at that URL; a bare `http(s)://HOST[:PORT]` gets
        `/metrics`), or `prometheus+http(s)://HOST[:PORT][/PREFIX][?LABEL=VALUE&...]` (a Prometheus server's
        query API). ValueError, with what is wrong, for anything else."""
        text = spec.strip()
        prometheus = text.startswith(PROMETHEUS_SCHEME)
        parts = urlsplit(text[len(PROMETHEUS_SCHEME) :] if prometheus else text)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "not an http(s) URL, nor prometheus+http(s)://HOST:PORT?LABEL=VALUE for a Prometheus server"
            )
        if parts.fragment:
            raise ValueError("a metrics URL takes no #fragment")
        if not prometheus:
            path = parts.path if parts.path not in ("", "/") else "/metrics"
            return cls("exposition", urlunsplit((parts.scheme, parts.netloc, path, parts.query, "")), spec=text)
        matchers = []
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if not _LABEL.fullmatch(name) or name == "__name__":
                raise ValueError(f"{name!r} is not a label name to select series by")
            matchers.append((name, value))
        return cls(
            "prometheus", urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), tuple(matchers), spec=text
        )

    @classmethod
    def beside(cls, base_url: str) -> MetricsSource:
        """The /metrics of a server at `base_url` (the default: the engine's, beside the API it serves)."""
        return cls("exposition", url_of(base_url, "/metrics"))

    def same_origin(self, url: str) -> bool:
        """Whether this source is served where `url` is (scheme, host and port): only then may the API key of
        `url` go to it. A Prometheus server is never sent the key of the engine it watches."""
        if self.kind != "exposition":
            return False
        a, b = urlsplit(self.url), urlsplit(url)
        return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)

    def query(self, names: dict[str, str]) -> str:
        """The PromQL expression that reads, in one evaluation, every mapped metric summed per name, and the
        time of the oldest scrape they come from (`min(timestamp(...))` of one of them, the running-requests
        gauge where mapped: a scrape stamps all its series alike), as a series labelled `loadproof`."""
        wanted = _wanted(names)
        engine_names = sorted(wanted)
        split = sorted({w.label for ways in wanted.values() for w in ways if w.label is not None})
        bad = [n for n in engine_names if not _METRIC.fullmatch(n)]
        if bad:
            raise ValueError(f"not a Prometheus metric name: {bad[0]!r}")
        matchers = "".join(f',{name}="{_escape(value)}"' for name, value in self.matchers)
        anchor = split_name(names["num_requests_running"])[0] if "num_requests_running" in names else engine_names[0]
        by = ", ".join(["__name__", *split])  # a split name's series stay apart by its label
        values = f'sum by ({by}) ({{__name__=~"{"|".join(engine_names)}"{matchers}}})'
        scraped = f"min(timestamp({anchor}{{{matchers.lstrip(',')}}}))"
        return f'{values} or label_replace({scraped}, "loadproof", "{_SCRAPE_TIME}", "", "")'

    @property
    def shown(self) -> str:
        """The URL as messages and the manifest show it: without any user:password."""
        shown = self.url if self.kind == "exposition" else self.spec or PROMETHEUS_SCHEME + self.url
        parts = urlsplit(shown)
        if "@" in parts.netloc:
            shown = urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
        return shown

    def describe(self) -> dict[str, Any]:
        """For the manifest (the URL goes through the sanitizer at publish, like every URL; the matchers are
        its query, so one value to sanitize)."""
        return {"kind": self.kind, "url": self.shown}

    async def read(self, session: aiohttp.ClientSession, names: dict[str, str]) -> Reading:
        """One reading of every mapped metric; raises MetricsUnavailable with the reason when there is none."""
        try:
            if self.kind == "exposition":
                async with session.get(self.url) as resp:
                    text = await resp.text()
                    if resp.status != 200:
                        raise MetricsUnavailable(f"HTTP {resp.status}", resp.status)
                try:
                    return Reading(parse_metrics(text, names))
                except ValueError:
                    raise MetricsUnavailable("not a Prometheus text exposition") from None
            url = f"{url_of(self.url, '/api/v1/query')}?query={quote(self.query(names), safe='')}"
            async with session.get(url) as resp:
                try:
                    data = await resp.json(content_type=None)
                except ValueError:
                    raise MetricsUnavailable(f"HTTP {resp.status}, not Prometheus's query API", resp.status) from None
            if not isinstance(data, dict) or data.get("status") != "success":
                error = data.get("error") if isinstance(data, dict) else None
                raise MetricsUnavailable(
                    f"HTTP {resp.status}: {str(error or 'not a Prometheus answer')[:200]}", resp.status
                )
            return _vector_reading(data, names)
        except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError) as exc:
            raise MetricsUnavailable(type(exc).__name__) from None


@dataclass(frozen=True)
class Reading:
    """What one read of a source gave: the values, and for a Prometheus server the evaluation time and the
    time of the scrape the values come from (seconds, on Prometheus's clock); None for a live exposition."""

    values: dict[str, float]
    evaluated_s: float | None = None
    scraped_s: float | None = None


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _vector_reading(data: dict[str, Any], names: dict[str, str]) -> Reading:
    """Our name -> value from the answer to `MetricsSource.query` (summed by __name__), with the scrape
    time series and the evaluation time."""
    values = _Values(names)
    evaluated = scraped = None
    result = (data.get("data") or {}).get("result") or []
    for series in result:
        labels = series.get("metric") or {}
        try:
            at, value = float(series["value"][0]), float(series["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        evaluated = at
        if labels.get("loadproof") == _SCRAPE_TIME:
            scraped = value
            continue
        values.add(labels.get("__name__"), labels, value)
    return Reading(values.result(), evaluated, scraped)


class MetricsScraper:
    """`async with MetricsScraper(source, names) as scraper:` samples every `interval_s` until the block
    ends, into `samples` (each an EngineSample, the type of a metrics.jsonl row) and `sink`; `api_key` goes
    to the source as a bearer token (give it only where it belongs: see
    `MetricsSource.same_origin`)."""

    def __init__(
        self,
        source: MetricsSource,
        names: dict[str, str],
        *,
        interval_s: float | None = 0.5,
        sink: Callable[[EngineSample], None] | None = None,
        api_key: str | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.source = source
        self.url = self.source.url
        self.names = names
        self.interval_s = interval_s
        self.samples: list[EngineSample] = []
        self.errors = 0
        self.last_failure: MetricsUnavailable | None = None
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

    async def sample(self) -> EngineSample | None:
        """Take one sample now (also used at the boundaries a scenario cares about): the engine as it is
        now, or, from a Prometheus server, as its first scrape after now saw it, placed at that scrape."""
        try:
            sample = await self.read_sample(self.source)
        except MetricsUnavailable as exc:
            self.errors += 1
            self.last_failure = exc
            return None
        self.samples.append(sample)
        if self._sink is not None:
            self._sink(sample)
        return sample

    async def read_sample(self, source: MetricsSource) -> EngineSample:
        """One sample of `source` read now, placed in time (MetricsUnavailable when there is none): what `sample`
        keeps, and what a fleet's scraper takes of each replica."""
        assert self._session is not None
        t_ns, wall = self._clock(), time.time()
        reading = await self._fresh_reading(source)
        if reading.scraped_s is not None and reading.evaluated_s is not None:
            age_s = max(0.0, reading.evaluated_s - reading.scraped_s)
            t_ns, wall = self._clock() - round(age_s * NS), time.time() - age_s
        return EngineSample(t_ns=t_ns, wall_time_s=wall, values=reading.values)

    async def _fresh_reading(self, source: MetricsSource) -> Reading:
        """A reading whose scrape (if it has one) came after this call began: Prometheus's clock at the
        first evaluation marks the start, so no clock of this machine is compared with the server's."""
        assert self._session is not None
        reading = await source.read(self._session, self.names)
        if reading.scraped_s is None or reading.evaluated_s is None:
            return reading  # a live exposition, or no scrape time to go by (then: as read)
        asked_s = reading.evaluated_s
        give_up = time.monotonic() + FRESH_WAIT_S
        pause = 0.05
        while reading.scraped_s is not None and reading.scraped_s < asked_s:
            if time.monotonic() > give_up:
                raise MetricsUnavailable(
                    f"no scrape of the engine in {FRESH_WAIT_S:g} s (the last is "
                    f"{asked_s - reading.scraped_s:.0f} s older than the request)"
                )
            await asyncio.sleep(pause)
            pause = min(0.5, pause * 2)
            reading = await source.read(self._session, self.names)
        return reading

    @property
    def last_error(self) -> str | None:
        """Why the last failed reading failed, as messages show it."""
        return str(self.last_failure) if self.last_failure is not None else None

    def latest(self) -> dict[str, float]:
        return self.samples[-1].values if self.samples else {}
