"""The scenarios loadproof knows: one entry each, in the order `loadproof run --help` lists them.

Each entry names, as lazy `module:attr` strings, what the generic parts need of the scenario
(docs/architecture.md, "Adding a scenario", walks through one):

- `scenario`: the Scenario class that runs it (scenarios/, may import the client, pydantic, tokenizers);
- `plan`: its plan schema (plans/, msgspec only);
- `claims`: `claims_of_run(run, plan)`, its claims (metrics/, no client, no model);
- `figures`: `figures(run, plan, claims)`, its report panels as typed data (`metrics.figures`: tables
  for report.md and the console, plots for report.html);
- `answer_changes`: `answer_changes(base_run, candidate_run)`, answer-by-answer changes for `compare`;
- `splits_by_repeat`: its claims are functions of the records alone, so `compare` counts a run holding
  several `repeat` values as that many repeats;
- `demo`: `demo(setup)`, the scenario scaled down for `loadproof demo` (None: not in the demo).

`report`, `compare`, `export`, `verify` and `publish` read these and never a scenario's name; the
registries are live views of this table (`column`), so the pure side (plans, metrics, verify) never
imports a scenario module, and adding a scenario is one entry here. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    scenario: str  # module:attr of the Scenario class
    plan: str  # module:attr of the Plan schema
    claims: str  # module:attr of claims_of_run(run, plan)
    figures: str | None = None  # module:attr of figures(run, plan, claims) -> list[Panel]
    answer_changes: str | None = None  # module:attr of answer_changes(base_run, candidate_run)
    splits_by_repeat: bool = False
    demo: str | None = None  # module:attr of demo(setup) -> Scenario


def _entry(name: str, scenario_class: str, plan_class: str, *, figures: bool = False, answer_changes: bool = False,
           splits_by_repeat: bool = False, demo: bool = False) -> Entry:
    """The entry of a scenario laid out as usual: scenarios/NAME.py, plans/NAME.py, metrics/NAME.py."""
    metrics, scenario = f"loadproof.metrics.{name}", f"loadproof.scenarios.{name}"
    return Entry(f"{scenario}:{scenario_class}", f"loadproof.plans.{name}:{plan_class}", f"{metrics}:claims_of_run",
                 figures=f"{metrics}:figures" if figures else None,
                 answer_changes=f"{metrics}:answer_changes" if answer_changes else None,
                 splits_by_repeat=splits_by_repeat, demo=f"{scenario}:demo" if demo else None)


SCENARIOS: dict[str, Entry] = {
    "throughput": _entry("throughput", "ThroughputScenario", "ThroughputPlan", figures=True, splits_by_repeat=True,
                         demo=True),
    "load": Entry("loadproof.scenarios.load.scenario:LoadScenario", "loadproof.plans.load:LoadPlan",
                  "loadproof.metrics.load:claims_of_run", demo="loadproof.scenarios.load.scenario:demo"),
    "replay": _entry("replay", "ReplayScenario", "ReplayPlan"),
    "sessions": _entry("sessions", "SessionsScenario", "SessionsPlan"),
    "capacity": _entry("capacity", "CapacityScenario", "CapacityPlan", figures=True, demo=True),
    "prefill": _entry("prefill", "PrefillScenario", "PrefillPlan", demo=True),
    "interference": _entry("interference", "InterferenceScenario", "InterferencePlan", figures=True, demo=True),
    "soak": _entry("soak", "SoakScenario", "SoakPlan", demo=True),
    "quality": _entry("quality", "QualityScenario", "QualityPlan", figures=True, answer_changes=True, demo=True),
    "ab": _entry("ab", "AbScenario", "AbPlan", figures=True),
}


class _Column(Mapping[str, str]):
    """{name: module:attr of one part} of every entry that has the part, read from SCENARIOS at each access."""

    def __init__(self, part: str) -> None:
        self.part = part

    def __getitem__(self, name: str) -> str:
        target = getattr(SCENARIOS[name], self.part)
        if target is None:
            raise KeyError(name)
        return target

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, entry in SCENARIOS.items() if getattr(entry, self.part) is not None])

    def __len__(self) -> int:
        return len(list(iter(self)))


def column(part: str) -> Mapping[str, str]:
    """One part of every entry (`plan`, `claims`, `figures`...), a live view: an entry added to SCENARIOS
    later is in it, so `registry.Registry.over(column(part))` finds it."""
    if part not in Entry.__dataclass_fields__ or part == "splits_by_repeat":
        raise ValueError(f"{part!r} is not a module:attr part of a catalog entry")
    return _Column(part)


def entry(name: str) -> Entry | None:
    """The catalog entry of scenario `name`; None for a name the catalog does not list."""
    return SCENARIOS.get(name)
