"""Scenarios: a planned set of requests against a target, recorded into a run directory.

Each scenario class (`scenarios.base.Scenario`) has `name`, `Options` (a strict model whose fields are
the options of `loadproof run NAME`, see `scenarios.options`) and `async run(writer, manifest, live)`;
`scenarios.lifecycle` runs it, and the claims of its runs are found by that name in
`loadproof.metrics.claim_functions`. The list is `loadproof.catalog.SCENARIOS`, one entry per scenario.
"""

from loadproof.catalog import column
from loadproof.registry import Registry

scenarios: Registry[type] = Registry.over("scenario", column("scenario"))

__all__ = ["scenarios"]
