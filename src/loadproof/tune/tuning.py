"""`loadproof tune PROFILE --sim SIM --grid KEY=V1,V2 ... --slo ...`: every grid point predicted on the
simulator, the promising ones measured for real, the Pareto front (docs/simulator.md, "Tuning").

1. Each point (`tune.grid`) is predicted: its profile's limits on the sim profile's step costs
   (`predict.deployment.deployment_config`), then the rate search of `run load --search rate` run on the virtual
   clock (the same `rate_search`, start, maximum, minimum and resolution, each trial the same schedule
   `run load` sends): the highest rate meeting the SLO, the TTFT p99 at that rate, and the memory the
   profile gives the KV cache on all its GPUs (the planner's budget: the GPU memory the point costs).
2. Pruning: a point no rate of which meets the SLO is listed with why and not run. The others are
   measured while the budget lasts (`--max-real` points, `--max-time-s` seconds): the predicted Pareto
   front first (`tune.pareto`: no other point predicted at least as good on rate, TTFT p99 and KV memory,
   and better on one), highest predicted rate first, then the dominated points, as checks of the
   prediction; each unmeasured point says why (no passing rate, or which budget ran out).
3. Measuring a point (`tune.measure`), in this process: the point's profile served as `loadproof serve`
   serves it (its engine under the supervisor, started afresh for every point), then the rate search of
   `run load --search rate`, the same function with the same typed options (`tune.options`: one
   `LoadOptions`, run load's defaults), then the engine stopped. The search's search.json, read through its
   type, gives the measured rate, the TTFT p99 there, and whether that rate is only a lower bound.
4. Every step is a typed line of `tune.jsonl` (`tune.journal`) as it ends; an interrupted tune given the
   same options resumes at the first point not yet done. tune.md, tune.json and pareto.svg (`tune.table`)
   are written at the end.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from loadproof.config.profile import Profile
from loadproof.planner.profile_plan import model_config_path, plan_profile
from loadproof.predict.deployment import deployment_config, simulator_deployment_config
from loadproof.predict.load import RateSweep, predict_load_sweep
from loadproof.rundir.tune import Measured, Predicted, TuneSpec
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.rate_search import rate_search
from loadproof.sim.config import SimConfig, sim_profile_of
from loadproof.tune.grid import parse_axis, points
from loadproof.tune.journal import Journal
from loadproof.tune.measure import measure_point
from loadproof.tune.options import TuneRequest
from loadproof.tune.pareto import dominated_by
from loadproof.tune.table import PointResult, Tune, write_outputs

GIB = 2**30


def predict_point(profile: Profile, base: SimConfig, opts: LoadOptions, name: str = "") -> Predicted:
    """The rate search of `run load` on the modeled engine of `profile` (see the module doc): its `Predicted`
    line (`name`, the point's)."""
    if sim_profile_of(profile) is not None:  # the engine is the simulator: no GPU memory to plan
        config, kv_gib = simulator_deployment_config(profile, base), 0.0
    else:
        planned = plan_profile(profile, model_config_path(profile))
        config, dep = deployment_config(profile, planned, base), planned.deployment
        kv_gib = round(dep.kv_bytes_per_gpu * dep.tensor_parallel * dep.pipeline_parallel / GIB, 3)
    ttft_at: dict[float, object] = {}  # each rate's predicted TTFT p99

    def passes(rate: float) -> bool:
        predicted = predict_load_sweep(config, RateSweep(opts, (rate,))).rates[0]
        ttft_at[rate] = predicted.run.value("load.ttft_s.p99")
        return predicted.meets_slo

    maximum, minimum = opts.search_maximum, opts.search_minimum
    found = rate_search(opts.search_start, passes, opts.search_resolution, maximum=maximum, minimum=minimum)
    ttft = ttft_at.get(found.largest_pass) if found.largest_pass is not None else None
    return Predicted(
        point=name,
        max_rate_rps=found.largest_pass,
        min_failing_rate_rps=found.smallest_fail,
        ttft_p99_s=float(ttft) if isinstance(ttft, (int, float)) else None,
        lower_bound=found.stopped == "maximum",  # every rate tried passed, up to the maximum
        kv_gib=kv_gib,
        tried=list(found.tried),
    )


def spec(request: TuneRequest) -> TuneSpec:
    """What the tune is, as its journal's first line keeps it (a resumed tune must be the same)."""
    files = (request.profile_path, request.sim_path)
    tokenizer = request.target.tokenizer
    return TuneSpec(
        profile=request.profile_path.name,
        sim=request.sim_path.name,
        sha256={p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files},
        grid=list(request.options.grid),
        load=request.load.model_dump(mode="json"),
        tokenizer=None if tokenizer is None else str(tokenizer),
    )


def tune(request: TuneRequest, say: Callable[[str], None]) -> Tune:
    options, opts = request.options, request.load
    grid = points(request.profile, [parse_axis(text) for text in options.grid])
    journal = Journal(options.out, spec(request))
    if journal.resumed:
        say(
            f"resuming the tune in {options.out}: {sum(isinstance(e, Predicted) for e in journal.entries)} "
            f"point(s) predicted, {sum(isinstance(e, Measured) for e in journal.entries)} measured"
        )
    results = []
    for i, point in enumerate(grid, 1):
        done = journal.find(Predicted, point.name)
        if done is None:
            say(f"predicting {i}/{len(grid)}: {point.name}")
            done = predict_point(point.profile, request.sim, opts, point.name)
            journal.add(done)
        results.append(PointResult(point, done))
    scored = [r.scored for r in results]
    for r in results:
        if not r.predicted.max_rate_rps:
            r.pruned = "no rate met the SLO (predicted)"
        elif (other := dominated_by(r.scored, scored)) is not None:
            r.dominated_by = other.name
    started = time.monotonic()
    spent: list[float] = []
    # the predicted front first, then the rest by predicted rate: a dominated point measured is a check
    # of the prediction, never a substitute for a front point
    candidates = sorted(
        (r for r in results if not r.pruned),
        key=lambda r: (r.dominated_by is not None, -(r.predicted.max_rate_rps or 0.0)),
    )
    for r in candidates:
        r.measured = journal.find(Measured, r.point.name)
        if r.measured is not None:
            continue
        if len([c for c in candidates if c.measured]) >= options.max_real:
            r.pruned = f"budget: --max-real {options.max_real}"
            continue
        elapsed = time.monotonic() - started
        if options.max_time_s is not None and elapsed + (max(spent) if spent else 0.0) > options.max_time_s:
            r.pruned = f"budget: --max-time-s {options.max_time_s:g} (spent {elapsed:.0f} s)"
            continue
        say(f"measuring {r.point.name} for real: serve, rate search, stop")
        t0 = time.monotonic()
        r.measured = measure_point(r.point, options.out / folder_name(r.point.name), request, say)
        spent.append(time.monotonic() - t0)
        journal.add(r.measured)
    tuned = Tune(results, options.out, journal.resumed)
    write_outputs(tuned)
    return tuned


def folder_name(point: str) -> str:
    """A point's folder in the tune's folder, from its name (`max_num_seqs=4` -> `point-max_num_seqs-4`)."""
    return "point-" + point.replace("=", "-").replace(",", "_")
