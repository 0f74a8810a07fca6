"""`loadproof demo`: the embedded engine, every scenario scaled down, the reports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.cli.common import OutOption, console, with_serving
from loadproof.config.profile import packaged_profile
from loadproof.results.auto import storing
from loadproof.scenarios.demo import run_demo


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
    with storing(out, console.say):  # LOADPROOF_STORE_AUTO=1: its runs added to the results store
        outcome = run_demo(
            with_serving(packaged_profile("embedded"), eager, None),
            out,
            console,
            ui.status,
            ui.err.rule,
            max_tokens=max_tokens,
            prompts=prompts,
        )
    ui.table("Demo summary", ["scenario", "verdict"], [[k, v or "measured"] for k, v in outcome.verdicts.items()])
    ui.out.print(
        "wall time: "
        + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.0f} s" for k, v in outcome.timings_s.items())
    )
    outcome.conclude()
