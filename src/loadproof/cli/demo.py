"""`loadproof demo`: the embedded engine, every scenario scaled down, the reports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.config.profile import packaged_profile
from loadproof.engines import embedded
from loadproof.errors import AcceptanceFailed
from loadproof.scenarios.base import Target
from loadproof.cli.common import OutOption, console, with_serving
from loadproof.scenarios.demo import DemoSetup, demo_scenarios
from loadproof.scenarios.lifecycle import run_once


@app.command()
def demo(
    out: OutOption = Path("runs"),
    max_tokens: Annotated[int, typer.Option(help="output tokens per request (scaled down)")] = 128,
    prompts: Annotated[int, typer.Option(help="prompts per family at concurrency 1")] = 4,
    eager: Annotated[bool, typer.Option(help="skip torch.compile: faster start, about 20% slower decode")] = False,
) -> None:
    """Install and start the embedded engine, run every scenario scaled down, report, stop.

    Every scenario whose catalog entry has a `demo` factory, in the catalog's order, scaled for a 2-core
    CPU: throughput (3 families x concurrency 1/4/8), open-loop load (Poisson at 2 requests/s for 15 s,
    128 tokens in, 32 out, with SLOs), capacity (4 sessions of 1,536 tokens, 6 s window), prefill (3 cold
    repeats of 4,096 tokens), interference (3 sessions of 1,024 tokens, a 6,144-token newcomer, 4 s
    windows), soak (2 clients for 20 s, every third request long), quality (5 GSM8K problems, the
    authored tasks in plain mode, retrieval at 1,024 and 2,048 tokens).
    """
    profile = with_serving(packaged_profile("embedded"), eager, None)
    timings: dict[str, float] = {}
    watch = ui.Stopwatch()
    with ui.status("preparing the embedded engine") as status:
        timings["install_s"] = embedded.ensure_engine(status)
        timings["model_prepare_s"] = embedded.ensure_model(status)
    watch.lap()
    with ui.status("starting the engine") as status:
        engine = embedded.start(profile, status=status)
    timings["engine_start_s"] = watch.lap()
    verdicts: dict[str, str | None] = {}
    try:
        ui.err.print(f"engine ready at {engine.url} after {timings['engine_start_s']:.0f} s")
        startup = engine.startup_report()
        target = Target(url=engine.url, model=profile.model.served_name, endpoint=profile.serving.endpoint,
                        tokenizer_path=embedded.tokenizer_path_for(profile), engine=profile.engine).resolve()
        extra = {"profile": profile.model_dump(), "engine": {
            "kind": profile.engine, "launch": engine.command.argv[1:], "env": engine.command.env,
            "startup_report": startup.as_dict() if startup else None, "ready_after_s": engine.ready_after_s}}
        setup = DemoSetup(target=target, max_tokens=max_tokens, prompts=prompts,
                          kv_cache_tokens=startup.kv_cache_tokens if startup else None, engine_url=engine.url)
        for scenario in demo_scenarios(setup):
            ui.err.rule(scenario.name)
            verdicts[scenario.name] = run_once(scenario, out, console, extra).verdict
        timings["measurement_s"] = watch.lap()
    finally:
        with ui.status("stopping the engine"):
            engine.stop()
    ui.table("Demo summary", ["scenario", "verdict"], [[k, v or "measured"] for k, v in verdicts.items()])
    ui.out.print("wall time: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.0f} s"
                                            for k, v in timings.items()))
    if any(v == "FAIL" for v in verdicts.values()):
        raise AcceptanceFailed("a demo acceptance failed: " + ", ".join(k for k, v in verdicts.items() if v == "FAIL"))
