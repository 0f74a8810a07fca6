"""Many load runs in one command: a sweep over rates, and the search for the highest rate that meets an SLO.

Both work as the capacity search does: every point or trial is a full `loadproof run load` run
(`run_trial`, which `load.scenario` passes in as its `run_load`: the idle guard, the schedule, the
engine's /metrics sampled throughout, the report) of options derived from the command's own
(`LoadOptions.one_run`, a typed copy validated with the command's), in its own run directory inside the
command's folder (`runs/load-sweep-...`, `runs/load-search-...`); a line is appended to `sweep.jsonl` /
`search.jsonl` as each ends, and `sweep.json` / `search.json` (typed: `rundir.series.Sweep`, `RateSearch`;
`store.series` reads and writes them) are rewritten after each, so an interrupted command keeps every
finished point and says how far it got. The folder's report.md and report.html show the table (and a sweep's
curves); a search also writes `claims.json` with `load.search.max_rate_rps`, which
`metrics.load_series.recompute_search` recomputes from the trials' directories alone.

- `--sweep 1,2,4,8`: one run per rate, in the order given, each with the command's arrival, bounds and
  workload.
- `--sweep auto` (as GuideLLM's sweep): a synchronous run (`--num-requests N` requests one after
  another: `--rate inf --max-concurrency 1`), a throughput run (all N at once, `--rate inf`, capped by
  `--max-concurrency` if given), then `--sweep-points K` constant-rate runs at
  r_k = r_sync + k (r_max - r_sync) / K, k = 1..K, where r_sync and r_max are the two runs' measured
  `load.request_throughput_rps`: the last point asks the throughput run's rate.
- `--search rate`: `load.rate_search.rate_search` (bracketing by doubling from `--rate`, default 1, or
  halving when that fails; then bisection to `--search-resolution`). With `--search-decision interval` (the
  default) a rate is a level of up to `--search-segments` runs at it, run one after another while the
  pooled attainment's 95% interval straddles `--attainment` (`metrics.search_decision`); a level passes
  when its lower bound meets the target, and one still straddling after its last segment is UNDECIDED, not
  passing. With `point`, a trial passes when its SLO attainment reaches `--attainment` and the client kept
  its schedule (`metrics.load_series.trial_verdict`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from loadproof.errors import AcceptanceFailed, NothingMeasured, UsageError
from loadproof.metrics.claims import Claim, claims_payload
from loadproof.metrics.headline import LOAD_BRIEF, render_lines
from loadproof.metrics.load_series import (
    POINT_FIGURES,
    finals,
    level_trials,
    point_figures,
    recompute_search,
    search_claims,
    search_result,
    search_trial,
)
from loadproof.metrics.search_decision import INTERVAL, describe, verdict_label
from loadproof.metrics.series_figures import search_outcome, search_panels, sweep_panels
from loadproof.metrics.slo import slo_text
from loadproof.report.build import build_report
from loadproof.report.series import write_series_report
from loadproof.rundir import Manifest
from loadproof.rundir.manifest import SeriesPoint
from loadproof.rundir.series import Figure, PointFigures, RateSearch, SearchTrial, Sweep, SweepPoint
from loadproof.scenarios.base import Setup
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.rate_search import rate_search, round_rate
from loadproof.scenarios.recording import Console, Nested, Outcome, is_verbose
from loadproof.scenarios.target import Target
from loadproof.store.run_dir import new_run_id, write_claims
from loadproof.store.series import SEARCH_JSON, SWEEP_JSON, encode_line, read_sweep, write_document
from loadproof.workloads.arrivals import ALL_AT_ONCE, RequestRate

# one run of the series: (target, options, folder, console, manifest_extra) -> its outcome (`scenario.run_load`)
RunTrial = Callable[[Target, LoadOptions, Path, Console, Manifest], Outcome]

# the console's and the report's columns (the summary files keep every figure)
SHOWN = (
    "achieved_rate_rps",
    "request_throughput_rps",
    "ttft_p50_s",
    "ttft_p99_s",
    "itl_p99_s",
    "e2el_p50_s",
    "goodput_rps",
    "slo_attainment_pct",
    "engine_running_max",
    "engine_waiting_max",
    "engine_preemptions",
)
HEADINGS = {key: heading for key, _, heading in POINT_FIGURES}
# the console's table of a search or sweep without -v: what decides, in 80 columns; report.md has the rest
BRIEF = {
    "achieved_rate_rps": "sent/s",
    "slo_attainment_pct": "SLO met %",
    "ttft_p50_s": "TTFT p50",
    "ttft_p99_s": "TTFT p99",
    "itl_p99_s": "ITL p99",
}
BRIEF_TIMES = " (times in s)"


def _append(path: Path, line: msgspec.Struct) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(encode_line(line) + "\n")


def _cells(point: PointFigures, keys: tuple[str, ...] = SHOWN) -> list[str]:
    return [point.printed(key) for key in keys]


def _folder(setup: Setup, kind: str) -> Path:
    folder = setup.out / new_run_id(kind)
    folder.mkdir(parents=True)
    return folder


def _manifest_extra(setup: Setup, key: str, folder: Path, index: int, **more: Any) -> Manifest:
    """The command's manifest fields, with the trial's place in the series (`key`: search or sweep)."""
    point = SeriesPoint(folder=folder.name, index=index, **more)
    return msgspec.structs.replace(setup.manifest_extra, **{key: point})


# --- the sweep ------------------------------------------------------------------------------------


def sweep_command(setup: Setup, console: Console, run_trial: RunTrial) -> list[SweepPoint]:
    """`--sweep`: one run per point; returns the points (each its kind, rate, run directory and figures)."""
    opts: LoadOptions = setup.options
    target = setup.target  # resolved once, before the first point
    folder = _folder(setup, "load-sweep")
    console.say(f"sweep directory: {folder}")
    auto = opts.sweep == "auto"
    planned: list[tuple[str, float | None]] = (
        [("synchronous", None), ("throughput", None)] if auto else [("rate", r) for r in opts.sweep_rates()]
    )
    total = len(planned) + (opts.sweep_points if auto else 0)
    points: list[SweepPoint] = []
    summary = Sweep(sweep=str(opts.sweep), points_planned=total, options=opts.model_dump(mode="json"), points=points)

    nothing: list[str] = []  # each point's line where it measured nothing

    def one(kind: str, rate: float | None) -> SweepPoint:
        index = len(points)
        if kind == "synchronous":
            label = f"synchronous: {opts.num_requests} requests one after another"
        elif kind == "throughput":
            label = f"throughput: {opts.num_requests} requests at once" + (
                f", at most {opts.max_concurrency} in flight" if opts.max_concurrency else ""
            )
        else:
            label = f"{rate:g} requests/s"
        console.say(f"sweep point {index + 1} of {total}: {label}")
        run_rate: RequestRate = ALL_AT_ONCE if rate is None else rate  # synchronous, throughput: all at once
        extra = _manifest_extra(setup, "sweep", folder, index, point=kind, rate_rps=rate)
        one_run = opts.one_run(run_rate, synchronous=kind == "synchronous")
        outcome = run_trial(target, one_run, folder, Nested(console), extra)
        headline = outcome.report.failures.headline()
        if headline is not None:
            nothing.append(headline)
        console.say(f"  {headline or outcome.report.failures.line()}{_brief(outcome.report.claims)}")
        row = {"index": index, "kind": kind, "rate_rps": rate, "run_dir": outcome.run_path.name}
        point = msgspec.convert({**point_figures(outcome.report.claims), **row}, SweepPoint)
        points.append(point)
        _append(folder / "sweep.jsonl", point)
        write_document(folder / SWEEP_JSON, summary)
        return point

    try:
        for kind, rate in planned:
            one(kind, rate)
        if auto:
            if nothing:
                raise NothingMeasured(f"sweep auto: no rate range to spread points over: {nothing[0]}")
            low, high = _positive(points[0].request_throughput_rps), _positive(points[1].request_throughput_rps)
            if low is None or high is None:
                raise AcceptanceFailed(
                    "sweep auto: the synchronous or the throughput run completed no request, so "
                    "there is no rate range to spread points over (see their run directories)"
                )
            if high < low:
                console.say(
                    f"the throughput run ({high:.3f} requests/s) was slower than the synchronous one "
                    f"({low:.3f}): the points are spread between them all the same"
                )
            rates = [round_rate(low + k * (high - low) / opts.sweep_points) for k in range(1, opts.sweep_points + 1)]
            summary.auto_rates_rps = rates
            console.say(
                "sweep auto: rates " + ", ".join(f"{r:g}" for r in rates) + " requests/s, between the "
                f"synchronous run's {low:.3f} and the throughput run's {high:.3f} requests/s"
            )
            for rate in rates:
                one("rate", rate)
        summary.completed = True
    except KeyboardInterrupt:
        summary.interrupted = True
        write_document(folder / SWEEP_JSON, summary)
        console.say(
            f"sweep interrupted: {len(points)} of {total} points finished (kept in {folder}); the point "
            "under way keeps what it finished in its own run directory"
        )
        _sweep_report(folder, summary, console)
        raise
    write_document(folder / SWEEP_JSON, summary)
    _sweep_report(folder, summary, console)
    console.result(
        f"sweep: {len(points)} points; report: {folder / 'report.html'} (sweep.json and report.md beside it)"
    )
    if points and len(nothing) == len(points):
        raise NothingMeasured(f"sweep: no point measured anything; the last: {nothing[-1]}")
    return points


def _positive(value: Figure) -> float | None:
    """A figure that is a number > 0, else None."""
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return float(number) if number is not None and number > 0 else None


def _point_label(point: SweepPoint) -> str:
    return point.kind if point.rate_rps is None else f"{point.rate_rps:g}"


def _sweep_report(folder: Path, summary: Sweep, console: Console) -> None:
    points = summary.points
    header = ["rate asked"] + [HEADINGS[k] for k in SHOWN] + ["run"]
    rows = [[_point_label(p)] + _cells(p) + [p.run_dir] for p in points]
    if rows:
        if is_verbose(console):
            console.table("Load sweep (engine running/waiting max and preemptions from its own /metrics)", header, rows)
        else:
            console.table(
                "Load sweep" + BRIEF_TIMES,
                ["point", *BRIEF.values()],
                [[_point_label(p)] + _cells(p, tuple(BRIEF)) for p in points],
            )
    opts: dict[str, Any] = summary.options  # run load's options, as its runs' manifests store them
    intro = [
        f"sweep {summary.sweep}: {len(points)} of {summary.points_planned} points"
        + ("" if summary.completed else " (interrupted)"),
        f"each point: arrival {opts['arrival']}, bound "
        + " and ".join(
            b
            for b in (
                f"{opts['num_requests']} requests" if opts["num_requests"] else "",
                f"{opts['duration_s']:g} s" if opts["duration_s"] else "",
            )
            if b
        )
        + f", input {opts['input_tokens']} tokens, output {opts['output_tokens']} tokens"
        + (f", SLO {slo_text(opts['slo'])}" if opts.get("slo") else ""),
        "every point starts on an idle engine (the idle guard); engine columns are the engine's own /metrics "
        "sampled through the point",
    ]
    if summary.auto_rates_rps:
        intro.append(
            "auto rates: r_k = r_sync + k (r_max - r_sync) / K: "
            + ", ".join(f"{r:g}" for r in summary.auto_rates_rps)
            + " requests/s"
        )
    write_series_report(folder, f"loadproof load sweep {folder.name}", intro, header, rows, sweep_panels(points))


def _brief(claims: list[Claim]) -> str:
    """`; TTFT p50 ... · output ... tokens/s` of one trial or point, or nothing where it measured none."""
    shown = render_lines((LOAD_BRIEF,), claims)
    return f"; {shown[0][1]}" if shown else ""


# --- the rate search ------------------------------------------------------------------------------


def rate_search_command(setup: Setup, console: Console, run_trial: RunTrial) -> RateSearch:
    """`--search rate`: the highest rate whose SLO attainment meets `--attainment`; AcceptanceFailed when
    no rate tried met it. Returns search.json's content (written in the search's folder, `setup.out`'s
    `load-search-*`, after every trial)."""
    opts: LoadOptions = setup.options
    target = setup.target
    folder = _folder(setup, "load-search")
    maximum, start, minimum = opts.search_maximum, opts.search_start, opts.search_minimum
    resolution = opts.search_resolution
    slo = slo_text(opts.slo or {})
    console.say(f"search directory: {folder}")
    console.say(
        f"rate search: the highest rate at which at least {opts.attainment * 100:g}% of requests meet "
        f"{slo}; from {start:g} requests/s, doubling while trials pass (up to {maximum:g}), halving while "
        f"they fail (down to {minimum:.3g}), then bisecting; {resolution.describe()}"
    )
    on_interval = opts.search_decision == INTERVAL
    budget = opts.search_segments if on_interval else 1
    if on_interval:
        console.say(describe(opts.attainment, budget))
    trials: list[SearchTrial] = []
    summary = RateSearch(
        slo=dict(opts.slo or {}),
        slo_text=slo,
        attainment=opts.attainment,
        decision=opts.search_decision,
        segments=budget,
        resolution=str(resolution),
        resolution_rps=None if resolution.relative else resolution.value,
        resolution_relative=resolution.value if resolution.relative else None,
        start_rps=start,
        maximum_rps=maximum,
        minimum_rps=minimum,
        options=opts.model_dump(mode="json"),
        trials=trials,
    )

    nothing: list[str] = []  # each trial's line where it measured nothing

    levels_run: list[float] = []

    def passes(rate: float) -> bool:
        """The level at `rate`: one trial, and on intervals more while its interval straddles the target."""
        first, level = len(trials), len(levels_run)
        levels_run.append(rate)
        segments: list[dict[str, Any]] = []
        while True:
            index = len(trials)
            more = f" (segment {len(segments) + 1} of at most {budget}: its interval straddled)" if segments else ""
            console.say(f"trial {index + 1}: {rate:g} requests/s{more}")
            extra = _manifest_extra(setup, "search", folder, index, rate_rps=rate, attainment=opts.attainment)
            outcome = run_trial(target, opts.one_run(rate), folder, Nested(console), extra)
            figures = point_figures(outcome.report.claims)
            if on_interval:
                segments.append(figures)
                trial = level_trials(rate, segments, opts.attainment, level, first)[-1]
                trial.run_dir = outcome.run_path.name
            else:
                trial = search_trial(rate, figures, opts.attainment, index=index, run_dir=outcome.run_path.name)
            headline = outcome.report.failures.headline()
            if headline is not None:  # every request failed: the engine's own words say why, not a 0% attainment
                nothing.append(headline)
                trial.reason = headline
            go_on = trial.decision == "undecided" and len(segments) < budget
            console.say(
                f"  {verdict_label(trial.decision, trial.passed, go_on)}: {trial.reason}{_brief(outcome.report.claims)}"
            )
            trials.append(trial)
            _append(folder / "search.jsonl", trial)
            write_document(folder / SEARCH_JSON, summary)
            if not go_on:
                return trial.passed

    try:
        result = rate_search(start, passes, resolution, maximum=maximum, minimum=minimum)
    except KeyboardInterrupt:
        summary.interrupted = True
        _finish_search(folder, summary, console)
        console.say(
            f"search interrupted after {len(trials)} finished trial(s) (kept in {folder}); the trial under "
            "way keeps what it finished in its own run directory"
        )
        raise
    summary.completed = True
    summary.stopped = result.stopped
    said = _finish_search(folder, summary, console)
    if trials and len(nothing) == len(trials):
        raise NothingMeasured(f"load search: no trial measured anything; the last: {nothing[-1]}")
    if result.largest_pass is None:
        raise AcceptanceFailed(f"load search: {said}")
    return summary


def _level_cell(trial: SearchTrial) -> str:
    """A trial's level attainment so far, with its interval: `97.50 [92.10, 99.30]`."""
    low, high = trial.level_attainment_low_pct, trial.level_attainment_high_pct
    if trial.level_attainment_pct is None or low is None or high is None:
        return "n/a"
    return f"{trial.level_attainment_pct:.2f} [{low:.2f}, {high:.2f}]"


