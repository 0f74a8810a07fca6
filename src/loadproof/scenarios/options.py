"""A scenario's options, declared once on its Options model, as the command line shows and takes them.

Every field of an Options model (a StrictModel) is one option of its `loadproof run` command, unless
its `cli(hidden=True)` says it is not:

- flag: `--` and the field name with '-' for '_'; `cli("--modes")` names it otherwise, and
  `cli(aliases=["-n"])` adds short or old names;
- default: the field's default; help: the field's description (`cli(help=...)` where the flag's
  sense is the opposite of the field's), naming the values it takes and their unit;
- panel: `cli(panel=Panel.WORKLOAD)`, the group `--help` lists it in (`Panel`: one set, one order, for
  every command);
- what `--help` shows for its value (the metavar): a choice's values (`poisson|constant|gamma`), else a name
  from its type and the field's unit (`N`, `TOKENS`, `SECONDS`, `PATH`...); `cli(metavar="R|inf")` where
  the field parses text of its own;
- validation: the field's constraints; an error is one line naming the flag and the value given.

How a field's type reaches the command line:

| field | command line |
|---|---|
| `bool` | `--flag/--no-flag`; with `cli("--skip-x", invert=True)`, `--skip-x` sets the field False |
| `list[int]`, `list[str]` | one comma-separated value (`--concurrency 1,4,8`) |
| `dict[str, number or bool]` | `--flag KEY=VALUE`, repeatable |
| anything else | one value, checked by the model |
| any, with `cli(text=True)` | one value as typed; the field's validator parses it (`--rate inf`, `--slo ttft=2s`) |

A field's choices, which `--help` shows and a test holds its help to naming, are its `Literal`'s values, or
those of the `among` (a list) or `one_of` (one value) that checks it.

`cli_options(Model)` lists what a model puts on the command line (the CLI generates its commands from
it); `from_cli(Model, values, source)` turns the command line's values back into a validated model.
Standard library and pydantic only: the CLI layer adds typer on top.
"""

from __future__ import annotations

import json
import types
import typing
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import AfterValidator, BaseModel, Field, ValidationError

from loadproof.errors import ConfigError

Shape = Literal["value", "flag", "list", "pairs"]


class Panel(StrEnum):
    """The groups a command's `--help` lists its options in, in this order: one set for every `loadproof run`
    command (and `tune`, which takes run load's), each option's declared on its field (`cli(panel=...)`)."""

    TARGET = "Target"  # the server, the model, how to talk to it, how tokens are counted
    ARRIVALS = "Arrivals"  # when requests are sent and how many: rates, users, concurrency, durations
    WORKLOAD = "Workload"  # what each request asks: prompts and their lengths, outputs, seeds, deadlines
    MEDIA = "Media"  # images, audio and video each request carries, and the prompt tokens they cost
    DATA_SET = "Data set"  # prompts from a file: a data set or a trace
    TOOLS = "Tools and formats"  # tool calls and structured answers
    SLO_SEARCH = "SLO and search"  # which requests are good, sweeps and searches over many runs
    CHECKS = "Checks"  # the verdict's criteria and bounds, a prediction to judge against
    SCALE_OUT = "Scale-out"  # the load generator spread over processes or hosts
    ENGINE = "Engine metrics"  # where the engine's metrics come from, how often, what its cache holds
    OUTPUT = "Output"  # where the run directory goes, the price its costs are figured at


def cli(
    flag: str | None = None,
    *,
    aliases: list[str] | None = None,
    invert: bool = False,
    help: str | None = None,
    hidden: bool = False,
    text: bool = False,
    panel: Panel | None = None,
    metavar: str | None = None,
) -> dict[str, Any]:
    """How a field appears on the command line: `Field(..., json_schema_extra=cli(...))`."""
    spec: dict[str, Any] = {}
    if flag is not None:
        spec["flag"] = flag
    if aliases:
        spec["aliases"] = list(aliases)
    if invert:
        spec["invert"] = True
    if help is not None:
        spec["help"] = help
    if hidden:
        spec["hidden"] = True
    if text:
        spec["text"] = True
    if panel is not None:
        spec["panel"] = panel
    if metavar is not None:
        spec["metavar"] = metavar
    return {"cli": spec}


def idle_timeout_field() -> Any:
    """`--idle-timeout-s`, as the open-loop scenarios take it (the idle guard before a run)."""
    return Field(
        default=120.0,
        ge=0,
        description="seconds to wait, before the run, for the engine to report 0 "
        "running and 0 waiting (0: do not wait)",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )


SAMPLING_OFF = (
    "seconds between /metrics samples (0: sampling off: the engine's /metrics only before and after "
    "the run, no GPU or host telemetry)"
)
SAMPLING_NEEDED = "seconds between /metrics samples, > 0 (0 refused: the verdict needs them)"


