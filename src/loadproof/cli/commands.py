"""The commands of the DESIGN.md contract that exist so far: demo, serve, run throughput, report."""

from __future__ import annotations

import asyncio
import json
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
from loadproof.errors import AcceptanceFailed, EnvironmentFailure, UsageError
from loadproof.report.build import build_report, criteria_rows, throughput_table
from loadproof.scenarios.base import Target, common_manifest, resolve_model
from loadproof.scenarios.capacity import CapacityOptions, CapacityScenario
from loadproof.scenarios.interference import InterferenceOptions, InterferenceScenario
from loadproof.scenarios.prefill import PrefillOptions, PrefillScenario
from loadproof.scenarios.soak import SoakOptions, SoakScenario
from loadproof.scenarios.throughput import ThroughputOptions, ThroughputScenario
from loadproof.store.run_dir import RunWriter



# options every `run` command shares, spelled once
UrlOption = Annotated[str, typer.Option(help="base URL of the OpenAI-compatible server")]
ModelOption = Annotated[Optional[str], typer.Option(help="model name; default: the first at /v1/models")]
EndpointOption = Annotated[str, typer.Option(help="completions or chat")]
ProfileOption = Annotated[Optional[Path], typer.Option(help="profile TOML: endpoint, model name, thinking")]
ApiKeyEnvOption = Annotated[Optional[str], typer.Option(help="name of the environment variable holding the API key")]
OutOption = Annotated[Path, typer.Option(help="where run directories go")]
TokenizerOption = Annotated[Path, typer.Option(help="the model's tokenizer.json (or its folder): exact-length prompts")]
NoCacheSaltOption = Annotated[bool, typer.Option(help="do not send vLLM's cache_salt")]

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


