"""A run's headline: the few figures a person reads first, each scenario's declared here, found by its catalog
entry (`headline`), rendered from the claims alone.

A headline is a few lines of figures; a figure names a claim, or a pattern where `*` stands for one dotted
part of the name (`throughput.*.*.decode_tokens_per_s`), and then every claim that matches is shown with the
parts the stars stood for in front of its value (`edit c4 27.1 tokens/s`). A claim a run does not have (no
SLO asked, no engine metrics) is left out, and a line with none is not shown. What the headline leaves out is
in report.md, report.html and claims.json, and on the console with `-v`.

`render_lines` and `value_text` are pure: the console (`report/headline.py`) and `compare` use them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from loadproof.catalog import column
from loadproof.metrics.claims import Claim
from loadproof.registry import Registry

MAX_PER_LINE = 6  # figures on one line; the rest are counted, not shown


@dataclass(frozen=True)
class Figure:
    label: str  # what the figure is called on the console (`TTFT p99`)
    claim: str  # the claim's name, or a pattern with `*` for one dotted part


@dataclass(frozen=True)
class Line:
    label: str  # the line's subject (`latency`, `engine`)
    figures: tuple[Figure, ...]


def line(label: str, *figures: tuple[str, str]) -> Line:
    return Line(label, tuple(Figure(short, name) for short, name in figures))


Headline = tuple[Line, ...]
headlines: Registry[Headline] = Registry.over("scenario", column("headline"))


def _latency_lines(scenario: str) -> tuple[Line, ...]:
    s = scenario
    return (
        line(
            "rate",
            ("offered", f"{s}.offered_rate_rps"),
            ("achieved", f"{s}.achieved_rate_rps"),
            ("over", f"{s}.duration_s"),
        ),
        line("SLO", ("attainment", f"{s}.slo_attainment_pct"), ("goodput", f"{s}.goodput_rps")),
        line(
            "latency",
            ("TTFT p50", f"{s}.ttft_s.p50"),
            ("TTFT p99", f"{s}.ttft_s.p99"),
            ("ITL p50", f"{s}.itl_s.p50"),
            ("ITL p99", f"{s}.itl_s.p99"),
            ("E2E p50", f"{s}.e2el_s.p50"),
            ("E2E p99", f"{s}.e2el_s.p99"),
        ),
        line("throughput", ("output", f"{s}.output_tokens_per_s"), ("requests", f"{s}.request_throughput_rps")),
        line(
            "engine",
            ("running max", f"{s}.engine_running_max"),
            ("waiting max", f"{s}.engine_waiting_max"),
            ("KV max", f"{s}.engine_kv_usage_max_pct"),
            ("preemptions", f"{s}.engine_preemptions"),
        ),
    )


# a run whose requests carried media (--images, --audio-s, --video-frames, a data set's): one line of their
# figures, the engine's prompt tokens beside what the text and --media-tokens imply; absent without media
MEDIA = line(
    "media",
    ("images", "load.media.images_per_s"),
    ("video frames", "load.media.video_frames_per_s"),
    ("audio", "load.media.audio_s_per_s"),
    ("real-time factor", "load.media.real_time_factor"),
    ("prompt tokens engine", "load.media.prompt_tokens_per_request.engine"),
    ("expected", "load.media.prompt_tokens_per_request.expected"),
    ("mismatched", "load.media.prompt_tokens_mismatched"),
    ("mm cache hits", "load.media.mm_cache_hit_pct"),
)
# a run with --until-precision: each figure's published precision, the requests and the time it took (the
# verdict, first, says whether each was reached)
PRECISION = line(
    "precision",
    ("", "load.precision.*.reached_pct"),
    ("requests", "load.precision.requests"),
    ("decided at", "load.precision.decided_s"),
    ("stopped by", "load.precision.stopped_by"),
)
LOAD: Headline = (*_latency_lines("load"), PRECISION, MEDIA)
# one line for each trial of a rate search or point of a sweep, after its verdict
LOAD_BRIEF = line(
    "",
    ("TTFT p50", "load.ttft_s.p50"),
    ("TTFT p99", "load.ttft_s.p99"),
    ("ITL p50", "load.itl_s.p50"),
    ("output", "load.output_tokens_per_s"),
)
REPLAY: Headline = (
    line(
        "agent",
        ("requests", "replay.agent.requests_replayed"),
        ("of", "replay.agent.requests_expected"),
        ("order violations", "replay.agent.order_violations"),
        ("forks", "replay.agent.forks"),
        ("joins", "replay.agent.joins"),
        ("send delay max", "replay.agent.send_delay_s.max"),
    ),
    *_latency_lines("replay"),
    line(
        "prefix hits",
        ("expected", "replay.prefix_hit_rate.expected_pct"),
        ("engine", "replay.prefix_hit_rate.engine_pct"),
    ),
)
THROUGHPUT: Headline = (
    line("decode", ("", "throughput.*.*.decode_tokens_per_s")),
    line("aggregate", ("", "throughput.*.*.aggregate_tokens_per_s")),
    line("TTFT median", ("", "throughput.*.*.ttft_median_s")),
)
SESSIONS: Headline = (
    line("sessions", ("completed", "sessions.completed_sessions")),
    line(
        "TTFT",
        ("cold p50", "sessions.ttft_s.cold.p50"),
        ("warm p50", "sessions.ttft_s.warm.p50"),
        ("warm/cold", "sessions.warm_over_cold_ttft_p50"),
    ),
    line(
        "prefix hits",
        ("expected", "sessions.expected_hit_pct.bounded"),
        ("checkpointed", "sessions.checkpointed_hit_pct.bounded"),
        ("engine", "sessions.prefix_hit_rate.engine_pct"),
    ),
    line("SLO", ("attainment", "sessions.slo_attainment_pct")),
)
CAPACITY: Headline = (
    line("held", ("sessions", "capacity.sessions"), ("x tokens", "capacity.input_tokens")),
    line("cold TTFT", ("median", "capacity.cold_ttft_median_s"), ("max", "capacity.cold_ttft_max_s")),
    line(
        "window",
        ("aggregate", "capacity.window_aggregate_tokens_per_s"),
        ("slowest stream", "capacity.window_per_stream_min_tokens_per_s"),
    ),
)
PREFILL: Headline = (
    line("prefill", ("tokens", "prefill.input_tokens"), ("cold TTFT median", "prefill.cold_ttft_median_s")),
    line("decode", ("", "prefill.decode_tokens_per_s")),
)
INTERFERENCE: Headline = (
    line(
        "streams",
        ("before", "interference.before_tokens_per_s"),
        ("during", "interference.during_tokens_per_s"),
        ("after", "interference.after_tokens_per_s"),
        ("longest gap", "interference.during_longest_gap_s"),
    ),
    line("newcomer", ("TTFT", "interference.newcomer_ttft_s")),
)
SOAK: Headline = (
    line("soak", ("over", "soak.duration_s"), ("errors", "soak.errors")),
    line("latency drift", ("", "soak.*.latency_drift")),
)
QUALITY: Headline = (
    line("accuracy", ("", "quality.*.accuracy")),
    line("retrieved", ("", "quality.retrieval.*.retrieved")),
    line("errors", ("", "quality.request_errors")),
)
AB: Headline = (
    line("change B vs A", ("", "ab.*.change")),
    line("rounds", ("", "ab.rounds")),
)
# every run that read the engine's own counters: how far the client's figures are from them
CROSSCHECK: Headline = (
    line(
        "client vs engine",
        ("prompt tokens", "crosscheck.prompt_tokens.diff_pct"),
        ("output tokens", "crosscheck.generation_tokens.diff_pct"),
        ("TTFT mean", "crosscheck.ttft_mean_s.diff_pct"),
    ),
)

# a fleet's run (docs/fleet.md): its prefix hits beside the expectation under the router's policy, and the balance
FLEET: Headline = (
    line(
        "fleet",
        ("prefix hits", "fleet.prefix_hit_pct"),
        ("expected", "fleet.prefix_hit_pct.expected"),
        ("busiest/even", "fleet.balance.max_share_over_even"),
        ("CV", "fleet.balance.cv"),
        ("retries", "fleet.router.retries"),
    ),
)


def matcher(pattern: str) -> Callable[[str], list[str] | None]:
    """A pattern's test: the parts its stars stood for, or None where the name does not match."""
    if "*" not in pattern:
        return lambda name: [] if name == pattern else None
    regex = re.compile("^" + r"\.".join("([^.]+)" if p == "*" else re.escape(p) for p in pattern.split(".")) + "$")

    def match(name: str) -> list[str] | None:
        m = regex.match(name)
        return list(m.groups()) if m else None

    return match


