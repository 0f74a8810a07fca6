"""`--thinking off|low|on` and `--reasoning-effort`: checked offline, mapped per engine into the request
body, recorded in the manifest, refused on the completions endpoint."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.config.profile import Profile
from loadproof.errors import ConfigError, UsageError
from loadproof.rundir.manifest import TargetInfo
from loadproof.scenarios import lifecycle, target
from loadproof.scenarios.options import from_cli


def options(**given):
    return from_cli(lifecycle.TargetOptions, {"url": "http://h:1", **given}, "target")


def profile(engine: str = "vllm", thinking: str = "unsupported", endpoint: str = "chat") -> Profile:
    return Profile.model_validate(
        {
            "name": "p",
            "engine": engine,
            "model": {"path": "m", "served_name": "m", "max_model_len": 4096},
            "serving": {"endpoint": endpoint, "thinking": thinking},
        }
    )


@pytest.fixture
def resolved(monkeypatch):
    """resolve_target without a server: the target as the options built it."""
    monkeypatch.setattr(target.Target, "resolve", lambda self, tokenize=False: self)
    return lambda opts, prof=None: target.resolve_target(opts, prof)


@pytest.mark.parametrize(
    ("given", "body"),
    [
        ({"thinking": "off"}, {"chat_template_kwargs": {"enable_thinking": False}}),
        ({"disable_thinking": True}, {"chat_template_kwargs": {"enable_thinking": False}}),
        ({"thinking": "on"}, {"chat_template_kwargs": {"enable_thinking": True}}),
        ({"thinking": "low"}, {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "low"}),
        (
            {"thinking": "low", "reasoning_effort": "medium"},
            {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "medium"},
        ),
        ({"reasoning_effort": "high"}, {"reasoning_effort": "high"}),
        ({}, {}),
    ],
)
def test_vllm_gets_the_chat_template_switch_and_a_top_level_effort(resolved, given, body):
    assert resolved(options(**given)).extra_body == body


def test_sglang_also_asks_for_the_reasoning_apart(resolved):
    built = resolved(options(thinking="on"), profile("sglang"))
    assert built.extra_body == {"chat_template_kwargs": {"enable_thinking": True}, "separate_reasoning": True}


def test_the_profile_switches_thinking_off_unless_told_otherwise(resolved):
    assert resolved(options(), profile(thinking="disable")).thinking == "off"
    on = resolved(options(thinking="on"), profile(thinking="disable"))
    assert on.thinking == "on" and on.extra_body == {"chat_template_kwargs": {"enable_thinking": True}}


def test_the_mode_is_recorded_in_the_manifest(resolved):
    described = resolved(options(thinking="low")).describe()
    assert described["thinking"] == "low" and described["reasoning_effort"] == "low"
    stored = msgspec.convert(described, TargetInfo)  # the typed manifest takes it
    assert stored.thinking == "low" and stored.extra_body["reasoning_effort"] == "low"


def test_thinking_on_the_completions_endpoint_is_one_line(resolved):
    with pytest.raises(UsageError, match=r"^--thinking needs the chat endpoint"):
        resolved(options(thinking="on", endpoint="completions"))
    with pytest.raises(UsageError, match=r"^--reasoning-effort needs the chat endpoint"):
        resolved(options(reasoning_effort="low"), profile(endpoint="completions"))
    # --disable-thinking kept its old meaning there: nothing to switch, nothing sent
    assert resolved(options(disable_thinking=True, endpoint="completions")).extra_body == {}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"thinking": "lots"}, r"--thinking lots: Input should be 'off', 'low' or 'on'"),
        ({"reasoning_effort": "very high"}, r"--reasoning-effort very high: must be a word"),
        ({"thinking": "on", "disable_thinking": True}, r"--disable-thinking contradicts --thinking on"),
        ({"thinking": "off", "reasoning_effort": "low"}, r"--reasoning-effort with thinking off"),
    ],
)
def test_contradictions_and_bad_values_are_refused_offline(given, message):
    with pytest.raises(ConfigError, match=message):
        options(**given)
