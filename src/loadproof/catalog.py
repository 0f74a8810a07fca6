"""The scenarios loadproof knows: one line each, in the order `loadproof run --help` lists them.

Each line names the scenario's three parts (docs/architecture.md, "Adding a scenario"): the scenario
class that runs it (scenarios/, may import the client, pydantic and tokenizers), its plan schema
(plans/, msgspec only) and the function computing its claims (metrics/, no client, no model). The
three registries are built from this table, so the pure side (plans, metrics, verify) never imports
the scenario modules, and adding a scenario is one line here. Standard library only.
"""

from __future__ import annotations

from typing import NamedTuple


class Parts(NamedTuple):
    scenario: str  # module:attr of the Scenario class
    plan: str  # module:attr of the Plan schema
    claims: str  # module:attr of claims_of_run(run, plan)


def _parts(name: str, scenario_class: str, plan_class: str) -> Parts:
    return Parts(f"loadproof.scenarios.{name}:{scenario_class}", f"loadproof.plans.{name}:{plan_class}",
                 f"loadproof.metrics.{name}:claims_of_run")


SCENARIOS: dict[str, Parts] = {
    "throughput": _parts("throughput", "ThroughputScenario", "ThroughputPlan"),
    "load": _parts("load", "LoadScenario", "LoadPlan"),
    "replay": _parts("replay", "ReplayScenario", "ReplayPlan"),
    "sessions": _parts("sessions", "SessionsScenario", "SessionsPlan"),
    "capacity": _parts("capacity", "CapacityScenario", "CapacityPlan"),
    "prefill": _parts("prefill", "PrefillScenario", "PrefillPlan"),
    "interference": _parts("interference", "InterferenceScenario", "InterferencePlan"),
    "soak": _parts("soak", "SoakScenario", "SoakPlan"),
    "quality": _parts("quality", "QualityScenario", "QualityPlan"),
    "ab": _parts("ab", "AbScenario", "AbPlan"),
}
