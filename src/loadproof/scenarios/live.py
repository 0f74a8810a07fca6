"""What a run is doing now, for the person watching it: a small model the scenario keeps up to date and
the console draws on its own timer (`lifecycle.Console.live`; the CLI's renderer is `cli.ui.LiveView`).

The scenario's side costs nothing measurable (`benchmarks/live_view_cost.py`): per request one call when
it is sent (`started`, the client's `on_start`) and one when its record ends (`recording`), plain
attribute writes and a list append at each phase change, no formatting. Everything else is worked out by
the reader (`snapshot`, on the console's timer) from what the run already keeps: the records the client
fills chunk by chunk while their streams run (first tokens, per-chunk usage tokens), and the samples the
scenario's /metrics scraper takes anyway (`watch_engine`); nothing is scraped for the display. A
record is let go as soon as it ends (its final counts are summed then), so the view keeps nothing alive
that the client would have freed; each pass reads only the requests in flight. One reader at a time.

Phases, each with its view (`describe`):
- `preparing`: before anything is sent (building prompts, the idle guard);
- `cold`: sessions sent, first tokens (client), the engine's running / waiting / KV usage, prompt tokens
  completed (the engine's counter) against N x L planned, what the KV cache holds (an estimate, when the
  engine's KV size is known), an ETA;
- `window`: the countdown, tokens per second per stream (min / median / max) and together;
- `drain`: the engine letting go after cancel: running, waiting, KV;
- `requests`: requests done (of those planned), errors, tokens per second over the last few seconds,
  the TTFT median of the requests ended so far, and what the engine's samples show.
"""

from __future__ import annotations

import statistics
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.units import NS_PER_S as NS

Clock = Callable[[], int]

PREPARING, COLD, WINDOW, DRAIN, REQUESTS, END = "preparing", "cold", "window", "drain", "requests", "end"
RATE_SPAN_S = 5.0  # "current" rate: tokens over about the last this many seconds
TTFT_KEPT = 10_000  # the TTFT median is over at most the last this many first tokens
TTFT_EVERY_S = 2.0  # and, over more than TTFT_CHEAP of them, recomputed at most this often
TTFT_CHEAP = 2_000
STALE_ENGINE_S = 5.0  # an engine sample older than this is shown with its age
FINAL_AFTER_S = 1.0  # a closed window stops counting once this long past its end (late appends)
MIN_WINDOW_S = 0.5  # rates of a window shorter than this so far are not shown (one chunk would look fast)


@dataclass(frozen=True)
class Phase:
    """One phase of a run, as the scenario declared it."""

    name: str
    kind: str
    start_ns: int
    detail: str = ""
    end_ns: int | None = None  # a window's planned end; a countdown's end for `requests` (soak's duration)
    records: tuple[RequestRecord, ...] = ()  # a window's streams
    declared_ns: int = 0  # when the scenario declared it (a window can start in the past)


@dataclass(frozen=True)
class WindowFigures:
    elapsed_s: float
    left_s: float | None  # None: the window ends on an event, not a clock (interference's newcomer prefill)
    streams: int
    per_stream: tuple[float, float, float] | None  # min, median, max
    together: float | None
    unit: str  # tokens/s (the server's per-chunk usage) or chunks/s (a server without it)


