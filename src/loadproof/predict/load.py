"""The load scenario on the simulator, its catalog entry's `predict`: what `loadproof sim predict-load` and
`plan --simulate load` compute, as functions of `run load`'s own typed options (`LoadOptions`); the command
line only parses into them and shows what comes back.

One predicted run per rate, each with the schedule and the lengths `run load` draws from the same seed
(`intended_offsets`, `draw_lengths`), sent on the virtual clock (`predict.virtual.open_loop`), and its
records' claims from `metrics.load.load_claims` (the names and formulas of a run's claims.json); a rate meets
the SLO by `metrics.load_series.trial_verdict`, the rule of `run load --search rate`, at `--attainment` (a
fraction, as there). At one rate, its ranges and contract (`metrics.load.CONTRACT`). `predict.replay` shows
its predicted run as this module does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from loadproof.errors import ConfigError, UsageError
from loadproof.metrics.claims import Claim
from loadproof.metrics.headline import value_text
from loadproof.metrics.load import PREDICTED_LATENCIES, PREDICTED_RATES, SCENARIO, load_claims
from loadproof.metrics.load_series import point_figures, trial_verdict
from loadproof.metrics.media import PREDICTED_MEDIA
from loadproof.plans.load import LoadLengths, LoadPlan
from loadproof.predict.base import Predictor, Show
from loadproof.predict.media import PredictedMedia, media_rules, predicted_media
from loadproof.predict.virtual import OpenLoopPrediction, open_loop
from loadproof.protocol.routes import route_of
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.synthetic import media_plan
from loadproof.scenarios.media_options import check_media_route
from loadproof.scenarios.options import CliOption, Panel, cli_options, from_cli
from loadproof.sim.config import SimConfig
from loadproof.workloads.arrivals import AllAtOnce, RequestRate, intended_offsets, parse_rate, rate_text
from loadproof.workloads.synthetic import Lengths, draw_lengths

# the options of `run load` a prediction honours, and where its defaults differ from a run's
LOAD_FIELDS = (
    "rate",
    "num_requests",
    "input_tokens",
    "output_tokens",
    "arrival",
    "burstiness",
    "max_concurrency",
    "seed",
    "slo",
    "attainment",
    "images",
    "audio_s",
    "video_frames",
    "media_reuse",
    "media_tokens",
)
RATES_SYNTAX = "requests/s, one or several: 1,2,4,8 (inf: every request at once)"
# the attainment's default is run load's own (LoadOptions.attainment): a prediction judges a rate as its search would
LOAD_CHANGES: dict[str, dict[str, Any]] = {
    "rate": {"default": "1", "help": f"one predicted run per rate, {RATES_SYNTAX}", "metavar": "R,...|inf"},
    "num_requests": {"default": 1000, "help": "requests per rate"},
    "attainment": {
        "help": "the SLO attainment (good / all requests, a fraction, as "
        "`run load --attainment`) a rate must reach to meet the SLO",
    },
}


# the route a predicted run sends on: `run load`'s --endpoint, its media checked as there (a generating route,
# or one of media alone); without it, chat where the requests carry media (run load's default), else completions
ENDPOINT = CliOption(
    field="endpoint",
    flags=("--endpoint",),
    off_flag=None,
    shape="value",
    type=str,
    default=None,
    required=False,
    help="the route the predicted run sends on, as `run load --endpoint` (default: chat with media, else "
    "completions; the media options' kinds must be ones it carries)",
    panel=Panel.MEDIA,
    metavar="ROUTE",
)


def load_cli_options() -> list[CliOption]:
    """The options of `sim predict-load` (and `plan --simulate load`): `run load`'s, as its model declares
    them, with the prediction's defaults, and the route (`ENDPOINT`)."""
    picked = {o.field: o for o in cli_options(LoadOptions) if o.field in LOAD_FIELDS}
    return [replace(picked[name], **LOAD_CHANGES.get(name, {})) for name in LOAD_FIELDS] + [ENDPOINT]


def parse_rates(value: object) -> tuple[RequestRate, ...]:
    """`1,2,4,8` -> the rates, ascending and each once (all at once last), each read by `run load --rate`'s
    parser."""
    parts = [p for p in str(value).split(",") if p.strip()]
    if not parts:
        raise ValueError(f"takes {RATES_SYNTAX}")
    return tuple(sorted(set(parse_rate(p) for p in parts), key=_order))