def _finish_search(folder: Path, summary: RateSearch, console: Console) -> str:
    """search.json, claims.json and the folder's report from the search's trials, and its result shown, that
    result first: an interrupted search, or one whose every rate passed, gives a lower bound, and says so
    before the rate. Returns the result's line."""
    trials = summary.trials
    on_interval = summary.decision == INTERVAL
    claims = search_claims(
        trials, summary.attainment, summary.slo_text, summary.interrupted, INTERVAL if on_interval else "point"
    )
    by_name = {c.name: c for c in claims}
    best = by_name.get("load.search.max_rate_rps") or by_name.get("load.search.rate_lower_bound_rps")
    worst = by_name.get("load.search.min_failing_rate_rps")
    summary.max_rate_rps = float(best.value) if best else None  # the highest passing rate (tune reads it)
    summary.min_failing_rate_rps = float(worst.value) if worst else None
    summary.lower_bound = "load.search.rate_lower_bound_rps" in by_name  # max_rate_rps bounds the result
    result = search_result(claims, trials)
    summary.result = result
    write_document(folder / SEARCH_JSON, summary)
    write_claims(folder, claims_payload(folder.name, claims))
    console.result(
        result
        + (
            f" (resolution {summary.resolution}" + (" of the rate)" if summary.resolution_relative else " requests/s)")
            if "load.search.max_rate_rps" in by_name
            else ""
        )
    )
    last = {id(t) for t in finals(trials)}
    level = ["rate met % [95%]"] if on_interval else []

    def verdict(t: SearchTrial) -> list[str]:
        return ([_level_cell(t)] if on_interval else []) + [verdict_label(t.decision, t.passed, id(t) not in last)]

    header = ["rate"] + [HEADINGS[k] for k in SHOWN] + level + ["verdict", "run"]
    rows = [[f"{t.rate_rps:g}"] + _cells(t) + verdict(t) + [t.run_dir] for t in trials]
    title = f"Rate search: SLO {summary.slo_text}, attainment >= {summary.attainment * 100:g}%"
    if on_interval:
        title += " on its 95% interval"
    if rows and is_verbose(console):
        console.table(f"{title} (engine running/waiting max and preemptions from its own /metrics)", header, rows)
    elif rows:
        console.table(
            title + BRIEF_TIMES,
            ["rate", *BRIEF.values(), *level, "verdict"],
            [[f"{t.rate_rps:g}"] + _cells(t, tuple(BRIEF)) + verdict(t) for t in trials],
        )
    rule = (
        describe(summary.attainment, summary.segments)
        if on_interval
        else f"a trial passes when at least {summary.attainment * 100:g}% of its requests meet it "
        "(load.slo_attainment_pct) and the client kept its schedule"
    )
    intro = [
        result,
        f"SLO: {summary.slo_text}; {rule}",
        f"from {summary.start_rps:g} requests/s: doubling while trials pass (up to {summary.maximum_rps:g}), "
        f"halving while they fail, then bisection; resolution {summary.resolution}"
        + (" of the largest passing rate" if summary.resolution_relative else " requests/s"),
        "every trial starts on an idle engine (the idle guard); engine columns are the engine's own /metrics "
        "sampled through the trial",
    ]
    write_series_report(
        folder,
        f"loadproof load rate search {folder.name}",
        intro,
        header,
        rows,
        search_panels(trials, claims, summary.attainment, summary.slo),
        claims,
        search_outcome(claims),
    )
    console.result(f"report: {folder / 'report.html'} (search.json, claims.json and report.md beside it)")
    return result


