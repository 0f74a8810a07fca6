"""Scenarios: a planned set of requests against a target, recorded into a run directory.

Each scenario class has `name`, `Options` (a strict model) and `async run(writer, manifest, progress)`;
the claims of its runs are found by that name in `loadproof.metrics.claim_functions`.
"""
