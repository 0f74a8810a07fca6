"""The live status model: what the scenario writes, what the reader works out from the live records and
the scraper's samples, and the text of each phase's view; on a fake clock."""

from __future__ import annotations

import pytest

from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.scenarios import live as live_module
from loadproof.scenarios.live import TTFT_EVERY_S, LiveStatus
from loadproof.scenarios.live_views import line
from loadproof.units import NS_PER_S as NS


class FakeClock:
    def __init__(self) -> None:
        self.ns = 1_000 * NS

    def __call__(self) -> int:
        return self.ns

    def at(self, seconds: float) -> None:
        """Move to `seconds` after the start."""
        self.ns = 1_000 * NS + int(seconds * NS)

    def t(self, seconds: float) -> int:
        return 1_000 * NS + int(seconds * NS)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def sent(live: LiveStatus, clock: FakeClock, name: str, at_s: float) -> RequestRecord:
    record = RequestRecord(request_id=name, endpoint="chat")
    live.started(record)
    record.send_ns = clock.t(at_s)
    return record


def chunk(record: RequestRecord, at_s: float, clock: FakeClock, tokens: int = 1) -> None:
    """One token-bearing chunk, as the client appends it (the first one is the first token)."""
    t = clock.t(at_s)
    if record.first_token_ns is None:
        record.first_token_ns = t
    record.chunk_ns.append(t)
    record.chunk_tokens.append(tokens)
    record.output_tokens = (record.output_tokens or 0) + tokens  # the usage so far, as the client keeps it


def end(
    live: LiveStatus, record: RequestRecord, clock: FakeClock, at_s: float, *, ok: bool = True, kind: str | None = None
) -> None:
    record.end_ns, record.ok, record.error_kind = clock.t(at_s), ok, kind
    live.recording(lambda r: None)(record)


def engine(clock: FakeClock, at_s: float, **values: float) -> EngineSample:
    return EngineSample(t_ns=clock.t(at_s), values=values)


def test_counters_ttft_median_and_the_rate_of_the_last_seconds(clock):
    live = LiveStatus("throughput", clock=clock)
    live.planned = 4
    live.phase("requests")
    a, b, c = (sent(live, clock, n, 0.0) for n in "abc")
    clock.at(0.4)
    first = live.snapshot()
    assert first.first_tokens == 0 and first.rate is None  # no span yet to take a rate over
    for i in range(10):
        chunk(a, 0.5 + i * 0.1, clock, tokens=2)  # TTFT 0.5 s, 20 tokens by 1.4 s
    chunk(b, 1.5, clock)  # TTFT 1.5 s
    clock.at(2.0)
    end(live, a, clock, 1.5)
    end(live, b, clock, 1.6, ok=False, kind="http_status")
    end(live, c, clock, 1.7, ok=False, kind="cancelled")
    snap = live.snapshot()
    assert (snap.sent, snap.done, snap.errors, snap.cancelled, snap.first_tokens) == (3, 3, 1, 1, 2)
    assert snap.ttft_p50_s == pytest.approx(1.0)  # median of 0.5 and 1.5
    assert snap.rate == pytest.approx(21 / 1.6)  # 0 tokens at 0.4 s, 21 at 2.0 s
    assert snap.waiting_first_s is None  # nothing in flight
    assert live.in_flight == {}  # ended records are let go at once: the view keeps no finished one alive
    text = line(snap)
    assert text.startswith(
        "throughput requests 0:02: 3/4 done, 1 errors, 1 cancelled; sent 3 (1.5/s), 0 in flight; 13 tokens/s (last 5 s)"
    )
    assert "TTFT p50 1.00 s (2 so far)" in text
    assert "left at this pace" in text


def test_the_ttft_median_is_recomputed_at_once_while_cheap_then_at_most_every_few_seconds(clock, monkeypatch):
    def medians(then_at_s: float) -> tuple[float | None, float | None]:
        """The median after a request with a TTFT of 1 s ended, then after one of 3 s, seen at `then_at_s`."""
        clock.at(0.0)
        live = LiveStatus("soak", clock=clock)
        live.phase("requests")
        a = sent(live, clock, "a", 0.0)
        chunk(a, 1.0, clock)
        end(live, a, clock, 1.0)
        clock.at(1.0)
        first = live.snapshot().ttft_p50_s
        b = sent(live, clock, "b", 1.0)
        chunk(b, 4.0, clock)
        end(live, b, clock, 4.0)
        clock.at(then_at_s)
        return first, live.snapshot().ttft_p50_s

    assert medians(4.0) == (pytest.approx(1.0), pytest.approx(2.0))  # few so far: recomputed at once
    monkeypatch.setattr(live_module, "TTFT_CHEAP", 1)
    assert medians(1.0 + TTFT_EVERY_S / 2) == (pytest.approx(1.0), pytest.approx(1.0))  # not yet
    assert medians(1.0 + TTFT_EVERY_S) == (pytest.approx(1.0), pytest.approx(2.0))