@dataclass(frozen=True)
class Snapshot:
    """Everything the views show, as of `t_ns`."""

    t_ns: int
    scenario: str
    phases: tuple[Phase, ...]
    detail: str
    planned: int
    sent: int
    done: int
    errors: int
    cancelled: int
    first_tokens: int
    waiting_first_s: float | None  # the longest a request in flight has waited for its first token
    rate: float | None
    rate_unit: str
    ttft_p50_s: float | None
    ttft_count: int
    engine: dict[str, float] | None
    engine_baseline: dict[str, float]
    engine_age_s: float | None
    sessions: int
    prompt_tokens_planned: int
    kv_cache_tokens: int | None
    windows: dict[int, WindowFigures] = field(default_factory=dict)
    engine_samples: Sequence[EngineSample] = ()
    prompt_counter_moved_ns: int = 0  # the first sample showing the engine's prompt-token counter at its value
    last_first_token_ns: int = 0

    def engine_at(self, t_ns: int) -> dict[str, float] | None:
        """The engine's values in the last sample taken at or before `t_ns`."""
        samples = self.engine_samples
        for i in range(len(samples) - 1, -1, -1):  # from the end: a phase that just ended is near it
            if samples[i].t_ns <= t_ns:
                return samples[i].values
        return None

    @property
    def phase(self) -> Phase:
        return self.phases[-1]

    def growth(self, name: str) -> float | None:
        """How much an engine counter grew since the scenario started watching."""
        if self.engine is None or name not in self.engine or name not in self.engine_baseline:
            return None
        return self.engine[name] - self.engine_baseline[name]

    def kv_estimate(self) -> float | None:
        """Tokens the KV cache holds beyond its state when watching began: KV usage x the engine's KV size."""
        if not self.kv_cache_tokens:
            return None
        grown = self.growth("kv_cache_usage_perc")
        return None if grown is None else max(0.0, grown) * self.kv_cache_tokens

    def eta(self, index: int | None = None) -> tuple[float | None, str]:
        """Seconds left in a cold phase, and what the estimate is from: the pace of the prompt tokens the
        engine completed so far, else of the KV estimate, else of first tokens. The pace is taken up to
        when the figure last moved, so between two completions the ETA counts down."""
        start = self.phases[-1 if index is None else index].start_ns
        choices = (
            (
                self.growth("prompt_tokens_total"),
                self.prompt_counter_moved_ns,
                self.prompt_tokens_planned,
                "completed prompt tokens",
            ),
            (self.kv_estimate(), self.t_ns, self.prompt_tokens_planned, "the KV estimate"),
            (self.first_tokens, self.last_first_token_ns, self.sessions, "first tokens"),
        )
        for done, at, total, source in choices:
            if done and total and done > 0 and at > start:
                return max(0.0, ((at - start) * (total - done) / done - (self.t_ns - at)) / NS), source
        return None, ""


