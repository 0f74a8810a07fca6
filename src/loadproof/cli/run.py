"""`loadproof run SCENARIO`: one command per scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from loadproof.cli import run_app, ui
from loadproof.errors import AcceptanceFailed, UsageError
from loadproof.report.build import build_report
from loadproof.scenarios.base import Target
from loadproof.scenarios.capacity import CapacityOptions, CapacityScenario
from loadproof.scenarios.interference import InterferenceOptions, InterferenceScenario
from loadproof.scenarios.prefill import PrefillOptions, PrefillScenario
from loadproof.scenarios.soak import SoakOptions, SoakScenario
from loadproof.scenarios.throughput import ThroughputOptions, ThroughputScenario
from loadproof.cli.common import (
    ApiKeyEnvOption,
    EndpointOption,
    IdleTimeoutOption,
    ModelOption,
    NoCacheSaltOption,
    OutOption,
    ProfileOption,
    TokenizerOption,
    UrlOption,
    int_list,
    resolve_target,
    run_scenario,
    show_report,
    startup_kv_tokens,
    validated,
)


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
    options = validated(
        ThroughputOptions, "throughput options",
        families=[f.strip() for f in families.split(",") if f.strip()],
        concurrency=int_list(concurrency, "--concurrency"),
        max_tokens=max_tokens, repeats=repeats, num_prompts=num_prompts, seed=seed,
        ignore_eos=ignore_eos, deadline_s=deadline_s,
    )
    target, prof = resolve_target(url, model, endpoint, profile, api_key_env, tokenizer, disable_thinking)
    run_path = run_scenario(ThroughputScenario(target, options), out, {"profile": prof.model_dump() if prof else None})
    show_report(run_path)


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
    admission_stall_s: Annotated[float, typer.Option(help="end the cold phase once sessions have waited this long "
                                                     "while every running one was decoding")] = 10.0,
    no_cache_salt: NoCacheSaltOption = False,
    idle_timeout_s: IdleTimeoutOption = 120.0,
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
    target, prof = resolve_target(url, model, endpoint, profile, api_key_env, tokenizer)
    kv_tokens, startup = startup_kv_tokens(startup_log)
    base = dict(sessions=sessions, input_tokens=input_tokens, window_s=window_s, max_tokens=max_tokens,
                stagger_s=stagger_s, num_probes=num_probes, check_probes=not skip_probe_check,
                plant_probes=not negative_control, max_gap_s=max_gap_s, drain_timeout_s=drain_timeout_s,
                admission_stall_s=admission_stall_s,
                use_cache_salt=not no_cache_salt, idle_timeout_s=idle_timeout_s)
    extra = {"profile": prof.model_dump() if prof else None, "engine": {"startup_report": startup}}
    if search is None:
        options = validated(CapacityOptions, "capacity options", **base)
        verdict = _capacity_once(target, options, out, extra, kv_tokens)
        if verdict != "PASS":
            raise AcceptanceFailed("capacity acceptance FAILED (criteria above)")
        return
    _capacity_search(target, base, search, search_max, out, extra, kv_tokens)


def _capacity_once(target: Target, options: Any, out: Path, extra: dict[str, Any], kv_tokens: int | None) -> str | None:
    scenario = CapacityScenario(target, options, startup_kv_tokens=kv_tokens)
    run_path = run_scenario(scenario, out, extra, label="sessions with a first token")
    return show_report(run_path)


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
        options = validated(CapacityOptions, "capacity options", **{**base, key: value})
        scenario = CapacityScenario(target, options, startup_kv_tokens=kv_tokens)
        ui.err.print(f"trial {key} = {value}")
        run_path = run_scenario(scenario, folder, extra, label="sessions with a first token")
        claims = {c.name: c for c in build_report(run_path).claims}  # each trial is a full run: claims, report
        failed = [c for c in claims.values() if ".criteria." in c.name and c.printed == "FAIL"]
        verdict = claims["capacity.verdict"].printed
        reason = f"{failed[0].name.split('.')[-1]}: {failed[0].formula}" if failed else "every criterion passed"
        ui.err.print(f"  {verdict}: {reason}")
        return Trial(value, verdict, reason, run_path.name)

    def record(t: Trial) -> None:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(t.__dict__) + "\n")

    start = base[key]
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
    idle_timeout_s: IdleTimeoutOption = 120.0,
    model: ModelOption = None,
    endpoint: EndpointOption = "chat",
    profile: ProfileOption = None,
    api_key_env: ApiKeyEnvOption = None,
    out: OutOption = Path("runs"),
) -> None:
    """Cold time to first token of one long input, R freshly salted repeats."""
    target, prof = resolve_target(url, model, endpoint, profile, api_key_env, tokenizer)
    options = validated(PrefillOptions, "prefill options", input_tokens=input_tokens, repeats=repeats,
                       decode_tokens=decode_tokens, deadline_s=deadline_s, use_cache_salt=not no_cache_salt,
                       idle_timeout_s=idle_timeout_s)
    run_path = run_scenario(PrefillScenario(target, options), out, {"profile": prof.model_dump() if prof else None},
                             label="cold repeats")
    if show_report(run_path) != "PASS":
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
    idle_timeout_s: IdleTimeoutOption = 120.0,
    model: ModelOption = None,
    endpoint: EndpointOption = "chat",
    profile: ProfileOption = None,
    api_key_env: ApiKeyEnvOption = None,
    out: OutOption = Path("runs"),
) -> None:
    """M streams' rate before, during and after a new long prefill; then warm follow-ups on each session."""
    target, prof = resolve_target(url, model, endpoint, profile, api_key_env, tokenizer)
    options = validated(InterferenceOptions, "interference options", sessions=sessions, session_tokens=session_tokens,
                       newcomer_tokens=newcomer_tokens, window_s=window_s, check_probes=not skip_probe_check,
                       use_cache_salt=not no_cache_salt, idle_timeout_s=idle_timeout_s)
    run_path = run_scenario(InterferenceScenario(target, options), out,
                             {"profile": prof.model_dump() if prof else None}, label="sessions with a first token")
    if show_report(run_path) != "PASS":
        raise AcceptanceFailed("interference: see the criteria above")


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

    target, prof = resolve_target(url, model, endpoint, profile, api_key_env, tokenizer)
    options = validated(SoakOptions, "soak options", duration_s=duration_s, clients=clients,
                       long_every=long_every if tokenizer else 0, long_tokens=long_tokens, deadline_s=deadline_s,
                       max_latency_drift=max_latency_drift, max_rss_growth_mib=max_rss_growth_mib)
    if long_every and tokenizer is None:
        ui.err.print("no --tokenizer: short requests only", markup=False)
    scenario = SoakScenario(target, options, engine_metrics_url=engine_metrics or url, relay_metrics_url=relay_metrics)
    run_path = run_scenario(scenario, out, {"profile": prof.model_dump() if prof else None}, label="requests")
    if show_report(run_path) != "PASS":
        raise AcceptanceFailed("soak: see the criteria above")


