"""`loadproof demo`'s scenarios: every catalog entry with a `demo` factory, in the catalog's order.

A scenario joins the demo by naming `demo(setup) -> Scenario` in its catalog entry: a function in its
own module that scales the scenario down for the embedded engine on a small CPU. The factories get
what the demo knows of the engine it started (`DemoSetup`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from loadproof.catalog import column
from loadproof.registry import Registry
from loadproof.scenarios.base import Scenario, Target


@dataclass(frozen=True)
class DemoSetup:
    target: Target
    max_tokens: int  # output tokens per request (throughput)
    prompts: int  # prompts per family at concurrency 1 (throughput)
    kv_cache_tokens: int | None  # the engine's KV cache, from its startup report (capacity)
    engine_url: str  # where the engine's /metrics are (soak's memory samples)


demo_factories: Registry[Callable[[DemoSetup], Scenario]] = Registry.over("scenario", column("demo"))


def demo_scenarios(setup: DemoSetup) -> list[Scenario]:
    """The demo's scenarios, scaled down, in the catalog's order."""
    return [demo_factories.get(name)(setup) for name in demo_factories.in_order()]