def _run_scenario(scenario: Any, out: Path, manifest_extra: dict[str, Any] | None = None,
                  label: str = "requests") -> Path:
    """Create the run directory, write the manifest, run, and close the manifest even when interrupted."""
    from loadproof.telemetry.sampler import TelemetrySampler

    writer = RunWriter.create(out, scenario.name)
    manifest = common_manifest(writer.run_id, scenario.name, scenario.options, scenario.target, manifest_extra)
    sampler = TelemetrySampler(writer.path / "telemetry.jsonl", say=_say_once)
    manifest["telemetry"] = sampler.describe()
    writer.write_manifest(manifest)
    ui.err.print(f"run directory: {writer.path}")
    try:
        with sampler, ui.request_progress(f"{scenario.name}: {label}") as progress:
            asyncio.run(scenario.run(writer, manifest, progress))
    finally:
        manifest["end_wall_time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        manifest["num_records"] = writer.num_records
        writer.write_manifest(manifest)
        writer.close()
    return writer.path


_said: set[str] = set()


def _say_once(text: str) -> None:
    if text not in _said:
        _said.add(text)
        ui.err.print(text, markup=False, highlight=False)


def _show_report(run_path: Path) -> str | None:
    """Print the run's tables; return its acceptance verdict, if the scenario has one."""
    report = build_report(run_path)
    header, rows = throughput_table(report.claims)
    if rows:
        ui.table("Throughput (tokens/s): c1 = one user's decode rate; c4, c8 = aggregate of all streams",
                 header, rows)
    criteria = criteria_rows(report.claims)
    verdict = next((c.printed for c in report.claims if c.name.endswith(".verdict")), None)
    if criteria:
        ui.table(f"{report.run.manifest.get('scenario')} acceptance: {verdict}", ["criterion", "status", "evidence"],
                 [list(row) for row in criteria])
    figures = [c for c in report.claims if not c.name.startswith("throughput.") and ".criteria." not in c.name
               and not c.name.endswith(".verdict")]
    if figures:
        ui.table("Figures", ["claim", "value", "unit"], [[c.name, c.printed, c.unit] for c in figures])
    failed = sum(not r.ok and r.error_kind != "cancelled" for r in report.run.records)
    if failed:
        ui.err.print(f"[yellow]{failed} request(s) failed; see error_kind in requests.jsonl[/]")
    ui.out.print(f"claims: {run_path / 'claims.json'}\nreport: {run_path / 'report.md'}")
    return verdict


@app.command()
def demo(
    out: OutOption = Path("runs"),
    max_tokens: Annotated[int, typer.Option(help="output tokens per request (scaled down)")] = 128,
    prompts: Annotated[int, typer.Option(help="prompts per family at concurrency 1")] = 4,
    eager: Annotated[bool, typer.Option(help="skip torch.compile: faster start, about 20% slower decode")] = False,
) -> None:
    """Install and start the embedded engine, run every scenario scaled down, report, stop.

    Scaled for a 2-core CPU: throughput (3 families x concurrency 1/4/8), capacity (4 sessions of 1,536
    tokens, 6 s window), prefill (3 cold repeats of 4,096 tokens), interference (3 sessions of 1,024
    tokens, a 6,144-token newcomer, 4 s windows), soak (2 clients for 20 s, every third request long).
    """
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
    verdicts: dict[str, str | None] = {}
    try:
        ui.err.print(f"engine ready at {engine.url} after {timings['engine_start_s']:.0f} s")
        startup = engine.startup_report()
        target = Target(url=engine.url, model=profile.model.served_name, endpoint=profile.serving.endpoint,
                        tokenizer_path=embedded.tokenizer_path_for(profile))
        extra = {"profile": profile.model_dump(), "engine": {
            "kind": profile.engine, "launch": engine.command.argv[1:], "env": engine.command.env,
            "startup_report": startup.as_dict() if startup else None, "ready_after_s": engine.ready_after_s}}
        kv_tokens = startup.kv_cache_tokens if startup else None
        plan = [
            ("throughput", ThroughputScenario(target, ThroughputOptions(max_tokens=max_tokens, num_prompts=prompts)),
             "requests"),
            ("capacity", CapacityScenario(target, CapacityOptions(sessions=4, input_tokens=1536, window_s=6.0),
                                          startup_kv_tokens=kv_tokens), "sessions with a first token"),
            ("prefill", PrefillScenario(target, PrefillOptions(input_tokens=4096, repeats=3, decode_tokens=32)),
             "cold repeats"),
            ("interference", InterferenceScenario(target, InterferenceOptions(
                sessions=3, session_tokens=1024, newcomer_tokens=6144, window_s=4.0)), "sessions with a first token"),
            ("soak", SoakScenario(target, SoakOptions(duration_s=20.0, clients=2, long_every=3, long_tokens=1024,
                                                      max_latency_drift=1.0), engine_metrics_url=engine.url),
             "requests"),
        ]
        for name, scenario, label in plan:
            ui.err.rule(name)
            run_path = _run_scenario(scenario, out, extra, label=label)
            verdicts[name] = _show_report(run_path)
        timings["measurement_s"] = watch.lap()
    finally:
        with ui.status("stopping the engine"):
            engine.stop()
    ui.table("Demo summary", ["scenario", "verdict"], [[k, v or "measured"] for k, v in verdicts.items()])
    ui.out.print("wall time: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.0f} s"
                                            for k, v in timings.items()))
    if any(v == "FAIL" for v in verdicts.values()):
        raise AcceptanceFailed("a demo acceptance failed: " + ", ".join(k for k, v in verdicts.items() if v == "FAIL"))