@run_app.command("quality")
def run_quality(
    url: UrlOption,
    gsm8k_items: Annotated[int, typer.Option(help="first N problems of the packaged 200-problem GSM8K subset")] = 200,
    suites: Annotated[str, typer.Option(help="suites, comma-separated")] = "gsm8k,authored,retrieval,image",
    concurrency: Annotated[int, typer.Option(help="requests in flight at once")] = 4,
    retrieval_lengths: Annotated[str, typer.Option(help="retrieval prompt lengths in tokens, comma-separated "
                                                        "(those over max_model_len are skipped)")] = "1024,4096,16384",
    modes: Annotated[str, typer.Option(help="authored-task modes: plain, low-thinking")] = "plain,low-thinking",
    thinking_model: Annotated[bool, typer.Option(help="the model has a thinking mode (default: from the profile)")] = False,
    deadline_s: Annotated[float, typer.Option(help="per-request deadline in seconds")] = 900.0,
    tokenizer: Annotated[Optional[Path], typer.Option(help="tokenizer.json (or its folder): needed for retrieval")] = None,
    model: ModelOption = None,
    endpoint: EndpointOption = "chat",
    profile: ProfileOption = None,
    api_key_env: ApiKeyEnvOption = None,
    out: OutOption = Path("runs"),
) -> None:
    """GSM8K subset, authored tasks, long-context retrieval and image checks, scored item by item."""
    from loadproof.scenarios.quality import QualityOptions, QualityScenario

    options = validated(QualityOptions, "quality options",
                        suites=[s.strip() for s in suites.split(",") if s.strip()], gsm8k_items=gsm8k_items,
                        authored_modes=[m.strip() for m in modes.split(",") if m.strip()], thinking_mode=thinking_model,
                        retrieval_lengths=int_list(retrieval_lengths, "--retrieval-lengths"),
                        concurrency=concurrency, deadline_s=deadline_s)
    target, prof = resolve_target(url, model, endpoint, profile, api_key_env, tokenizer)
    if prof is not None and prof.serving.thinking == "disable":  # the profile knows the model can think
        options = options.model_copy(update={"thinking_mode": True})
    run_path = run_scenario(QualityScenario(target, options), out, {"profile": prof.model_dump() if prof else None},
                            label="items")
    show_report(run_path)