def _order(rate: RequestRate) -> float:
    return float("inf") if isinstance(rate, AllAtOnce) else float(rate)


def read_attainment(value: float) -> tuple[float, str | None]:
    """(the attainment as a fraction, a deprecation line or None). A value above 1 is the old percentage
    spelling of `sim predict-load --attainment 90`, read as value / 100."""
    if value > 1:
        fraction = value / 100
        return fraction, (
            f"deprecated: --attainment {value:g} is a percentage; give a fraction, as `run load` "
            f"takes it: --attainment {fraction:g}"
        )
    return value, None


@dataclass(frozen=True)
class RateSweep:
    """A load prediction's question: `run load`'s options (validated once; the rate is the first of
    `rates_rps`) and one predicted run per rate."""

    options: LoadOptions
    rates_rps: tuple[RequestRate, ...]
    notes: tuple[str, ...] = ()  # deprecations to show the user
    endpoint: str | None = None  # the route sent on (None: completions, the text-only default)


def rate_sweep(values: dict[str, Any], source: str = "sim predict-load") -> RateSweep:
    """A RateSweep from command-line values keyed by `LOAD_FIELDS` (None: the prediction's default)."""
    given = {k: v for k, v in values.items() if k in LOAD_FIELDS and v is not None}
    given = {**{k: c["default"] for k, c in LOAD_CHANGES.items() if "default" in c}, **given}
    try:
        rates = parse_rates(given.pop("rate"))
    except ValueError as exc:
        raise ConfigError(f"--rate {values.get('rate')}: {exc}") from None
    note = None
    if "attainment" in given:  # else LoadOptions' own default
        given["attainment"], note = read_attainment(float(given["attainment"]))
    options = from_cli(LoadOptions, {**given, "rate": rates[0]}, source)
    endpoint = values.get("endpoint") or ("chat" if options.synthetic_media else None)
    if endpoint is not None:
        route = route_of(endpoint)
        if route.pooling:
            raise UsageError(f"--endpoint {endpoint}: the prediction models a route that generates, not a pooling one")
        check_media_route(options, route, endpoint, dataset=False)
    return RateSweep(options, rates, (note,) if note else (), endpoint)


@dataclass(frozen=True)
class PredictedRun:
    """One predicted run: its claims, computed from its records by the scenario's metrics module."""

    claims: tuple[Claim, ...]
    num_steps: int
    modeled_s: float
    media: PredictedMedia | None = None  # what its requests carried besides text
    prefix_cache_hits: int = 0  # the modeled engine's counters over the run, in tokens
    prefix_cache_queries: int = 0

    def value(self, name: str) -> Any:
        """A claim's value by name (`load.ttft_s.p50`); None when the run has no such claim."""
        return next((c.value for c in self.claims if c.name == name), None)

    @property
    def figures(self) -> dict[str, Any]:
        """Its figures as a rate search's trial has them (`metrics.load_series.point_figures`)."""
        return point_figures(list(self.claims))

    @property
    def num_ok(self) -> int:
        return int(self.figures["requests"] or 0) - int(self.figures["failed"] or 0)


@dataclass(frozen=True)
class RatePrediction:
    rate_rps: RequestRate
    run: PredictedRun
    meets_slo: bool  # False without an SLO
    why: str  # the verdict's reason (`trial_verdict`'s)


@dataclass(frozen=True)
class LoadForecast:
    sweep: RateSweep
    rates: tuple[RatePrediction, ...]
    wall_s: float

    @property
    def best_rate_rps(self) -> RequestRate | None:
        """The highest rate meeting the SLO (None: none did, or no SLO)."""
        return max((r.rate_rps for r in self.rates if r.meets_slo), key=_order, default=None)


