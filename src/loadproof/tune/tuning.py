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
3. Measuring a point: `loadproof serve` on the point's profile (its engine under the supervisor, started
   afresh for every point), then `loadproof run load --search rate` with the same options, then the
   engine stopped. The search's own search.json gives the measured rate and TTFT p99.
4. Every step is a line of `tune.jsonl` (`tune.journal`) as it ends; an interrupted tune given the same
   options resumes at the first point not yet done. tune.md and pareto.svg are written at the end.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from loadproof.config.base import StrictModel
from loadproof.config.profile import Profile
from loadproof.errors import UsageError
from loadproof.planner.profile_plan import model_config_path, plan_profile
from loadproof.predict.deployment import deployment_config, simulator_deployment_config
from loadproof.predict.load import RateSweep, predict_load_sweep
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.rate_search import rate_search
from loadproof.scenarios.options import from_cli
from loadproof.sim.config import SimConfig, is_sim_profile
from loadproof.tune.grid import Point, parse_axis, points
from loadproof.tune.journal import Journal
from loadproof.tune.measure import measure_point
from loadproof.tune.pareto import Scored, dominated_by, pareto_svg

GIB = 2**30


class TuneOptions(StrictModel):
    grid: list[str] = Field(
        default_factory=list,
        description="KEY=V1,V2,...: a profile setting and its values "
        "(given whole by the command line, each --grid one)",
    )
    slo: str = Field(description="the SLO the rate search holds, as `run load --slo`")
    attainment: float = Field(default=0.9, gt=0, le=1)
    rate: float = Field(default=1.0, gt=0, description="where each rate search starts, requests/s")
    search_max: float = Field(default=64.0, gt=0)
    search_resolution: str = "10%"
    duration_s: float = Field(default=15.0, gt=0, description="each trial's schedule, seconds")
    input_tokens: str = "128"
    output_tokens: str = "32"
    seed: int = 731
    max_real: int = Field(default=2, ge=0, description="budget: points measured for real")
    max_time_s: float | None = Field(default=None, gt=0, description="budget: no real run starts after this")
    port: int = Field(default=8191, ge=1, le=65535)
    tokenizer: Path | None = None
    out: Path = Path("tune")

    def load_options(self) -> LoadOptions:
        """The rate search's options, as `run load --search rate` takes them (validated here, once)."""
        return from_cli(
            LoadOptions,
            {
                "rate": str(self.rate),
                "duration_s": self.duration_s,
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "slo": self.slo,
                "attainment": self.attainment,
                "search": "rate",
                "search_max": self.search_max,
                "search_resolution": self.search_resolution,
                "seed": self.seed,
            },
            "tune",
        )

    def run_load_args(self) -> list[str]:
        return [
            "--search",
            "rate",
            "--rate",
            f"{self.rate:g}",
            "--duration-s",
            f"{self.duration_s:g}",
            "--input-tokens",
            self.input_tokens,
            "--output-tokens",
            self.output_tokens,
            "--slo",
            self.slo,
            "--attainment",
            f"{self.attainment:g}",
            "--search-max",
            f"{self.search_max:g}",
            "--search-resolution",
            self.search_resolution,
            "--seed",
            str(self.seed),
        ]


@dataclass
class PointResult:
    point: Point
    predicted: dict[str, Any]
    measured: dict[str, Any] | None = None
    pruned: str = ""  # why it was not measured
    dominated_by: str | None = None  # the point that beats it on every axis, as predicted

    @property
    def status(self) -> str:
        front = f"dominated by {self.dominated_by} (predicted)" if self.dominated_by else "on the predicted front"
        return (
            f"{'measured' if self.measured else 'not measured: ' + self.pruned}; {front}"
            if self.predicted["max_rate_rps"]
            else f"pruned: {self.pruned}"
        )

    @property
    def scored(self) -> Scored:
        p = self.predicted
        return Scored(self.point.name, p["max_rate_rps"] or 0.0, p["ttft_p99_s"] or 0.0, p["kv_gib"])

    @property
    def error_pct(self) -> float | None:
        if not self.measured or not self.measured.get("max_rate_rps") or not self.predicted["max_rate_rps"]:
            return None
        return 100 * (self.predicted["max_rate_rps"] - self.measured["max_rate_rps"]) / self.measured["max_rate_rps"]


@dataclass
class Tune:
    results: list[PointResult]
    folder: Path
    resumed: bool
    notes: list[str] = field(default_factory=list)


def predict_point(profile: Profile, base: SimConfig, opts: LoadOptions) -> dict[str, Any]:
    """The rate search of `run load` on the modeled engine of `profile` (see the module doc)."""
    if is_sim_profile(Path(profile.model.path)):  # the engine is the simulator: no GPU memory to plan
        config, kv_gib = simulator_deployment_config(profile, base), 0.0
    else:
        planned = plan_profile(profile, model_config_path(profile))
        config, dep = deployment_config(profile, planned, base), planned.deployment
        kv_gib = round(dep.kv_bytes_per_gpu * dep.tensor_parallel * dep.pipeline_parallel / GIB, 3)
    runs: dict[float, Any] = {}

    def passes(rate: float) -> bool:
        runs[rate] = predict_load_sweep(config, RateSweep(opts, (rate,))).rates[0]
        return runs[rate].meets_slo

    start = opts.search_start
    minimum = min(max(start / 64, 2 / opts.duration_s if opts.duration_s else 0.0), start)
    found = rate_search(start, passes, opts.search_resolution, maximum=opts.search_maximum, minimum=minimum)
    best = runs.get(found.largest_pass) if found.largest_pass is not None else None
    return {
        "max_rate_rps": found.largest_pass,
        "min_failing_rate_rps": found.smallest_fail,
        "ttft_p99_s": best.run.value("load.ttft_s.p99") if best else None,
        "kv_gib": kv_gib,
        "tried": [[r, ok] for r, ok in found.tried],
    }


