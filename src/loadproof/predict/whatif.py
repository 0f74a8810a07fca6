"""`plan PROFILE --simulate NAME` and `sim predict-NAME` below the command line: the checks, the sim profile a
prediction runs on, and the prediction shown, with its ranges and contract where its scenario has them.

Every scenario the simulator predicts is a catalog entry with a `predict` (`predict.base.Predictor`), and one
whose runs a contract can judge has a `contract` (the claims compared, in metrics/NAME.py); nothing here
names a scenario. A prediction shows the predictor's tables and lines, then the sim profile's account of
itself; with ranges, each contract figure's range over the profile's open assumptions and what drives it
(`predict.ranges`); with `--prediction-out`, the contract (`predict.contract`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loadproof.config.profile import Profile, load_profile, resolve_profile_path
from loadproof.engines import read_startup_log
from loadproof.engines.embedded import tokenizer_path_for
from loadproof.errors import UsageError
from loadproof.planner.profile_plan import ProfilePlan, model_config_path, plan_profile
from loadproof.predict.base import Predictor, Show, contracts, listing, predictors
from loadproof.predict.contract import DEFAULT_TOLERANCE_PCT, contract, ranged_prediction, write_contract
from loadproof.predict.deployment import deployment_config, simulator_deployment_config
from loadproof.predict.ranges import RangedPrediction
from loadproof.sim.config import SimConfig, is_sim_profile, load_sim_config, sim_profile_of, sim_profile_path


@dataclass(frozen=True)
class WhatIf:
    """A prediction's request beyond the scenario's options: which scenario, the command (for its errors),
    and, for `plan`, whether to range it and where its contract goes."""

    simulate: str
    source: str  # `plan --simulate load`, `sim predict-load`
    ranges: bool = False
    prediction_out: Path | None = None
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT
    sim_profile: Path | None = None  # the sim profile a contract rests on
    tokenizer: Path | None = None  # the profile's model's tokenizer, for a prediction that counts prompts with one


@dataclass(frozen=True)
class Planned:
    """`plan PROFILE`'s profile and KV plan (None for a sim profile, or a profile whose engine is the simulator),
    the sim profile to predict on, and the prediction's request with the sim profile file its contract rests on."""

    profile: Profile | None
    plan: ProfilePlan | None
    config: SimConfig | None  # None: nothing to predict
    shows_plan: bool = True  # the KV plan is shown before the prediction
    what: WhatIf | None = None


def check_applies(simulate: str | None, given: Iterable[str]) -> None:
    """Refuse an option of one prediction given to another (`plan --simulate capacity --rate 2`)."""
    mine = {o.field for o in predictors.get(simulate).cli_options()} if simulate and simulate in predictors else set()
    for name in predictors.in_order():
        for option in predictors.get(name).cli_options():
            if option.field in given and option.field not in mine:
                raise UsageError(f"{option.flag} applies to --simulate {name}")


def check(what: WhatIf, given: Iterable[str]) -> Predictor[Any]:
    """The prediction's predictor, once `what` and the options given on the command line make sense for it."""
    if what.simulate not in predictors:
        raise UsageError(f"--simulate {what.simulate!r}: the simulator predicts {listing(predictors.names())}")
    check_applies(what.simulate, given)
    if what.prediction_out is not None and what.simulate not in contracts:
        raise UsageError(f"--prediction-out: a contract is written for --simulate {listing(contracts.names(), ' or ')}")
    if not 0 < what.tolerance_pct < 1000:
        raise UsageError(f"--tolerance {what.tolerance_pct:g}: a percentage above 0")
    return predictors.get(what.simulate)