def sample_interval_field() -> Any:
    """`--sample-interval-s` of the open-loop scenarios: /metrics every second; 0: sampling off (the engine's
    /metrics only before and after the run, and no GPU or host telemetry: docs/scenarios.md)."""
    return Field(default=1.0, ge=0, description=SAMPLING_OFF, json_schema_extra=cli(panel=Panel.ENGINE))


def check_http_url(value: str) -> str:
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL")
    return value


def check_exists(value: Path) -> Path:
    if not value.exists():
        raise ValueError("no such file or folder")
    return value


@dataclass(frozen=True)
class Choosing:
    """The check of a field whose values are `choices` (`among`, `one_of`): the command line reads them here."""

    choices: tuple[str, ...]
    check: Callable[[Any], Any]

    def __call__(self, value: Any) -> Any:
        return self.check(value)


def among(choices: Sequence[str], what: str) -> AfterValidator:
    """For `Annotated[list[str], among(...)]`: a non-empty list whose every item is one of `choices`."""

    def check(value: list[str]) -> list[str]:
        if not value or any(v not in choices for v in value):
            raise ValueError(f"{what} must be among {', '.join(choices)} (got {', '.join(value) or 'none'})")
        return value

    return AfterValidator(Choosing(tuple(choices), check))


def one_of(choices: Sequence[str]) -> AfterValidator:
    """For `Annotated[str, one_of(...)]`: one of `choices` (a set the code holds, not a `Literal`)."""
    said = ", ".join(choices[:-1]) + f" or {choices[-1]}" if len(choices) > 1 else choices[0]

    def check(value: str) -> str:
        if value not in choices:
            raise ValueError(f"must be {said}")
        return value

    return AfterValidator(Choosing(tuple(choices), check))


def needs_samples(why: str) -> AfterValidator:
    """For `Annotated[float, needs_samples(...)]`: the `--sample-interval-s` of a scenario whose verdict
    reads the engine's /metrics sampled through the run, where 0 (sampling off) is refused saying `why`."""

    def check(value: float) -> float:
        if value == 0:
            raise ValueError(f"sampling cannot be switched off here: {why}")
        return value

    return AfterValidator(check)


# a base URL, checked before anything is sent: http or https, and a host
HttpUrl = Annotated[str, AfterValidator(check_http_url)]
# a file or folder to read, checked before anything is sent
ExistingPath = Annotated[Path, AfterValidator(check_exists)]


@dataclass(frozen=True)
class CliOption:
    """One command-line option of a model's field."""

    field: str
    flags: tuple[str, ...]  # the primary flag first, then its aliases
    off_flag: str | None  # a flag's opposite (`--no-x`, or `--cache-salt` for `--no-cache-salt`)
    shape: Shape
    type: Any  # the type of the value typed on the command line (of one element, for a list)
    default: Any  # as typed on the command line
    required: bool
    help: str
    invert: bool = False
    panel: Panel | None = None  # the `--help` group it is listed in (None: the command's own "Options")
    choices: tuple[str, ...] = ()  # the values it takes, where they are a fixed set
    metavar: str = ""  # what `--help` shows for its value ("" for a flag)

    @property
    def flag(self) -> str:
        return self.flags[0]


def cli_options(model: type[BaseModel]) -> list[CliOption]:
    """The command-line options of `model`'s fields, in the model's order."""
    options = []
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        spec = cast(dict[str, Any], extra.get("cli", {}))  # only cli() above writes "cli": always its dict
        if spec.get("hidden"):
            continue
        flag = spec.get("flag") or "--" + name.replace("_", "-")
        flags = (flag, *spec.get("aliases", ()))
        shape, kind = _shape(info.annotation)
        choices = _choices(info.annotation, info.metadata)
        if spec.get("text"):  # the model parses the text itself: its errors stay one line naming the flag
            shape, kind = "value", str
        help_text = spec.get("help") or info.description or ""
        required = info.is_required()
        default = None if required else info.get_default(call_default_factory=True)
        off_flag = None
        invert = bool(spec.get("invert"))
        if shape == "flag":
            off_flag = "--" + flag[len("--no-") :] if flag.startswith("--no-") else "--no-" + flag[2:]
            default = (not default) if invert else bool(default)
        elif shape == "list":
            default = None if default is None else ",".join(str(v) for v in default)
        elif shape == "pairs":
            default = None
        elif spec.get("text") and default is not None:
            default = str(default)  # as it would be typed
        metavar = spec.get("metavar") or _metavar(name, shape, kind, choices)
        panel = spec.get("panel")
        options.append(
            CliOption(name, flags, off_flag, shape, kind, default, required, help_text, invert, panel, choices, metavar)
        )
    return options


_UNITS = {"_s": "SECONDS", "_tokens": "TOKENS", "_mib": "MIB", "_gbps": "GB/S", "url": "URL"}
_KINDS = {int: "N", float: "X", str: "TEXT", Path: "PATH"}
LONGEST_CHOICES = 24  # longer alternatives show as the field's name; its help names them


