"""The commands of the DESIGN.md contract that exist so far: demo, serve, run throughput, report."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from pydantic import ValidationError

from loadproof.cli import app, run_app, ui
from loadproof.config.base import one_line
from loadproof.config.profile import Profile, load_profile, packaged_profile
from loadproof.errors import EngineStartError, UsageError
from loadproof.report.build import build_report, throughput_table
from loadproof.scenarios.base import Target, resolve_model
from loadproof.scenarios.throughput import ThroughputOptions, ThroughputScenario
from loadproof.store.run_dir import RunWriter


def _int_list(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what} takes whole numbers separated by commas (got {text!r})") from None


def _options(model: type, source: str, **values: Any) -> Any:
    try:
        return model(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        raise one_line(exc, source) from None


def _extra_body(profile: Profile | None, endpoint: str, disable_thinking: bool) -> dict[str, Any]:
    thinking_off = disable_thinking or (profile is not None and profile.serving.thinking == "disable")
    if thinking_off and endpoint == "chat":
        return {"chat_template_kwargs": {"enable_thinking": False}}
    return {}


def _run_throughput(target: Target, options: ThroughputOptions, out: Path,
                    manifest_extra: dict[str, Any] | None = None) -> Path:
    scenario = ThroughputScenario(target, options)
    writer = RunWriter.create(out, "throughput")
    manifest = scenario.manifest(writer, manifest_extra)
    writer.write_manifest(manifest)
    ui.err.print(f"run directory: {writer.path}")
    try:
        with ui.request_progress("throughput requests") as progress:
            failed = asyncio.run(scenario.run(writer, progress))
    finally:
        manifest["end_wall_time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        manifest["num_records"] = writer.num_records
        writer.write_manifest(manifest)
        writer.close()
    if failed:
        ui.err.print(f"[yellow]{failed} request(s) failed; see error_kind in requests.jsonl[/]")
    return writer.path


def _show_report(run_path: Path) -> None:
    report = build_report(run_path)
    header, rows = throughput_table(report.claims)
    if rows:
        ui.table("Throughput (tokens/s): c1 = one user's decode rate; c4, c8 = aggregate of all streams",
                 header, rows)
    ui.out.print(f"claims: {run_path / 'claims.json'}\nreport: {run_path / 'report.md'}")


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="where run directories go")] = Path("runs"),
    max_tokens: Annotated[int, typer.Option(help="output tokens per request (scaled down)")] = 128,
    prompts: Annotated[int, typer.Option(help="prompts per family at concurrency 1")] = 4,
    eager: Annotated[bool, typer.Option(help="skip torch.compile: faster start, about 20% slower decode")] = False,
) -> None:
    """Install and start the embedded engine, run every scenario scaled down, report, stop."""
    from loadproof.engines import embedded

    profile = _with_serving(packaged_profile("embedded"), eager, None)
    timings: dict[str, float] = {}
    watch = ui.Stopwatch()
    with ui.status("preparing the embedded engine") as status:
        timings["install_s"] = embedded.ensure_engine(status)
        timings["model_prepare_s"] = embedded.ensure_model(status)
    watch.lap()
    with ui.status("starting the engine") as status:
        engine = embedded.start(profile, status=status)
    timings["engine_start_s"] = watch.lap()
    try:
        ui.err.print(f"engine ready at {engine.url} after {timings['engine_start_s']:.0f} s")
        startup = engine.startup_report()
        target = Target(url=engine.url, model=profile.model.served_name, endpoint=profile.serving.endpoint,
                        tokenizer_path=embedded.tokenizer_path_for(profile))
        options = ThroughputOptions(max_tokens=max_tokens, num_prompts=prompts)
        extra = {"profile": profile.model_dump(), "engine": {
            "kind": profile.engine, "launch": engine.command.argv[1:], "env": engine.command.env,
            "startup_report": startup.as_dict() if startup else None, "ready_after_s": engine.ready_after_s}}
        run_path = _run_throughput(target, options, out, extra)
        timings["measurement_s"] = watch.lap()
    finally:
        with ui.status("stopping the engine"):
            engine.stop()
    _show_report(run_path)
    ui.out.print("wall time: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.0f} s"
                                            for k, v in timings.items()))


@app.command()
def serve(
    profile_path: Annotated[Optional[Path], typer.Argument(metavar="PROFILE", help="profile TOML")] = None,
    embedded_engine: Annotated[bool, typer.Option("--embedded", help="the embedded default engine")] = False,
    dry_run: Annotated[bool, typer.Option(help="print the engine command and exit")] = False,
    eager: Annotated[bool, typer.Option(help="skip graph compilation: faster start, slower decode")] = False,
    port: Annotated[Optional[int], typer.Option(help="port on 127.0.0.1; default: a free one")] = None,
) -> None:
    """Launch the engine of a profile (or the embedded default) and keep it running until Ctrl-C."""
    from loadproof.engines import embedded, engines

    if embedded_engine == (profile_path is not None):
        raise UsageError("give either a PROFILE or --embedded")
    profile = packaged_profile("embedded") if embedded_engine else load_profile(profile_path)  # type: ignore[arg-type]
    profile = _with_serving(profile, eager, port)
    if profile.engine != "embedded":
        engine = engines.get(profile.engine)
        command = engine.launch_command(profile, sys.executable, profile.model.path, profile.serving.port or 8000)
        _print_command(command.argv, command.env)
        if not dry_run:
            raise UsageError("launching GPU engines arrives with the supervisor; use --dry-run to see the command")
        return
    if dry_run:
        p = embedded.paths()
        command = engines.get("embedded").launch_command(
            profile, str(p.python), embedded.model_path_for(profile), profile.serving.port or 8000)
        _print_command(command.argv, command.env)
        return
    with ui.status("preparing the embedded engine") as status:
        embedded.ensure_engine(status)
        embedded.ensure_model(status)
    with ui.status("starting the engine") as status:
        engine = embedded.start(profile, status=status)
    try:
        ui.out.print(f"serving {profile.model.served_name} at {engine.url} (Ctrl-C stops it; log: {engine.log_path})")
        while engine.alive():
            time.sleep(1.0)
        raise EngineStartError(f"the engine exited on its own (log: {engine.log_path})")
    finally:
        engine.stop()


def _with_serving(profile: Profile, eager: bool, port: int | None) -> Profile:
    update: dict[str, Any] = {}
    if eager:
        update["enforce_eager"] = True
    if port is not None:
        update["port"] = port
    if not update:
        return profile
    return profile.model_copy(update={"serving": profile.serving.model_copy(update=update)})


def _print_command(argv: list[str], env: dict[str, str]) -> None:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    ui.out.print((prefix + " " if prefix else "") + shlex.join(argv), markup=False, highlight=False, soft_wrap=True)


@run_app.command("throughput")
def run_throughput(
    url: Annotated[str, typer.Option(help="base URL of the OpenAI-compatible server")],
    model: Annotated[Optional[str], typer.Option(help="model name; default: the first at /v1/models")] = None,
    endpoint: Annotated[str, typer.Option(help="completions or chat")] = "chat",
    out: Annotated[Path, typer.Option(help="where run directories go")] = Path("runs"),
    families: Annotated[str, typer.Option(help="task families, comma-separated")] = "english,chinese,code",
    concurrency: Annotated[str, typer.Option(help="concurrency levels, comma-separated")] = "1,4,8",
    max_tokens: Annotated[int, typer.Option(help="output tokens asked per request")] = 1024,
    repeats: Annotated[int, typer.Option(help="repeats of every level")] = 1,
    num_prompts: Annotated[Optional[int], typer.Option(help="prompts per family at concurrency 1")] = None,
    seed: Annotated[int, typer.Option(help="sampling seed sent with every request")] = 731,
    ignore_eos: Annotated[bool, typer.Option(help="generate exactly max_tokens")] = False,
    deadline_s: Annotated[Optional[float], typer.Option(help="per-request deadline in seconds")] = None,
    disable_thinking: Annotated[bool, typer.Option(help="send enable_thinking=false (chat)")] = False,
    tokenizer: Annotated[Optional[Path], typer.Option(help="tokenizer.json (or its folder) to re-count output")] = None,
    api_key_env: Annotated[Optional[str], typer.Option(help="name of the environment variable holding the API key")] = None,
    profile: Annotated[Optional[Path], typer.Option(help="profile TOML: endpoint, model name, thinking")] = None,
) -> None:
    """Single-request decode rate and batch aggregate throughput per task family."""
    prof = load_profile(profile) if profile else None
    if prof is not None:
        endpoint = prof.serving.endpoint
        model = model or prof.model.served_name
    if endpoint not in ("completions", "chat"):
        raise UsageError(f"--endpoint must be completions or chat (got {endpoint!r})")
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise UsageError(f"environment variable {api_key_env} is not set")
    if tokenizer is not None and not tokenizer.exists():
        raise UsageError(f"no tokenizer at {tokenizer}")
    options = _options(
        ThroughputOptions, "throughput options",
        families=[f.strip() for f in families.split(",") if f.strip()],
        concurrency=_int_list(concurrency, "--concurrency"),
        max_tokens=max_tokens, repeats=repeats, num_prompts=num_prompts, seed=seed,
        ignore_eos=ignore_eos, deadline_s=deadline_s,
    )
    model = resolve_model(url, model, api_key)
    target = Target(url=url, model=model, endpoint=endpoint,  # type: ignore[arg-type]
                    api_key=api_key, extra_body=_extra_body(prof, endpoint, disable_thinking),
                    tokenizer_path=tokenizer)
    run_path = _run_throughput(target, options, out, {"profile": prof.model_dump() if prof else None})
    _show_report(run_path)


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR")]) -> None:
    """Recompute the claims of a run directory and write claims.json and report.md."""
    _show_report(run_dir)
