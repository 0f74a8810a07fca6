"""A run over time, as report panels (`metrics.figures`): requests asked, sent and completed per second,
TTFT and ITL as the run went on, the output token rate, and the engine's own running, waiting and KV cache
use from its scraped /metrics (metrics.jsonl).

Presentation only: every value is read from the stored records and samples with the definitions the claims
use (`metrics.latency`: TTFT, ITL of successful requests), binned by time; no claim reads this module, so
nothing here changes what `verify` recomputes. Times are seconds since `t0`, the run's own start (a load
run's schedule start). Standard library only, as the rest of metrics/.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from loadproof.metrics.distribution import percentile
from loadproof.metrics.engine_agreement import ENGINE_SOURCES
from loadproof.metrics.figures import MAX_POINTS, Level, LinePlot, Panel, Point, Series, Span, thin
from loadproof.metrics.latency import succeeded
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.units import NS_PER_S

BIN_STEPS_S = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
MAX_BINS = 150  # a longer run gets wider bins
ENGINE_MARGIN_S = 2.0  # engine samples kept this long before the start and after the end
MIN_SAMPLES = 3  # the engine's state is drawn from at least this many samples taken during the run

# the engine's gauges (loadproof's names, protocol.vllm_metrics): running and waiting requests, KV cache use
RUNNING, WAITING, KV_USE = "num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"


def bin_width(span_s: float) -> float:
    """The time bin of a run `span_s` long: one second, or the first of BIN_STEPS_S that makes at most
    MAX_BINS bins."""
    return next((w for w in BIN_STEPS_S if span_s / w <= MAX_BINS), BIN_STEPS_S[-1])


def _seconds(t_ns: int, t0: int) -> float:
    return (t_ns - t0) / NS_PER_S


def _width_text(width: float) -> str:
    return f"{width:g} s"


def per_second(times_ns: Sequence[int], t0: int, end: int, width: float, whole: bool = False) -> list[Point]:
    """(bin middle, events in the bin / its width) of every bin from t0 to `end`; a last bin shorter than
    half a width is left out (its few events would read as a rate it never had), shorter than a whole width
    too where `whole` (a schedule ending at its last send: that bin holds the send at its very end, and the
    interval after it that would follow is not in it)."""
    span = _seconds(end, t0)
    if span <= 0:
        return []
    counts: dict[int, int] = defaultdict(int)
    for t in times_ns:
        if t0 <= t <= end:
            counts[min(int(_seconds(t, t0) / width), int(span / width))] += 1
    points = []
    k = 0
    while k * width < span:
        length = min(width, span - k * width)
        if length >= (width if whole else width / 2):
            points.append((k * width + length / 2, counts.get(k, 0) / length))
        k += 1
    return points


def rate_panel(
    records: Sequence[RequestRecord], t0: int, end: int, claim_prefix: str = "load", spans: Sequence[Span] = ()
) -> list[Panel]:
    """Requests per second asked (the schedule's intended sends), sent and completed, per time bin: an open-loop
    run's schedule against what the client and the engine did with it, `spans` shaded (the steady window,
    metrics.steady_state). None without intended send times."""
    intended = [r.intended_send_ns for r in records if r.intended_send_ns is not None]
    if not intended or end <= t0:
        return []
    width = bin_width(_seconds(end, t0))
    sends = [r.send_ns for r in records if r.send_ns]
    last_send = max([*intended, *sends])  # asked and sent end with the schedule, completed with the run
    series = [
        Series("asked (intended sends)", per_second(intended, t0, last_send, width, whole=True)),
        Series("sent", per_second(sends, t0, last_send, width, whole=True)),
        Series("completed", per_second([r.end_ns for r in records if succeeded(r)], t0, end, width)),
    ]
    if len(series[0].points) < 2:
        return []
    return [
        LinePlot(
            title="Requests per second: asked, sent, completed",
            key="rate-over-time",
            series=series,
            x_label="seconds since the schedule's start",
            y_label="requests/s",
            dots=len(series[0].points) <= 40,
            spans=list(spans),
            caption=f"Requests in each {_width_text(width)} bin / its width: asked (the schedule's intended send "
            "times), sent (the client's sends) and completed (successful responses' ends). The run's figures: "
            f"{claim_prefix}.offered_rate_rps, {claim_prefix}.achieved_rate_rps, "
            f"{claim_prefix}.request_throughput_rps"
            + (
                f"; shaded, the steady window MSER-5 found, warm-up and drain left out ({claim_prefix}.steady.method "
                f"says on which series), over which {claim_prefix}.steady.* are measured."
                if spans
                else "."
            ),
        )
    ]


def _binned(values: Sequence[tuple[float, float]], width: float, stats: Sequence[float]) -> list[list[Point]]:
    """For each percentile in `stats`, (bin middle, that percentile of the values whose time falls in it)."""
    bins: dict[int, list[float]] = defaultdict(list)
    for t, v in values:
        bins[int(t // width)].append(v)
    out: list[list[Point]] = [[] for _ in stats]
    for k in sorted(bins):
        ordered = sorted(bins[k])
        for i, p in enumerate(stats):
            out[i].append(((k + 0.5) * width, percentile(ordered, p)))
    return [thin(points) for points in out]


def _scale(values: Sequence[float]) -> tuple[float, str]:
    """(factor, unit) to show latencies in: milliseconds when the largest is under a second."""
    return (1000.0, "ms") if values and max(values) < 1.0 else (1.0, "s")


def latency_panels(records: Sequence[RequestRecord], t0: int, origin: str = "the schedule's start") -> list[Panel]:
    """TTFT of each successful request by its send time (a dot each, and the median and p99 per bin), and ITL
    (every gap between token-bearing chunks, by the time it ended: median and p99 per bin)."""
    ok = [r for r in records if succeeded(r) and r.first_token_ns is not None]
    if len(ok) < 2:
        return []
    span = max(_seconds(r.end_ns, t0) for r in ok)
    width = bin_width(span)
    out: list[Panel] = []
    ttft = sorted((_seconds(r.send_ns, t0), (r.first_token_ns - r.send_ns) / NS_PER_S) for r in ok if r.first_token_ns)
    factor, unit = _scale([v for _, v in ttft])
    ttft = [(t, v * factor) for t, v in ttft]
    p50, p99 = _binned(ttft, width, (50, 99))
    out.append(
        LinePlot(
            title="TTFT over the run",
            key="ttft-over-time",
            series=[Series("each request", thin(ttft), line=False), Series("p50", p50), Series("p99", p99)],
            x_label=f"send time, seconds since {origin}",
            y_label=f"time to first token, {unit}",
            half=True,
            caption=f"Each successful request's t_first_token - t_send at its send time; the lines: median and "
            f"99th percentile of the requests sent in each {_width_text(width)} bin"
            + (f" (every {-(-len(ttft) // MAX_POINTS)}th request drawn)." if len(ttft) > MAX_POINTS else "."),
        )
    )
    gaps = [(_seconds(b, t0), (b - a) / NS_PER_S) for r in ok for a, b in _gaps(r)]
    if len(gaps) >= 2:
        factor, unit = _scale([v for _, v in gaps])
        p50, p99 = _binned([(t, v * factor) for t, v in gaps], width, (50, 99))
        out.append(
            LinePlot(
                title="ITL over the run",
                key="itl-over-time",
                series=[Series("p50", p50), Series("p99", p99)],
                x_label=f"seconds since {origin}",
                y_label=f"inter-token latency, {unit}",
                half=True,
                caption=f"Every gap between successive token-bearing chunks of a successful request ({len(gaps):,} "
                f"gaps), by the time it ended: median and 99th percentile per {_width_text(width)} bin.",
            )
        )
    return out


def _gaps(record: RequestRecord) -> list[tuple[int, int]]:
    """(start, end) of each gap between successive token-bearing chunks, from the first token on (the gaps
    `RequestRecord.itl_ns` measures)."""
    first = record.first_token_ns
    times = [t for t in record.chunk_ns if first is not None and t >= first]
    return list(zip(times, times[1:]))


def token_rate_panel(
    records: Sequence[RequestRecord],
    t0: int,
    origin: str = "the first send",
    half: bool = False,
    spans: Sequence[Span] = (),
) -> list[Panel]:
    """Output tokens per second of all streams together, per time bin (the server's per-chunk usage); `spans`
    shaded (steady windows, metrics.steady_state)."""
    events = [(t, n) for r in records for t, n in zip(r.chunk_ns, r.chunk_tokens) if t >= t0]
    if not events or not any(n for _, n in events):
        return []
    end = max(t for t, _ in events)
    width = bin_width(_seconds(end, t0))
    totals: dict[int, int] = defaultdict(int)
    for t, n in events:
        totals[int(_seconds(t, t0) / width)] += n
    points = [((k + 0.5) * width, totals.get(k, 0) / width) for k in range(int(_seconds(end, t0) / width) + 1)]
    if len(points) < 2:
        return []
    return [
        LinePlot(
            title="Output tokens per second, all streams",
            key="tokens-over-time",
            series=[Series("output tokens/s", thin(points))],
            x_label=f"seconds since {origin}",
            y_label="tokens/s",
            half=half,
            spans=list(spans),
            caption=f"Tokens of every stream's chunks (the server's per-chunk usage) in each {_width_text(width)} "
            "bin / its width"
            + ("; shaded, each steady window MSER-5 found (warm-up and drain left out)." if spans else "."),
        )
    ]


def engine_panels(
    samples: Sequence[EngineSample],
    t0: int,
    end: int,
    origin: str = "the schedule's start",
    spans: Sequence[Span] = (),
    levels: Sequence[Level] = (),
) -> list[Panel]:
    """The engine's requests running and waiting, and its KV cache use, in each /metrics sample from a little
    before `t0` to a little after `end` (its own gauges, scraped while the run went on); `spans` shade both
    (a window), `levels` are drawn on the requests (the running count a criterion wants)."""
    margin = int(ENGINE_MARGIN_S * NS_PER_S)
    held = sorted(
        (s for s in samples if s.source in ENGINE_SOURCES and t0 - margin <= s.t_ns <= end + margin),
        key=lambda s: s.t_ns,
    )
    out: list[Panel] = []
    if sum(t0 <= s.t_ns <= end for s in held) < MIN_SAMPLES:  # read only around the run: nothing over time
        return out
    queue = [
        Series(name, thin([(_seconds(s.t_ns, t0), s.values[key]) for s in held if key in s.values]))
        for name, key in (("running", RUNNING), ("waiting", WAITING))
    ]
    queue = [s for s in queue if len(s.points) >= 2]
    if queue:
        out.append(
            LinePlot(
                title="The engine's requests running and waiting",
                key="engine-queue",
                series=queue,
                x_label=f"seconds since {origin}",
                y_label="requests",
                step=True,
                half=True,
                spans=list(spans),
                levels=list(levels),
                caption=f"The engine's own gauges (num_requests_running, num_requests_waiting) in each of the "
                f"{len(held)} /metrics samples scraped during the run.",
            )
        )
    kv = [(_seconds(s.t_ns, t0), s.values[KV_USE] * 100) for s in held if KV_USE in s.values]
    if len(kv) >= 2:
        out.append(
            LinePlot(
                title="The engine's KV cache use",
                key="engine-kv",
                series=[Series("KV cache used", thin(kv))],
                x_label=f"seconds since {origin}",
                y_label="% of the KV cache",
                step=True,
                half=True,
                spans=list(spans),
                caption="kv_cache_usage_perc x 100 in each /metrics sample: the share of the engine's KV cache "
                "blocks in use.",
            )
        )
    return out