class LiveStatus:
    """The live state of one run. The scenario writes (the methods below); the console reads (`snapshot`)."""

    def __init__(self, scenario: str, clock: Clock = time.perf_counter_ns) -> None:
        self.scenario = scenario
        self.clock = clock
        self.phases: list[Phase] = [Phase("preparing", PREPARING, clock())]
        self.detail = ""  # a note on the current phase (throughput's family and concurrency)
        self.planned = 0  # requests planned; 0 when open-ended
        self.sent = self.done = self.errors = self.cancelled = 0
        self.sessions = 0
        self.prompt_tokens_planned = 0
        self.kv_cache_tokens: int | None = None
        self.engine_samples: Sequence[EngineSample] | None = None
        self.engine_baseline: dict[str, float] = {}
        # requests in flight, which the reader watches fill; the ended ones are let go at once (a record
        # kept alive longer than the run keeps it costs the client), their final counts summed here
        self.in_flight: dict[int, RequestRecord] = {}
        self.tokens_done = self.chunks_done = self.first_tokens_done = 0
        self.last_first_token_ns = 0
        self.ttfts: deque[int] = deque(maxlen=TTFT_KEPT)  # of the ended requests, ns
        self._reader = _Reader()

    # ----- the scenario's side: cheap -----

    def started(self, record: RequestRecord) -> None:
        """A request is about to be sent (the client's `on_start`)."""
        self.sent += 1
        self.in_flight[id(record)] = record

    def starting(self, scenario: str) -> Callable[[RequestRecord], None]:
        """An `on_start` that leaves out the requests not labelled `scenario` (warm-ups)."""
        started = self.started

        def on_start(record: RequestRecord) -> None:
            if record.scenario == scenario:
                started(record)

        return on_start

    def ended(self, record: RequestRecord) -> None:
        """A request's record is complete."""
        self.in_flight.pop(id(record), None)
        self.done += 1
        self.tokens_done += record.output_tokens or 0
        self.chunks_done += len(record.chunk_ns)
        first = record.first_token_ns
        if first is not None:
            self.first_tokens_done += 1
            self.ttfts.append(first - record.send_ns)
            if first > self.last_first_token_ns:
                self.last_first_token_ns = first
        if not record.ok:
            if record.error_kind == "cancelled":
                self.cancelled += 1
            else:
                self.errors += 1

    def recording(self, sink: Callable[[RequestRecord], None]) -> Callable[[RequestRecord], None]:
        """The client's `on_record`: `sink` (which stores the record), then `ended`."""
        ended = self.ended

        def on_record(record: RequestRecord) -> None:
            sink(record)
            ended(record)

        return on_record

    def hooks(self, sink: Callable[[RequestRecord], None]) -> dict[str, Callable[[RequestRecord], None]]:
        """The client's `on_start` and `on_record` (`sink`, then `ended`): `StreamingClient(..., **hooks)`."""
        return {"on_start": self.started, "on_record": self.recording(sink)}

    def phase(
        self,
        name: str,
        kind: str = REQUESTS,
        *,
        detail: str = "",
        end_ns: int | None = None,
        records: Sequence[RequestRecord] = (),
    ) -> None:
        self.detail = ""
        now = self.clock()
        self.phases.append(Phase(name, kind, now, detail, end_ns, tuple(records), now))

    def cold_phase(self, sessions: int, input_tokens: int, kv_cache_tokens: int | None = None) -> None:
        """Sessions of `input_tokens` are being sent and prefilled; `kv_cache_tokens`, the engine's KV size
        when known, turns KV usage into an estimate of the tokens it holds."""
        self.sessions, self.prompt_tokens_planned, self.kv_cache_tokens = (
            sessions,
            sessions * input_tokens,
            kv_cache_tokens,
        )
        self.phase("cold phase", COLD)

    def window(
        self, name: str, start_ns: int, end_ns: int | None, records: Sequence[RequestRecord], detail: str = ""
    ) -> None:
        """A measured window over `records`' streams, from `start_ns` (possibly just past) to `end_ns`, or,
        with None, until the next phase."""
        self.detail = ""
        self.phases.append(Phase(name, WINDOW, start_ns, detail, end_ns, tuple(records), self.clock()))

    def drain(self) -> None:
        self.phase("drain", DRAIN)

    def finish(self) -> None:
        """The run is over, or was interrupted: every phase has ended (the lifecycle says so)."""
        if self.phases[-1].kind != END:
            self.phase("end", END)

    def watch_engine(self, samples: Sequence[EngineSample]) -> None:
        """Show what the engine reports, from `samples`, the list a /metrics scraper appends to; its
        latest sample now is the baseline counters grow from."""
        self.engine_baseline = dict(samples[-1].values) if samples else {}
        self.engine_samples = samples

    # ----- the reader's side -----

    def snapshot(self) -> Snapshot:
        """What to show now. Called by one reader at a time (the console's timer)."""
        return self._reader.read(self)