@app.command()
def serve(
    profile_path: Annotated[Optional[Path], typer.Argument(metavar="PROFILE", help="profile TOML")] = None,
    embedded_engine: Annotated[bool, typer.Option("--embedded", help="the embedded default engine")] = False,
    dry_run: Annotated[bool, typer.Option(help="print the engine command and exit")] = False,
    eager: Annotated[bool, typer.Option(help="skip graph compilation: faster start, slower decode")] = False,
    port: Annotated[Optional[int], typer.Option(help="engine port on 127.0.0.1; default: a free one")] = None,
    with_relay: Annotated[bool, typer.Option("--relay", help="also run the relay in front of the engine")] = False,
    relay_port: Annotated[int, typer.Option(help="the relay's port")] = 8080,
    max_restarts: Annotated[int, typer.Option(help="restarts allowed within the restart window, then FAILED")] = 3,
    probe_interval_s: Annotated[float, typer.Option(help="seconds between liveness probes (a real completion)")] = 10.0,
    probe_timeout_s: Annotated[float, typer.Option(help="a probe unanswered this long counts as a hang")] = 60.0,
    backoff_s: Annotated[float, typer.Option(help="first restart delay; doubles, capped at 120 s")] = 5.0,
    out: OutOption = Path("runs"),
) -> None:
    """Launch and supervise the engine of a profile (or the embedded default) until Ctrl-C."""
    from loadproof.engines import embedded, engines
    from loadproof.engines.process import free_port
    from loadproof.store.run_dir import new_run_id
    from loadproof.supervisor import FAILED, READY, Supervisor, SupervisorPolicy

    if embedded_engine == (profile_path is not None):
        raise UsageError("give either a PROFILE or --embedded")
    profile = packaged_profile("embedded") if embedded_engine else load_profile(profile_path)  # type: ignore[arg-type]
    profile = _with_serving(profile, eager, port)
    engine = engines.get(profile.engine)
    if dry_run:
        python = str(embedded.paths().python) if profile.engine == "embedded" else profile.serving.python
        model_path = embedded.model_path_for(profile)
        serve_port = profile.serving.port or 8000
        command = engine.launch_command(profile, python, model_path, serve_port)
        if profile.parallel.nodes > 1:
            for step in engine.cluster_commands(profile, python, model_path, serve_port):
                ui.out.print(f"# on {step.node}:", markup=False, highlight=False)
                _print_command(step.argv, step.env)
        else:
            _print_command(command.argv, command.env)
        for note in command.notes:
            ui.err.print(f"note: {note}", markup=False, highlight=False)
        return
    if profile.parallel.nodes > 1:
        raise UsageError("multi-node profiles are launched host by host: run --dry-run and start each step on its host")
    notes = engine.launch_command(profile, profile.serving.python, profile.model.path, 0).notes
    unsupported = [n for n in notes if n.startswith("unsupported")]
    if unsupported:
        raise UsageError(f"refusing to launch what {profile.engine} cannot run as written: {unsupported[0]}")
    if profile.engine == "embedded":
        with ui.status("preparing the embedded engine") as status:
            embedded.ensure_engine(status)
            embedded.ensure_model(status)
    engine_port = profile.serving.port or free_port(profile.serving.host)
    folder = out / new_run_id("serve")
    relay_state: dict[str, Any] = {}

    def on_event(row: dict[str, Any]) -> None:
        kind = row["kind"]
        detail = {k: v for k, v in row.items() if k not in ("wall_time_s", "kind", "state", "log")}
        ui.err.print(f"[{kind}] " + ", ".join(f"{k}={v}" for k, v in detail.items()), markup=False, highlight=False)
        relay = relay_state.get("relay")
        if relay is not None:
            relay.paused_reason = None if row["state"] == READY else f"engine {row['state']}"
        if kind == "ready":
            ui.out.print(f"serving {profile.model.served_name} at http://{profile.serving.host}:{engine_port} "
                         f"(Ctrl-C stops it; log: {row.get('log') or supervisor.engine.log_path})", markup=False,
                         highlight=False)

    supervisor = Supervisor(
        launch=lambda: embedded.launch(profile, engine_port),
        served_name=profile.model.served_name,
        gpus_needed=0 if profile.engine == "embedded" else profile.parallel.gpus,
        ready_timeout_s=profile.serving.ready_timeout_s,
        events_path=folder / "events.jsonl",
        policy=SupervisorPolicy(probe_interval_s=probe_interval_s, probe_timeout_s=probe_timeout_s,
                                max_restarts=max_restarts, backoff_initial_s=backoff_s),
        on_event=on_event,
    )
    ui.err.print(f"supervisor events: {folder / 'events.jsonl'}")
    if with_relay:
        state = _serve_with_relay(supervisor, relay_state, f"http://{profile.serving.host}:{engine_port}", relay_port)
    else:
        state = supervisor.run()
    if state == FAILED:
        raise EnvironmentFailure(f"FAILED: {supervisor.failure}")