# --- `loadproof report FOLDER` --------------------------------------------------------------------


def is_series_folder(folder: Path) -> bool:
    return (folder / SEARCH_JSON).is_file() or (folder / SWEEP_JSON).is_file()


def report_series(folder: Path, console: Console) -> None:
    """Recompute a sweep's or a search's summary from its run directories alone and rewrite its report and
    each run's (which its report.html links); for a search, compare the recomputed claims with the stored
    claims.json (UsageError on a mismatch)."""
    if (folder / SEARCH_JSON).is_file():
        stored_path = folder / "claims.json"
        stored = json.loads(stored_path.read_text(encoding="utf-8")) if stored_path.is_file() else {"claims": []}
        summary, trials, claims = recompute_search(folder)
        before = {c["name"]: c["printed"] for c in stored["claims"]}
        after = {c.name: c.printed for c in claims}
        differ = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
        summary.trials = trials
        for trial in trials:
            build_report(folder / trial.run_dir)
        _finish_search(folder, summary, console)
        if differ and before:
            raise UsageError(
                f"{folder}: recomputed claims differ from the stored claims.json: "
                + ", ".join(f"{n} stored {before.get(n, '(none)')} recomputed {after.get(n, '(none)')}" for n in differ)
            )
        console.result(f"recomputed from {len(trials)} trial run directories: every claim as stored")
        return
    sweep = read_sweep(folder / SWEEP_JSON)
    sweep.points = [
        msgspec.convert(
            {**msgspec.to_builtins(p), **point_figures(build_report(folder / p.run_dir).claims)}, SweepPoint
        )
        for p in sweep.points
    ]
    write_document(folder / SWEEP_JSON, sweep)
    _sweep_report(folder, sweep, console)
    console.result(
        f"recomputed {len(sweep.points)} points from their run directories; report: {folder / 'report.html'}"
    )
