"""Constrained answers (docs/scenarios.md, "Tool calls and structured output"): the tools a request
declares (`--tools FILE`, OpenAI tool definitions), the tool choice it asks (`--tool-choice`), the format its
answer must take (`--response-format json|json_schema:FILE`), read and checked once, offline, before anything
is sent; the request body's fields that ask for them; and each answer's verdict against them.

The schemas are checked and applied with a kept library, `jsonschema` (JSON Schema 2020-12 unless a schema
names its own draft in `$schema`), never by hand. A verdict's reason names where the answer broke its schema
(the JSON path, `$.city`) and the schema keyword it broke (`required`, `enum`), never the model's own text:
`publish` drops the answers, and the reason is published beside the verdict.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator

from loadproof.errors import UsageError
from loadproof.records import RequestRecord, ToolCall

CHOICES = ("auto", "required")  # --tool-choice words; any other value names one tool of the file
RESPONSE_FORMAT_SYNTAX = "json, or json_schema:FILE (a JSON Schema file)"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for a function's and a json_schema's name


def read_json(path: Path) -> Any:
    """A file's JSON value; UsageError (one line: the line and column) when it is missing or not JSON."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError("no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read it: {exc.__class__.__name__}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def schema_validator(schema: Any, where: str) -> Validator:
    """A compiled validator of `schema` (its `$schema`'s draft, 2020-12 by default), the schema itself
    checked first: UsageError naming `where` and the schema's path when it is not valid JSON Schema."""
    if not isinstance(schema, (dict, bool)):
        raise UsageError(f"{where}: a JSON Schema is an object (got {type(schema).__name__})")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)  # type: ignore[arg-type]  # a JSON Schema may also be true or false, which the stub's dict leaves out
    except SchemaError as exc:
        raise UsageError(f"{where}{_schema_path(exc)}: not valid JSON Schema: {exc.message}") from None
    return cls(schema)


def _schema_path(exc: SchemaError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.absolute_path)
    return path


class ToolSet:
    """The tools of a `--tools` file: each definition as the file gives it (sent as is) and its parameters'
    compiled validator. `str()` is the file as typed (the manifest's options keep it)."""

    __slots__ = ("path", "definitions", "validators")

    def __init__(self, path: str, definitions: list[dict[str, Any]], validators: dict[str, Validator]) -> None:
        self.path = path
        self.definitions = definitions
        self.validators = validators

    def __str__(self) -> str:
        return self.path

    @property
    def names(self) -> list[str]:
        return list(self.validators)


def parse_tools(value: object) -> ToolSet:
    """`--tools FILE`: a JSON list of OpenAI tool definitions, `{"type": "function", "function": {"name":
    ..., "description": ..., "parameters": JSON Schema}}`, names unique. UsageError naming the tool (its
    index and name) and the field at fault."""
    if isinstance(value, ToolSet):
        return value
    path = Path(str(value))
    data = read_json(path)
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]  # a request body's `tools`, as some tools export them
    if not isinstance(data, list) or not data:
        raise UsageError(
            'a tools file is a non-empty JSON list of tool definitions ({"type": "function", '
            '"function": {"name": ..., "parameters": {...}}})'
        )
    validators: dict[str, Validator] = {}
    for i, tool in enumerate(data):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise UsageError(f'tool {i}: type must be "function"')
        function = tool.get("function")
        if not isinstance(function, dict):
            raise UsageError(f"tool {i}: function must be an object with a name")
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise UsageError(f"tool {i}: function.name must be 1 to 64 letters, digits, _ or - (got {name!r})")
        if name in validators:
            raise UsageError(f"tool {i} ({name}): function.name {name} is declared twice")
        parameters = function.get("parameters", {"type": "object"})
        validators[name] = schema_validator(parameters, f"tool {i} ({name}): function.parameters")
    return ToolSet(str(value), data, validators)


