"""`loadproof run NAME` is generated from the scenario's option models: the same flags, defaults and help
as the hand-written commands had, every option checked before anything is sent, and a new scenario
gets its command by declaring its Options."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner

from loadproof.cli import app
from loadproof.cli.run import build_command, command_options
from loadproof.config.base import StrictModel
from loadproof.errors import ConfigError
from loadproof.scenarios import lifecycle, scenarios
from loadproof.scenarios.base import Scenario, TokenizerUse
from loadproof.scenarios.options import cli, cli_options, from_cli

# The flags of every run command before they were generated (hand-written typer signatures). One was
# dropped on purpose: the generated opposite of `--no-cache-salt` is `--cache-salt`, not `--no-no-cache-salt`.
BEFORE = {
    "throughput": [
        "--api-key-env",
        "--concurrency",
        "--deadline-s",
        "--disable-thinking",
        "--endpoint",
        "--families",
        "--ignore-eos",
        "--max-tokens",
        "--model",
        "--no-disable-thinking",
        "--no-ignore-eos",
        "--num-prompts",
        "--out",
        "--profile",
        "--repeats",
        "--seed",
        "--tokenizer",
        "--url",
    ],
    "capacity": [
        "--admission-stall-s",
        "--api-key-env",
        "--drain-timeout-s",
        "--endpoint",
        "--idle-timeout-s",
        "--input-tokens",
        "--max-gap-s",
        "--max-tokens",
        "--model",
        "--negative-control",
        "--no-cache-salt",
        "--no-negative-control",
        "--no-skip-probe-check",
        "--num-probes",
        "--out",
        "--profile",
        "--search",
        "--search-max",
        "--sessions",
        "--skip-probe-check",
        "--stagger-s",
        "--startup-log",
        "--tokenizer",
        "--url",
        "--window-s",
        "-l",
        "-n",
    ],
    "prefill": [
        "--api-key-env",
        "--deadline-s",
        "--decode-tokens",
        "--endpoint",
        "--idle-timeout-s",
        "--input-tokens",
        "--model",
        "--no-cache-salt",
        "--out",
        "--profile",
        "--repeats",
        "--tokenizer",
        "--url",
        "-l",
        "-r",
    ],
    "interference": [
        "--api-key-env",
        "--endpoint",
        "--idle-timeout-s",
        "--model",
        "--newcomer-tokens",
        "--no-cache-salt",
        "--no-skip-probe-check",
        "--out",
        "--profile",
        "--session-tokens",
        "--sessions",
        "--skip-probe-check",
        "--tokenizer",
        "--url",
        "--window-s",
        "-m",
    ],
    "soak": [
        "--api-key-env",
        "--clients",
        "--deadline-s",
        "--duration-s",
        "--endpoint",
        "--engine-metrics",
        "--long-every",
        "--long-tokens",
        "--max-latency-drift",
        "--max-rss-growth-mib",
        "--model",
        "--out",
        "--profile",
        "--relay-metrics",
        "--tokenizer",
        "--url",
        "-k",
    ],
    "quality": [
        "--api-key-env",
        "--concurrency",
        "--deadline-s",
        "--endpoint",
        "--gsm8k-items",
        "--model",
        "--modes",
        "--no-thinking-model",
        "--out",
        "--profile",
        "--retrieval-lengths",
        "--suites",
        "--thinking-model",
        "--tokenizer",
        "--url",
    ],
    "ab": [
        "--a",
        "--a-model",
        "--a-profile",
        "--a-setting",
        "--a-url",
        "--api-key-env",
        "--b",
        "--b-model",
        "--b-profile",
        "--b-setting",
        "--b-url",
        "--bootstrap-seed",
        "--concurrency",
        "--deadline-s",
        "--endpoint",
        "--family",
        "--max-tokens",
        "--model",
        "--num-prompts",
        "--order-seed",
        "--out",
        "--profile",
        "--repeats",
        "--seed",
        "--url",
        "-r",
    ],
}
# (flag, default as the hand-written command had it) for the options whose default matters most
DEFAULTS = {
    "capacity": {
        "--sessions": 4,
        "--input-tokens": 2048,
        "--window-s": 10.0,
        "--no-cache-salt": False,
        "--skip-probe-check": False,
        "--idle-timeout-s": 120.0,
        "--endpoint": "chat",
        "--out": Path("runs"),
    },
    "throughput": {"--families": "english,chinese,code", "--concurrency": "1,4,8", "--max-tokens": 1024, "--seed": 731},
    "quality": {"--modes": "plain,low-thinking", "--retrieval-lengths": "1024,4096,16384", "--deadline-s": 900.0},
    "soak": {"--clients": 4, "--duration-s": 300.0, "--long-every": 5},
    "ab": {"--repeats": 5, "--order-seed": 20_240_607},
}
# --tokenizer is optional everywhere: exact-length prompts are sized by the engine's /tokenize without it
REQUIRED = {
    "capacity": {"--url"},
    "prefill": {"--url"},
    "interference": {"--url"},
    "throughput": {"--url"},
    "soak": {"--url"},
    "quality": {"--url"},
    "ab": {"--url"},
}


def run_commands() -> Mapping[str, Any]:
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)  # an app of sub-apps is a group; so is its `run`
    run = root.commands["run"]
    assert isinstance(run, typer.core.TyperGroup)
    return run.commands


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=60)


def test_every_scenario_has_a_command_in_registration_order():
    assert list(run_commands()) == scenarios.in_order()


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_generated_commands_keep_every_flag(name):
    params = run_commands()[name].params
    flags = {f for p in params for f in [*p.opts, *getattr(p, "secondary_opts", [])]}
    assert set(BEFORE[name]) <= flags
    assert {p.opts[0] for p in params if p.required} == REQUIRED[name]
    by_flag = {p.opts[0]: p for p in params}
    for flag, default in DEFAULTS.get(name, {}).items():
        assert by_flag[flag].default == default, flag


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_every_option_has_help_and_one_name(name):
    options = command_options(scenarios.get(name))
    assert all(o.help for o in options), [o.flag for o in options if not o.help]
    flags = [f for o in options for f in o.flags]
    assert len(flags) == len(set(flags))


def test_help_shows_defaults_and_short_names():
    result = CliRunner().invoke(app, ["run", "capacity", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for text in (
        "-n",
        "-l",
        "N, sessions started together",
        "[default: 4]",
        "--skip-probe-check",
        "do not score retrieval",
        "--search-max",
        "[required]",
        "exact-length prompts",
    ):
        assert text in result.output, text


def test_a_bad_url_is_one_line_before_anything_is_sent():
    result = loadproof("run", "capacity", "--url", "notaurl", "--tokenizer", ".")
    assert result.returncode == 2
    assert result.stderr == "error: --url notaurl: not an http(s) URL\n"


def test_an_option_error_comes_before_a_network_error():
    # port 9 (discard) refuses connections: were the server asked first, the error would be "cannot reach"
    result = loadproof("run", "capacity", "-n", "0", "--url", "http://127.0.0.1:9", "--tokenizer", ".")
    assert result.returncode == 2
    assert result.stderr == "error: --sessions 0: must be >= 1\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "soak", "--url", "http://127.0.0.1:9", "--relay-metrics", "relay:9"],
            "--relay-metrics relay:9: not an http(s) URL",
        ),
        (["run", "ab", "--url", "http://127.0.0.1:9", "--b-url", "file:///x"], "--b-url file:///x: not an http(s) URL"),
        (
            ["run", "prefill", "--url", "http://127.0.0.1:9", "--tokenizer", "/nonexistent"],
            "--tokenizer /nonexistent: no such",
        ),
        (
            ["run", "capacity", "--url", "http://127.0.0.1:9", "--tokenizer", ".", "--search", "n"],
            "--search n: Input should be 'sessions' or 'input-tokens'",
        ),
        (
            ["run", "capacity", "--url", "http://127.0.0.1:9", "--tokenizer", ".", "--search-max", "0"],
            "--search-max 0: must be >= 1",
        ),
        (["run", "ab", "--url", "http://127.0.0.1:9", "--a", "temperature"], "--a takes KEY=VALUE"),
        (["run", "quality", "--url", "http://127.0.0.1:9", "--suites", "gsm8k,poetry"], "suites must be among"),
        (
            ["run", "throughput", "--url", "http://127.0.0.1:9", "--api-key-env", "LOADPROOF_TEST_UNSET_VARIABLE"],
            "--api-key-env LOADPROOF_TEST_UNSET_VARIABLE: that environment variable is not set",
        ),
    ],
)
def test_every_option_is_checked_offline(args, message):
    result = loadproof(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "cannot reach" not in result.stderr
    assert len(result.stderr.splitlines()) == 1


class ToyOptions(StrictModel):
    rate: float = Field(default=2.0, gt=0, description="requests per second", json_schema_extra=cli(aliases=["-q"]))
    levels: list[int] = Field(default_factory=lambda: [1, 2], description="load levels")
    warm: bool = Field(
        default=True, description="warm up first", json_schema_extra=cli("--cold", invert=True, help="skip the warm-up")
    )
    knobs: dict[str, float] = Field(default_factory=dict, description="a sampling setting")
    secret: int = Field(default=7, json_schema_extra=cli(hidden=True))


class ToyScenario(Scenario):
    name = "toy"
    Options = ToyOptions
    summary = "A scenario written for this test."
    tokenizer = TokenizerUse(required=False, purpose="for nothing")


def test_a_new_scenario_gets_its_command_from_its_options(monkeypatch):
    seen: dict[str, Any] = {}
    monkeypatch.setattr(
        "loadproof.cli.run.run_command",
        lambda scenario, values, console: seen.update(lifecycle.check(scenario, values).__dict__),
    )
    toy = typer.Typer()
    toy.command("toy")(build_command(ToyScenario))
    toy.command("other")(lambda: None)  # two commands, so typer keeps the name
    result = CliRunner().invoke(
        toy, ["toy", "--url", "http://h:1", "-q", "5", "--levels", "1,4,8", "--cold", "--knobs", "top_p=0.5"]
    )
    assert result.exit_code == 0, result.output
    assert seen["options"] == ToyOptions(rate=5.0, levels=[1, 4, 8], warm=False, knobs={"top_p": 0.5})
    assert seen["target"].url == "http://h:1"
    assert [o.flag for o in cli_options(ToyOptions)] == ["--rate", "--levels", "--cold", "--knobs"]
    help_text = CliRunner().invoke(toy, ["toy", "--help"], env={"COLUMNS": "200"}).output
    for text in (
        "requests per second",
        "load levels (comma-separated)",
        "skip the warm-up",
        "[default: 2.0]",
        "KEY=VALUE, repeatable",
        "for nothing",
        "--url",
    ):
        assert text in help_text, text
    assert "--secret" not in help_text


def test_option_errors_name_the_flag_and_the_value():
    with pytest.raises(ConfigError, match=r"^--rate 0: must be > 0$"):
        from_cli(ToyOptions, {"rate": 0.0}, "toy options")
    with pytest.raises(ConfigError, match="--levels takes whole numbers separated by commas"):
        from_cli(ToyOptions, {"levels": "1,two"}, "toy options")
    assert from_cli(ToyOptions, {}, "toy options") == ToyOptions()  # None everywhere: the defaults
