"""How the simulator predicts a scenario: what a catalog entry's `predict` names (docs/architecture.md,
"Adding a scenario"; docs/simulator.md, "Predicting a scenario").

A `Predictor` takes the options of `plan --simulate NAME` (and, where it has a command of its own, of `sim
predict-NAME`), makes them its question once (`question`: every option validated by the scenario's own
model), and predicts it on a sim profile: `forecast` shows the prediction (tables and lines, through a
`Show`), `claims` gives the predicted run's claims, computed by the scenario's own metrics, which the ranges
over the profile's open assumptions and a prediction contract read by the names the entry's `contract`
lists (in metrics/NAME.py). The generic parts (`predict.whatif`, `predict.contract`, the command line) find a
scenario's predictor, contract and calibration in the catalog and never name a scenario.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

from loadproof.catalog import column
from loadproof.errors import UsageError
from loadproof.metrics.claims import Claim
from loadproof.registry import Registry
from loadproof.scenarios.options import CliOption
from loadproof.sim.config import SimConfig

Q = TypeVar("Q")


class Show(Protocol):
    """Where a prediction goes: its tables and result lines (stdout), its progress and notes (stderr)."""

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None: ...

    def line(self, text: str) -> None: ...

    def progress(self, text: str) -> None: ...


class Predictor(ABC, Generic[Q]):
    """One scenario on the simulator (see the module doc). `Q` is its question: the scenario's options,
    validated once."""

    # `sim predict-NAME`'s help; None: the scenario is predicted by `plan --simulate NAME` only
    command: str | None = None
    # `plan PROFILE --simulate NAME` shows the profile's KV plan before the prediction (an open-loop
    # prediction shows its own figures only)
    shows_plan: bool = True
    # the scenario's options a run judged by a contract must repeat: the ones the prediction honours
    contract_options: tuple[str, ...] = ()

    def cli_options(self) -> list[CliOption]:
        """The options it takes, as the scenario's model declares them (beyond `plan`'s own --input-tokens)."""
        return []

    @abstractmethod
    def question(self, values: dict[str, Any], source: str) -> Q:
        """The question, from command-line values keyed by field (absent or None: the option's default)."""

    @abstractmethod
    def forecast(self, config: SimConfig, question: Q, show: Show) -> None:
        """Predict `question` on `config` and show it."""

    def claims(self, config: SimConfig, question: Q) -> list[Claim]:
        """The predicted run's claims, by the scenario's own formulas: what ranges and contracts read."""
        raise UsageError("this prediction has no figures to range over or promise")

    def ranged(self, question: Q) -> bool:
        """Whether `question` asks for ranges when the command asks for them and writes no contract."""
        return True

    def options_of(self, question: Q) -> dict[str, Any]:
        """The scenario's options of `question`, dumped as JSON (a contract keeps `contract_options` of them)."""
        return {}


predictors: Registry[Predictor[Any]] = Registry.over("prediction", column("predict"))
contracts: Registry[Sequence[str]] = Registry.over("contract", column("contract"))


def listing(names: Sequence[str], last: str = ", ") -> str:
    """`a, b, c` (or `a or b` with last=" or "), sorted: what a message offers."""
    ordered = sorted(names)
    return ordered[0] if len(ordered) == 1 else ", ".join(ordered[:-1]) + last + ordered[-1]


def with_defaults(options: list[CliOption], values: dict[str, Any]) -> dict[str, Any]:
    """`values` (None: not given) with each option's default where it was not given, as the command line would
    have passed it."""
    given = {k: v for k, v in values.items() if v is not None}
    return {**{o.field: o.default for o in options if o.default is not None}, **given}
