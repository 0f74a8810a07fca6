"""`LoadOptions`: every option of `loadproof run load`, typed and validated once, where the command line
(or a caller in-process) gives them. A sweep's point or a search's trial is derived from them with
`one_run` (a typed copy), never dumped and validated again.

The rate is `workloads.arrivals.RequestRate`: a finite number of requests/s, or `ALL_AT_ONCE` (typed
`--rate inf`); `parse_rate` is the one parser. Stored options (the manifest's `options`) keep the
spelling they always had: `"inf"`, or the number.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, PlainValidator, field_validator, model_validator

from loadproof.scenarios.constraints import ConstraintOptions
from loadproof.scenarios.datasets import DatasetOptions
from loadproof.scenarios.load.precision import PRECISION_SYNTAX, Precision, check_precision
from loadproof.scenarios.load.rate_search import RESOLUTION_SYNTAX, Resolution, parse_resolution
from loadproof.scenarios.load.slo import SLO_SYNTAX, Slo
from loadproof.scenarios.media_options import MediaOptions
from loadproof.scenarios.options import SAMPLING_OFF, Panel, cli
from loadproof.workloads.arrivals import (
    ALL_AT_ONCE,
    ARRIVALS,
    MAX_PLANNED_REQUESTS,
    RATE_SYNTAX,
    ArrivalSpec,
    RequestRate,
    Stage,
    parse_rate,
    parse_stages,
    rate_text,
)
from loadproof.workloads.model_mix import MIX_SYNTAX, mix_text, parse_mix
from loadproof.workloads.synthetic import LENGTHS_SYNTAX, Lengths, parse_lengths

# a rate, parsed once (`parse_rate`); stored as it is typed: "inf" for ALL_AT_ONCE, else the number
Rate = Annotated[RequestRate, PlainValidator(parse_rate), PlainSerializer(lambda v: str(v) if v is ALL_AT_ONCE else v)]
Stages = Annotated[
    tuple[Stage, ...], BeforeValidator(parse_stages), PlainSerializer(lambda v: ",".join(str(s) for s in v))
]
TokenLengths = Annotated[Lengths, BeforeValidator(parse_lengths), PlainSerializer(str)]
ModelMix = Annotated[dict[str, float], BeforeValidator(parse_mix), PlainSerializer(mix_text)]
SearchResolution = Annotated[Resolution, BeforeValidator(parse_resolution), PlainSerializer(str)]

SWEEP_SYNTAX = "auto, or rates in requests/s separated by commas, e.g. 1,2,4,8"
SEARCH_MAX_RPS = 1024.0  # the highest rate a rate search tries unless --search-max says otherwise


def parse_sweep(value: object) -> str:
    """`auto`, or rates `1,2,4,8` (each a number > 0, none twice), normalized to `1,2,4,8`."""
    if isinstance(value, (list, tuple)):
        parts = [str(v).strip() for v in value]
    else:
        text = str(value).strip()
        if text == "auto":
            return text
        parts = [p.strip() for p in text.split(",")]
    if not parts or any(not p for p in parts):
        raise ValueError(f"takes {SWEEP_SYNTAX} (got {value!r})")
    rates: list[float] = []
    for part in parts:
        try:
            rate = float(part)
        except ValueError:
            raise ValueError(f"{part!r} is not a rate: takes {SWEEP_SYNTAX}") from None
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"every rate must be a number of requests/s > 0 (got {part})")
        if rate in rates:
            raise ValueError(f"the rate {rate:g} is given twice")
        rates.append(rate)
    return ",".join(f"{r:g}" for r in rates)


Sweep = Annotated[str, BeforeValidator(parse_sweep)]


def check_ray_address(value: str | None) -> str | None:
    """`--ray-address`: a non-empty address, and Ray installed (the `loadproof[ray]` extra)."""
    if value is None:
        return None
    if not value.strip():
        raise ValueError("give the Ray cluster's address (auto, HOST:PORT or ray://HOST:PORT)")
    if importlib.util.find_spec("ray") is None:
        raise ValueError("needs Ray, which is not installed: pip install 'loadproof[ray]'")
    return value.strip()


class LoadOptions(DatasetOptions, ConstraintOptions, MediaOptions):  # --dataset FILE (scenarios/datasets.py),
    # --tools and --response-format (scenarios/constraints.py), --images and the media (scenarios/media_options.py)
    rate: Rate | None = Field(
        default=None,
        description=f"the request rate: {RATE_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.ARRIVALS, metavar="R|inf"),
    )
    arrival: Literal["poisson", "constant", "gamma"] = Field(
        default="poisson",
        description="the gaps between sends: " + ", ".join(ARRIVALS[:-1]) + f" or {ARRIVALS[-1]} (with --burstiness)",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    burstiness: float = Field(
        default=1.0,
        gt=0,
        description="gamma's shape B > 0 (coefficient of variation 1/sqrt(B); 1 is Poisson), with --arrival gamma",
        json_schema_extra=cli(panel=Panel.ARRIVALS, metavar="B"),
    )
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="at most N requests in flight; the wait for a slot shows as send lag",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    ramp_up_s: float = Field(
        default=0.0,
        ge=0,
        description="seconds over which the rate first rises linearly from 0 to the first rate",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    stages: Stages | None = Field(
        default=None,
        description="instead of --rate: RATE:SECONDS,..., each stage's requests/s for its seconds, e.g. 2:30,4:30",
        json_schema_extra=cli(text=True, panel=Panel.ARRIVALS, metavar="R:S,..."),
    )
    num_requests: int | None = Field(
        default=None,
        ge=1,
        description="stop the schedule after N requests",
        json_schema_extra=cli(aliases=["-n"], panel=Panel.ARRIVALS),
    )
    duration_s: float | None = Field(
        default=None, gt=0, description="stop the schedule after D seconds", json_schema_extra=cli(panel=Panel.ARRIVALS)
    )
    until_precision: Precision | None = Field(
        default=None,
        description=f"stop sending once every figure named is that precise ({PRECISION_SYNTAX}); "
        "--duration-s or -n stays the ceiling",
        json_schema_extra=cli(text=True, panel=Panel.ARRIVALS, metavar="FIGURE=P%,..."),
    )
    seed: int = Field(
        default=731,
        description="seed (an integer) of the send times, the lengths and the filler",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    input_tokens: TokenLengths = Field(
        default=Lengths("fixed", 1024),
        description=f"prompt tokens, exactly: {LENGTHS_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.WORKLOAD, metavar="N|DIST:A:B"),
    )
    output_tokens: TokenLengths = Field(
        default=Lengths("fixed", 128),
        description=f"output tokens (max_tokens): {LENGTHS_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.WORKLOAD, metavar="N|DIST:A:B"),
    )
    shared_prefix_tokens: int = Field(
        default=0,
        ge=0,
        description="tokens of prompt text every request of the run "
        "shares at its start (0: none, every prompt salted from its first line)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    ignore_eos: bool = Field(
        default=True,
        description="generate exactly max_tokens (--no-ignore-eos: let the model stop)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    slo: Slo | None = Field(
        default=None,
        description=f"per-request SLOs for goodput: {SLO_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.SLO_SEARCH, metavar="NAME=VALUE,..."),
    )
    model_mix: ModelMix | None = Field(
        default=None,
        description="which model or LoRA adapter each request asks "
        f"for, drawn per request with the seed in proportion to the weights: "
        f"{MIX_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.WORKLOAD, metavar="NAME=W,..."),
    )
    inputs_per_request: int = Field(
        default=1,
        ge=1,
        le=4096,
        description="embeddings (--endpoint embeddings): "
        "texts each request embeds, 1 to 4096, one vector each (1: the input is one string)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    deadline_s: float = Field(
        default=600.0,
        gt=0,
        description="per-request deadline in seconds (a request past it fails as timed out)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    sample_interval_s: float = Field(
        default=1.0, ge=0, description=SAMPLING_OFF, json_schema_extra=cli(panel=Panel.ENGINE)
    )
    idle_timeout_s: float = Field(
        default=120.0,
        ge=0,
        description="seconds to wait, before the run (and "
        "before every point of a sweep or trial of a search), for the engine to report 0 "
        "running and 0 waiting; else fail with 'engine busy' (0: do not wait, measure "
        "beside whatever else the engine serves; not with --sweep or --search)",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    # --- sweeps and the rate search (load/series.py) ---
    sweep: Sweep | None = Field(
        default=None,
        description=f"one run per rate: {SWEEP_SYNTAX} (a synchronous run, a "
        "throughput run, then --sweep-points rates spread between the two)",
        json_schema_extra=cli(text=True, panel=Panel.SLO_SEARCH, metavar="R,...|auto"),
    )
    sweep_points: int = Field(
        default=4,
        ge=1,
        le=64,
        description="how many rates, 1 to 64, --sweep auto spreads between the synchronous and the throughput run's request rates",
        json_schema_extra=cli(panel=Panel.SLO_SEARCH),
    )
    search: Literal["rate"] | None = Field(
        default=None,
        description="rate: find the highest rate (requests/s) whose SLO "
        "attainment meets --attainment (needs --slo; starts at --rate, default 1)",
        json_schema_extra=cli(panel=Panel.SLO_SEARCH),
    )
    attainment: float = Field(
        default=0.99,
        gt=0,
        le=1,
        description="the SLO attainment, good / all requests, 0 < A <= 1, a --search trial must reach to pass",
        json_schema_extra=cli(panel=Panel.SLO_SEARCH, metavar="SHARE"),
    )
    search_resolution: SearchResolution = Field(
        default=Resolution(0.1, True),
        description=f"when the search stops: {RESOLUTION_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.SLO_SEARCH, metavar="RPS|P%"),
    )
    search_max: float | None = Field(
        default=None,
        gt=0,
        description=f"the highest rate the search tries, requests/s (default {SEARCH_MAX_RPS:g})",
        json_schema_extra=cli(panel=Panel.SLO_SEARCH, metavar="RPS"),
    )
    search_decision: Literal["interval", "point"] = Field(
        default="interval",
        description="interval: a rate passes when its SLO attainment's 95% lower bound meets --attainment, fails "
        "when the upper bound misses it, and gets more requests while it straddles; point: on the value alone",
        json_schema_extra=cli(panel=Panel.SLO_SEARCH),
    )
    search_segments: int = Field(
        default=3,
        ge=1,
        le=16,
        description="the budget of a straddling rate: at most N runs (segments) at it, their requests pooled; "
        "still straddling after N: UNDECIDED, not a pass",
        json_schema_extra=cli(panel=Panel.SLO_SEARCH, metavar="N"),
    )
    # --- scale-out of the load generator (load/scaleout/) ---
    workers: int | None = Field(
        default=None,
        ge=1,
        description="N load-generating processes on this host (default 1)",
        json_schema_extra=cli(panel=Panel.SCALE_OUT),
    )
    ray_address: str | None = Field(
        default=None,
        description="spread the load over a Ray cluster's nodes as Ray "
        "tasks: auto, HOST:PORT or ray://HOST:PORT (the loadproof[ray] extra)",
        json_schema_extra=cli(panel=Panel.SCALE_OUT, metavar="auto|HOST:PORT"),
    )

    @field_validator("ray_address")
    @classmethod
    def _ray_address(cls, value: str | None) -> str | None:
        return check_ray_address(value)

    @property
    def all_at_once(self) -> bool:
        return self.rate is ALL_AT_ONCE

    @property
    def scaled_out(self) -> bool:
        """The schedule is sent by worker processes or Ray tasks (`--workers N`, N > 1, or `--ray-address`)."""
        return (self.workers or 1) > 1 or self.ray_address is not None

    @model_validator(mode="after")
    def _consistent(self) -> LoadOptions:
        if self.dataset is not None and self.inputs_per_request > 1:
            raise ValueError("--inputs-per-request groups synthetic texts: with --dataset each row is one request")
        if self.dataset is not None and self.synthetic_media:
            raise ValueError(
                "--images, --audio-s and --video-frames make synthetic media: with --dataset each row carries its own"
            )
        if self.dataset is None and self.media_tokens and not self.synthetic_media:
            raise ValueError("--media-tokens applies with --images, --audio-s, --video-frames or a data set's media")
        if self.dataset is not None and self.shared_prefix_tokens:
            raise ValueError("--shared-prefix-tokens shapes synthetic prompts: it does not apply with --dataset")
        self._check_precision()
        if self.sweep is not None or self.search is not None:
            self._check_series()
            return self
        if self.rate is None and self.stages is None:
            raise ValueError("give --rate R (requests/s, or inf) or --stages RATE:SECONDS,...")
        if self.rate is not None and self.stages is not None:
            raise ValueError("give --rate or --stages, not both")
        if self.all_at_once:
            if self.num_requests is None:
                raise ValueError("--rate inf sends every request at once: give --num-requests N")
            if self.ramp_up_s or self.duration_s is not None:
                raise ValueError("--rate inf sends every request at once: --ramp-up-s and --duration-s do not apply")
        elif self.rate is not None and self.num_requests is None and self.duration_s is None:
            raise ValueError("bound the run with --num-requests N or --duration-s D")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError("--burstiness applies to --arrival gamma")
        spec = self.arrival_spec()
        expected: float = self.num_requests or 0
        if not spec.all_at_once and math.isfinite(spec.end_s):
            expected = min(expected or math.inf, spec.expected_arrivals(spec.end_s))
        if expected > MAX_PLANNED_REQUESTS:
            raise ValueError(
                f"the schedule would plan about {expected:,.0f} requests, more than the "
                f"{MAX_PLANNED_REQUESTS:,} one run may hold"
            )
        if (
            self.shared_prefix_tokens
            and self.input_tokens.kind == "fixed"
            and self.shared_prefix_tokens >= self.input_tokens.a
        ):
            raise ValueError(
                f"--shared-prefix-tokens {self.shared_prefix_tokens} leaves nothing of "
                f"--input-tokens {self.input_tokens} to salt"
            )
        if self.max_concurrency is not None and (self.workers or 1) > self.max_concurrency:  # scale-out
            raise ValueError(
                f"--max-concurrency {self.max_concurrency} is split among the workers: give at least "
                f"one slot per worker (--workers {self.workers})"
            )
        return self

    def _check_precision(self) -> None:
        if self.until_precision:  # a schedule sent over time by this process; attainment with an SLO
            check_precision(self.until_precision, self.slo, self.all_at_once or self.sweep == "auto", self.scaled_out)

    def _check_series(self) -> None:
        """A sweep or a rate search: many runs, each with a rate of its own. What holds here holds for every
        run `one_run` derives, so no run of the series is validated again."""
        what = "--sweep" if self.sweep is not None else "--search rate"
        if self.sweep is not None and self.search is not None:
            raise ValueError("give --sweep or --search rate, not both")
        if self.stages is not None:
            raise ValueError(f"{what} sets each run's rate: --stages do not apply")
        if self.sweep is not None and self.rate is not None:
            raise ValueError("--sweep sets each run's rate: give --sweep or --rate, not both")
        if self.search is not None:
            if self.slo is None:
                raise ValueError(
                    "--search rate finds the highest rate that meets an SLO: give --slo, e.g. --slo ttft=2s,tpot=50ms"
                )
            if self.all_at_once:
                raise ValueError("--search rate starts at --rate R, a number of requests/s (not inf)")
            if self.search_decision == "interval" and self.attainment >= 1:
                raise ValueError(
                    "--attainment 1 can never be met on an interval (its lower bound stays below 100% whatever "
                    "the count): give --attainment below 1, or --search-decision point"
                )
            if isinstance(self.rate, (int, float)) and self.rate > self.search_maximum:
                raise ValueError(
                    f"--rate {rate_text(self.rate)}, where the search starts, is above --search-max "
                    f"{self.search_maximum:g}"
                )
        if self.sweep == "auto" and self.num_requests is None:
            raise ValueError("--sweep auto sends --num-requests N in its synchronous and its throughput run: give -n N")
        if self.sweep == "auto" and self.scaled_out:
            raise ValueError(
                "--sweep auto's synchronous run sends one request at a time, which no set of workers "
                "can share: give --sweep with rates, or no --workers or --ray-address"
            )
        if self.num_requests is None and self.duration_s is None:
            raise ValueError("bound each run with --num-requests N or --duration-s D")
        if self.idle_timeout_s == 0:
            raise ValueError(f"{what} starts every run on an idle engine: --idle-timeout-s must be > 0")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError("--burstiness applies to --arrival gamma")
        if self.max_concurrency is not None and (self.workers or 1) > self.max_concurrency:
            raise ValueError(
                f"--max-concurrency {self.max_concurrency} is split among the workers: give at least "
                f"one slot per worker (--workers {self.workers})"
            )
        top = max(self.sweep_rates(), default=self.search_maximum)
        if self.search is None or self.duration_s is not None or self.num_requests is not None:
            expected = min(self.num_requests or math.inf, top * (self.duration_s or math.inf))
            if expected > MAX_PLANNED_REQUESTS:
                raise ValueError(
                    f"a run at {top:g} requests/s would plan about {expected:,.0f} requests, more than "
                    f"the {MAX_PLANNED_REQUESTS:,} one run may hold"
                )

    def sweep_rates(self) -> list[float]:
        """The rates of `--sweep 1,2,4,8`; [] for `--sweep auto`."""
        return [] if self.sweep is None or self.sweep == "auto" else [float(r) for r in self.sweep.split(",")]

    @property
    def search_maximum(self) -> float:
        """The highest rate a rate search tries."""
        return self.search_max or SEARCH_MAX_RPS

    @property
    def search_minimum(self) -> float:
        """The lowest rate a rate search tries: 1/64 of its start, and, where only a duration bounds a trial,
        one that plans 2 requests in it (never above the start)."""
        start = self.search_start
        planned = 2 / self.duration_s if self.duration_s and not self.num_requests else 0.0
        return min(max(start / 64, planned), start)

    @property
    def search_start(self) -> float:
        """The rate a rate search tries first: --rate, default 1 (or the maximum, if that is lower)."""
        return min(1.0, self.search_maximum) if self.rate is None or self.rate is ALL_AT_ONCE else self.rate

    def one_run(self, rate: RequestRate, *, synchronous: bool = False) -> LoadOptions:
        """The options of one run of a sweep or a search, at `rate`: a plain run (no sweep, no search) with
        every other option as given. All at once (a sweep's synchronous and throughput runs) has no ramp-up
        or duration bound and Poisson's name (it draws no gap); `synchronous` sends one request at a time.
        `_check_series` validated what these runs need, so this is a typed copy, not a new validation."""
        update: dict[str, object] = {"sweep": None, "search": None, "rate": rate, "stages": None}
        if rate is ALL_AT_ONCE:
            update.update(duration_s=None, ramp_up_s=0.0, arrival="poisson", burstiness=1.0)
            if synchronous:
                update["max_concurrency"] = 1
        elif synchronous or isinstance(rate, bool) or not (isinstance(rate, (int, float)) and 0 < rate < math.inf):
            raise ValueError(f"one run of a series at {rate!r}: a finite rate > 0, or ALL_AT_ONCE (synchronous)")
        return self.model_copy(update=update)

    def arrival_spec(self) -> ArrivalSpec:
        return ArrivalSpec(
            arrival=self.arrival,
            rate_rps=self.rate,
            stages=self.stages or (),
            burstiness=self.burstiness,
            ramp_up_s=self.ramp_up_s,
            num_requests=self.num_requests,
            duration_s=self.duration_s,
        )
