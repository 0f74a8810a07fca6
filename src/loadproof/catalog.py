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
- `demo`: `demo(setup)`, the scenario scaled down for `loadproof demo` (None: not in the demo);
- `text_fields`: the kind of each string field of its plan, by path in the plan (`sessions.*.expected`:
  `planted`), which `publish` sanitizes by (publish.fields lists the kinds); a plan string it does not
  declare is published as `<redacted>`, its numbers need no declaration;
- `predict`: its `Predictor` (predict/, `predict.base`), how the simulator predicts its run: `plan
  --simulate NAME` (and `sim predict-NAME` where it has a command);
- `contract`: the claim names (metrics/, a tuple) a prediction contract of it compares, each with its range
  (`plan --simulate NAME --prediction-out FILE`, `run NAME --prediction FILE`);
- `calibrate`: `calibration_points(run)` (predict/), what `sim calibrate` fits to from one of its runs;
- `headline`: the few figures the console shows at a run's end (`metrics.headline`; without one, the first
  figures of its own tables);
- `fleet_requests`: `fleet_requests(run, plan, block_tokens)` (metrics/), its requests as a fleet's router and
  replicas' caches see them (`metrics.fleet_expectation.FleetRequest`), for the expected prefix hits per replica
  under the router's policy (docs/fleet.md); without it, a fleet run of it has no expectation.

`report`, `compare`, `export`, `verify`, `publish`, the simulator's predictions and calibration, and the
command line read these and never a scenario's name; the registries are live views of this table
(`column`), so the pure side (plans, metrics, verify) never imports a scenario module, and adding a
scenario is one entry here. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Entry:
    scenario: str  # module:attr of the Scenario class
    plan: str  # module:attr of the Plan schema
    claims: str  # module:attr of claims_of_run(run, plan)
    figures: str | None = None  # module:attr of figures(run, plan, claims) -> list[Panel]
    answer_changes: str | None = None  # module:attr of answer_changes(base_run, candidate_run)
    splits_by_repeat: bool = False
    demo: str | None = None  # module:attr of demo(setup) -> Scenario
    text_fields: Mapping[str, str] = field(default_factory=dict)  # plan path -> field kind (publish.fields)
    predict: str | None = None  # module:attr of its Predictor (predict.base)
    contract: str | None = None  # module:attr of the claim names a prediction contract compares
    calibrate: str | None = None  # module:attr of calibration_points(run) -> predict.points.RunPoints
    headline: str | None = None  # module:attr of its metrics.headline.Headline
    fleet_requests: str | None = None  # module:attr of fleet_requests(run, plan, block_tokens)


def _entry(
    name: str,
    scenario_class: str,
    plan_class: str,
    *,
    figures: bool | str = False,
    answer_changes: bool = False,
    splits_by_repeat: bool = False,
    demo: bool = False,
    text_fields: Mapping[str, str] | None = None,
    predict: bool = False,
    contract: bool = False,
    calibrate: bool = False,
    headline: bool = False,
    fleet_requests: str | None = None,
) -> Entry:
    """The entry of a scenario laid out as usual: scenarios/NAME.py, plans/NAME.py, metrics/NAME.py (its
    `CONTRACT`), and predict/NAME.py (its `PREDICTOR` and `calibration_points`). `figures` names the metrics
    module of its report panels where they are not in metrics/NAME.py (a module that reads it: metrics/NAME.py
    cannot import it back); `fleet_requests` names the metrics module of its `fleet_requests`."""
    metrics, scenario, predictor = (
        f"loadproof.metrics.{name}",
        f"loadproof.scenarios.{name}",
        f"loadproof.predict.{name}",
    )
    return Entry(
        f"{scenario}:{scenario_class}",
        f"loadproof.plans.{name}:{plan_class}",
        f"{metrics}:claims_of_run",
        figures=(f"loadproof.metrics.{figures}:figures" if isinstance(figures, str) else f"{metrics}:figures")
        if figures
        else None,
        answer_changes=f"{metrics}:answer_changes" if answer_changes else None,
        splits_by_repeat=splits_by_repeat,
        demo=f"{scenario}:demo" if demo else None,
        text_fields=dict(text_fields or {}),
        predict=f"{predictor}:PREDICTOR" if predict else None,
        contract=f"{metrics}:CONTRACT" if contract else None,
        calibrate=f"{predictor}:calibration_points" if calibrate else None,
        headline=f"loadproof.metrics.headline:{name.upper()}" if headline else None,
        fleet_requests=f"loadproof.metrics.{fleet_requests}:fleet_requests" if fleet_requests else None,
    )


# The kinds of the plans' string fields (publish.fields), shared by several plans.
_OVERHEAD = {"overhead_source": "text"}
# a plan's route traits (plans.load.route_traits): its name, and a pooling route's items with their formulas
_ROUTE = {
    "route.name": "name",
    "route.items.claim": "name",
    "route.items.unit": "name",
    "route.items.per_s_formula": "text",
    "route.items.per_request_formula": "text",
}
_DATASET = {
    "dataset.path": "path",
    "dataset.files.*": "path",
    "dataset.format": "name",
    "dataset.sha256": "name",
    "dataset.columns.*": "name",
    "dataset.sample": "name",
    "dataset.output_from": "name",
}
_PROBES = {
    "sessions.*.request_id": "name",
    "sessions.*.session_id": "name",
    "sessions.*.salt": "name",
    "sessions.*.expected": "planted",
}
_LENGTHS = {f"{which}_tokens.{part}": "name" for which in ("input", "output") for part in ("kind", "text")}


