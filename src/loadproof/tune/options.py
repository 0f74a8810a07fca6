"""What `loadproof tune` is given, typed and checked once, before anything is predicted or started.

A tune's traffic is `run load --search rate`'s: its options are `LoadOptions` (the same fields, flags,
defaults, help and validation as `run load`, the attainment 0.99 among them), and every point's search, on
the simulator and for real, is run with that one typed value (`TUNE_LOAD_FIELDS` says which of run load's
options tune offers: those that shape the traffic and the search, which the prediction models too). Its
`--tokenizer` is run load's (the target's). What is tune's own is `TuneOptions`: the budget, the port each
point's engine serves on, the folder; the profile, the sim profile and `--grid` are the command's arguments (the
profile and the sim profile files, or packaged profiles' names).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from loadproof.config.base import StrictModel
from loadproof.config.profile import Profile, load_profile, resolve_profile_path
from loadproof.errors import UsageError
from loadproof.protocol.urls import base_url
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.scenario import LoadScenario
from loadproof.scenarios.options import CliOption, cli, cli_options, from_cli
from loadproof.scenarios.target import TargetOptions
from loadproof.sim.config import SimConfig, is_sim_profile, load_sim_config, sim_profile_path

# run load's options a tune takes, in the order its --help lists them: the schedule, the lengths, the SLO and
# the search; the others (a data set, tools, a model mix, workers) shape traffic the simulator does not
# model, so a prediction would rank points on traffic the real runs never send
TUNE_LOAD_FIELDS = (
    "rate",
    "arrival",
    "burstiness",
    "max_concurrency",
    "ramp_up_s",
    "num_requests",
    "duration_s",
    "seed",
    "input_tokens",
    "output_tokens",
    "slo",
    "attainment",
    "search_resolution",
    "search_max",
    "search_decision",
    "search_segments",
)
TARGET_FIELDS = ("tokenizer",)  # run load's target options a tune takes (it serves each point itself)


class TuneOptions(StrictModel):
    """tune's own options: nothing `run load` has."""

    grid: list[str] = Field(
        default_factory=list,
        description="KEY=V1,V2,...: a profile setting and its values (each --grid whole: its values hold commas)",
        json_schema_extra=cli(hidden=True),  # the command declares it: repeatable, its value not split
    )
    max_real: int = Field(default=2, ge=0, description="budget: points measured for real")
    max_time_s: float | None = Field(
        default=None,
        gt=0,
        description="budget: no real run starts after this many seconds (counting the longest run so far)",
    )
    port: int = Field(default=8191, ge=1, le=65535, description="the port each point's engine serves on")
    out: Path = Field(
        default=Path("tune"),
        description="the tune's folder; the same options resume it",
        json_schema_extra=cli("--out", aliases=["-o"]),
    )


def load_cli_options() -> list[CliOption]:
    """run load's options a tune takes, as `run load` declares them (`LoadOptions`)."""
    picked = {o.field: o for o in cli_options(LoadOptions) if o.field in TUNE_LOAD_FIELDS}
    return [picked[name] for name in TUNE_LOAD_FIELDS]


@dataclass(frozen=True)
class TuneRequest:
    """A tune whose every input passed: the deployment profile the grid varies, the calibrated sim profile,
    tune's own options, run load's options every search holds (`--search rate`), and the target's options
    each real point's search is run with (its URL the point's engine; its profile and folder set per point)."""

    profile_path: Path
    profile: Profile
    sim_path: Path
    sim: SimConfig
    options: TuneOptions
    load: LoadOptions
    target: TargetOptions


def tune_request(
    profile_text: str | Path, sim_text: str | Path, grid: list[str], values: dict[str, Any]
) -> TuneRequest:
    """The command line's values (keyed by field name), checked: the files first (each a file, or a packaged
    profile's name: `sim-small` as the profile and as --sim), then tune's options, run load's and the target's.
    A mistake is one line (UsageError, ConfigError)."""
    profile_path = resolve_profile_path(profile_text)
    if is_sim_profile(profile_path):
        raise UsageError(
            f"{profile_text} is a sim profile: tune varies a deployment profile (give the sim profile as --sim)"
        )
    sim_path = sim_profile_path(sim_text, "--sim")
    if not is_sim_profile(sim_path):
        raise UsageError(f"--sim {sim_text}: not a sim profile (write one with `loadproof sim calibrate`)")
    if not grid:
        raise UsageError("give at least one --grid KEY=V1,V2,...")
    profile = load_profile(profile_path)
    options = from_cli(TuneOptions, values, "tune").model_copy(update={"grid": list(grid)})
    given = {k: v for k, v in values.items() if k in TUNE_LOAD_FIELDS}
    load = from_cli(LoadOptions, {**given, "search": "rate"}, "tune")
    endpoint = profile.serving.endpoint
    LoadScenario.check_endpoint(load, endpoint)
    url = base_url(profile.serving.host, options.port)
    target = from_cli(TargetOptions, {"url": url, **{k: values.get(k) for k in TARGET_FIELDS}}, "tune")
    return TuneRequest(profile_path, profile, sim_path, load_sim_config(sim_path), options, load, target)


__all__ = ["TARGET_FIELDS", "TUNE_LOAD_FIELDS", "TuneOptions", "TuneRequest", "load_cli_options", "tune_request"]