def _settings(items: list[str] | None, option: str) -> dict[str, Any]:
    """`KEY=VALUE` pairs of an arm; values are numbers or true/false."""
    settings: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        try:
            value = json.loads(text) if sep else None
        except json.JSONDecodeError:
            value = None
        if not key.strip() or not isinstance(value, (int, float, bool)):
            raise UsageError(f"{option} takes KEY=VALUE with a number or true/false, e.g. temperature=0.7 (got {item!r})")
        settings[key.strip()] = value
    return settings


@run_app.command("ab")
def run_ab(
    url: UrlOption,
    a: Annotated[Optional[list[str]], typer.Option("--a", "--a-setting", help="arm a: sampling setting KEY=VALUE (repeatable)")] = None,
    b: Annotated[Optional[list[str]], typer.Option("--b", "--b-setting", help="arm b: sampling setting KEY=VALUE (repeatable)")] = None,
    a_url: Annotated[Optional[str], typer.Option(help="arm a's server (default: --url)")] = None,
    b_url: Annotated[Optional[str], typer.Option(help="arm b's server (default: --url)")] = None,
    a_profile: Annotated[Optional[Path], typer.Option(help="arm a's profile TOML (default: --profile)")] = None,
    b_profile: Annotated[Optional[Path], typer.Option(help="arm b's profile TOML (default: --profile)")] = None,
    a_model: Annotated[Optional[str], typer.Option(help="arm a's model (default: --model)")] = None,
    b_model: Annotated[Optional[str], typer.Option(help="arm b's model (default: --model)")] = None,
    family: Annotated[str, typer.Option(help="task family of the fixed batch")] = "english",
    num_prompts: Annotated[int, typer.Option(help="prompts in the batch")] = 4,
    concurrency: Annotated[int, typer.Option(help="requests of the batch in flight at once")] = 1,
    max_tokens: Annotated[int, typer.Option(help="output tokens asked per request")] = 128,
    repeats: Annotated[int, typer.Option("--repeats", "-r", help="rounds; each sends the batch once per arm")] = 5,
    seed: Annotated[int, typer.Option(help="sampling seed sent with every request, unless an arm sets one")] = 731,
    order_seed: Annotated[int, typer.Option(help="seed of the arms' random order")] = 20_240_607,
    bootstrap_seed: Annotated[int, typer.Option(help="seed of the confidence interval (stored in the manifest)")] = 20_240_607,
    deadline_s: Annotated[Optional[float], typer.Option(help="per-request deadline in seconds")] = None,
    model: ModelOption = None,
    endpoint: EndpointOption = "chat",
    profile: ProfileOption = None,
    api_key_env: ApiKeyEnvOption = None,
    out: OutOption = Path("runs"),
) -> None:
    """Two arms (settings or servers) in a randomized interleaved design: change and 95% interval per metric."""
    from loadproof.scenarios.ab import AbOptions, AbScenario

    options = validated(AbOptions, "ab options", family=family, num_prompts=num_prompts, concurrency=concurrency,
                        max_tokens=max_tokens, repeats=repeats, seed=seed, order_seed=order_seed,
                        bootstrap_seed=bootstrap_seed, a=_settings(a, "--a"), b=_settings(b, "--b"),
                        deadline_s=deadline_s)
    targets, profiles = {}, {}
    for arm, arm_url, arm_profile, arm_model in (("a", a_url, a_profile, a_model), ("b", b_url, b_profile, b_model)):
        targets[arm], prof = resolve_target(arm_url or url, arm_model or model, endpoint, arm_profile or profile,
                                            api_key_env, None)
        profiles[arm] = prof.model_dump() if prof else None
    if targets["a"] == targets["b"] and options.a == options.b:
        ui.err.print("note: the two arms are identical (an A/A run): the interval should include 0", markup=False)
    run_path = run_scenario(AbScenario(targets, options), out, {"profiles": profiles}, label="requests")
    show_report(run_path)