def value_text(claim: Claim) -> str:
    """A figure as the console's headline shows it: seconds under one in ms, three significant digits; the
    verified printed figure (claims.json, report.md) is unchanged."""
    value = claim.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return claim.printed
    if claim.unit == "s" and claim.kind == "figure":
        if value != 0 and abs(value) < 1:
            return f"{value * 1000:.3g} ms"
        return f"{value:.3g} s" if abs(value) < 1000 else f"{value:,.0f} s"
    if claim.kind == "count" and isinstance(value, int):
        return f"{value:,}"  # the label says what is counted
    unit = claim.unit
    text = claim.printed
    if unit == "%" and claim.name.endswith("diff_pct") and isinstance(value, float) and value > 0:
        text = "+" + text  # a difference: which way
    return f"{text}{unit}" if unit == "%" else f"{text} {unit}".rstrip()


def render_lines(headline: Sequence[Line], claims: Sequence[Claim]) -> list[tuple[str, str]]:
    """(line label, its figures as text) for each line with at least one figure among the claims."""
    out = []
    for spec in headline:
        texts: list[str] = []
        for figure in spec.figures:
            match = matcher(figure.claim)
            for claim in claims:
                parts = match(claim.name)
                if parts is None:
                    continue
                label = " ".join(p for p in [figure.label, *parts] if p)
                texts.append(f"{label} {value_text(claim)}".strip())
        if texts:
            more = len(texts) - MAX_PER_LINE
            shown = " · ".join(texts[:MAX_PER_LINE]) + (f" (+{more} more)" if more > 0 else "")
            out.append((spec.label, shown))
    return out