def test_a_request_waiting_for_its_first_token_is_shown_with_the_wait(clock):
    live = LiveStatus("prefill", clock=clock)
    live.planned = 3
    live.phase("repeat 1/3", detail="4,096 tokens, cold")
    sent(live, clock, "p00", 0.0)
    clock.at(42.0)
    text = line(live.snapshot())
    assert text.startswith("prefill repeat 1/3 0:42 (4,096 tokens, cold): 0/3 done, 0 errors")
    assert "oldest in flight waiting 42 s for its first token" in text


def test_cold_phase_eta_from_the_engines_completed_prompt_tokens(clock):
    live = LiveStatus("capacity", clock=clock)
    samples = [
        engine(
            clock,
            0.0,
            num_requests_running=0,
            num_requests_waiting=0,
            prompt_tokens_total=500.0,
            kv_cache_usage_perc=0.01,
        )
    ]
    live.watch_engine(samples)
    live.cold_phase(sessions=4, input_tokens=1000)  # N x L = 4,000 prompt tokens planned
    records = [sent(live, clock, f"s{i}", 0.0) for i in range(4)]
    clock.at(10.0)
    samples.append(
        engine(
            clock,
            9.8,
            num_requests_running=3,
            num_requests_waiting=1,
            prompt_tokens_total=500.0,
            kv_cache_usage_perc=0.2,
        )
    )
    snap = live.snapshot()
    assert snap.eta() == (None, "")  # no prefill completed, no KV size known, no first token: no basis
    text = line(snap)
    assert "sessions sent 4/4, first tokens 0/4 (client)" in text
    assert "engine: running 3, waiting 1, KV 20%" in text
    assert "prompt tokens completed 0/4,000 (engine counter" in text
    assert "ETA: once the first prefill completes" in text
    chunk(records[0], 19.0, clock)
    clock.at(20.0)
    samples.append(
        engine(
            clock,
            19.9,
            num_requests_running=4,
            num_requests_waiting=0,
            prompt_tokens_total=1500.0,
            kv_cache_usage_perc=0.4,
        )
    )
    snap = live.snapshot()
    eta, source = snap.eta()
    assert eta == pytest.approx(19.9 * 3 - 0.1)  # 1,000 of 4,000 in the 19.9 s to the sample that showed them
    assert source == "completed prompt tokens"
    text = line(snap)
    assert "first tokens 1/4 (client)" in text
    assert "prompt tokens completed 1,000/4,000" in text
    assert "ETA 1:00 (from the rate of completed prompt tokens so far)" in text
    assert "in the KV cache" not in text  # the engine's KV size is not known: no estimate
    clock.at(30.0)  # no prefill completed since: the ETA counts down
    samples.append(
        engine(
            clock,
            29.9,
            num_requests_running=4,
            num_requests_waiting=0,
            prompt_tokens_total=1500.0,
            kv_cache_usage_perc=0.5,
        )
    )
    assert live.snapshot().eta()[0] == pytest.approx(19.9 * 3 - 10.1)


def test_cold_phase_kv_estimate_gives_an_eta_before_any_prefill_completes(clock):
    live = LiveStatus("capacity", clock=clock)
    samples = [engine(clock, 0.0, prompt_tokens_total=0.0, kv_cache_usage_perc=0.0)]
    live.watch_engine(samples)
    live.cold_phase(sessions=2, input_tokens=500_000, kv_cache_tokens=4_000_000)
    sent(live, clock, "s0", 0.0)
    sent(live, clock, "s1", 0.0)
    clock.at(30.0)
    samples.append(engine(clock, 30.0, prompt_tokens_total=0.0, kv_cache_usage_perc=0.05))  # 200,000 tokens held
    snap = live.snapshot()
    assert snap.kv_estimate() == pytest.approx(200_000)
    assert snap.eta() == (pytest.approx(30.0 * 800_000 / 200_000), "the KV estimate")
    text = line(snap)
    assert "~200,000 in the KV cache (estimate from KV usage, prefills in progress too)" in text
    assert "ETA 2:00 (from the rate of the KV estimate so far)" in text