def header(profile_path: Path, sim_path: Path, options: TuneOptions) -> dict[str, Any]:
    digest = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (profile_path, sim_path)}
    kept = options.model_dump(mode="json", exclude={"max_real", "max_time_s", "out", "port"})
    return {"profile": profile_path.name, "sim": sim_path.name, "sha256": digest, "options": kept}


def tune(
    profile_path: Path,
    profile: Profile,
    sim_path: Path,
    base: SimConfig,
    options: TuneOptions,
    say: Callable[[str], None],
) -> Tune:
    if not options.grid:
        raise UsageError("give at least one --grid KEY=V1,V2,...")
    opts = options.load_options()
    grid = points(profile, [parse_axis(text) for text in options.grid])
    journal = Journal(options.out, header(profile_path, sim_path, options))
    if journal.resumed:
        say(
            f"resuming the tune in {options.out}: {sum(e['kind'] == 'predicted' for e in journal.entries)} point(s) "
            f"predicted, {sum(e['kind'] == 'measured' for e in journal.entries)} measured"
        )
    results = []
    for i, point in enumerate(grid, 1):
        done = journal.find("predicted", point.name)
        if done is None:
            say(f"predicting {i}/{len(grid)}: {point.name}")
            done = {"kind": "predicted", "point": point.name, **predict_point(point.profile, base, opts)}
            journal.add(done)
        results.append(PointResult(point, done))
    scored = [r.scored for r in results]
    for r in results:
        if not r.predicted["max_rate_rps"]:
            r.pruned = "no rate met the SLO (predicted)"
        elif (other := dominated_by(r.scored, scored)) is not None:
            r.dominated_by = other.name
    started = time.monotonic()
    spent: list[float] = []
    # the predicted front first, then the rest by predicted rate: a dominated point measured is a check
    # of the prediction, never a substitute for a front point
    candidates = sorted(
        (r for r in results if not r.pruned), key=lambda r: (r.dominated_by is not None, -r.predicted["max_rate_rps"])
    )
    for r in candidates:
        r.measured = journal.find("measured", r.point.name)
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
        r.measured = {
            "kind": "measured",
            "point": r.point.name,
            **measure_point(r.point, options.out / folder_name(r.point.name), options, say),
        }
        spent.append(time.monotonic() - t0)
        journal.add(r.measured)
    tuned = Tune(results, options.out, journal.resumed)
    write_outputs(tuned)
    return tuned


def folder_name(point: str) -> str:
    """A point's folder in the tune's folder, from its name (`max_num_seqs=4` -> `point-max_num_seqs-4`)."""
    return "point-" + point.replace("=", "-").replace(",", "_")


TABLE_HEAD = [
    "point",
    "predicted max rate (req/s)",
    "predicted TTFT p99 (s)",
    "KV (GiB)",
    "measured max rate",
    "measured TTFT p99 (s)",
    "predicted vs measured",
    "status",
]


def table_rows(tuned: Tune) -> list[list[str]]:
    """One row per point, as tune.md and the command line show it (TABLE_HEAD)."""
    rows = []
    for r in tuned.results:
        p, m = r.predicted, r.measured or {}
        err = r.error_pct
        rows.append(
            [
                r.point.name,
                _num(p["max_rate_rps"]),
                _num(p["ttft_p99_s"], 3),
                f"{p['kv_gib']:g}",
                _num(m.get("max_rate_rps")),
                _num(m.get("ttft_p99_s"), 3),
                "" if err is None else f"{err:+.1f}%",
                r.status,
            ]
        )
    return rows


def write_outputs(tuned: Tune) -> None:
    rows = ["| " + " | ".join(TABLE_HEAD) + " |", "|" + "---|" * len(TABLE_HEAD)]
    rows += ["| " + " | ".join(row) + " |" for row in table_rows(tuned)]
    (tuned.folder / "tune.md").write_text("# Tune\n\n" + "\n".join(rows) + "\n", encoding="utf-8")
    measured = [
        Scored(
            r.point.name,
            r.measured.get("max_rate_rps") or 0.0,
            r.measured.get("ttft_p99_s") or 0.0,
            r.predicted["kv_gib"],
        )
        for r in tuned.results
        if r.measured
    ]
    svg = pareto_svg("Tune: highest rate meeting the SLO against TTFT p99", [r.scored for r in tuned.results], measured)
    if svg:
        (tuned.folder / "pareto.svg").write_text(svg, encoding="utf-8")
    (tuned.folder / "tune.json").write_text(
        json.dumps(
            [
                {
                    "point": r.point.name,
                    "settings": r.point.settings,
                    "predicted": r.predicted,
                    "measured": r.measured,
                    "pruned": r.pruned,
                    "error_pct": r.error_pct,
                }
                for r in tuned.results
            ],
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"