class _Reader:
    """What one reader keeps between passes: the rate's recent totals, the TTFT median, the windows' sums."""

    def __init__(self) -> None:
        self.ttft_p50: float | None = None
        self.ttft_at = -1 << 62
        self.ttft_of = 0
        self.ring: deque[tuple[int, int, int]] = deque()  # (t_ns, tokens, chunks)
        self.windows: dict[int, list[Any]] = {}  # phase index -> [per record (index, tokens) at its start, final]
        self.samples_seen = 0
        self.prompt_counter: float | None = None
        self.prompt_counter_moved = 0

    def read(self, status: LiveStatus) -> Snapshot:
        now = status.clock()
        first_tokens, last_first, oldest, tokens, chunks = self._in_flight(status, now)
        rate, unit = self._rate(now, status.tokens_done + tokens, status.chunks_done + chunks)
        done_firsts = status.first_tokens_done
        cheap = done_firsts <= TTFT_CHEAP
        if done_firsts != self.ttft_of and (cheap or now - self.ttft_at >= TTFT_EVERY_S * NS):
            self.ttft_p50 = statistics.median(list(status.ttfts)) / NS
            self.ttft_at, self.ttft_of = now, done_firsts
        phases = tuple(status.phases)
        engine = age = None
        samples = status.engine_samples
        if samples:
            n = len(samples)
            for sample in samples[self.samples_seen : n]:  # when the prompt-token counter last moved
                value = sample.values.get("prompt_tokens_total")
                if value != self.prompt_counter:
                    self.prompt_counter, self.prompt_counter_moved = value, sample.t_ns
            self.samples_seen = n
            latest = samples[n - 1]
            engine, age = latest.values, (now - latest.t_ns) / NS
        windows = {i: self._window(i, phases, now) for i, p in enumerate(phases) if p.kind == WINDOW}
        return Snapshot(
            t_ns=now,
            scenario=status.scenario,
            phases=phases,
            detail=status.detail,
            planned=status.planned,
            sent=status.sent,
            done=status.done,
            errors=status.errors,
            cancelled=status.cancelled,
            first_tokens=done_firsts + first_tokens,
            waiting_first_s=oldest / NS if oldest else None,
            rate=rate,
            rate_unit=unit,
            ttft_p50_s=self.ttft_p50,
            ttft_count=self.ttft_of,
            engine=engine,
            engine_baseline=status.engine_baseline,
            engine_age_s=age,
            sessions=status.sessions,
            prompt_tokens_planned=status.prompt_tokens_planned,
            kv_cache_tokens=status.kv_cache_tokens,
            windows=windows,
            engine_samples=samples or (),
            prompt_counter_moved_ns=self.prompt_counter_moved,
            last_first_token_ns=max(last_first, status.last_first_token_ns),
        )

    @staticmethod
    def _in_flight(status: LiveStatus, now: int) -> tuple[int, int, int, int, int]:
        """Over the requests in flight (O(their number); the client keeps each record's usage so far and
        its chunk list live): first tokens, the latest of them, the longest wait for one, tokens, chunks."""
        first_tokens = last_first = oldest = tokens = chunks = 0
        for record in list(status.in_flight.values()):
            if record.end_ns:  # ended: counted by `ended`, or never will be (a request nobody waits for)
                status.in_flight.pop(id(record), None)
                continue
            tokens += record.output_tokens or 0
            chunks += len(record.chunk_ns)
            first = record.first_token_ns
            if first is not None:
                first_tokens += 1
                last_first = max(last_first, first)
            elif record.send_ns:
                oldest = max(oldest, now - record.send_ns)
        return first_tokens, last_first, oldest, tokens, chunks

    def _rate(self, now: int, tokens: int, chunks: int) -> tuple[float | None, str]:
        """Tokens (or, from a server without per-chunk usage, chunks) per second over about the last
        RATE_SPAN_S, from the running totals."""
        ring = self.ring
        ring.append((now, tokens, chunks))
        while len(ring) > 2 and ring[1][0] <= now - RATE_SPAN_S * NS:
            ring.popleft()
        t0, tokens0, chunks0 = ring[0]
        if now - t0 < NS // 2:
            return None, "tokens/s"
        if tokens or not chunks:
            return max(0, tokens - tokens0) * NS / (now - t0), "tokens/s"
        return max(0, chunks - chunks0) * NS / (now - t0), "chunks/s"

    def _window(self, index: int, phases: tuple[Phase, ...], now: int) -> WindowFigures:
        """A window's figures: while it runs, each stream's usage so far less its usage at the window's
        start (O(streams)); once it has ended, exactly the chunks inside it, as the report counts them,
        until a second after its end, and then those figures for good."""
        phase = phases[index]
        state = self.windows.get(index)
        if state is None:
            starts = []
            for record in phase.records:
                i = bisect_left(record.chunk_ns, phase.start_ns)
                starts.append((i, sum(record.chunk_tokens[:i])))
            state = self.windows[index] = [starts, None]
        if state[1] is not None:
            return state[1]
        end = phase.end_ns
        if index + 1 < len(phases):  # a later phase began: the window ended then at the latest
            end = phases[index + 1].start_ns if end is None else min(end, phases[index + 1].start_ns)
        tokens, chunks = [], []
        for record, (i, before) in zip(phase.records, state[0]):
            if end is not None and now >= end:
                j = bisect_right(record.chunk_ns, end)
                tokens.append(sum(record.chunk_tokens[i:j]))
                chunks.append(j - i)
            else:
                tokens.append((record.output_tokens or 0) - before)
                chunks.append(len(record.chunk_ns) - i)
        per, unit = tokens, "tokens/s"
        if not any(tokens) and any(chunks):
            per, unit = chunks, "chunks/s"
        elapsed = ((now if end is None else min(now, end)) - phase.start_ns) / NS
        rates = [v / elapsed for v in per] if elapsed >= MIN_WINDOW_S else []
        figures = WindowFigures(
            elapsed_s=max(0.0, elapsed),
            left_s=None if phase.end_ns is None else max(0.0, (phase.end_ns - now) / NS),
            streams=len(per),
            per_stream=(min(rates), statistics.median(rates), max(rates)) if rates else None,
            together=sum(per) / elapsed if rates else None,
            unit=unit,
        )
        if end is not None and now - end >= FINAL_AFTER_S * NS:
            state[1] = figures
        return figures


