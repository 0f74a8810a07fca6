"""`ConstraintOptions`: `--tools FILE`, `--tool-choice auto|required|NAME` and `--response-format
json|json_schema:FILE`, declared once for every scenario that takes them (throughput, load, sessions,
quality: their Options derive from it), read and checked once with the command's other options, offline,
before anything is sent (`workloads.constraints`: valid JSON, valid JSON Schema, a named tool that the file
declares). `constraint(endpoint)` is what a run uses: the request body's fields and each answer's verdict.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, PlainSerializer, PlainValidator, model_validator

from loadproof.config.base import StrictModel
from loadproof.errors import UsageError
from loadproof.protocol.routes import route_of
from loadproof.scenarios.options import Panel, cli
from loadproof.scenarios.target import Target
from loadproof.workloads.constraints import (
    CHOICES,
    RESPONSE_FORMAT_SYNTAX,
    Constraint,
    ResponseFormat,
    ToolSet,
    parse_response_format,
    parse_tools,
)


def _as_value_error(parse: Any) -> Any:
    """A workloads parser as a pydantic validator: its UsageError becomes the option's one-line error."""

    def validate(value: object) -> Any:
        try:
            return parse(value)
        except UsageError as exc:
            raise ValueError(str(exc)) from None

    return validate


Tools = Annotated[ToolSet, PlainValidator(_as_value_error(parse_tools)), PlainSerializer(str)]
Format = Annotated[ResponseFormat, PlainValidator(_as_value_error(parse_response_format)), PlainSerializer(str)]


class ConstraintOptions(StrictModel):
    tools: Tools | None = Field(
        default=None,
        json_schema_extra=cli(text=True, panel=Panel.TOOLS, metavar="FILE"),
        description="declare these tools in every request: a JSON file of OpenAI tool "
        "definitions; each call's arguments are checked against its tool's parameters",
    )
    tool_choice: str | None = Field(
        default=None,
        description="with --tools: auto, required (every answer must call "
        "a tool) or the name of one tool of the file (every answer must call it)",
        json_schema_extra=cli(panel=Panel.TOOLS, metavar="auto|required|NAME"),
    )
    response_format: Format | None = Field(
        default=None,
        json_schema_extra=cli(text=True, panel=Panel.TOOLS, metavar="json|json_schema:FILE"),
        description=f"ask every answer as {RESPONSE_FORMAT_SYNTAX}; each answer is checked against it",
    )

    @model_validator(mode="after")
    def _constraints(self) -> ConstraintOptions:
        if self.tool_choice is not None:
            if self.tools is None:
                raise ValueError(f"--tool-choice {self.tool_choice} applies with --tools FILE")
            if self.tool_choice not in CHOICES and self.tool_choice not in self.tools.names:
                raise ValueError(
                    f"--tool-choice {self.tool_choice} names no tool of {self.tools} (it declares "
                    f"{', '.join(self.tools.names)}); or give auto or required"
                )
        if self.constrained:
            # a constrained answer ends where the model stops: a scenario that forces max_tokens cannot check it
            if getattr(self, "ignore_eos", False):
                raise ValueError(f"{self._given()} asks answers that end where the model stops: add --no-ignore-eos")
            # the answers of worker processes are not kept (load's --workers and --ray-address)
            if getattr(self, "scaled_out", False):
                raise ValueError(f"{self._given()} is checked in this process: not with --workers or --ray-address")
        return self

    @property
    def constrained(self) -> bool:
        return self.tools is not None or self.response_format is not None

    def _given(self) -> str:
        return " and ".join(
            flag for flag, v in (("--tools", self.tools), ("--response-format", self.response_format)) if v is not None
        )

    def constraint(self, endpoint: str) -> Constraint | None:
        """What every request asks and every answer is checked against (None: nothing). Tools and response
        formats are fields of the chat API (and tools of Responses and Messages too, a response format of
        Responses): on a route that takes none, one line (exit 2) before anything is sent."""
        if not self.constrained:
            return None
        asked = {"tools"} if self.tools is not None else set()
        if self.response_format is not None:
            asked.add("response_format")
        if not asked <= route_of(endpoint).constraints:
            raise UsageError(
                f"{self._given()} cannot be asked on the {endpoint} endpoint (--endpoint chat takes both); the "
                f"target's is {endpoint}"
            )
        return Constraint(self.tools, self.tool_choice, self.response_format)


def request_extra(options: ConstraintOptions, target: Target) -> dict[str, Any]:
    """The fields a request body adds to the prompt: the target's own (`extra_body`), then the constraint's."""
    constraint = options.constraint(target.endpoint)
    return {**target.extra_body, **(constraint.body() if constraint is not None else {})}