def _serve_with_relay(supervisor: Any, relay_state: dict[str, Any], upstream: str, relay_port: int) -> str:
    """The supervisor in a thread, the relay in front (503 while the engine is not ready)."""
    import threading

    from loadproof.relay import Relay, RelayConfig
    from loadproof.relay.serve import UPSTREAM_KEY_ENV, configure_logging, load_keys, server

    configure_logging()
    relay = Relay(RelayConfig(upstream=upstream, api_keys=load_keys(None),
                              upstream_api_key=os.environ.get(UPSTREAM_KEY_ENV)))
    relay.paused_reason = "engine starting"
    relay_state["relay"] = relay
    http = server(relay, "127.0.0.1", relay_port)
    result: dict[str, str] = {}

    def supervise() -> None:
        result["state"] = supervisor.run()
        http.should_exit = True

    thread = threading.Thread(target=supervise, name="loadproof-supervisor", daemon=True)
    thread.start()
    ui.out.print(f"relay listening on http://127.0.0.1:{relay_port}", markup=False, highlight=False)
    try:
        http.run()
    finally:
        supervisor.stop()
        thread.join(timeout=60)
    return result.get("state", "stopped")


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


def _target(url: str, model: str | None, endpoint: str, profile: Path | None, api_key_env: str | None,
            tokenizer: Path | None, disable_thinking: bool = False) -> tuple[Target, Profile | None]:
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
    model = resolve_model(url, model, api_key)
    target = Target(url=url, model=model, endpoint=endpoint,  # type: ignore[arg-type]
                    api_key=api_key, extra_body=_extra_body(prof, endpoint, disable_thinking),
                    tokenizer_path=tokenizer)
    return target, prof


def _startup_kv_tokens(startup_log: Path | None, engine: str = "vllm") -> tuple[int | None, dict[str, Any] | None]:
    if startup_log is None:
        return None, None
    from loadproof.engines import engines

    try:
        text = startup_log.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise UsageError(f"no startup log at {startup_log}") from None
    report = engines.get(engine).parse_startup_report(text)
    if report is None:
        raise UsageError(f"{startup_log} holds no KV cache size line")
    return report.kv_cache_tokens, report.as_dict()


@run_app.command("throughput")
def run_throughput(
    url: UrlOption,
    model: ModelOption = None,
    endpoint: EndpointOption = "chat",
    out: OutOption = Path("runs"),
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
    api_key_env: ApiKeyEnvOption = None,
    profile: ProfileOption = None,
) -> None:
    """Single-request decode rate and batch aggregate throughput per task family."""
    options = _options(
        ThroughputOptions, "throughput options",
        families=[f.strip() for f in families.split(",") if f.strip()],
        concurrency=_int_list(concurrency, "--concurrency"),
        max_tokens=max_tokens, repeats=repeats, num_prompts=num_prompts, seed=seed,
        ignore_eos=ignore_eos, deadline_s=deadline_s,
    )
    target, prof = _target(url, model, endpoint, profile, api_key_env, tokenizer, disable_thinking)
    run_path = _run_scenario(ThroughputScenario(target, options), out, {"profile": prof.model_dump() if prof else None})
    _show_report(run_path)


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR")]) -> None:
    """Recompute the claims of a run directory and write claims.json and report.md."""
    _show_report(run_dir)