class ResponseFormat:
    """`--response-format`: `json` (any JSON answer) or `json_schema:FILE` (an answer valid against the
    schema in FILE). `str()` is the option as typed."""

    __slots__ = ("text", "schema", "name", "validator")

    def __init__(self, text: str, schema: Any = None, name: str = "", validator: Validator | None = None) -> None:
        self.text = text
        self.schema = schema
        self.name = name
        self.validator = validator

    def __str__(self) -> str:
        return self.text

    def body(self) -> dict[str, Any]:
        """The request's `response_format`."""
        if self.validator is None:
            return {"type": "json_object"}
        return {"type": "json_schema", "json_schema": {"name": self.name, "schema": self.schema}}


def parse_response_format(value: object) -> ResponseFormat:
    if isinstance(value, ResponseFormat):
        return value
    text = str(value).strip()
    if text == "json":
        return ResponseFormat(text)
    kind, sep, file = text.partition(":")
    if kind != "json_schema" or not sep or not file:
        raise UsageError(f"takes {RESPONSE_FORMAT_SYNTAX}")
    schema = read_json(Path(file))
    validator = schema_validator(schema, "the schema")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", Path(file).stem)[:64] or "answer"
    return ResponseFormat(text, schema, name, validator)


def tool_choice_body(choice: str) -> Any:
    """The request's `tool_choice`: `auto`, `required`, `none` (a sessions turn that declares the tools but
    asks no call), or a named function."""
    if choice in CHOICES or choice == "none":
        return choice
    return {"type": "function", "function": {"name": choice}}


class Constraint:
    """What a run asks of every answer, and the verdict on each (`check`)."""

    __slots__ = ("tools", "tool_choice", "response_format")

    def __init__(self, tools: ToolSet | None, tool_choice: str | None, response_format: ResponseFormat | None) -> None:
        self.tools = tools
        self.tool_choice = tool_choice
        self.response_format = response_format

    def body(self) -> dict[str, Any]:
        """The fields a request body adds: `tools`, `tool_choice`, `response_format`."""
        extra: dict[str, Any] = {}
        if self.tools is not None:
            extra["tools"] = self.tools.definitions
        if self.tool_choice is not None:
            extra["tool_choice"] = tool_choice_body(self.tool_choice)
        if self.response_format is not None:
            extra["response_format"] = self.response_format.body()
        return extra

    def check(self, record: RequestRecord) -> None:
        """Set the record's verdict: `output_valid`, and `output_invalid_reason` when it is False. A failed
        request is not checked (its verdict stays None: the failure is counted apart)."""
        if not record.ok:
            return
        reason = self.reason(record.output_text, record.tool_calls)
        record.output_valid = reason is None
        record.output_invalid_reason = reason

    def reason(self, text: str, calls: list[ToolCall]) -> str | None:
        """Why an answer (its text and tool calls) breaks the constraint; None when it keeps it."""
        if self.tools is not None:
            if calls:
                return self._calls_reason(calls)
            if self.tool_choice is not None and self.tool_choice != "auto":
                return f"no tool call (tool_choice {self.tool_choice})"
        if self.response_format is not None:
            return _json_reason(text, self.response_format.validator, "answer")
        return None

    def _calls_reason(self, calls: list[ToolCall]) -> str | None:
        assert self.tools is not None
        named = self.tool_choice if self.tool_choice not in (None, *CHOICES) else None
        for k, call in enumerate(calls):
            validator = self.tools.validators.get(call.name)
            if validator is None:
                return f"tool call {k}: names no declared tool"
            if named is not None and call.name != named:
                return f"tool call {k} ({call.name}): not the tool tool_choice names ({named})"
            reason = _json_reason(call.arguments, validator, f"tool call {k} ({call.name}) arguments")
            if reason is not None:
                return reason
        return None


def _json_reason(text: str, validator: Validator | None, what: str) -> str | None:
    """Why `text` is not JSON valid against `validator` (None: any JSON): `what: not JSON (...)` or
    `what: $.path: keyword`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{what}: not JSON ({exc.msg}, char {exc.pos})"
    if validator is None:
        return None
    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    return f"{what}: {error.json_path}: {error.validator}"
