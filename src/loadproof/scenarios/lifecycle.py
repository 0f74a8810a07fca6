"""The life of a run, one definition for every `loadproof run` command, the demo and each trial of a
capacity search:

1. check (offline): every option, the scenario's (its Options model), the command's and the target's,
   every URL among them, the tokenizer's path, the API key's variable, the profile; nothing is sent
   before all of them pass, and a mistake is one line (ConfigError/UsageError, exit 2);
2. prepare the scenario (`Scenario.prepare`), which resolves the target (`Setup.target`,
   `scenarios.target`: the model the server lists, the first network access), and perform the command
   (`Scenario.perform`: by default one run; a capacity search runs many; `--repeats N` and `run ab --scenario`
   run it as a unit, `scenarios.repeats`);
3. record a run into its directory, report it and conclude (`scenarios.recording`): the manifest, the
   records, telemetry; claims.json, report.md and report.html from the directory alone; a FAIL verdict
   raises AcceptanceFailed (exit 1) with the scenario's `failure` line.

This module is the top of the scenarios package: it imports the others, none imports it. The names
`scenarios.recording` and `scenarios.target` define are also reachable here, for the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadproof.config.profile import Profile, resolve_profile
from loadproof.errors import UsageError
from loadproof.protocol.routes import route_of
from loadproof.rundir import Manifest
from loadproof.rundir.prediction import Prediction, mismatched_options, read_prediction
from loadproof.scenarios.ab import AbCommand
from loadproof.scenarios.base import Scenario, Setup, TokenizerUse
from loadproof.scenarios.live_endpoint import LiveMetricsOptions, exported
from loadproof.scenarios.options import from_cli
from loadproof.scenarios.recording import (
    Console,
    Outcome,
    conclude,
    failed_criteria,
    record,
    report,
    run_once,
    verdict_of,
)
from loadproof.scenarios.repeats import ArmOptions, arm_runs, repeat_options, repeat_runs
from loadproof.scenarios.target import TargetOptions, resolve_target

__all__ = [
    "Checked",
    "Console",
    "LiveMetricsOptions",
    "Outcome",
    "Setup",
    "TargetOptions",
    "check",
    "conclude",
    "failed_criteria",
    "record",
    "report",
    "resolve_target",
    "run_arms_command",
    "run_command",
    "run_once",
    "setup",
    "verdict_of",
]


@dataclass
class Checked:
    """A command's options, every one validated, and its profile loaded: nothing has been sent yet.
    `tokenizer`: the scenario's use of one (`Scenario.tokenizer`), which its target's resolution follows."""

    options: Any
    command: Any
    target: TargetOptions
    profile: Profile | None
    tokenizer: TokenizerUse | None = None
    prediction: Prediction | None = None  # --prediction: the contract the run is judged against


def check(scenario: type[Scenario], values: dict[str, Any]) -> Checked:
    """Every option of a run command, from the command line's values (keyed by field name), validated
    before anything is sent: the scenario's options first, then the command's, then the target's."""
    options = from_cli(scenario.Options, values, f"{scenario.name} options")
    command = from_cli(scenario.CommandOptions, values, f"{scenario.name} options")
    target = from_cli(TargetOptions, values, "target")
    profile = resolve_profile(target.profile) if target.profile is not None else None
    endpoint = profile.serving.endpoint if profile is not None else target.endpoint
    route = route_of(endpoint)  # an unknown route: one line naming the known ones
    if getattr(options, "ignore_eos", False) and not route.forces_length:
        raise UsageError(
            f"--endpoint {endpoint} cannot hold an answer to its max_tokens (the engine takes no ignore_eos on "
            f"{route.path}): add --no-ignore-eos, and the answers end where the model stops"
        )
    if scenario.endpoints is not None and endpoint not in scenario.endpoints:
        raise UsageError(
            f"`run {scenario.name}` does not measure the {endpoint} endpoint (it measures "
            f"{', '.join(scenario.endpoints)}); `run load` measures every route"
        )
    scenario.check_endpoint(options, endpoint)
    use = scenario.tokenizer_use(options, route)
    return Checked(options, command, target, profile, use, _contract(scenario, options, target))


def _contract(scenario: type[Scenario], options: Any, target: TargetOptions) -> Prediction | None:
    """`--prediction FILE`, read and matched to this run: its scenario and the options it was made for."""
    if target.prediction is None:
        return None
    prediction = read_prediction(target.prediction)
    if prediction.scenario != scenario.name:
        raise UsageError(
            f"--prediction {target.prediction}: a prediction of `{prediction.scenario}`, not of `run {scenario.name}`"
        )
    why = mismatched_options(prediction, options.model_dump(mode="json"))
    if why is not None:
        raise UsageError(f"--prediction {target.prediction}: {why}")
    return prediction


def setup(checked: Checked) -> Setup:
    return Setup(
        profile=checked.profile,
        options=checked.options,
        command=checked.command,
        out=checked.target.out,
        target_options=checked.target,
        tokenizer=checked.tokenizer,
        manifest_extra=Manifest(
            profile=checked.profile.model_dump() if checked.profile else None,
            price=checked.target.price,
            prediction=checked.prediction,
        ),
    )


def run_command(scenario: type[Scenario], values: dict[str, Any], console: Console) -> None:
    """`loadproof run NAME ...`: check, resolve, perform (run, report, conclude); with `--repeats N` (N > 1),
    N such runs and their spread (`scenarios.repeats`). With `--metrics-port`, the live endpoint serves every run
    of the command (`scenarios.live_endpoint`)."""
    checked = check(scenario, values)
    repeat = repeat_options(scenario)
    runs = from_cli(repeat, values, f"{scenario.name} options").runs if repeat is not None else 1
    live = from_cli(LiveMetricsOptions, values, "live metrics")
    with exported(live, console) as console:
        if runs > 1:
            repeat_runs(scenario, setup(checked), runs, console)
        else:
            scenario.perform(setup(checked), console)


def run_arms_command(unit: type[Scenario], values: dict[str, Any], console: Console) -> None:
    """`loadproof run ab --scenario NAME ...`: the unit's options, the arms' and the target's checked, then
    both arms' runs interleaved (`scenarios.repeats.arm_runs`)."""
    checked = check(unit, values)
    command = from_cli(AbCommand, values, "ab options")
    arms = from_cli(ArmOptions, values, "ab options")
    live = from_cli(LiveMetricsOptions, values, "live metrics")
    with exported(live, console) as console:
        arm_runs(unit, setup(checked), command, arms, console)