# ----- the views: text only, for any console -----


def describe(snap: Snapshot, index: int | None = None) -> tuple[str, list[str]]:
    """The heading and the parts of phase `index`'s view (default: the current phase). A phase that
    has ended is described with its final figures ("ended after" its duration), the engine's as of the
    last sample taken before the next phase was declared."""
    index = len(snap.phases) - 1 if index is None else index
    phase = snap.phases[index]
    closed = index + 1 < len(snap.phases)
    until = snap.phases[index + 1].start_ns if closed else snap.t_ns
    if closed and snap.engine is not None:
        snap = replace(snap, engine=snap.engine_at(snap.phases[index + 1].declared_ns), engine_age_s=None)
    took = clock_text((until - phase.start_ns) / NS)
    heading = f"{snap.scenario} {phase.name}" + (f" ended after {took}" if closed else f" {took}")
    detail = phase.detail or (snap.detail if not closed else "")
    if detail:
        heading += f" ({detail})"
    parts = VIEWS.get(phase.kind, lambda s, i, c: [])(snap, index, closed)
    return heading, parts


def line(snap: Snapshot, index: int | None = None) -> str:
    """One plain line: the heading, then the parts."""
    heading, parts = describe(snap, index)
    return heading + (": " + "; ".join(parts) if parts else "")


def _cold(snap: Snapshot, index: int, closed: bool) -> list[str]:
    parts = [f"sessions sent {snap.sent}/{snap.sessions}, first tokens {snap.first_tokens}/{snap.sessions} (client)"]
    if snap.errors:
        parts[0] += f", {snap.errors} failed"
    parts += _engine(snap)
    done = snap.growth("prompt_tokens_total")
    if done is not None:
        parts.append(
            f"prompt tokens completed {done:,.0f}/{snap.prompt_tokens_planned:,} "
            "(engine counter: prefills that finished)"
        )
    held = snap.kv_estimate()
    if held is not None:
        parts.append(f"~{held:,.0f} in the KV cache (estimate from KV usage, prefills in progress too)")
    if not closed:
        eta, source = snap.eta(index)
        parts.append(
            f"ETA {clock_text(eta)} (from the rate of {source} so far)"
            if eta is not None
            else "ETA: once the first prefill completes"
        )
    return parts


