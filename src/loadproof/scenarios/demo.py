"""`loadproof demo`: the embedded engine started, every catalog entry with a `demo` factory run scaled down,
in the catalog's order, the engine stopped.

A scenario joins the demo by naming `demo(setup) -> Scenario` in its catalog entry: a function in its
own module that scales the scenario down for the embedded engine on a small CPU. The factories get
what the demo knows of the engine it started (`DemoSetup`). `run_demo` does the rest and returns each
scenario's verdict and the wall time of each phase; the command prints them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from loadproof.catalog import column
from loadproof.config.profile import Profile
from loadproof.engines import embedded
from loadproof.engines.base import StartupReport
from loadproof.engines.process import EngineProcess, Status
from loadproof.errors import AcceptanceFailed, NothingMeasured
from loadproof.registry import Registry
from loadproof.rundir import Manifest
from loadproof.rundir.manifest import EngineInfo
from loadproof.scenarios.base import Scenario, Target
from loadproof.scenarios.recording import Console, run_once, startup_of

Phase = Callable[[str], AbstractContextManager[Status]]  # a named step with a status line (the CLI's spinner)
NOTHING_MEASURED = "NOTHING MEASURED"  # a demo run's verdict where every request failed


@dataclass(frozen=True)
class DemoSetup:
    target: Target
    max_tokens: int  # output tokens per request (throughput)
    prompts: int  # prompts per family at concurrency 1 (throughput)
    kv_cache_tokens: int | None  # the engine's KV cache, from its startup report (capacity)
    engine_url: str  # where the engine's /metrics are (soak's memory samples)


@dataclass
class DemoOutcome:
    # scenario -> PASS, FAIL, None (measured) or NOTHING_MEASURED (every request failed)
    verdicts: dict[str, str | None] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)  # phase -> wall seconds, in order
    nothing: dict[str, str] = field(default_factory=dict)  # scenario -> its line, where it measured nothing

    def conclude(self) -> None:
        """Exit code 4 (NothingMeasured) when any scenario measured nothing, else 1 (AcceptanceFailed) when any
        verdict is FAIL, naming each."""
        if self.nothing:
            raise NothingMeasured(
                "a demo run measured nothing: " + "; ".join(f"{k}: {v}" for k, v in self.nothing.items())
            )
        failed = [name for name, verdict in self.verdicts.items() if verdict == "FAIL"]
        if failed:
            raise AcceptanceFailed("a demo acceptance failed: " + ", ".join(failed))


demo_factories: Registry[Callable[[DemoSetup], Scenario]] = Registry.over("scenario", column("demo"))


def demo_scenarios(setup: DemoSetup) -> list[Scenario]:
    """The demo's scenarios, scaled down, in the catalog's order."""
    return [demo_factories.get(name)(setup) for name in demo_factories.in_order()]


def engine_manifest(profile: Profile, engine: EngineProcess, startup: StartupReport | None) -> Manifest:
    """What every demo run's manifest says of the engine the demo started (the manifest's `profile` and
    `engine`: its launch arguments and environment, startup report and time to ready)."""
    return Manifest(
        profile=profile.model_dump(),
        engine=EngineInfo(
            kind=profile.engine,
            launch=engine.command.argv[1:],
            env=engine.command.env,
            startup_report=startup_of(startup),
            ready_after_s=engine.ready_after_s,
        ),
    )


def run_demo(
    profile: Profile,
    out: Path,
    console: Console,
    phase: Phase,
    rule: Callable[[str], None],
    *,
    max_tokens: int,
    prompts: int,
) -> DemoOutcome:
    """Install (once) and start the embedded engine of `profile`, run every demo scenario against it (each
    announced with `rule(name)`), and stop it, whatever happens. A scenario's FAIL is in the outcome's
    verdicts, not raised."""
    outcome = DemoOutcome()
    lap = time.monotonic()

    def timed(name: str) -> None:
        nonlocal lap
        now = time.monotonic()
        outcome.timings_s[name], lap = now - lap, now

    with phase("preparing the embedded engine") as status:
        outcome.timings_s["install_s"] = embedded.ensure_engine(status)
        outcome.timings_s["model_prepare_s"] = embedded.ensure_model(status)
    lap = time.monotonic()
    with phase("starting the engine") as status:
        engine = embedded.start(profile, status=status)
    timed("engine_start_s")
    try:
        console.say(f"engine ready at {engine.url} after {outcome.timings_s['engine_start_s']:.0f} s")
        startup = engine.startup_report()
        target = Target(
            url=engine.url,
            model=profile.model.served_name,
            endpoint=profile.serving.endpoint,
            tokenizer_path=embedded.tokenizer_path_for(profile),
            engine=profile.engine,
        ).resolve()
        setup = DemoSetup(
            target=target,
            max_tokens=max_tokens,
            prompts=prompts,
            kv_cache_tokens=startup.kv_cache_tokens if startup else None,
            engine_url=engine.url,
        )
        extra = engine_manifest(profile, engine, startup)
        for scenario in demo_scenarios(setup):
            rule(scenario.name)
            ran = run_once(scenario, out, console, extra)
            headline = ran.report.failures.headline()
            if headline is not None:
                outcome.nothing[scenario.name] = headline
            outcome.verdicts[scenario.name] = NOTHING_MEASURED if headline is not None else ran.verdict
        timed("measurement_s")
    finally:
        with phase("stopping the engine"):
            engine.stop()
    return outcome
