"""A small example scenario, added as a contributor adds one: five parts and nothing else, and a sixth for
the simulator to predict it.

- `scenario.py`: its Options (the options of `loadproof run example`) and the Scenario that runs it;
- `plan.py`: its plan schema;
- `metrics.py`: its claims and its report panels, and `CONTRACT`, the claims a prediction contract compares;
- `ENTRY` below: its catalog entry (in loadproof itself, one line in `catalog.py`);
- `docs.md`: its section of the docs, naming every claim with its formula;
- `predict.py`: how the simulator predicts its run (`plan SIM --simulate example`).

`report`, `report.html`, `compare`, `export`, `publish` and `verify` work on its runs without knowing
it, and `plan --simulate` predicts it and writes its contract, which `run example --prediction FILE` is
judged against (tests/integration/test_example_scenario.py, tests/unit/test_catalog_plugins.py);
`python -m tests.unit.example_scenario run example ...` is `loadproof run example` with the entry in the
catalog.
"""

from __future__ import annotations

from pathlib import Path

from loadproof.catalog import Entry

NAME = "example"
HERE = "tests.unit.example_scenario"
ENTRY = Entry(
    scenario=f"{HERE}.scenario:ExampleScenario",
    plan=f"{HERE}.plan:ExamplePlan",
    claims=f"{HERE}.metrics:claims_of_run",
    figures=f"{HERE}.metrics:figures",
    splits_by_repeat=True,
    text_fields={"prompt": "text", "rounds.*.*": "name"},  # what publish does with the plan's strings
    predict=f"{HERE}.predict:PREDICTOR",
    contract=f"{HERE}.metrics:CONTRACT",
)
DOCS = Path(__file__).with_name("docs.md")