def _window(snap: Snapshot, index: int, closed: bool) -> list[str]:
    w = snap.windows[index]
    if w.left_s is None:
        timing = f"{clock_text(w.elapsed_s)} so far"
    else:
        planned = w.elapsed_s + w.left_s if not closed else None
        timing = (
            f"{clock_text(w.left_s)} left of {clock_text(planned)}"
            if planned is not None
            else f"{clock_text(w.elapsed_s)} measured"
        )
    parts = [timing]
    if w.per_stream is not None and w.together is not None:
        low, mid, high = w.per_stream
        parts.append(
            f"per stream {low:,.1f} / {mid:,.1f} / {high:,.1f} {w.unit} (min / median / max over "
            f"{w.streams}), together {w.together:,.1f} {w.unit}"
        )
    if snap.errors:
        parts.append(f"{snap.errors} failed")
    return parts + _engine(snap)


def _drain(snap: Snapshot, index: int, closed: bool) -> list[str]:
    engine = _engine(snap, lead="engine at the end: " if closed else "waiting for the engine to let go: ")
    return engine or ["(no engine /metrics)"]


def _requests(snap: Snapshot, index: int, closed: bool) -> list[str]:
    phase = snap.phases[index]
    done = f"{snap.done}/{snap.planned} done" if snap.planned else f"{snap.done} done"
    parts = [f"{done}, {snap.errors} errors" + (f", {snap.cancelled} cancelled" if snap.cancelled else "")]
    if snap.rate is not None and not closed:
        parts.append(f"{snap.rate:,.0f} {snap.rate_unit} (last {RATE_SPAN_S:g} s)")
    if snap.ttft_p50_s is not None:
        last = f", last {TTFT_KEPT:,}" if snap.ttft_count > TTFT_KEPT else ""
        parts.append(f"TTFT p50 {snap.ttft_p50_s:.2f} s ({snap.ttft_count:,} so far{last})")
    if not closed and snap.waiting_first_s is not None and snap.waiting_first_s >= 1.0:
        parts.append(f"oldest in flight waiting {snap.waiting_first_s:.0f} s for its first token")
    if not closed and phase.end_ns is not None:
        left = (phase.end_ns - snap.t_ns) / NS
        parts.append(
            f"{clock_text(left)} left" if left > 0 else f"no new requests; {snap.sent - snap.done} in flight finishing"
        )
    elif not closed and snap.planned and snap.done:
        elapsed = (snap.t_ns - phase.start_ns) / NS
        parts.append(f"~{clock_text(elapsed * (snap.planned - snap.done) / snap.done)} left at this pace")
    return parts + _engine(snap)


def _engine(snap: Snapshot, lead: str = "engine: ") -> list[str]:
    values = snap.engine
    if values is None:
        return []
    shown = []
    if "num_requests_running" in values:
        shown.append(f"running {values['num_requests_running']:g}")
    if "num_requests_waiting" in values:
        shown.append(f"waiting {values['num_requests_waiting']:g}")
    if "kv_cache_usage_perc" in values:
        shown.append(f"KV {values['kv_cache_usage_perc'] * 100:.0f}%")
    if "process_rss_bytes" in values:
        shown.append(f"RSS {values['process_rss_bytes'] / 2**20:,.0f} MiB")
    if not shown:
        return []
    age = f" (/metrics {snap.engine_age_s:.0f} s ago)" if (snap.engine_age_s or 0) >= STALE_ENGINE_S else ""
    return [lead + ", ".join(shown) + age]


VIEWS: dict[str, Callable[[Snapshot, int, bool], list[str]]] = {
    COLD: _cold,
    WINDOW: _window,
    DRAIN: _drain,
    REQUESTS: _requests,
}


def clock_text(seconds: float) -> str:
    """0:07, 12:30, 1:02:03."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
