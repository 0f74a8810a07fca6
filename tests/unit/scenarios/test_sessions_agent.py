"""Agent turns of `run sessions`: the messages each turn sends (a call, then its tool result, by id; the text
fallback where no call came back), the generated tool definitions, and the options' one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from loadproof.records import RequestRecord, ToolCall
from loadproof.scenarios.sessions_options import SessionsOptions
from loadproof.workloads.agent import Conversation, tool_definitions, tool_names, tools_text
from loadproof.workloads.constraints import tool_choice_body


def answer(text: str = "", calls: list[ToolCall] = ()) -> RequestRecord:
    return RequestRecord(request_id="r", endpoint="chat", output_text=text, tool_calls=list(calls))


WEATHER = str(Path(__file__).resolve().parents[3] / "docs" / "examples" / "tools-weather.json")


def test_a_call_goes_back_as_the_assistants_tool_call_then_a_tool_message_answering_it_by_id():
    convo = Conversation.opened("SYS\n", "first\n")
    assert convo.messages == [{"role": "system", "content": "SYS\n"}, {"role": "user", "content": "first\n"}]
    convo.answered(
        answer(
            "",
            [
                ToolCall(name="read_file", arguments='{"target": "a"}', id="call-x"),
                ToolCall(name="git_diff", arguments="{}", id="call-y"),
            ],
        ),
        "RESULT\n",
        "call-0-0",
    )
    assert convo.messages[2:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call-x", "type": "function", "function": {"name": "read_file", "arguments": '{"target": "a"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call-x", "content": "RESULT\n"},
    ]  # the first call answered, only
    assert convo.text == "SYS\nfirst\n\nRESULT\n"
    # a call without an id gets the scenario's
    convo.answered(answer("", [ToolCall(name="list_dir", arguments='{"target": "b"}')]), "MORE\n", "call-0-1")
    assert convo.messages[-2]["tool_calls"][0]["id"] == "call-0-1" and convo.messages[-1]["tool_call_id"] == "call-0-1"
    # a plain turn: the answer, then the user's next message
    convo.answered(answer("done"), None, "call-0-2")
    convo.say("next\n")
    assert convo.messages[-2:] == [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next\n"}]
    assert convo.text.endswith("MORE\ndone\nnext\n")


@pytest.mark.parametrize(
    "calls",
    [[], [ToolCall(name="read_file", arguments='{"target": "a', id="c")]],
    ids=["no call", "arguments cut short"],
)
def test_without_a_usable_call_the_answer_stands_in_and_the_result_is_the_users_message(calls):
    convo = Conversation.opened("", "first\n")
    assert convo.messages == [{"role": "user", "content": "first\n"}]
    convo.answered(answer('[{"name": "read_file"', calls), "RESULT\n", "call-0-0")
    assert convo.messages[1:] == [
        {"role": "assistant", "content": '[{"name": "read_file"'},
        {"role": "user", "content": "RESULT\n"},
    ]


def test_generated_tool_definitions():
    names = tool_names(12)
    assert names[:3] == ["read_file", "write_file", "edit_file"] and names[10:] == ["read_file_1", "write_file_1"]
    assert len(set(names)) == 12
    tools = tool_definitions(names[:2], ["reads a file", "writes one"])
    assert tools[0] == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "reads a file",
            "parameters": tools[0]["function"]["parameters"],
            "strict": True,
        },
    }
    params = tools[0]["function"]["parameters"]
    assert params["required"] == ["target"] and params["additionalProperties"] is False
    text = tools_text(tools)
    lines = text.split("<tools>\n")[1].split("</tools>")[0].splitlines()
    assert [json.loads(line) for line in lines] == [
        {k: v for k, v in t["function"].items() if k != "strict"} for t in tools
    ]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"turns": 3, "tool_turns": 4, "tool_definitions_tokens": 2000}, "--tool-turns 4 is more than --turns 3"),
        (
            {"turns": 3, "tool_turns": 2},
            "--tool-turns needs tools to call: --tool-definitions-tokens N or --tools FILE",
        ),
        (
            {"tool_definitions_tokens": 2000, "tool_count": 2, "tool_choice": "run_tests"},
            "--tool-choice 'run_tests' names no tool: auto, required, or one of read_file, write_file",
        ),
        (
            {"tools": WEATHER, "tool_choice": "read_file"},
            "--tool-choice 'read_file' names no tool: auto, required, or one of get_weather, get_time",
        ),
        ({"tools": WEATHER, "tool_definitions_tokens": 2000}, "--tools FILE and --tool-definitions-tokens both define"),
        ({"tool_choice": "auto"}, "--tool-choice auto needs tools: --tools FILE or --tool-definitions-tokens N"),
        ({"prime_shared": True}, "--prime-shared needs a shared prefix to send"),
    ],
)
def test_bad_agent_options_are_refused_in_one_line(fields, message):
    with pytest.raises(ValidationError, match=message):
        SessionsOptions(**fields)


def test_good_agent_options():
    opts = SessionsOptions(
        turns=6,
        tool_turns=5,
        tool_definitions_tokens=8000,
        tool_choice="edit_file",
        system_tokens=8000,
        tool_result_tokens=128,
    )
    assert opts.tool_turns == 5 and opts.tools_in_prompt and opts.engine_block_tokens is None


def test_each_turns_tool_choice_and_check():
    """Agent turns force a call (required unless --tool-choice names one); with agent turns the other turns
    send none; without them --tool-choice as given. --response-format is asked of the turns that are no
    agent turns; only a user's own --tools or --response-format is checked."""
    generated = SessionsOptions(turns=3, tool_turns=2, tool_definitions_tokens=2000)
    assert [generated.turn_choice(t) for t in range(3)] == ["required", "required", "none"]
    assert generated.turn_constraint(0) is None  # the generated tools' calls are counted, not checked
    own = SessionsOptions(
        turns=3, tool_turns=1, tools=WEATHER, tool_choice="get_time", response_format="json", ignore_eos=False
    )
    assert [own.turn_choice(t) for t in range(3)] == ["get_time", "none", "none"]
    first, later = own.turn_constraint(0), own.turn_constraint(2)
    assert first.tool_choice == "get_time" and first.response_format is None
    assert later.tool_choice is None and str(later.response_format) == "json"
    # the body's tool_choice: "none" as it is (vLLM answers 400 to a function named "none")
    assert [tool_choice_body(own.turn_choice(t)) for t in range(3)] == [
        {"type": "function", "function": {"name": "get_time"}},
        "none",
        "none",
    ]
    plain = SessionsOptions(turns=2, tools=WEATHER, tool_choice="auto")
    assert [plain.turn_choice(t) for t in range(2)] == ["auto", "auto"] and plain.turn_constraint(
        1
    ).tool_choice == "auto"
