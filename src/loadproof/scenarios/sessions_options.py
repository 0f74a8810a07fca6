"""`loadproof run sessions`'s options (`SessionsOptions`, the fields `cli/run.py` turns into flags) and the
think-time syntax; the scenario itself is `scenarios.sessions`, the users' messages from a data set
`scenarios.sessions_dataset`."""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BeforeValidator, Field, PlainSerializer, model_validator

from loadproof.errors import UsageError
from loadproof.scenarios.constraints import ConstraintOptions
from loadproof.scenarios.datasets import Columns
from loadproof.scenarios.load.options import ModelMix
from loadproof.scenarios.load.slo import SLO_SYNTAX, Slo
from loadproof.scenarios.options import Panel, cli, idle_timeout_field, sample_interval_field
from loadproof.scenarios.session_header import HeaderName, session_header_field
from loadproof.workloads.agent import tool_names
from loadproof.workloads.constraints import CHOICES, Constraint
from loadproof.workloads.datasets import DatasetFormat, resolve
from loadproof.workloads.model_mix import MIX_SYNTAX

THINK_SYNTAX = "seconds X, or uniform:LOW:HIGH"


def parse_think(value: object) -> str:
    text = f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value).strip()
    parts = text.split(":")
    try:
        numbers = [float(p) for p in (parts[1:] if parts[0] == "uniform" else parts)]
    except ValueError:
        raise ValueError(f"takes {THINK_SYNTAX} (got {text!r})") from None
    if (
        parts[0] == "uniform"
        and len(numbers) == 2
        and 0 <= numbers[0] <= numbers[1]
        and all(map(math.isfinite, numbers))
    ):
        return f"uniform:{numbers[0]:g}:{numbers[1]:g}"
    if len(parts) == 1 and len(numbers) == 1 and numbers[0] >= 0 and math.isfinite(numbers[0]):
        return f"{numbers[0]:g}"
    raise ValueError(f"takes {THINK_SYNTAX}, never negative (got {text!r})")


Think = Annotated[str, BeforeValidator(parse_think), PlainSerializer(str)]


