"""Scenarios: a planned set of requests against a target, recorded into a run directory."""

from loadproof.registry import Registry

scenarios: Registry[object] = Registry("scenario")
scenarios.register("throughput", "loadproof.scenarios.throughput:ThroughputScenario")
scenarios.register("capacity", "loadproof.scenarios.capacity:CapacityScenario")
scenarios.register("prefill", "loadproof.scenarios.prefill:PrefillScenario")
scenarios.register("interference", "loadproof.scenarios.interference:InterferenceScenario")
scenarios.register("soak", "loadproof.scenarios.soak:SoakScenario")

__all__ = ["scenarios"]