SCENARIOS: dict[str, Entry] = {
    "throughput": _entry(
        "throughput",
        "ThroughputScenario",
        "ThroughputPlan",
        headline=True,
        figures=True,
        splits_by_repeat=True,
        demo=True,
        text_fields={"families.*": "name"},
        calibrate=True,
    ),
    "load": Entry(
        "loadproof.scenarios.load.scenario:LoadScenario",
        "loadproof.plans.load:LoadPlan",
        "loadproof.metrics.load:claims_of_run",
        figures="loadproof.metrics.load:figures",
        demo="loadproof.scenarios.load.scenario:demo",
        predict="loadproof.predict.load:PREDICTOR",
        contract="loadproof.metrics.load:CONTRACT",
        calibrate="loadproof.predict.load_points:calibration_points",  # its own runs and imported ones (docs/import.md)
        headline="loadproof.metrics.headline:LOAD",
        text_fields={
            "arrival": "name",
            "endpoint": "name",
            **_ROUTE,
            "model_mix.*.model": "name",
            "base_model": "name",
            **_LENGTHS,
            **_OVERHEAD,
            **_DATASET,
        },
    ),
    "replay": _entry(
        "replay",
        "ReplayScenario",
        "ReplayPlan",
        headline=True,
        figures=True,
        predict=True,
        fleet_requests="replay_fleet",
        text_fields={
            "trace": "path",
            "format": "name",
            "sha256": "name",
            "endpoint": "name",
            **_ROUTE,
            "kv_source": "name",
            "model_mix.*.model": "name",
            "models.*": "name",
            **_OVERHEAD,
            # a trace of sessions (bailian, otel): each request's session id and the header that carried it
            "sessions.*": "name",
            "session_header": "name",
            # a recorded agent (--format otel): its pace, tool role, each request's span id and its links' kinds
            "agent.pace": "name",
            "agent.tool_role": "name",
            "agent.spans.*": "name",
            "agent.links.*.*": "name",
        },
    ),
    "sessions": _entry(
        "sessions",
        "SessionsScenario",
        "SessionsPlan",
        figures="sessions_figures",
        headline=True,
        fleet_requests="sessions_fleet",
        text_fields={
            "think_time": "name",
            "endpoint": "name",
            "tool_names.*": "name",
            "tool_choice": "name",
            "tool_call_mode": "name",
            "kv_source": "name",
            "checkpoint_source": "name",
            "model_mix.*.model": "name",
            "session_header": "name",
            "session_ids.*": "name",
            **_DATASET,
        },
    ),
    "capacity": _entry(
        "capacity",
        "CapacityScenario",
        "CapacityPlan",
        figures="capacity_figures",
        headline=True,
        demo=True,
        text_fields={**_PROBES, "sessions.*.key": "text", **_OVERHEAD},
        predict=True,
        contract=True,
        calibrate=True,
    ),
    "prefill": _entry(
        "prefill",
        "PrefillScenario",
        "PrefillPlan",
        figures=True,
        headline=True,
        demo=True,
        text_fields={"repeats.*.request_id": "name", "repeats.*.salt": "name", **_OVERHEAD},
        predict=True,
        calibrate=True,
    ),
    "interference": _entry(
        "interference",
        "InterferenceScenario",
        "InterferencePlan",
        headline=True,
        figures=True,
        demo=True,
        text_fields={
            **_PROBES,
            "sessions.*.followup_request_id": "name",
            "newcomer.request_id": "name",
            "newcomer.salt": "name",
            **_OVERHEAD,
        },
    ),
    "soak": _entry("soak", "SoakScenario", "SoakPlan", figures=True, demo=True, headline=True),
    "quality": _entry(
        "quality",
        "QualityScenario",
        "QualityPlan",
        figures="quality_figures",
        headline=True,
        answer_changes=True,
        demo=True,
        text_fields={
            "suites.*": "name",
            "endpoint": "name",
            "gsm8k.file": "path",
            "gsm8k.sha256": "name",
            "gsm8k.prompt": "text",
            "authored.file": "path",
            "authored.sha256": "name",
            "authored.modes.*": "text",
            "retrieval.overhead_source": "text",
            "retrieval.salts.*": "name",
            "image.status": "text",
            **{
                f"under_load.load.{path}": kind
                for path, kind in {  # --under-load-rate
                    "arrival": "name",
                    "endpoint": "name",
                    **_LENGTHS,
                    **_OVERHEAD,
                }.items()
            },
        },
    ),
    "ab": _entry(
        "ab",
        "AbScenario",
        "AbPlan",
        headline=True,
        figures=True,
        text_fields={
            "arms.*.target": "config",
            "arms.*.settings": "config",
            "order.*.*": "name",
            "prompts.*": "name",
            "family": "name",
            "labels.*": "text",
        },
    ),
}


class _Column(Mapping[str, str]):
    """{name: module:attr of one part} of every entry that has the part, read from SCENARIOS at each access."""

    def __init__(self, part: str) -> None:
        self.part = part

    def __getitem__(self, name: str) -> str:
        target: str | None = getattr(SCENARIOS[name], self.part)
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
    if part not in Entry.__dataclass_fields__ or part in ("splits_by_repeat", "text_fields"):
        raise ValueError(f"{part!r} is not a module:attr part of a catalog entry")
    return _Column(part)


def entry(name: str) -> Entry | None:
    """The catalog entry of scenario `name`; None for a name the catalog does not list."""
    return SCENARIOS.get(name)
