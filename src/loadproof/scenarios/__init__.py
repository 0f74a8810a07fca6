"""Scenarios: a planned set of requests against a target, recorded into a run directory."""

from loadproof.registry import Registry

scenarios: Registry[object] = Registry("scenario")
scenarios.register("throughput", "loadproof.scenarios.throughput:ThroughputScenario")

__all__ = ["scenarios"]
