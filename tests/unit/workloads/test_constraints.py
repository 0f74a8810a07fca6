"""Constrained answers: the tools and schema files read and checked once (one line each mistake), the request
body's fields, and the verdict on each answer (its JSON path and keyword, never the model's text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadproof.errors import UsageError
from loadproof.records import RequestRecord, ToolCall
from loadproof.workloads.constraints import Constraint, parse_response_format, parse_tools

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
TOOLS = EXAMPLES / "tools-weather.json"
SCHEMA = EXAMPLES / "answer-schema.json"
WEATHER = json.dumps({"city": "Oslo", "unit": "celsius"})


def call(name: str = "get_weather", arguments: str = WEATHER) -> ToolCall:
    return ToolCall(name=name, arguments=arguments, id="call-0")


def write(tmp_path: Path, value: object, name: str = "f.json") -> Path:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return path


def test_the_examples_read_and_ask_what_the_api_names():
    tools = parse_tools(str(TOOLS))
    assert tools.names == ["get_weather", "get_time"]
    body = Constraint(tools, "get_time", parse_response_format(f"json_schema:{SCHEMA}")).body()
    assert body["tools"] == json.loads(TOOLS.read_text())
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer-schema", "schema": json.loads(SCHEMA.read_text())},
    }
    assert Constraint(tools, "required", parse_response_format("json")).body()["tool_choice"] == "required"
    assert Constraint(None, None, parse_response_format("json")).body() == {"response_format": {"type": "json_object"}}


@pytest.mark.parametrize(
    "content, says",
    [
        ("{not json", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        ({"type": "function"}, "non-empty JSON list"),
        ([], "non-empty JSON list"),
        ([{"type": "retrieval"}], 'tool 0: type must be "function"'),
        ([{"type": "function", "function": {"name": "has space"}}], "tool 0: function.name must be"),
        (
            [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}],
            "tool 1 (a): function.name a is declared twice",
        ),
        (
            [{"type": "function", "function": {"name": "a", "parameters": {"type": "objec"}}}],
            "tool 0 (a): function.parameters.type: not valid JSON Schema",
        ),
        (
            [{"type": "function", "function": {"name": "a", "parameters": {"properties": {"x": {"minimum": "1"}}}}}],
            "tool 0 (a): function.parameters.properties.x.minimum: not valid JSON Schema",
        ),
    ],
)
def test_a_bad_tools_file_is_one_line_naming_the_tool_and_field(tmp_path, content, says):
    with pytest.raises(UsageError) as exc:
        parse_tools(str(write(tmp_path, content)))
    assert says in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "text, says",
    [
        ("xml", "takes json, or json_schema:FILE"),
        ("json_schema:", "takes json, or json_schema:FILE"),
        ("json_schema:/no/such/file.json", "no such file"),
    ],
)
def test_a_bad_response_format_is_one_line(text, says):
    with pytest.raises(UsageError, match=says):
        parse_response_format(text)


def test_a_schema_that_is_not_json_schema_names_its_path(tmp_path):
    path = write(tmp_path, {"type": "object", "properties": {"a": {"type": 3}}})
    with pytest.raises(UsageError, match=r"the schema.properties.a.type: not valid JSON Schema"):
        parse_response_format(f"json_schema:{path}")
    with pytest.raises(UsageError, match="a JSON Schema is an object"):
        parse_response_format(f"json_schema:{write(tmp_path, [1], 'list.json')}")


def verdict(constraint: Constraint, text: str = "", calls: list[ToolCall] = (), ok: bool = True) -> RequestRecord:
    record = RequestRecord(request_id="r", endpoint="chat", ok=ok, output_text=text, tool_calls=list(calls))
    constraint.check(record)
    return record


@pytest.mark.parametrize(
    "choice, calls, reason",
    [
        ("required", [call()], None),
        ("required", [call(), call("get_time", '{"timezone": "UTC"}')], None),
        ("auto", [], None),  # auto: a text answer keeps the constraint
        (None, [], None),
        ("required", [], "no tool call (tool_choice required)"),
        ("get_time", [], "no tool call (tool_choice get_time)"),
        ("get_time", [call()], "tool call 0 (get_weather): not the tool tool_choice names (get_time)"),
        ("required", [call("launch_rockets", "{}")], "tool call 0: names no declared tool"),
        ("required", [call(arguments='{"city": "Oslo"')], "tool call 0 (get_weather) arguments: not JSON ("),
        ("required", [call(arguments='{"city": "Oslo"}')], "tool call 0 (get_weather) arguments: $: required"),
        (
            "required",
            [call(arguments='{"city": "Oslo", "unit": "kelvin"}')],
            "tool call 0 (get_weather) arguments: $.unit: enum",
        ),
        (
            "required",
            [call(), call("get_time", '{"timezone": 3}')],
            "tool call 1 (get_time) arguments: $.timezone: type",
        ),
    ],
)
def test_tool_calls_are_checked_against_their_tools(choice, calls, reason):
    record = verdict(Constraint(parse_tools(str(TOOLS)), choice, None), calls=calls)
    assert record.output_valid is (reason is None)
    assert (record.output_invalid_reason or "").startswith(reason or "")
    assert record.output_invalid_reason is None or "Oslo" not in record.output_invalid_reason  # not the model's text


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"summary": "s", "topics": ["a"], "sentiment": "neutral"}', None),
        (' {"summary": "s", "topics": ["a"], "sentiment": "neutral"}\n', None),
        ('{"summary": "s", "topics": [], "sentiment": "neutral"}', "answer: $.topics: minItems"),
        ('{"summary": "s", "topics": ["a"], "sentiment": "glad", "extra": 1}', "answer: $: additionalProperties"),
        ('{"summary": "s", "topics": ["a"], "senti', "answer: not JSON (Unterminated string"),
        ("Sure! Here is", "answer: not JSON (Expecting value, char 0)"),
    ],
)
def test_answers_are_checked_against_the_schema(text, reason):
    record = verdict(Constraint(None, None, parse_response_format(f"json_schema:{SCHEMA}")), text)
    assert record.output_valid is (reason is None)
    assert (record.output_invalid_reason or "").startswith(reason or "")


def test_json_asks_only_for_json_and_a_failed_request_is_not_checked():
    json_only = Constraint(None, None, parse_response_format("json"))
    assert verdict(json_only, '[1, "two"]').output_valid is True
    assert verdict(json_only, "two").output_valid is False
    failed = verdict(json_only, "", ok=False)
    assert failed.output_valid is None and failed.output_invalid_reason is None
