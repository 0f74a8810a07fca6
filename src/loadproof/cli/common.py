"""What the commands share: option types, the target, running a scenario into a run directory, showing its report."""

from __future__ import annotations

import asyncio
import os
import shlex
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from pydantic import ValidationError

from loadproof.cli import ui
from loadproof.config.base import one_line
from loadproof.config.profile import Profile, load_profile
from loadproof.errors import UsageError
from loadproof.report.build import build_report, criteria_rows, throughput_table
from loadproof.scenarios.base import Target, common_manifest, resolve_model
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
IdleTimeoutOption = Annotated[float, typer.Option(help="wait up to this long, before the run, for the engine to report "
                                                  "0 running and 0 waiting; else fail with 'engine busy'")]

def int_list(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what} takes whole numbers separated by commas (got {text!r})") from None


def validated(model: type, source: str, **values: Any) -> Any:
    try:
        return model(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        raise one_line(exc, source) from None


def extra_body(profile: Profile | None, endpoint: str, disable_thinking: bool) -> dict[str, Any]:
    thinking_off = disable_thinking or (profile is not None and profile.serving.thinking == "disable")
    if thinking_off and endpoint == "chat":
        return {"chat_template_kwargs": {"enable_thinking": False}}
    return {}


def run_scenario(scenario: Any, out: Path, manifest_extra: dict[str, Any] | None = None,
                  label: str = "requests") -> Path:
    """Create the run directory, write the manifest, run, and close the manifest even when interrupted."""
    from loadproof.telemetry.sampler import TelemetrySampler

    writer = RunWriter.create(out, scenario.name)
    manifest = common_manifest(writer.run_id, scenario.name, scenario.options, scenario.target, manifest_extra)
    sampler = TelemetrySampler(writer.path / "telemetry.jsonl", say=say_once)
    manifest["telemetry"] = sampler.describe()
    writer.write_manifest(manifest)
    ui.err.print(f"run directory: {writer.path}")
    if hasattr(scenario, "status"):
        scenario.status = lambda text: ui.err.print(text, markup=False, highlight=False)
    try:
        with sampler, ui.request_progress(f"{scenario.name}: {label}") as progress:
            asyncio.run(scenario.run(writer, manifest, progress))
    finally:
        manifest["end_wall_time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        manifest["num_records"] = writer.num_records
        writer.write_manifest(manifest)
        writer.close()
    return writer.path


said: set[str] = set()


def say_once(text: str) -> None:
    if text not in said:
        said.add(text)
        ui.err.print(text, markup=False, highlight=False)


def show_report(run_path: Path) -> str | None:
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


def with_serving(profile: Profile, eager: bool, port: int | None) -> Profile:
    update: dict[str, Any] = {}
    if eager:
        update["enforce_eager"] = True
    if port is not None:
        update["port"] = port
    if not update:
        return profile
    return profile.model_copy(update={"serving": profile.serving.model_copy(update=update)})


def print_command(argv: list[str], env: dict[str, str]) -> None:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    ui.out.print((prefix + " " if prefix else "") + shlex.join(argv), markup=False, highlight=False, soft_wrap=True)


def resolve_target(url: str, model: str | None, endpoint: str, profile: Path | None, api_key_env: str | None,
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
                    api_key=api_key, extra_body=extra_body(prof, endpoint, disable_thinking),
                    tokenizer_path=tokenizer)
    return target, prof


def startup_kv_tokens(startup_log: Path | None, engine: str = "vllm") -> tuple[int | None, dict[str, Any] | None]:
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