def predict_load_sweep(config: SimConfig, sweep: RateSweep) -> LoadForecast:
    """What `run load` measures at each rate of `sweep` on the modeled engine (see the module doc; media by
    `predict.media`)."""
    opts = sweep.options
    route = route_of(sweep.endpoint) if sweep.endpoint is not None else None
    rules = media_rules(opts.media_spec(), opts.media_tokens or (), config) if opts.synthetic_media else None
    alone = route is not None and rules is not None and not route.takes_text  # a transcription: no text
    started = time.perf_counter()
    out = []
    for rate in sweep.rates_rps:
        schedule = opts.one_run(rate).arrival_spec()
        try:
            offsets = intended_offsets(schedule, opts.seed)
        except ValueError as exc:
            raise UsageError(f"load schedule: {exc}") from None
        n = len(offsets)
        texts = [0] * n if alone else draw_lengths(opts.input_tokens, n, opts.seed, "input")
        outputs = draw_lengths(opts.output_tokens, n, opts.seed, "output")
        media = None
        if rules is not None:
            media = predicted_media(opts.media_spec(), rules, n, opts.seed, not alone)
        inputs = [t + (media.tokens if media is not None else 0) for t in texts]
        if max(i + o for i, o in zip(inputs, outputs)) > config.max_model_len:
            what = "input (text and media)" if media is not None else "input"
            raise UsageError(f"{what} + output tokens exceed the profile's max_model_len {config.max_model_len:,}")
        hashes = media.block_hashes(inputs, config.block_size, f"{SCENARIO}-{rate}") if media is not None else None
        pred = predict_load(config, offsets, inputs, outputs, max_concurrency=opts.max_concurrency, hashes=hashes)
        samples = []
        if media is not None:
            media.mark(pred.records, None if alone else texts)
            order = sorted(range(n), key=lambda i: offsets[i])
            samples = media.cache_samples(order, config.mm_cache_items, pred.modeled_s)
        if route is not None:
            for record in pred.records:
                record.endpoint = route.name
        every = isinstance(rate, AllAtOnce)
        plan = LoadPlan(
            arrival=schedule.arrival,
            rate_rps=None if isinstance(rate, AllAtOnce) else rate,
            all_at_once=every,
            burstiness=schedule.burstiness,
            num_requests=opts.num_requests,
            max_concurrency=opts.max_concurrency,
            seed=opts.seed,
            planned_requests=n,
            rescaled=schedule.rescaled,
            schedule_span_s=round(offsets[-1], 9),
            input_tokens=LoadLengths(kind="none", a=0, text="none: media alone")
            if alone
            else _lengths(opts.input_tokens),
            output_tokens=_lengths(opts.output_tokens),
            slo=dict(opts.slo or {}),
            max_model_len=config.max_model_len,
            endpoint=sweep.endpoint,
            route=route.traits() if route is not None else None,
            media=media_plan(opts, alone) if media is not None else None,
        )
        if media is not None and plan.media is not None:  # the rules charged, wherever they came from
            plan.media.tokens, plan.media.tokens_source = media.rules_text()
        claims = tuple(load_claims(pred.records, plan, [], samples))
        run = PredictedRun(
            claims, pred.num_steps, pred.modeled_s, media, pred.prefix_cache_hits, pred.prefix_cache_queries
        )
        out.append(RatePrediction(rate, run, *_verdict(run, opts.attainment) if opts.slo else (False, "")))
    return LoadForecast(sweep, tuple(out), time.perf_counter() - started)


def _verdict(run: PredictedRun, attainment: float) -> tuple[bool, str]:
    return trial_verdict(run.figures, attainment)


def _lengths(spec: Lengths) -> LoadLengths:
    return LoadLengths(kind=spec.kind, a=spec.a, b=spec.b, text=str(spec))


def predict_load(
    config: SimConfig,
    offsets_s: list[float],
    input_tokens: list[int],
    output_tokens: list[int],
    *,
    max_concurrency: int | None = None,
    hashes: list[list[int]] | None = None,
) -> OpenLoopPrediction:
    """Open-loop traffic on the modeled engine, its records labelled as a `run load` run's records are, so the
    load scenario's own formulas read them (`predict.virtual.open_loop`)."""
    return open_loop(
        config,
        offsets_s,
        input_tokens,
        output_tokens,
        scenario=SCENARIO,
        max_concurrency=max_concurrency,
        hashes=hashes,
    )


# a predicted open-loop run's table (`sim predict-load|predict-replay`): its columns, by the claims `run load` computes
PREDICTION_HEAD = ["ok", "output tok/s", "TTFT p50 (s)", "TTFT p99", "TPOT p50", "TPOT p99", "ITL p99", "E2EL p50"]
SLO_HEAD = ["goodput (req/s)", "SLO attainment"]