def plan_of(
    profile_text: str | Path,
    what: WhatIf | None,
    given: Iterable[str],
    *,
    sim: str | Path | None = None,
    startup_log: Path | None = None,
    model_config: Path | None = None,
) -> Planned:
    """`plan PROFILE [--simulate NAME --sim SIM]`: every check first, then the KV plan of a deployment profile
    and the sim profile its prediction runs on (the deployment's limits on the sim profile's step costs), or
    the sim profile itself given as PROFILE, or, for a profile whose engine is the simulator (`sim-small`), its
    own sim profile (or --sim's) with its context and scheduler limits, as `tune` predicts it. PROFILE and
    --sim are files or packaged profiles' names."""
    profile_path = resolve_profile_path(profile_text)  # before any advice about what else to give
    if what is None:
        check_applies(None, given)
    predictor = check(what, given) if what is not None else None
    sim_path = sim_profile_path(sim, "--sim") if sim is not None else None
    if is_sim_profile(profile_path):
        if predictor is None:
            raise UsageError(f"{profile_text} is a sim profile: give --simulate {_names()}")
        rests_on = sim_path if sim_path is not None else profile_path
        return Planned(None, None, load_sim_config(profile_path), False, _resting(what, rests_on))
    profile = load_profile(profile_path)
    own = sim_profile_of(profile)
    if own is not None:  # the simulator's own deployment: no KV cache to plan from a model
        if predictor is None:
            raise UsageError(f"{profile_text} serves the simulator: give --simulate {_names()}")
        costs = sim_path if sim_path is not None else own
        simulated = simulator_deployment_config(profile, load_sim_config(costs))
        return Planned(profile, None, simulated, False, _resting(what, costs))
    if predictor is not None and sim_path is None:
        raise UsageError("--simulate needs the step costs: give --sim SIM_PROFILE (from `loadproof sim calibrate`)")
    log_text = read_startup_log(startup_log) if startup_log is not None else None
    planned = plan_profile(profile, model_config_path(profile, model_config), log_text)
    config = deployment_config(profile, planned, load_sim_config(sim_path)) if predictor is not None else None
    shows = predictor is None or predictor.shows_plan
    resting = _resting(what, sim_path)
    if resting is not None:
        resting = replace(resting, tokenizer=tokenizer_path_for(profile))
    return Planned(profile, planned, config, shows, resting)


def _names() -> str:
    return "|".join(sorted(predictors.names()))


def _resting(what: WhatIf | None, sim_profile: Path | None) -> WhatIf | None:
    """`what` with the sim profile file its contract rests on."""
    return None if what is None else replace(what, sim_profile=sim_profile)


def predict_named(profile: str | Path, simulate: str, values: dict[str, Any], show: Show) -> None:
    """`sim predict-NAME SIM_PROFILE [options]`: the prediction on the sim profile (a file, or a packaged
    simulator profile's name), without ranges."""
    path = sim_profile_path(profile, "SIM_PROFILE")
    predict(load_sim_config(path), WhatIf(simulate, f"sim predict-{simulate}", sim_profile=path), values, show)


def predict(config: SimConfig, what: WhatIf, values: dict[str, Any], show: Show) -> None:
    """Predict and show `what` on `config` (see the module doc); `values`: the scenario's options given, keyed
    by field, and `plan`'s own --input-tokens."""
    predictor = predictors.get(what.simulate)
    takes_tokenizer = any(o.field == "tokenizer" for o in predictor.cli_options())
    if what.tokenizer is not None and takes_tokenizer and values.get("tokenizer") is None:
        values = {**values, "tokenizer": what.tokenizer}  # the profile's, where the command line gave none
    question = predictor.question(values, what.source)
    predictor.forecast(config, question, show)
    show.line(f"model: {config.source}")
    names = contracts.get(what.simulate) if what.simulate in contracts else ()
    out = what.prediction_out
    if not names or not (out is not None or (what.ranges and predictor.ranged(question))):
        return
    result = ranged_prediction(predictor, question, names, config, show.progress)
    show_ranges(result, show)
    if out is None or what.sim_profile is None:
        return
    options = predictor.options_of(question)
    kept = {k: options[k] for k in predictor.contract_options if k in options}
    write_contract(out, contract(what.simulate, kept, result, config, what.sim_profile, what.tolerance_pct))
    show.line(
        f"prediction contract: {out} (tolerance {what.tolerance_pct:g}%); judge a run against it with "
        f"`loadproof run {what.simulate} ... --prediction {out}`"
    )


def show_ranges(result: RangedPrediction, show: Show) -> None:
    show.table(
        f"Ranges over the open assumptions ({result.predictions} predictions)",
        ["figure", "point", "low", "high", "width", "driven by"],
        [
            [f.claim, f"{f.point:,.4g}", f"{f.low:,.4g}", f"{f.high:,.4g}", f"{f.width_pct:.1f}%", f.driver or "-"]
            for f in result.figures
        ],
    )
    for a in result.assumptions:
        values = ", ".join(str(v) for v in a.values)
        show.line(
            f"assumption {a.name} = {a.point}: "
            + (f"pinned by {a.pinned_by}" if a.pinned_by else f"open ({values})")
            + f"; {a.what}"
        )
