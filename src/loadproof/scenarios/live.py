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

What the reader returns is a `Snapshot` (`scenarios.live_snapshot`); the views that turn it into text are
`scenarios.live_views`.
"""

from __future__ import annotations

import statistics
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypedDict

from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.scenarios.live_snapshot import (
    COLD,
    DRAIN,
    END,
    PREPARING,
    REQUESTS,
    WINDOW,
    Phase,
    Snapshot,
    WindowFigures,
)
from loadproof.units import NS_PER_S as NS

Clock = Callable[[], int]

RATE_SPAN_S = 5.0  # "current" rate: tokens over about the last this many seconds
TTFT_KEPT = 10_000  # the TTFT median is over at most the last this many first tokens
TTFT_EVERY_S = 2.0  # and, over more than TTFT_CHEAP of them, recomputed at most this often
TTFT_CHEAP = 2_000
FINAL_AFTER_S = 1.0  # a closed window stops counting once this long past its end (late appends)
MIN_WINDOW_S = 0.5  # rates of a window shorter than this so far are not shown (one chunk would look fast)


class ClientHooks(TypedDict):
    """What a StreamingClient calls as each request starts and ends (`LiveStatus.hooks`)."""

    on_start: Callable[[RequestRecord], None]
    on_record: Callable[[RequestRecord], None]


class Watcher(Protocol):
    """What else follows a run's requests as they start and end (`LiveStatus.watch`): the live Prometheus
    endpoint (`scenarios.live_metrics`). Called on the scenario's side, so each call must be as cheap."""

    def started(self, record: RequestRecord) -> None: ...

    def ended(self, record: RequestRecord) -> None: ...


class LiveStatus:
    """The live state of one run. The scenario writes (the methods below); the console reads (`snapshot`)."""

    def __init__(self, scenario: str, clock: Clock = time.perf_counter_ns, run_id: str = "") -> None:
        self.scenario = scenario
        self.run_id = run_id  # the run directory's name, where the run has one
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
        self.watchers: list[Watcher] = []
        # each ended request's time per output token after its first, ns: its mean inter-token latency
        self.tpots: deque[float] = deque(maxlen=TTFT_KEPT)
        self._reader = _Reader()

    # ----- the scenario's side: cheap -----

    def started(self, record: RequestRecord) -> None:
        """A request is about to be sent (the client's `on_start`)."""
        self.sent += 1
        self.in_flight[id(record)] = record
        for watcher in self.watchers:
            watcher.started(record)

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
            last, tokens = record.last_token_ns, record.output_tokens
            if last is not None and last > first and tokens is not None and tokens > 1:  # one chunk: no gap
                self.tpots.append((last - first) / (tokens - 1))
            if first > self.last_first_token_ns:
                self.last_first_token_ns = first
        if not record.ok:
            if record.error_kind == "cancelled":
                self.cancelled += 1
            else:
                self.errors += 1
        for watcher in self.watchers:
            watcher.ended(record)

    def watch(self, watcher: Watcher) -> None:
        """`watcher` is told of every request from now on, as it starts and as it ends."""
        self.watchers.append(watcher)

    def recording(self, sink: Callable[[RequestRecord], None]) -> Callable[[RequestRecord], None]:
        """The client's `on_record`: `sink` (which stores the record), then `ended`."""
        ended = self.ended

        def on_record(record: RequestRecord) -> None:
            sink(record)
            ended(record)

        return on_record

    def hooks(self, sink: Callable[[RequestRecord], None]) -> ClientHooks:
        """The client's `on_start` and `on_record` (`sink`, then `ended`): `StreamingClient(..., **hooks)`."""
        return ClientHooks(on_start=self.started, on_record=self.recording(sink))

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
        self.tpot_p50: float | None = None
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
            self.tpot_p50 = statistics.median(list(status.tpots)) / NS if status.tpots else None
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
            tpot_p50_s=self.tpot_p50,
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
        final: WindowFigures | None = state[1]
        if final is not None:
            return final
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