def prediction_row(run: PredictedRun, slo: bool) -> list[str]:
    """A predicted run's row under PREDICTION_HEAD (and SLO_HEAD with an SLO)."""
    output, goodput, attainment = (run.value(name) for name in PREDICTED_RATES)
    row = [f"{run.num_ok}/{run.figures['requests'] or 0}", "n/a" if output is None else f"{output:,.1f}"]
    row += ["n/a" if (v := run.value(name)) is None else f"{v:.3f}" for name in PREDICTED_LATENCIES]
    if slo:
        row += ["n/a" if goodput is None else f"{goodput:.3f}", "n/a" if attainment is None else f"{attainment:.1f}%"]
    return row


def _media_text(forecast: LoadForecast) -> str:
    media = forecast.rates[0].run.media
    return "" if media is None else f" + {media.tokens} tokens of media"


def _show_media(forecast: LoadForecast, media: PredictedMedia, route: str, show: Show) -> None:
    """The predicted media figures at each rate (the claims `run load` makes of them, the modeled prefix cache's
    hit rate beside), then what the prediction assumed of the media."""
    shown = [(head, name) for head, name in PREDICTED_MEDIA if forecast.rates[0].run.value(name) is not None]
    rows = []
    for p in forecast.rates:
        run = p.run
        hit = 100 * run.prefix_cache_hits / run.prefix_cache_queries if run.prefix_cache_queries else 0.0
        claims = {c.name: c for c in run.claims}
        values = [value_text(claims[name]) if name in claims else "n/a" for _, name in shown]
        rows.append([rate_text(p.rate_rps), *values, f"{hit:.1f}%"])
    show.table("Predicted media", ["rate (req/s)", *(h for h, _ in shown), "prefix-cache hits"], rows)
    for text in media.lines(route):
        show.line(text)


class LoadPredictor(Predictor[RateSweep]):
    """`sim predict-load` and `plan --simulate load` (see the module doc)."""

    command = """Predict what `loadproof run load` measures
    at each rate, on the virtual clock (seconds of wall time): the same schedule and lengths (same seed), the same
    claims (metrics.load), and the highest rate meeting the SLO. --attainment is a fraction, as `run load`'s
    (90 is still read as 90%, with a deprecation line)."""
    shows_plan = False
    contract_options = tuple(f for f in LOAD_FIELDS if f not in ("slo", "attainment"))

    def cli_options(self) -> list[CliOption]:
        return load_cli_options()

    def question(self, values: dict[str, Any], source: str) -> RateSweep:
        lengths = values.get("input_tokens")  # `plan`'s own -l is a number of tokens
        return rate_sweep({**values, "input_tokens": None if lengths is None else str(lengths)}, source)

    def forecast(self, config: SimConfig, question: RateSweep, show: Show) -> None:
        for note in question.notes:
            show.progress(note)
        forecast = predict_load_sweep(config, question)
        opts = question.options
        slo = bool(opts.slo)
        show.table(
            f"Predicted open-loop load: {opts.num_requests} requests per rate, {opts.arrival} arrivals, seed "
            f"{opts.seed}, input {opts.input_tokens}{_media_text(forecast)}, output {opts.output_tokens} "
            f"({forecast.wall_s:.2f} s wall)",
            ["rate (req/s)", *PREDICTION_HEAD] + (SLO_HEAD if slo else []),
            [[rate_text(p.rate_rps), *prediction_row(p.run, slo)] for p in forecast.rates],
        )
        first = forecast.rates[0].run.media
        if first is not None:
            _show_media(forecast, first, question.endpoint or "", show)
        if slo:
            share = f"{opts.attainment * 100:g}% of requests"
            best = forecast.best_rate_rps
            show.line(
                f"highest rate meeting the SLO ({share}): {rate_text(best)} requests/s"
                if best is not None
                else f"no rate given met the SLO ({share})"
            )

    def claims(self, config: SimConfig, question: RateSweep) -> list[Claim]:
        if len(question.rates_rps) != 1:
            raise UsageError("a load prediction with ranges takes one --rate (the run it promises)")
        return list(predict_load_sweep(config, question).rates[0].run.claims)

    def ranged(self, question: RateSweep) -> bool:
        return len(question.rates_rps) == 1

    def options_of(self, question: RateSweep) -> dict[str, Any]:
        return question.options.model_dump(mode="json")


PREDICTOR = LoadPredictor()
