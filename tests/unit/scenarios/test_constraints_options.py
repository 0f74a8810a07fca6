"""`--tools`, `--tool-choice`, `--response-format` on the run commands: every mistake one line naming the
file (the tool, the field), exit 2, before anything is sent; the body's fields and the stored options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.errors import ConfigError, UsageError
from loadproof.scenarios.constraints import request_extra
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.options import from_cli
from loadproof.scenarios.target import Target
from loadproof.scenarios.throughput import ThroughputOptions

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
TOOLS = str(EXAMPLES / "tools-weather.json")
SCHEMA = str(EXAMPLES / "answer-schema.json")
LOAD = {"rate": "2", "num_requests": 4, "ignore_eos": False}


def test_options_read_back_as_given_and_the_body_asks_for_them():
    opts = from_cli(
        LoadOptions,
        {**LOAD, "tools": TOOLS, "tool_choice": "get_time", "response_format": f"json_schema:{SCHEMA}"},
        "load options",
    )
    dumped = opts.model_dump()
    assert (dumped["tools"], dumped["tool_choice"], dumped["response_format"]) == (
        TOOLS,
        "get_time",
        f"json_schema:{SCHEMA}",
    )
    assert opts.one_run(4.0).tools is opts.tools  # a sweep's point keeps the typed tools, not validated again
    target = Target(url="http://127.0.0.1:9", model="m", endpoint="chat", extra_body={"seed": 1})
    extra = request_extra(opts, target)
    assert extra["seed"] == 1 and extra["tools"] == json.loads(Path(TOOLS).read_text())
    assert extra["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}
    assert extra["response_format"]["type"] == "json_schema"
    assert request_extra(from_cli(LoadOptions, LOAD, "load options"), target) == {"seed": 1}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"tool_choice": "required"}, "load options: --tool-choice required applies with --tools FILE"),
        (
            {"tools": TOOLS, "tool_choice": "get_wether"},
            f"load options: --tool-choice get_wether names no tool of {TOOLS} (it declares get_weather, get_time)",
        ),
        ({"tools": "/no/such/tools.json"}, "--tools /no/such/tools.json: no such file"),
        ({"response_format": "yaml"}, "--response-format yaml: takes json, or json_schema:FILE"),
        (
            {"response_format": "json", "ignore_eos": True},
            "load options: --response-format asks answers that end where the model stops: add --no-ignore-eos",
        ),
        ({"tools": TOOLS, "workers": 2}, "load options: --tools is checked in this process: not with --workers"),
    ],
)
def test_every_mistake_is_one_line(values, message):
    with pytest.raises(ConfigError) as exc:
        from_cli(LoadOptions, {**LOAD, **values}, "load options")
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_tools_need_the_chat_endpoint():
    opts = from_cli(ThroughputOptions, {"tools": TOOLS, "response_format": "json"}, "throughput options")
    assert opts.constraint("chat") is not None and from_cli(ThroughputOptions, {}, "t").constraint("chat") is None
    with pytest.raises(UsageError, match="^--tools and --response-format cannot be asked on the completions endpoint"):
        opts.constraint("completions")
    assert opts.constraint("responses") is not None  # the Responses API takes both
    with pytest.raises(UsageError, match="cannot be asked on the messages endpoint"):  # no response format there
        opts.constraint("messages")


def test_a_bad_tools_file_stops_the_command_with_exit_2(tmp_path):
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps([{"type": "function", "function": {"name": "f", "parameters": {"type": "objec"}}}]))
    # an unreachable server: the option error comes first, or the run would fail with exit 3 instead
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "load",
            "--url",
            "http://127.0.0.1:9",
            "--tokenizer",
            "README.md",
            "--rate",
            "1",
            "-n",
            "2",
            "--no-ignore-eos",
            "--tools",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"--tools {bad}: tool 0 (f): function.parameters.type: not valid JSON Schema" in done.stderr
    assert "Traceback" not in done.stderr