def test_cold_phase_eta_falls_back_to_first_tokens(clock):
    live = LiveStatus("interference", clock=clock)  # no scraper watched: no engine figures at all
    live.cold_phase(sessions=4, input_tokens=1000)
    records = [sent(live, clock, f"m{i}", 0.0) for i in range(4)]
    chunk(records[0], 5.0, clock)
    clock.at(10.0)
    snap = live.snapshot()
    assert snap.eta() == (pytest.approx(5.0 * 3 - 5.0), "first tokens")  # 1 of 4 in 5 s, 5 s ago
    assert "engine" not in line(snap)


def test_window_countdown_and_per_stream_rates(clock):
    live = LiveStatus("capacity", clock=clock)
    live.cold_phase(sessions=2, input_tokens=1000)
    a, b = sent(live, clock, "a", 0.0), sent(live, clock, "b", 0.0)
    chunk(a, 9.0, clock, tokens=5)  # before the window: not counted in it
    chunk(b, 10.0, clock)  # the last first token: the window starts here
    live.window("window", clock.t(10.0), clock.t(16.0), [a, b])
    for i in range(1, 21):
        chunk(a, 10.0 + i * 0.1, clock)  # 20 tokens by 12.0 s
    for i in range(1, 11):
        chunk(b, 10.0 + i * 0.2, clock, tokens=3)  # 1 + 30 tokens by 12.0 s
    clock.at(12.0)
    w = live.snapshot().windows[2]
    assert w.left_s == pytest.approx(4.0) and w.elapsed_s == pytest.approx(2.0)
    assert w.per_stream == (pytest.approx(10.0), pytest.approx(12.75), pytest.approx(15.5))
    assert w.together == pytest.approx(25.5)
    text = line(live.snapshot())
    assert text.startswith(
        "capacity window 0:02: 0:04 left of 0:06; per stream 10.0 / 12.8 / 15.5 tokens/s "
        "(min / median / max over 2), together 25.5 tokens/s"
    )
    # the window ends at 16 s; chunks after it do not count, and once the drain began the figures stay
    chunk(a, 15.9, clock, tokens=4)
    chunk(a, 16.5, clock, tokens=100)
    clock.at(17.0)
    live.drain()
    clock.at(18.0)
    snap = live.snapshot()
    w = snap.windows[2]
    assert w.left_s == 0 and w.elapsed_s == pytest.approx(6.0)
    assert w.together == pytest.approx((24 + 31) / 6.0)
    assert line(snap, 2).startswith("capacity window ended after 0:07: 0:06 measured; per stream 4.0 / 4.6 / 5.2")


def test_an_ended_phase_shows_the_engine_as_it_was_when_the_next_one_began(clock):
    live = LiveStatus("capacity", clock=clock)
    samples = [engine(clock, 0.0, num_requests_running=0, num_requests_waiting=0, prompt_tokens_total=0.0)]
    live.watch_engine(samples)
    live.cold_phase(sessions=2, input_tokens=100)
    records = [sent(live, clock, "a", 0.0), sent(live, clock, "b", 0.0)]
    chunk(records[0], 2.0, clock)
    chunk(records[1], 3.0, clock)
    samples.append(engine(clock, 3.5, num_requests_running=2, num_requests_waiting=0, prompt_tokens_total=200.0))
    clock.at(3.5)  # declared after that sample, the window starts at the last first token
    live.window("window", clock.t(3.0), clock.t(9.0), records)
    samples.append(engine(clock, 9.1, num_requests_running=2, num_requests_waiting=0, prompt_tokens_total=200.0))
    clock.at(9.1)
    live.drain()
    samples.append(engine(clock, 9.2, num_requests_running=0, num_requests_waiting=0, prompt_tokens_total=200.0))
    clock.at(9.3)
    snap = live.snapshot()
    cold, window = line(snap, 1), line(snap, 2)
    assert cold.startswith(
        "capacity cold phase ended after 0:03: sessions sent 2/2, first tokens 2/2 (client); "
        "engine: running 2, waiting 0; prompt tokens completed 200/200"
    )
    assert "ETA" not in cold
    assert "engine: running 2, waiting 0" in window  # not the drain's 0
    assert line(snap).endswith("waiting for the engine to let go: running 0, waiting 0")


def test_window_rates_are_not_shown_before_half_a_second(clock):
    live = LiveStatus("capacity", clock=clock)
    a = sent(live, clock, "a", 0.0)
    chunk(a, 1.0, clock)
    live.window("window", clock.t(1.0), clock.t(7.0), [a])
    clock.at(1.1)
    assert live.snapshot().windows[1].per_stream is None  # one chunk in 0.1 s is not a rate


