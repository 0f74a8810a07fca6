"""The life of a run, one definition for every `loadproof run` command, the demo and each trial of a
capacity search:

1. check (offline): every option, the scenario's (its Options model), the command's and the target's,
   every URL among them, the tokenizer's path, the API key's variable, the profile; nothing is sent
   before all of them pass, and a mistake is one line (ConfigError/UsageError, exit 2);
2. prepare the scenario (`Scenario.prepare`), which resolves the target (`Setup.target`: the model
   the server lists, the first network access), and perform the command (`Scenario.perform`: by
   default one run; a capacity search runs many);
3. record a run into its directory (`record`): the manifest, the records, telemetry, the manifest's
   end time even when interrupted;
4. report (`run_once`): claims.json, report.md and report.html from the directory alone, shown on
   the console;
5. conclude: a FAIL verdict raises AcceptanceFailed (exit 1) with the scenario's `failure` line.

What is printed goes through a `Console` (the CLI's rich console), so this module needs no UI; while a
run records, the console shows its `LiveStatus` (`scenarios.live`), which the scenario keeps up to date.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import Field, field_validator

from loadproof.config.base import StrictModel
from loadproof.config.profile import Profile, load_profile
from loadproof.errors import AcceptanceFailed
from loadproof.scenarios.base import Scenario, Target, common_manifest, resolve_model
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.options import ExistingPath, HttpUrl, from_cli
from loadproof.telemetry.server_metrics import MetricsSource

if TYPE_CHECKING:
    from loadproof.metrics.claims import Claim
    from loadproof.report.build import Report


class Console(Protocol):
    """Where a run's lines, live view and tables go."""

    def say(self, text: str) -> None:
        """A status line (stderr)."""

    def live(self, status: LiveStatus) -> AbstractContextManager[object]:
        """Show `status` while the context is open, redrawn on the console's own timer (the scenario
        only updates it)."""

    def show(self, report: Report) -> None:
        """The tables of a run's report."""

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None: ...

    def result(self, text: str) -> None:
        """A result line (stdout)."""


class TargetOptions(StrictModel):
    """The options every `loadproof run` command shares: where the server is, how to talk to it, where
    the run directory goes. `--tokenizer` is offered, and required, as the scenario's `tokenizer` says."""

    url: HttpUrl = Field(description="base URL of the OpenAI-compatible server")
    tokenizer: ExistingPath | None = Field(default=None, description="the model's tokenizer.json (or its folder)")
    model: str | None = Field(default=None, description="model name; default: the first at /v1/models")
    endpoint: str = Field(default="chat", description="completions or chat")
    profile: Path | None = Field(default=None, description="profile TOML: endpoint, model name, thinking")
    api_key_env: str | None = Field(default=None, description="name of the environment variable holding the API key")
    disable_thinking: bool = Field(default=False, description="send enable_thinking=false (chat)")
    engine_metrics: str | None = Field(
        default=None, description="where the engine's metrics come from: its /metrics URL (a bare http://HOST:PORT "
        "gets /metrics; through `loadproof relay`: RELAY/engine/metrics), or prometheus+http://HOST:9090?LABEL=VALUE "
        "for a Prometheus server's query API (e.g. ?job=vllm); default: --url's /metrics")
    token_counts: Literal["engine", "local"] = Field(
        default="engine", description="where exact-length prompts count the tokens the engine adds (BOS, chat "
        "template): engine (its /tokenize) or local (the tokenizer folder's chat template rendered here, checked "
        "against the engine's usage.prompt_tokens before the run)")
    out: Path = Field(default=Path("runs"), description="where run directories go")

    @field_validator("engine_metrics")
    @classmethod
    def _engine_metrics(cls, value: str | None) -> str | None:
        if value is not None:
            MetricsSource.parse(value)  # its ValueError says what is wrong
        return value

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        if value not in ("completions", "chat"):
            raise ValueError("must be completions or chat")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _api_key_env(cls, value: str | None) -> str | None:
        if value and not os.environ.get(value):
            raise ValueError("that environment variable is not set")
        return value

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


@dataclass
class Checked:
    """A command's options, every one validated, and its profile loaded: nothing has been sent yet."""

    options: Any
    command: Any
    target: TargetOptions
    profile: Profile | None


@dataclass
class Setup:
    """A command whose options all passed: what its scenario's `prepare` and `perform` work from."""

    profile: Profile | None
    options: Any  # the scenario's Options
    command: Any  # its CommandOptions
    out: Path
    target_options: TargetOptions
    manifest_extra: dict[str, Any] = field(default_factory=dict)
    resolved: Target | None = None

    @property
    def target(self) -> Target:
        """The target, resolved on the server the first time it is asked for (an A/B run whose arms both
        name their own server never asks the common one)."""
        if self.resolved is None:
            self.resolved = resolve_target(self.target_options, self.profile)
        return self.resolved


@dataclass
class Outcome:
    run_path: Path
    report: Report
    verdict: str | None