@run_app.command("capacity")
def run_capacity(
    url: UrlOption,
    tokenizer: TokenizerOption,
    sessions: Annotated[int, typer.Option("--sessions", "-n", help="N, sessions started together")] = 4,
    input_tokens: Annotated[int, typer.Option("--input-tokens", "-l", help="L, input tokens per session")] = 2048,
    window_s: Annotated[float, typer.Option(help="W, seconds of shared generation")] = 10.0,
    max_tokens: Annotated[Optional[int], typer.Option(help="output tokens per session (default: what fits)")] = None,
    stagger_s: Annotated[float, typer.Option(help="pause between session starts")] = 0.0,
    num_probes: Annotated[int, typer.Option(help="facts planted per session")] = 1,
    skip_probe_check: Annotated[bool, typer.Option(help="do not score retrieval (random weights); said in the verdict")] = False,
    negative_control: Annotated[bool, typer.Option(help="ask about facts never planted: retrieval must FAIL")] = False,
    max_gap_s: Annotated[float, typer.Option(help="longest silence allowed inside the window")] = 5.0,
    drain_timeout_s: Annotated[float, typer.Option(help="bound on the engine letting go after cancel")] = 30.0,
    no_cache_salt: NoCacheSaltOption = False,
    startup_log: Annotated[Optional[Path], typer.Option(help="engine startup log: KV tokens for the theoretical count")] = None,
    search: Annotated[Optional[str], typer.Option(help="find the largest passing 'sessions' or 'input-tokens'")] = None,
    search_max: Annotated[Optional[int], typer.Option(help="upper bound of the search")] = None,
    model: ModelOption = None,
    endpoint: EndpointOption = "chat",
    profile: ProfileOption = None,
    api_key_env: ApiKeyEnvOption = None,
    out: OutOption = Path("runs"),
) -> None:
    """N sessions of L tokens generating together for W seconds, verified on the engine's own metrics."""
    target, prof = _target(url, model, endpoint, profile, api_key_env, tokenizer)
    kv_tokens, startup = _startup_kv_tokens(startup_log)
    base = dict(sessions=sessions, input_tokens=input_tokens, window_s=window_s, max_tokens=max_tokens,
                stagger_s=stagger_s, num_probes=num_probes, check_probes=not skip_probe_check,
                plant_probes=not negative_control, max_gap_s=max_gap_s, drain_timeout_s=drain_timeout_s,
                use_cache_salt=not no_cache_salt)
    extra = {"profile": prof.model_dump() if prof else None, "engine": {"startup_report": startup}}
    if search is None:
        options = _options(CapacityOptions, "capacity options", **base)
        verdict = _capacity_once(target, options, out, extra, kv_tokens)
        if verdict != "PASS":
            raise AcceptanceFailed("capacity acceptance FAILED (criteria above)")
        return
    _capacity_search(target, base, search, search_max, out, extra, kv_tokens)


def _capacity_once(target: Target, options: Any, out: Path, extra: dict[str, Any], kv_tokens: int | None) -> str | None:
    scenario = CapacityScenario(target, options, startup_kv_tokens=kv_tokens)
    run_path = _run_scenario(scenario, out, extra, label="sessions with a first token")
    return _show_report(run_path)