class SessionsOptions(ConstraintOptions):  # --tools, --tool-choice, --response-format (scenarios/constraints.py)
    users: int = Field(
        default=4,
        ge=1,
        le=10_000,
        description="N concurrent users, each one conversation",
        json_schema_extra=cli(aliases=["-u"], panel=Panel.ARRIVALS),
    )
    turns: int = Field(
        default=4,
        ge=1,
        le=1000,
        description="N turns per conversation",
        json_schema_extra=cli(aliases=["-t"], panel=Panel.WORKLOAD),
    )
    first_tokens: int = Field(
        default=512,
        ge=8,
        description="tokens of each user's first message",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    turn_tokens: int = Field(
        default=64, ge=8, description="tokens of each later user message", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    system_tokens: int = Field(
        default=0,
        ge=0,
        description="a system prompt of this many tokens every user shares (the agent pattern; 0: none)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    tool_tokens: int = Field(
        default=0,
        ge=0,
        description="a tool output of this many tokens appended before each "
        "later user message (the agent pattern; 0: none)",
        json_schema_extra=cli(panel=Panel.TOOLS),
    )
    output_tokens: int = Field(
        default=32, ge=1, description="tokens of each reply (max_tokens)", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    think_time_s: Think = Field(
        default="0",
        description=f"wait after a reply before the next turn: {THINK_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.ARRIVALS, metavar="X|uniform:LO:HI"),
    )
    stagger_s: float = Field(
        default=0.0,
        ge=0,
        description="spread the users' first turns evenly over this many seconds",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    ignore_eos: bool = Field(
        default=True,
        description="generate exactly --output-tokens (--no-ignore-eos: let the model stop)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    dataset: str | None = Field(
        default=None,
        description="the users' messages from a data set: a ShareGPT file or "
        "JSONL of `messages` gives each user a conversation (its user turns); a file of "
        "prompts (JSONL, Parquet, Arrow) gives each message a row (seeded samples)",
        json_schema_extra=cli(panel=Panel.DATA_SET, metavar="PATH"),
    )
    dataset_format: DatasetFormat = Field(
        default="auto",
        description="the data set's format: auto (by its extension: .json sharegpt, .jsonl, .parquet, .arrow), "
        "sharegpt, jsonl, parquet or arrow",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    dataset_columns: Columns = Field(
        default={},
        description="FIELD=COLUMN,... maps prompt, messages or conversations to the data set's own names",
        json_schema_extra=cli(text=True, panel=Panel.DATA_SET, metavar="FIELD=COL,..."),
    )
    tool_definitions_tokens: int = Field(
        default=0,
        ge=0,
        description="generated tool definitions of about this "
        "many tokens (--tool-count tools, descriptions of filler), shared by every "
        "user after the system prompt (the coding-agent shape; 0: none)",
        json_schema_extra=cli(panel=Panel.TOOLS),
    )
    tool_count: int = Field(
        default=8,
        ge=1,
        le=100,
        description="how many tools, 1 to 100, the generated definitions define",
        json_schema_extra=cli(panel=Panel.TOOLS),
    )
    tools_in_prompt: bool = Field(
        default=True,
        description="write the tool definitions into the system message "
        "(--no-tools-in-prompt: leave them to the engine's chat template, for templates "
        "that render `tools` themselves; the embedded Gemma's does not)",
        json_schema_extra=cli(panel=Panel.TOOLS),
    )
    tool_turns: int = Field(
        default=0,
        ge=0,
        description="agent turns: turns 0 to N-1 each ask for a tool call, and "
        "the next turn appends the call and a tool result (no user message)",
        json_schema_extra=cli(panel=Panel.TOOLS),
    )
    tool_choice: str | None = Field(
        default=None,
        description="the agent turns' tool_choice (default required), or "
        "without --tool-turns every turn's: auto, required, or a tool's name (of "
        "--tools FILE or the generated tools)",
        json_schema_extra=cli(panel=Panel.TOOLS, metavar="auto|required|NAME"),
    )
    tool_result_tokens: int = Field(
        default=256,
        ge=8,
        description="tokens of each tool result appended after a call",
        json_schema_extra=cli(panel=Panel.TOOLS),
    )
    prime_shared: bool = Field(
        default=False,
        description="before the users start, send the shared prefix (the "
        "system prompt and tool definitions) once with a one-token reply, as a deployment "
        "whose agents share it has it cached; the users' first turns then prefill only their "
        "own message (its record is family prime, no turn's)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    engine_block_tokens: int | None = Field(
        default=None,
        ge=1,
        description="the engine's KV block size in tokens, "
        "for the prefix-cache expectations (default: its /metrics "
        "cache_config_info)",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    engine_kv_tokens: int | None = Field(
        default=None,
        ge=1,
        description="the engine's KV cache in tokens, for the "
        "bounded expectation (default: its /metrics cache_config_info; its startup "
        "log's 'KV cache size')",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    engine_sliding_window: int | None = Field(
        default=None,
        ge=0,
        description="a hybrid model's sliding window in tokens that the engine keeps only at checkpoints, for the "
        "checkpointed expectation; 0: the engine keeps every block (--disable-hybrid-kv-cache-manager) "
        "(default: the model's config.json beside --tokenizer, where the engine's /metrics cache_config_info says "
        "prefix_cache_retention_interval 0)",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    cpu_tier_tokens: int | None = Field(
        default=None,
        ge=1,
        description="the engine's CPU tier for the KV cache in "
        "tokens (`loadproof plan PROFILE` shows it), for the tokens the tier should "
        "supply (docs/scenarios.md, sessions, A CPU tier)",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    kv_bytes_per_token: int | None = Field(
        default=None,
        ge=1,
        description="bytes one token's KV takes (`loadproof "
        "plan`), for each warm turn's transfer from the tier (with --h2d-gbps)",
        json_schema_extra=cli(panel=Panel.ENGINE, metavar="BYTES"),
    )
    h2d_gbps: float | None = Field(
        default=None,
        gt=0,
        description="the host-to-device bandwidth you measured, in "
        "GB/s (1e9 bytes/s), for the transfer bound (with --kv-bytes-per-token)",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    seed: int = Field(
        default=731,
        description="seed (an integer) of the filler and the think times",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    model_mix: ModelMix | None = Field(
        default=None,
        description="which model or LoRA adapter each user's "
        f"conversation asks for, drawn per user with the seed: {MIX_SYNTAX} (the "
        "shared prefix is shared within one model: --prime-shared primes each)",
        json_schema_extra=cli(text=True, panel=Panel.WORKLOAD, metavar="NAME=W,..."),
    )
    deadline_s: float = Field(
        default=600.0, gt=0, description="per-request deadline in seconds", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    session_header: HeaderName | None = session_header_field("<salt>-u<k>, each user's conversation")
    slo: Slo | None = Field(
        default=None,
        description=f"per-request SLOs: which requests are good, for goodput and "
        f"the energy and cost per good token: {SLO_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.SLO_SEARCH, metavar="NAME=VALUE,..."),
    )
    idle_timeout_s: float = idle_timeout_field()
    sample_interval_s: float = sample_interval_field()

    @model_validator(mode="after")
    def _constraints(self) -> SessionsOptions:  # in place of ConstraintOptions': generated tools count too
        if self.tools is not None and self.tool_definitions_tokens:
            raise ValueError("--tools FILE and --tool-definitions-tokens both define the tools: give one")
        if self.tool_turns > self.turns:
            raise ValueError(f"--tool-turns {self.tool_turns} is more than --turns {self.turns}")
        if (self.kv_bytes_per_token is None) != (self.h2d_gbps is None):
            raise ValueError("the transfer bound needs both --kv-bytes-per-token and --h2d-gbps")
        if self.prime_shared and not (self.system_tokens or self.tool_definitions_tokens or self.tools):
            raise ValueError(
                "--prime-shared needs a shared prefix to send: --system-tokens N, "
                "--tool-definitions-tokens N or --tools FILE"
            )
        names = self.tool_names()
        if self.tool_turns and not names:
            raise ValueError("--tool-turns needs tools to call: --tool-definitions-tokens N or --tools FILE")
        if self.tool_choice is not None and not names:
            raise ValueError(
                f"--tool-choice {self.tool_choice} needs tools: --tools FILE or --tool-definitions-tokens N"
            )
        if self.tool_choice is not None and self.tool_choice not in CHOICES and self.tool_choice not in names:
            raise ValueError(
                f"--tool-choice {self.tool_choice!r} names no tool: auto, required, or one of {', '.join(names)}"
            )
        return self

    def tool_names(self) -> list[str]:
        """The tools the requests declare: the file's, or the generated ones' (none without either)."""
        if self.tools is not None:
            return self.tools.names
        return tool_names(self.tool_count) if self.tool_definitions_tokens else []

    def turn_choice(self, turn: int) -> str | None:
        """Turn `turn`'s tool_choice (None: not sent): an agent turn's is --tool-choice or required; with agent
        turns the others' is none; without, --tool-choice as given."""
        if turn < self.tool_turns:
            return self.tool_choice or "required"
        return "none" if self.tool_turns else self.tool_choice

    def turn_constraint(self, turn: int) -> Constraint | None:
        """What turn `turn`'s answer is checked against (None: nothing): with --tools or --response-format,
        the file's tools (required on an agent turn) and, on a turn that is no agent turn, the format."""
        if not self.constrained:
            return None
        agent = turn < self.tool_turns
        choice = self.turn_choice(turn)
        return Constraint(self.tools, choice if choice != "none" else None, None if agent else self.response_format)

    @model_validator(mode="after")
    def _dataset(self) -> SessionsOptions:
        if self.dataset is not None:
            try:
                resolve(self.dataset, self.dataset_format)
            except UsageError as exc:
                raise ValueError(str(exc)) from None
        return self
