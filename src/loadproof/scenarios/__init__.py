"""Scenarios: a planned set of requests against a target, recorded into a run directory.

Each scenario class (`scenarios.base.Scenario`) has `name`, `Options` (a strict model whose fields are
the options of `loadproof run NAME`, see `scenarios.options`) and `async run(writer, manifest, live)`;
`scenarios.lifecycle` runs it, and the claims of its runs are found by that name in
`loadproof.metrics.claim_functions`. The list is `loadproof.catalog.SCENARIOS`, one line per scenario.
"""

from loadproof.catalog import SCENARIOS
from loadproof.registry import Registry

scenarios: Registry[type] = Registry.of("scenario", {name: parts.scenario for name, parts in SCENARIOS.items()})

__all__ = ["scenarios"]