def _metavar(name: str, shape: Shape, kind: Any, choices: tuple[str, ...]) -> str:
    """What `--help` shows for the value: the choices, the field's unit (by the suffix of its name: `_s`
    seconds, `_tokens`...), or its type."""
    if shape == "flag":
        return ""
    if shape == "pairs":
        return "KEY=VALUE"
    word = name.rpartition("_")[2].upper()
    if choices:
        shown = "|".join(choices)
        one = shown if len(shown) <= LONGEST_CHOICES else word
        return f"{word},..." if shape == "list" else one
    unit = next((u for suffix, u in _UNITS.items() if name.endswith(suffix)), None)
    one = unit or _KINDS.get(kind, "TEXT")
    return f"{one},..." if shape == "list" else one


def _choices(annotation: Any, metadata: list[Any]) -> tuple[str, ...]:
    """The values a field takes, where they are a fixed set: its Literal's, or those of its `among` or
    `one_of` check (on the field or inside its Annotated type)."""
    checks = list(metadata)
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        annotation = rest[0] if len(rest) == 1 else annotation
    if typing.get_origin(annotation) is Annotated:
        annotation, *more = typing.get_args(annotation)
        checks += more
    for check in checks:
        if isinstance(check, AfterValidator) and isinstance(check.func, Choosing):
            return check.func.choices
    if typing.get_origin(annotation) is Literal:
        return tuple(str(a) for a in typing.get_args(annotation))
    return ()


def from_cli(model: type[BaseModel], values: dict[str, Any], source: str) -> Any:
    """A validated `model` from command-line values keyed by field name (its own fields only; a value of
    None leaves the model's default). Errors are ConfigError, one line naming the flag and the value."""
    options = {o.field: o for o in cli_options(model)}
    given: dict[str, Any] = {}
    for name, option in options.items():
        value = values.get(name)
        if value is None:
            continue
        if option.shape == "flag" and option.invert:
            value = not value
        elif option.shape == "list":
            value = _split(value, option)
        elif option.shape == "pairs":
            value = _pairs(value, option)
        given[name] = value
    try:
        return model(**given)
    except ValidationError as exc:
        raise options_error(exc, options, values, source) from None


def options_error(
    exc: ValidationError, options: dict[str, CliOption], values: dict[str, Any], source: str
) -> ConfigError:
    """The first error as `--flag VALUE: what is wrong` (`source: ...` when no one option is at fault)."""
    err = exc.errors()[0]
    bound = _BOUNDS.get(err["type"])
    if bound is not None and bound[1] in err.get("ctx", {}):
        message = f"must be {bound[0]} {_number(err['ctx'][bound[1]])}"
    else:
        message = str(err["msg"]).removeprefix("Value error, ")
    field = str(err["loc"][0]) if err["loc"] else ""
    option = options.get(field)
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    if option is None:
        where = f"{field}: " if field else ""
        return ConfigError(f"{source}: {where}{message}{more}")
    raw = values.get(field)
    shown = " ".join(str(v) for v in raw) if isinstance(raw, (list, tuple)) else _number(raw)
    return ConfigError(f"{option.flag} {shown}: {message}{more}")


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# pydantic's bound errors, said the way the help says them
_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}


def _shape(annotation: Any) -> tuple[Shape, Any]:
    """(shape, the type of a value on the command line) of a field's annotation; None allowed or not."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        annotation = rest[0] if len(rest) == 1 else str
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return "flag", bool
    if origin is list:
        (element,) = typing.get_args(annotation) or (str,)
        return "list", element
    if origin is dict:
        return "pairs", str
    if annotation in (int, float, str, Path):
        return "value", annotation
    return "value", str  # a Literal, a constrained string: the model checks it


def _split(text: str, option: CliOption) -> list[Any]:
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if option.type is int:
        try:
            return [int(p) for p in parts]
        except ValueError:
            raise ConfigError(f"{option.flag} takes whole numbers separated by commas (got {text!r})") from None
    if option.type is float:
        try:
            return [float(p) for p in parts]
        except ValueError:
            raise ConfigError(f"{option.flag} takes numbers separated by commas (got {text!r})") from None
    return parts


def _pairs(items: list[str], option: CliOption) -> dict[str, Any]:
    """`KEY=VALUE` pairs; a value is a number or true/false."""
    pairs: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        try:
            value = json.loads(text) if sep else None
        except json.JSONDecodeError:
            value = None
        if not key.strip() or not isinstance(value, (int, float, bool)):
            raise ConfigError(
                f"{option.flag} takes KEY=VALUE with a number or true/false, e.g. temperature=0.7 (got {item!r})"
            )
        pairs[key.strip()] = value
    return pairs