def _capacity_search(target: Target, base: dict[str, Any], parameter: str, maximum: int | None, out: Path,
                     extra: dict[str, Any], kv_tokens: int | None) -> None:
    from loadproof.scenarios.search import Trial, search as run_search
    from loadproof.store.run_dir import new_run_id

    key = {"sessions": "sessions", "input-tokens": "input_tokens"}.get(parameter)
    if key is None:
        raise UsageError(f"--search takes 'sessions' or 'input-tokens' (got {parameter!r})")
    if maximum is None:
        maximum = 256 if key == "sessions" else 1_048_576
    folder = out / new_run_id("capacity-search")
    folder.mkdir(parents=True)
    log = folder / "search.jsonl"
    ui.err.print(f"search directory: {folder}")

    def trial(value: int) -> Trial:
        options = _options(CapacityOptions, "capacity options", **{**base, key: value})
        scenario = CapacityScenario(target, options, startup_kv_tokens=kv_tokens)
        ui.err.print(f"trial {key} = {value}")
        run_path = _run_scenario(scenario, folder, extra, label="sessions with a first token")
        claims = {c.name: c for c in build_report(run_path).claims}  # each trial is a full run: claims, report
        failed = [c for c in claims.values() if ".criteria." in c.name and c.printed == "FAIL"]
        verdict = claims["capacity.verdict"].printed
        reason = f"{failed[0].name.split('.')[-1]}: {failed[0].formula}" if failed else "every criterion passed"
        ui.err.print(f"  {verdict}: {reason}")
        return Trial(value, verdict, reason, run_path.name)

    def record(t: Trial) -> None:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(t.__dict__) + "\n")

    start = base[key] if key == "sessions" else base[key]
    resolution = 1 if key == "sessions" else max(64, start // 16)
    result = run_search(key, min(start, maximum), maximum, trial, resolution=resolution, on_trial=record)
    (folder / "search.json").write_text(json.dumps({
        "parameter": key, "fixed": {k: v for k, v in base.items() if k != key}, "maximum": maximum,
        "largest_pass": result.largest_pass, "smallest_fail": result.smallest_fail,
        "trials": [t.__dict__ for t in result.trials]}, indent=2) + "\n")
    ui.table(f"Capacity search over {key}", [key, "verdict", "reason", "run"],
             [[str(t.value), t.verdict, t.reason, t.run_dir] for t in result.trials])
    ui.out.print(result.summary)
    if result.largest_pass is None:
        raise AcceptanceFailed(result.summary)


@run_app.command("prefill")
def run_prefill(
    url: UrlOption,
    tokenizer: TokenizerOption,
    input_tokens: Annotated[int, typer.Option("--input-tokens", "-l", help="L, input tokens")] = 4096,
    repeats: Annotated[int, typer.Option("--repeats", "-r", help="R, cold repeats")] = 3,
    decode_tokens: Annotated[int, typer.Option(help="tokens generated after the first")] = 64,
    deadline_s: Annotated[Optional[float], typer.Option(help="per-repeat deadline in seconds")] = None,
    no_cache_salt: NoCacheSaltOption = False,
    model: ModelOption = None,
    endpoint: EndpointOption = "chat",
    profile: ProfileOption = None,
    api_key_env: ApiKeyEnvOption = None,
    out: OutOption = Path("runs"),
) -> None:
    """Cold time to first token of one long input, R freshly salted repeats."""
    target, prof = _target(url, model, endpoint, profile, api_key_env, tokenizer)
    options = _options(PrefillOptions, "prefill options", input_tokens=input_tokens, repeats=repeats,
                       decode_tokens=decode_tokens, deadline_s=deadline_s, use_cache_salt=not no_cache_salt)
    run_path = _run_scenario(PrefillScenario(target, options), out, {"profile": prof.model_dump() if prof else None},
                             label="cold repeats")
    if _show_report(run_path) != "PASS":
        raise AcceptanceFailed("prefill: a repeat was not cold, not the planned length, or failed (criteria above)")


@run_app.command("interference")
def run_interference(
    url: UrlOption,
    tokenizer: TokenizerOption,
    sessions: Annotated[int, typer.Option("--sessions", "-m", help="M, streams already generating")] = 3,
    session_tokens: Annotated[int, typer.Option(help="L_m, input tokens per session")] = 2048,
    newcomer_tokens: Annotated[int, typer.Option(help="L_big, input tokens of the newcomer")] = 8192,
    window_s: Annotated[float, typer.Option(help="W, the before and after windows")] = 5.0,
    skip_probe_check: Annotated[bool, typer.Option(help="do not score retrieval (random weights)")] = False,
    no_cache_salt: NoCacheSaltOption = False,
    model: ModelOption = None,
    endpoint: EndpointOption = "chat",
    profile: ProfileOption = None,
    api_key_env: ApiKeyEnvOption = None,
    out: OutOption = Path("runs"),
) -> None:
    """M streams' rate before, during and after a new long prefill; then warm follow-ups on each session."""
    target, prof = _target(url, model, endpoint, profile, api_key_env, tokenizer)
    options = _options(InterferenceOptions, "interference options", sessions=sessions, session_tokens=session_tokens,
                       newcomer_tokens=newcomer_tokens, window_s=window_s, check_probes=not skip_probe_check,
                       use_cache_salt=not no_cache_salt)
    run_path = _run_scenario(InterferenceScenario(target, options), out,
                             {"profile": prof.model_dump() if prof else None}, label="sessions with a first token")
    if _show_report(run_path) != "PASS":
        raise AcceptanceFailed("interference: see the criteria above")


@app.command()
def plan(
    profile_path: Annotated[Path, typer.Argument(metavar="PROFILE", help="profile TOML")],
    startup_log: Annotated[Optional[Path], typer.Option(help="the engine's startup log: plan from the memory it "
                                                          "found, and compare with the tokens it reported")] = None,
    input_tokens: Annotated[Optional[int], typer.Option("--input-tokens", "-l", help="L: how many sessions of L fit")] = None,
    model_config: Annotated[Optional[Path], typer.Option(help="the model's config.json (default: the profile's model folder)")] = None,
) -> None:
    """KV cache capacity of a profile, in theory, beside what the engine reported."""
    from loadproof.planner.profile_plan import model_config_path, plan_profile

    profile = load_profile(profile_path)
    log_text = None
    if startup_log is not None:
        try:
            log_text = startup_log.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise UsageError(f"no startup log at {startup_log}") from None
    result = plan_profile(profile, model_config_path(profile, model_config), log_text)
    dep, kv = result.deployment, result.plan
    ui.table(f"KV cache plan for {profile.name} (theory; a capacity run measures)",
             ["stage", "layers", "groups", "block bytes", "blocks", "blocks per request"],
             [[str(s.stage), str(s.layers), str(len(s.groups)), f"{s.block_bytes:,}", f"{s.num_blocks:,}",
               f"{s.blocks_per_request:,}"] for s in kv.stages])
    rows = [
        ["KV budget per GPU", result.budget_source],
        ["parallelism", f"TP {dep.tensor_parallel} x PP {dep.pipeline_parallel}"],
        ["KV bytes per token per GPU", f"{kv.bytes_per_token_per_gpu:,.0f}"],
        ["predicted KV cache tokens", f"{kv.kv_cache_tokens:,}"],
        [f"max concurrency at {dep.max_model_len:,} tokens", f"{kv.max_concurrency:.2f}x"],
        ["theoretical full windows", f"{kv.theoretical_full_windows:.2f} (theory, not capacity)"],
    ]
    if input_tokens:
        rows.append([f"sessions of {input_tokens:,} tokens that fit", f"{kv.sessions_fitting(input_tokens, dep.block_size):,} (theory)"])
    if result.reported is not None and result.reported.kv_cache_tokens:
        rows.append(["engine reported", f"{result.reported.kv_cache_tokens:,} tokens"])
        rows.append(["prediction error", f"{result.error_pct:+.2f}%"])
    ui.table("Plan", ["", "value"], rows)


@app.command()
def relay(
    upstream: Annotated[str, typer.Option(help="the engine's base URL (from config only, never from requests)")],
    port: Annotated[int, typer.Option(help="port to listen on")] = 8080,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    max_in_flight: Annotated[int, typer.Option(help="requests relayed at once; more get 429")] = 64,
    deadline_s: Annotated[float, typer.Option(help="total deadline per request")] = 3600.0,
    heartbeat_s: Annotated[float, typer.Option(help="SSE heartbeat interval while the engine is silent")] = 5.0,
    max_body_mib: Annotated[float, typer.Option(help="request body limit")] = 64.0,
    keys_file: Annotated[Optional[Path], typer.Option(help="API keys, one a line (also LOADPROOF_RELAY_KEYS)")] = None,
) -> None:
    """The streaming relay alone, in front of an OpenAI-compatible engine."""
    from loadproof.relay import RelayConfig
    from loadproof.relay.serve import UPSTREAM_KEY_ENV, load_keys, run

    if not upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream must be an http(s) URL (got {upstream!r})")
    if max_in_flight < 1 or deadline_s <= 0 or heartbeat_s <= 0 or max_body_mib <= 0:
        raise UsageError("--max-in-flight, --deadline-s, --heartbeat-s and --max-body-mib must be positive")
    config = RelayConfig(upstream=upstream, max_in_flight=max_in_flight, deadline_s=deadline_s,
                         heartbeat_s=heartbeat_s, max_body_bytes=int(max_body_mib * 1024 * 1024),
                         api_keys=load_keys(keys_file), upstream_api_key=os.environ.get(UPSTREAM_KEY_ENV))
    run(config, host, port)


@run_app.command("soak")
def run_soak(
    url: UrlOption,
    duration_s: Annotated[float, typer.Option(help="no request starts after this many seconds")] = 300.0,
    clients: Annotated[int, typer.Option("--clients", "-k", help="K concurrent client loops")] = 4,
    long_every: Annotated[int, typer.Option(help="every Nth request of a client is long (needs --tokenizer)")] = 5,
    long_tokens: Annotated[int, typer.Option(help="input tokens of a long request")] = 4096,
    deadline_s: Annotated[float, typer.Option(help="per-request deadline")] = 600.0,
    tokenizer: Annotated[Optional[Path], typer.Option(help="the model's tokenizer.json, for long requests")] = None,
    engine_metrics: Annotated[Optional[str], typer.Option(help="engine base URL for memory samples (default: --url)")] = None,
    relay_metrics: Annotated[Optional[str], typer.Option(help="relay base URL for memory samples")] = None,
    max_latency_drift: Annotated[float, typer.Option(help="allowed second-half vs first-half latency growth")] = 0.25,
    max_rss_growth_mib: Annotated[float, typer.Option(help="allowed resident memory growth")] = 512.0,
    model: ModelOption = None,
    endpoint: EndpointOption = "chat",
    profile: ProfileOption = None,
    api_key_env: ApiKeyEnvOption = None,
    out: OutOption = Path("runs"),
) -> None:
    """K clients for a duration, short and long requests mixed: errors, latency drift, memory over time."""
    from loadproof.scenarios.soak import SoakOptions, SoakScenario

    target, prof = _target(url, model, endpoint, profile, api_key_env, tokenizer)
    options = _options(SoakOptions, "soak options", duration_s=duration_s, clients=clients,
                       long_every=long_every if tokenizer else 0, long_tokens=long_tokens, deadline_s=deadline_s,
                       max_latency_drift=max_latency_drift, max_rss_growth_mib=max_rss_growth_mib)
    if long_every and tokenizer is None:
        ui.err.print("no --tokenizer: short requests only", markup=False)
    scenario = SoakScenario(target, options, engine_metrics_url=engine_metrics or url, relay_metrics_url=relay_metrics)
    run_path = _run_scenario(scenario, out, {"profile": prof.model_dump() if prof else None}, label="requests")
    if _show_report(run_path) != "PASS":
        raise AcceptanceFailed("soak: see the criteria above")
