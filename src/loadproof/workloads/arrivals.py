"""Open-loop arrival schedules: when each request of a load run is meant to be sent, drawn up front.

Standard library only (no client, no tokenizer): the schedule is a list of offsets in seconds from the
schedule's start, drawn once from `random.Random(seed)` before anything is sent, so two runs with the
same seed and settings send at the same offsets (docs/scenarios.md, "load").

The rate is a function of time, lambda(t), piecewise linear:
- a constant rate R: lambda(t) = R;
- stages `R1:S1,R2:S2,...`: R1 for S1 seconds, then R2 for S2 seconds, ...; the schedule ends with the last;
- a ramp-up of S seconds: lambda rises linearly from 0 to the first rate over [0, S), then the constant
  rate or the stages follow (the stages start at S).

Arrivals are a renewal process in operational time u = Lambda(t) = integral of lambda from 0 to t: unit-
mean gaps are drawn (`poisson`: exponential, coefficient of variation 1; `gamma`: shape B = burstiness,
scale 1/B, CV 1/sqrt(B), as vLLM's `--burstiness`; `constant`: every gap 1), summed, and mapped back
through Lambda's inverse. With a constant rate R that is exactly vLLM's `bench serve`: gaps of mean 1/R,
gamma(shape B, scale 1/(R*B)); the k-th request is sent at the sum of the first k gaps (the first after
one gap); and, as vLLM does, N requests are drawn (`--num-requests`, or R x `--duration-s`) and the
offsets rescaled so that the last lands on N/R: the schedule offers exactly R, whatever the seed (the
gaps' shape, their coefficient of variation, is unchanged). With a ramp-up or stages nothing is
rescaled (vLLM does not rescale a ramp either): the count is what the process draws until the end.
A rate of "all at once" (`--rate inf`: every request at offset 0) is one typed value, `ALL_AT_ONCE`,
never an infinite float: `RequestRate` is a finite number of requests/s > 0 or `ALL_AT_ONCE`, and
`parse_rate` is the one place text becomes one.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ARRIVALS = ("poisson", "constant", "gamma")
MAX_PLANNED_REQUESTS = 10_000_000  # a schedule larger than this is refused before anything is drawn
RATE_SYNTAX = "a number of requests/s > 0, or inf (every request at once)"


class AllAtOnce(enum.Enum):
    """The rate of a schedule that sends every request at once, at offset 0 (`--rate inf`)."""

    ALL_AT_ONCE = "inf"

    def __str__(self) -> str:
        return "inf"  # as it is typed on the command line and stored in the options


ALL_AT_ONCE = AllAtOnce.ALL_AT_ONCE
RequestRate = float | AllAtOnce  # a finite number of requests/s > 0, or ALL_AT_ONCE


def rate_text(rate: RequestRate) -> str:
    """`inf` or the rate as typed (`2.5`)."""
    return str(rate) if rate is ALL_AT_ONCE else f"{rate:g}"


@dataclass(frozen=True)
class Stage:
    """One stage of a staged schedule: `rate_rps` requests/s for `duration_s` seconds."""

    rate_rps: float
    duration_s: float

    def __str__(self) -> str:
        return f"{self.rate_rps:g}:{self.duration_s:g}"


@dataclass(frozen=True)
class Segment:
    """lambda(t) = rate_start + (rate_end - rate_start) * (t - start_s) / (end_s - start_s) on [start_s, end_s)."""

    start_s: float
    end_s: float  # math.inf for the last segment of an open-ended constant rate
    rate_start: float
    rate_end: float

    @property
    def slope(self) -> float:
        return 0.0 if math.isinf(self.end_s) else (self.rate_end - self.rate_start) / (self.end_s - self.start_s)

    @property
    def area(self) -> float:
        """Expected arrivals in the segment (Lambda's growth across it)."""
        return (
            math.inf if math.isinf(self.end_s) else (self.rate_start + self.rate_end) / 2 * (self.end_s - self.start_s)
        )


@dataclass(frozen=True)
class ArrivalSpec:
    """What a schedule is drawn from. Exactly one of `rate_rps` (a finite rate, or ALL_AT_ONCE) and `stages`."""

    arrival: str = "poisson"
    rate_rps: RequestRate | None = None
    stages: tuple[Stage, ...] = ()
    burstiness: float = 1.0
    ramp_up_s: float = 0.0
    num_requests: int | None = None
    duration_s: float | None = None
    segments: tuple[Segment, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.arrival not in ARRIVALS:
            raise ValueError(f"unknown arrival process {self.arrival!r} (one of {', '.join(ARRIVALS)})")
        if (self.rate_rps is None) == (not self.stages):
            raise ValueError("give a rate or stages, not both and not neither")
        rate = self.rate_rps
        if (
            rate is not None
            and rate is not ALL_AT_ONCE
            and not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 < rate < math.inf)
        ):
            raise ValueError("the rate must be a finite number > 0 (every request at once: ALL_AT_ONCE)")
        if any(not (s.rate_rps > 0 and math.isfinite(s.rate_rps) and s.duration_s > 0) for s in self.stages):
            raise ValueError("every stage needs a rate > 0 (not inf) and a duration > 0")
        if not self.burstiness > 0:
            raise ValueError("the burstiness must be > 0")
        if self.all_at_once:
            if self.num_requests is None:
                raise ValueError("all at once needs a number of requests")
        elif self.num_requests is None and self.duration_s is None and not self.stages:
            raise ValueError("bound the schedule with a number of requests or a duration")
        object.__setattr__(self, "segments", () if self.all_at_once else tuple(_segments(self)))

    @property
    def all_at_once(self) -> bool:
        return self.rate_rps is ALL_AT_ONCE

    @property
    def constant_rps(self) -> float | None:
        """The constant rate in requests/s; None with stages or all at once."""
        return None if self.rate_rps is None or self.rate_rps is ALL_AT_ONCE else float(self.rate_rps)

    @property
    def rescaled(self) -> bool:
        """A constant rate without a ramp-up: the offsets are rescaled to offer exactly the rate."""
        return self.constant_rps is not None and self.ramp_up_s == 0

    @property
    def planned_count(self) -> int:
        """With `rescaled`: num_requests, or floor(rate x duration_s), the smaller with both."""
        rate = self.constant_rps
        assert rate is not None
        counts = [self.num_requests] if self.num_requests is not None else []
        if self.duration_s is not None:
            counts.append(_bounded(math.floor(rate * self.duration_s + 1e-9)))
        return _bounded(min(counts))

    @property
    def end_s(self) -> float:
        """When the schedule stops drawing: the duration bound, or the end of the last stage."""
        ends = [self.duration_s] if self.duration_s is not None else []
        if self.stages:
            ends.append(self.ramp_up_s + sum(s.duration_s for s in self.stages))
        return min(ends) if ends else math.inf

    def rate_at(self, t: float) -> float:
        """lambda(t), requests/s."""
        for seg in self.segments:
            if seg.start_s <= t < seg.end_s:
                return seg.rate_start + seg.slope * (t - seg.start_s)
        return 0.0

    def expected_arrivals(self, t: float) -> float:
        """Lambda(t): the expected number of arrivals in [0, t)."""
        total = 0.0
        for seg in self.segments:
            if t <= seg.start_s:
                break
            tau = min(t, seg.end_s) - seg.start_s
            total += seg.rate_start * tau + seg.slope * tau * tau / 2
        return total

    def time_of(self, u: float) -> float:
        """Lambda's inverse: the time at which `u` arrivals are expected (math.inf past the schedule)."""
        base = 0.0
        for seg in self.segments:
            area = seg.area
            if u <= base + area:
                return seg.start_s + _solve(seg.rate_start, seg.slope, u - base)
            base += area
        return math.inf


def _segments(spec: ArrivalSpec) -> list[Segment]:
    rate = spec.constant_rps
    first = rate if rate is not None else spec.stages[0].rate_rps
    out: list[Segment] = []
    t = 0.0
    if spec.ramp_up_s > 0:
        out.append(Segment(0.0, spec.ramp_up_s, 0.0, first))
        t = spec.ramp_up_s
    if rate is not None:
        out.append(Segment(t, math.inf, rate, rate))
    for stage in spec.stages:
        out.append(Segment(t, t + stage.duration_s, stage.rate_rps, stage.rate_rps))
        t += stage.duration_s
    return out


def _solve(a: float, b: float, area: float) -> float:
    """tau >= 0 with a * tau + b * tau**2 / 2 == area (a >= 0; a > 0 or b > 0)."""
    if b == 0:
        return area / a
    # the root of the quadratic written so that it stays accurate when b is small
    return 2 * area / (a + math.sqrt(a * a + 2 * b * area))


def unit_gaps(arrival: str, burstiness: float, rng: random.Random) -> Callable[[], float]:
    """A function drawing one gap of mean 1 in operational time."""
    if arrival == "constant":
        return lambda: 1.0
    if arrival == "gamma":
        shape, scale = burstiness, 1.0 / burstiness
        return lambda: rng.gammavariate(shape, scale)
    return lambda: rng.expovariate(1.0)


def intended_offsets(spec: ArrivalSpec, seed: int, *, rescale: bool = True) -> list[float]:
    """Every request's intended send time, seconds after the schedule's start, in order.

    A constant rate R without a ramp-up (`spec.rescaled`), as vLLM's `bench serve`: N = `num_requests`
    (or floor(R x duration_s), the smaller with both) gaps are drawn and the offsets rescaled so that the
    last is N/R, so the schedule offers exactly R (`rescale=False`: the raw draw). Otherwise the
    schedule ends at the first of: `num_requests` drawn, the next offset at or past `end_s`.
    """
    if spec.all_at_once:
        return [0.0] * _bounded(spec.num_requests or 0)
    rate = spec.constant_rps
    if spec.rescaled and rescale and rate is not None:
        n = spec.planned_count
        raw = (
            intended_offsets(
                ArrivalSpec(arrival=spec.arrival, rate_rps=rate, burstiness=spec.burstiness, num_requests=n),
                seed,
                rescale=False,
            )
            if n
            else []
        )
        if not raw or raw[-1] <= 0:
            return raw
        factor = n / rate / raw[-1]
        return [t * factor for t in raw]
    limit = spec.num_requests if spec.num_requests is not None else math.inf
    end_s = spec.end_s
    if math.isinf(end_s) and math.isinf(limit):
        raise ValueError("the schedule is unbounded")
    if not math.isinf(end_s):
        _bounded(int(spec.expected_arrivals(end_s)))  # refuse before drawing millions of gaps
    draw = unit_gaps(spec.arrival, spec.burstiness, random.Random(seed))
    offsets: list[float] = []
    u = 0.0
    while len(offsets) < limit:
        u += draw()
        t = spec.time_of(u)
        if t >= end_s:
            break
        offsets.append(t)
        if len(offsets) > MAX_PLANNED_REQUESTS:
            _bounded(len(offsets))
    return offsets


def _bounded(n: int) -> int:
    if n > MAX_PLANNED_REQUESTS:
        raise ValueError(
            f"the schedule plans about {n:,} requests, more than the {MAX_PLANNED_REQUESTS:,} one run may hold"
        )
    return n


def parse_rate(value: object) -> RequestRate:
    """`--rate`: a number of requests/s > 0, or `inf` (every request at once: ALL_AT_ONCE). The edge where
    a rate is validated, once: a float infinity (a TOML `inf`) is ALL_AT_ONCE too, so no infinite float
    goes further."""
    if value is ALL_AT_ONCE:
        return ALL_AT_ONCE
    if isinstance(value, bool):
        raise ValueError(f"takes {RATE_SYNTAX}")
    if isinstance(value, (int, float)):
        rate = float(value)
    else:
        text = str(value).strip().lower()
        if text in ("inf", "infinity"):
            return ALL_AT_ONCE
        try:
            rate = float(text)
        except ValueError:
            raise ValueError(f"takes {RATE_SYNTAX}") from None
    if math.isnan(rate) or rate <= 0:
        raise ValueError("must be > 0 requests/s (or inf: all at once)")
    return ALL_AT_ONCE if math.isinf(rate) else rate


def parse_stages(value: object) -> tuple[Stage, ...]:
    """`--stages 2:30,4:30`: RATE:SECONDS pairs, in order."""
    if isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [p for p in str(value).split(",") if p.strip()]
    if not items:
        raise ValueError("takes RATE:SECONDS stages separated by commas, e.g. 2:30,4:30")
    stages = []
    for item in items:
        if isinstance(item, Stage):
            stages.append(item)
            continue
        rate: Any  # each as the user gave it: float() below takes a number or its text and refuses the rest
        seconds: Any
        if isinstance(item, dict):
            rate, seconds = item.get("rate_rps"), item.get("duration_s")
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            rate, seconds = item
        else:
            rate, sep, seconds = str(item).strip().partition(":")
            if not sep:
                raise ValueError(f"each stage is RATE:SECONDS, e.g. 2:30,4:30 (got {str(item).strip()!r})")
        try:
            stage = Stage(float(rate), float(seconds))
        except (TypeError, ValueError):
            raise ValueError(f"each stage is RATE:SECONDS with two numbers, e.g. 2:30 (got {item!r})") from None
        if not (stage.rate_rps > 0 and math.isfinite(stage.rate_rps)):
            raise ValueError(f"a stage's rate must be a number > 0 (got {stage.rate_rps:g} in {str(stage)!r})")
        if not (stage.duration_s > 0 and math.isfinite(stage.duration_s)):
            raise ValueError(f"a stage's seconds must be > 0 (got {stage.duration_s:g} in {str(stage)!r})")
        stages.append(stage)
    return tuple(stages)