def test_an_open_window_lasts_until_the_next_phase(clock):
    live = LiveStatus("interference", clock=clock)
    a = sent(live, clock, "a", 0.0)
    live.window("newcomer prefill", clock.t(0.0), None, [a], detail="8,192 tokens, until its first token")
    for i in range(1, 9):
        chunk(a, i * 0.5, clock)
    clock.at(4.0)
    assert line(live.snapshot()).startswith(
        "interference newcomer prefill 0:04 (8,192 tokens, until its first "
        "token): 0:04 so far; per stream 2.0 / 2.0 / 2.0 tokens/s"
    )
    live.phase("follow-ups")  # at 4 s: the chunks at 4.5 s and after are not the prefill's
    chunk(a, 4.5, clock)
    chunk(a, 5.0, clock)
    clock.at(6.0)
    assert live.snapshot().windows[1].together == pytest.approx(8 / 4.0)


def test_drain_says_what_the_engine_still_holds(clock):
    live = LiveStatus("capacity", clock=clock)
    samples = [engine(clock, 0.0, num_requests_running=4, num_requests_waiting=0, kv_cache_usage_perc=0.5)]
    live.watch_engine(samples)
    live.drain()
    clock.at(1.0)
    assert line(live.snapshot()) == (
        "capacity drain 0:01: waiting for the engine to let go: running 4, waiting 0, KV 50%"
    )
    samples.append(engine(clock, 1.0, num_requests_running=0, num_requests_waiting=0, kv_cache_usage_perc=0.01))
    clock.at(8.0)  # the sample is 7 s old by now: its age is said
    assert "running 0, waiting 0, KV 1% (/metrics 7 s ago)" in line(live.snapshot())
    live.finish()
    assert line(live.snapshot(), 1) == "capacity drain ended after 0:08: engine at the end: running 0, waiting 0, KV 1%"


def test_a_countdown_then_requests_finishing(clock):
    live = LiveStatus("soak", clock=clock)
    live.phase("requests", end_ns=clock.t(20.0), detail="2 clients")
    sent(live, clock, "a", 0.0)
    clock.at(5.0)
    assert "0:15 left" in line(live.snapshot())
    clock.at(21.0)
    assert "no new requests; 1 in flight finishing" in line(live.snapshot())


def test_without_per_chunk_usage_the_rates_count_chunks(clock):
    live = LiveStatus("throughput", clock=clock)
    live.phase("requests")
    a = sent(live, clock, "a", 0.0)
    clock.at(1.0)
    live.snapshot()
    for i in range(10):
        chunk(a, 1.0 + i * 0.1, clock, tokens=0)
    clock.at(2.0)
    snap = live.snapshot()
    assert (snap.rate, snap.rate_unit) == (pytest.approx(10.0), "chunks/s")


def test_the_view_shows_requests_in_flight_the_rate_sent_and_the_itl_median(clock):
    """What the panel shows while a load runs (issue #38): in flight, the rate sent so far (the rate asked is
    the phase's detail, in its heading), TTFT and ITL medians of the ended requests."""
    live = LiveStatus("load", clock=clock)
    live.phase("requests", detail="poisson at 2 requests/s")
    a = sent(live, clock, "a", 0.0)
    sent(live, clock, "b", 1.0)  # still in flight
    for i in range(5):
        chunk(a, 0.2 + i * 0.05, clock)  # TTFT 0.2 s, then a token every 50 ms
    a.last_token_ns = a.chunk_ns[-1]
    end(live, a, clock, 0.5)
    clock.at(2.0)
    text = line(live.snapshot())
    assert text.startswith("load requests 0:02 (poisson at 2 requests/s): 1 done, 0 errors; sent 2 (1/s), 1 in flight")
    assert "TTFT p50 0.20 s, ITL p50 50 ms (1 so far)" in text


def test_the_rate_sent_is_over_the_schedule_not_the_drain_after_it(clock):
    live = LiveStatus("load", clock=clock)
    live.phase("requests", detail="poisson at 2 requests/s", end_ns=clock.t(1.0))  # sends for 1 s
    sent(live, clock, "a", 0.0)
    sent(live, clock, "b", 0.5)
    clock.at(3.0)  # both still streaming, 2 s after the last send
    assert "sent 2 (2/s), 2 in flight" in line(live.snapshot())


def test_an_answer_in_one_chunk_has_no_inter_token_latency_to_show(clock):
    """A quality item's whole answer can come in one chunk: its tokens have no gap between them, so it adds
    nothing to the ITL median (the demo's quality line read "ITL p50 0 ms")."""
    live = LiveStatus("quality", clock=clock)
    live.phase("requests")
    a = sent(live, clock, "a", 0.0)
    chunk(a, 0.3, clock, tokens=5)
    a.last_token_ns = a.first_token_ns
    end(live, a, clock, 0.3)
    clock.at(1.0)
    assert "ITL" not in line(live.snapshot())