def check(scenario: type[Scenario], values: dict[str, Any]) -> Checked:
    """Every option of a run command, from the command line's values (keyed by field name), validated
    before anything is sent: the scenario's options first, then the command's, then the target's."""
    options = from_cli(scenario.Options, values, f"{scenario.name} options")
    command = from_cli(scenario.CommandOptions, values, f"{scenario.name} options")
    target = from_cli(TargetOptions, values, "target")
    profile = load_profile(target.profile) if target.profile is not None else None
    return Checked(options, command, target, profile)


def resolve_target(options: TargetOptions, profile: Profile | None, **overrides: Any) -> Target:
    """The target the options (and the profile) name, with the model the server lists: the first
    request a command sends. `overrides` that are not None replace options (an A/B arm's URL or model)."""
    options = options.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    endpoint, model = options.endpoint, options.model
    if profile is not None:
        endpoint = profile.serving.endpoint
        model = model or profile.model.served_name
    api_key = options.api_key
    thinking_off = options.disable_thinking or (profile is not None and profile.serving.thinking == "disable")
    extra_body = {"chat_template_kwargs": {"enable_thinking": False}} if thinking_off and endpoint == "chat" else {}
    return Target(url=options.url, model=resolve_model(options.url, model, api_key), endpoint=endpoint,  # type: ignore[arg-type]
                  api_key=api_key, extra_body=extra_body, tokenizer_path=options.tokenizer,
                  engine=profile.engine if profile is not None else Target.engine,
                  metrics=MetricsSource.parse(options.engine_metrics) if options.engine_metrics else None,  # type: ignore[arg-type]
                  token_counts=options.token_counts)


def setup(checked: Checked) -> Setup:
    return Setup(profile=checked.profile, options=checked.options, command=checked.command, out=checked.target.out,
                 target_options=checked.target,
                 manifest_extra={"profile": checked.profile.model_dump() if checked.profile else None})


def run_command(scenario: type[Scenario], values: dict[str, Any], console: Console) -> None:
    """`loadproof run NAME ...`: check, resolve, perform (run, report, conclude)."""
    scenario.perform(setup(check(scenario, values)), console)


def record(scenario: Scenario, out: Path, console: Console, manifest_extra: dict[str, Any] | None = None) -> Path:
    """Create the run directory, write the manifest, run, and close the manifest even when interrupted."""
    from loadproof.store.run_dir import RunWriter
    from loadproof.telemetry.sampler import TelemetrySampler

    writer = RunWriter.create(out, scenario.name)
    manifest = common_manifest(writer.run_id, scenario.name, scenario.options, scenario.target, manifest_extra)
    sampler = TelemetrySampler(writer.path / "telemetry.jsonl", say=_once(console.say))
    manifest["telemetry"] = sampler.describe()
    writer.write_manifest(manifest)
    console.say(f"run directory: {writer.path}")
    scenario.status = console.say
    live = LiveStatus(scenario.name)
    try:
        with sampler, console.live(live):
            try:
                asyncio.run(scenario.run(writer, manifest, live))  # type: ignore[attr-defined]
            finally:
                live.finish()
    finally:
        manifest["end_wall_time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        manifest["num_records"] = writer.num_records
        writer.write_manifest(manifest)
        writer.close()
    return writer.path


def report(run_path: Path, console: Console) -> Outcome:
    """Claims, report.md and report.html of a run directory, recomputed from it alone and shown."""
    from loadproof.report.build import build_report

    built = build_report(run_path)
    console.show(built)
    return Outcome(run_path, built, verdict_of(built.claims))


def run_once(scenario: Scenario, out: Path, console: Console, manifest_extra: dict[str, Any] | None = None) -> Outcome:
    """One run of `scenario`: recorded, reported, shown."""
    return report(record(scenario, out, console, manifest_extra), console)


def conclude(outcome: Outcome, failure: str = Scenario.failure) -> None:
    """Exit code 1 (AcceptanceFailed) when the run's verdict is FAIL: `scenario: failure`."""
    if outcome.verdict == "FAIL":
        raise AcceptanceFailed(f"{outcome.report.run.manifest.get('scenario')}: {failure}")


def verdict_of(claims: list[Claim]) -> str | None:
    """The run's acceptance verdict (PASS or FAIL), if its scenario has one."""
    from loadproof.metrics.claims import verdict_of as verdict_claim

    claim = verdict_claim(claims)
    return claim.printed if claim is not None else None


def failed_criteria(claims: list[Claim]) -> list[Claim]:
    from loadproof.metrics.claims import criteria_of

    return [c for c in criteria_of(claims) if c.printed == "FAIL"]


_said: set[str] = set()  # lines said once a process (the telemetry note, in a demo of six runs)


def _once(say: Callable[[str], None]) -> Callable[[str], None]:
    def once(text: str) -> None:
        if text not in _said:
            _said.add(text)
            say(text)

    return once

