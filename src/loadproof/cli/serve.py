"""`loadproof serve` (the engine under its supervisor, optionally behind the relay; a profile with [replicas]: its
replicas behind their router), `loadproof relay` and `loadproof router`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.cli.common import OutOption, print_command, with_serving
from loadproof.config.profile import resolve_profile
from loadproof.engines.replicas import with_router_policy
from loadproof.engines.router import RouterSettings
from loadproof.errors import UsageError
from loadproof.relay.serve import relay_config
from loadproof.relay.serve import run as run_relay
from loadproof.supervisor.fleet import run_router
from loadproof.supervisor.serving import ServeOptions, dry_run
from loadproof.supervisor.serving import serve as serve_profile


def _say(text: str) -> None:
    ui.err.print(text, markup=False, highlight=False)


def _result(text: str) -> None:
    ui.out.print(text, markup=False, highlight=False)


@app.command()
def serve(
    profile_path: Annotated[
        Path | None,
        typer.Argument(metavar="PROFILE", help="profile TOML, or a packaged profile's name (`loadproof profiles`)"),
    ] = None,
    embedded_engine: Annotated[bool, typer.Option("--embedded", help="the embedded default engine")] = False,
    dry_run_only: Annotated[bool, typer.Option("--dry-run", help="print the engine command and exit")] = False,
    eager: Annotated[bool, typer.Option(help="skip graph compilation: faster start, slower decode")] = False,
    port: Annotated[
        int | None, typer.Option(help="engine port on 127.0.0.1 (a fleet's: its router's); default: a free one")
    ] = None,
    with_relay: Annotated[bool, typer.Option("--relay", help="also run the relay in front of the engine")] = False,
    relay_port: Annotated[int, typer.Option(help="the relay's port")] = 8080,
    max_restarts: Annotated[int, typer.Option(help="restarts allowed within the restart window, then FAILED")] = 3,
    probe_interval_s: Annotated[float, typer.Option(help="seconds between liveness probes (a real completion)")] = 10.0,
    probe_timeout_s: Annotated[float, typer.Option(help="a probe unanswered this long counts as a hang")] = 60.0,
    backoff_s: Annotated[float, typer.Option(help="first restart delay; doubles, capped at 120 s")] = 5.0,
    router_policy: Annotated[
        str | None, typer.Option(help="a profile with [replicas]: the router's policy instead of the profile's")
    ] = None,
    out: OutOption = Path("runs"),
) -> None:
    """Launch and supervise the engine of a profile (or the embedded default) until Ctrl-C; a profile with
    [replicas], its replicas behind their router."""
    if embedded_engine == (profile_path is not None):
        raise UsageError("give either a PROFILE or --embedded")
    options = ServeOptions(
        max_restarts=max_restarts,
        probe_interval_s=probe_interval_s,
        probe_timeout_s=probe_timeout_s,
        backoff_s=backoff_s,
        relay_port=relay_port if with_relay else None,
        out=out,
    )
    profile = resolve_profile(profile_path if profile_path is not None else "embedded")
    profile = with_router_policy(with_serving(profile, eager, port), router_policy)
    if dry_run_only:
        steps, notes = dry_run(profile)
        for step in steps:
            if step.node is not None:
                ui.out.print(f"# on {step.node}:", markup=False, highlight=False)
            print_command(step.argv, step.env)
        for note in notes:
            ui.err.print(f"note: {note}", markup=False, highlight=False)
        return
    serve_profile(profile, options, _say, _result, ui.status)


@app.command()
def relay(
    upstream: Annotated[str, typer.Option(help="the engine's base URL (from config only, never from requests)")],
    port: Annotated[int, typer.Option(help="port to listen on")] = 8080,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    max_in_flight: Annotated[int, typer.Option(help="requests relayed at once; more get 429")] = 64,
    deadline_s: Annotated[float, typer.Option(help="total deadline per request")] = 3600.0,
    heartbeat_s: Annotated[float, typer.Option(help="SSE heartbeat interval while the engine is silent")] = 5.0,
    max_body_mib: Annotated[float, typer.Option(help="request body limit")] = 64.0,
    body_timeout_s: Annotated[
        float,
        typer.Option(help="the request head and body must arrive within this (never past the deadline); 408 after"),
    ] = 60.0,
    keys_file: Annotated[Path | None, typer.Option(help="API keys, one a line (also LOADPROOF_RELAY_KEYS)")] = None,
    prefill_upstream: Annotated[
        str | None,
        typer.Option(
            help="a disaggregated pair: the prefill instance's base URL (--upstream is then the decode instance)"
        ),
    ] = None,
    kv_connector: Annotated[
        str, typer.Option(help="the pair's KV connector: ExampleConnector or NixlConnector")
    ] = "ExampleConnector",
    kv_storage: Annotated[
        Path | None,
        typer.Option(help="ExampleConnector's shared folder: the relay reports the bytes written there per prompt"),
    ] = None,
    kv_block_size: Annotated[
        int | None,
        typer.Option(help="the engines' KV block size, which names --kv-storage's folders (default: tried)"),
    ] = None,
) -> None:
    """The streaming relay alone, in front of an OpenAI-compatible engine (or a prefill/decode pair)."""
    run_relay(
        relay_config(
            upstream,
            max_in_flight=max_in_flight,
            deadline_s=deadline_s,
            heartbeat_s=heartbeat_s,
            max_body_mib=max_body_mib,
            body_timeout_s=body_timeout_s,
            keys_file=keys_file,
            prefill_upstream=prefill_upstream,
            kv_connector=kv_connector,
            kv_storage=kv_storage,
            kv_block_size=kv_block_size,
        ),
        host,
        port,
    )


@app.command()
def router(
    worker_urls: Annotated[str, typer.Option(help="the replicas' base URLs, comma-separated (already running)")],
    policy: Annotated[str, typer.Option(help="the router's policy (round_robin, cache_aware, consistent_hash, ...)")],
    port: Annotated[int, typer.Option(help="port to listen on (127.0.0.1)")],
    prometheus_port: Annotated[
        int | None, typer.Option(help="the router's own metrics (requests per replica); default: a free port")
    ] = None,
    router_name: Annotated[str, typer.Option("--router", help="vllm-router or sglang-router")] = "vllm-router",
    cache_threshold: Annotated[float | None, typer.Option(help="cache_aware's prefix-match threshold")] = None,
    balance_abs_threshold: Annotated[int | None, typer.Option(help="cache_aware's absolute load gap")] = None,
    balance_rel_threshold: Annotated[float | None, typer.Option(help="cache_aware's relative load gap")] = None,
    max_restarts: Annotated[int, typer.Option(help="restarts allowed within the restart window, then FAILED")] = 3,
    out: OutOption = Path("runs"),
) -> None:
    """A router alone (vllm-router by default) in front of replicas already running, supervised, until Ctrl-C."""
    settings = RouterSettings(
        router=router_name,
        policy=policy,
        cache_threshold=cache_threshold,
        balance_abs_threshold=balance_abs_threshold,
        balance_rel_threshold=balance_rel_threshold,
    )
    urls = [url.strip() for url in worker_urls.split(",") if url.strip()]
    run_router(settings, urls, port, prometheus_port, ServeOptions(max_restarts=max_restarts, out=out), _say, _result)
