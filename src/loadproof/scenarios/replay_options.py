"""`loadproof run replay`'s options (`ReplayOptions`, the fields `cli/run.py` turns into flags): the trace and its
format, how it is selected, scaled and capped, and, for a recorded agent (`--format otel`,
`scenarios.agent_replay`), its pace, copies and how its messages are sized. The scenario is `scenarios.replay`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from loadproof.config.base import StrictModel
from loadproof.scenarios.load.options import ModelMix
from loadproof.scenarios.load.slo import SLO_SYNTAX, Slo
from loadproof.scenarios.options import Panel, cli, idle_timeout_field, sample_interval_field
from loadproof.scenarios.session_header import HeaderName, session_header_field
from loadproof.workloads.model_mix import MIX_SYNTAX
from loadproof.workloads.traces import HASHED, MOONCAKE_BLOCK, REPLAY_BLOCK, Shaped, TraceFormat, TraceRead, read_trace

Pace = Literal["deps", "recorded"]
ToolRole = Literal["tool", "user"]
# the options only a recorded agent takes, and those it does not
AGENT_ONLY = ("pace", "copies", "copy_interval_s", "input_scale", "tool_role")
NOT_AGENT = ("start_offset_s", "max_requests", "skip_bad_rows", "model_mix")
SESSIONS = ("bailian", "weka", "otel")  # the formats whose requests belong to sessions


class ReplayOptions(StrictModel):
    trace: str = Field(
        description="the trace file, in --format (the shipped Mooncake slice: loadproof/data/traces/)",
        json_schema_extra=cli(panel=Panel.DATA_SET, metavar="FILE"),
    )
    format: TraceFormat = Field(
        default="mooncake",
        description="mooncake (JSONL: timestamp ms, "
        "input_length, output_length, hash_ids), bailian (JSONL: chat_id, "
        "parent_chat_id, timestamp s, input_length, output_length, type, turn, "
        "hash_ids), weka (JSON: coding agents' sessions, sub-agents), azure (CSV: "
        "TIMESTAMP, ContextTokens, GeneratedTokens), csv "
        "(timestamp s, input, output) or otel (an agent's OpenTelemetry spans as OTLP JSON, GenAI or "
        "OpenInference conventions: each LLM call a request, in its recorded order)",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    time_scale: float = Field(
        default=1.0,
        gt=0,
        description="replay X > 0 times faster (2: half the gaps; 0.5: twice as slow; otel: every think time, "
        "gap and offset)",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    max_requests: int | None = Field(
        default=None, ge=1, description="replay at most N requests", json_schema_extra=cli(panel=Panel.ARRIVALS)
    )
    start_offset_s: float = Field(
        default=0.0,
        ge=0,
        description="start this many seconds (trace time) after the trace's first request",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    block_tokens: int | None = Field(
        default=None,
        ge=1,
        description="tokens per trace hash id as replayed "
        "(default: 512 for Mooncake, its own; 32 for Bailian, twice its 16, which a "
        "block's head line and pad need); B scales every input by B over the trace's "
        "block, keeping its sharing; otel: the blocks its prompts' expected prefix hits are counted in "
        "(default: the engine's KV block, else 16)",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    max_input_tokens: int | None = Field(
        default=None,
        ge=2,
        description="cap each prompt at this many tokens (as the engine counts them); the served context caps it too",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    max_output_tokens: int | None = Field(
        default=None,
        ge=1,
        description="cap each output at this many tokens",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="at most N requests in flight; the wait for a slot shows as send lag",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    ignore_eos: bool = Field(
        default=True,
        description="generate exactly each output length (--no-ignore-eos: let the model stop)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    slo: Slo | None = Field(
        default=None,
        description=f"per-request SLOs for goodput: {SLO_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.SLO_SEARCH, metavar="NAME=VALUE,..."),
    )
    deadline_s: float = Field(
        default=600.0, gt=0, description="per-request deadline in seconds", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    skip_bad_rows: bool = Field(
        default=False,
        description="skip rows that do not parse or break the time order, "
        "counting them, instead of stopping at the first",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    seed: int = Field(
        default=731,
        description="seed (an integer) of the filler in each block (and of --model-mix's draws)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    model_mix: ModelMix | None = Field(
        default=None,
        description="which model or LoRA adapter each request asks "
        f"for, drawn per request with the seed: {MIX_SYNTAX} (a prefix is shared only "
        "within one model, as vLLM keys its cache by adapter)",
        json_schema_extra=cli(text=True, panel=Panel.WORKLOAD, metavar="NAME=W,..."),
    )
    kv_blocks: int | None = Field(
        default=None,
        ge=2,
        description="the engine's KV cache in blocks (vLLM's "
        "num_gpu_blocks), for the hit rate expected at its size; default: its /metrics "
        "cache_config_info",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    kv_block_tokens: int | None = Field(
        default=None,
        ge=1,
        description="tokens per KV block of the engine (with --kv-blocks)",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    pace: Pace = Field(
        default="deps",
        description="otel: deps (each call as soon as the calls it waits for ended and its recorded tool "
        "time passed) or recorded (the recorded gap after them, framework overhead included, and never "
        "before its recorded offset)",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    copies: int = Field(
        default=1,
        ge=1,
        le=100_000,
        description="otel: N runs of the recorded agent, each a session of its own (system and developer "
        "messages shared across them, every other message its copy's own)",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    copy_interval_s: float = Field(
        default=0.0,
        ge=0,
        description="otel: seconds between the copies' starts",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    input_scale: float = Field(
        default=1.0,
        gt=0,
        le=1000,
        description="otel: size each call's prompt to its recorded input tokens x X (every message "
        "scaled alike, so what calls share stays shared)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    tool_role: ToolRole = Field(
        default="tool",
        description="otel: send a recorded tool message as a tool result (tool) or, for a chat template "
        "that refuses the tool role, as a user message (user)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    session_header: HeaderName | None = session_header_field(
        "bailian: the request's session; weka: its trace's, or its sub-agent's; otel: its copy's"
    )
    idle_timeout_s: float = idle_timeout_field()
    sample_interval_s: float = sample_interval_field()

    @property
    def block(self) -> int:
        """Tokens per hash id as replayed: --block-tokens, else the format's default (REPLAY_BLOCK)."""
        return self.block_tokens or REPLAY_BLOCK.get(self.format, MOONCAKE_BLOCK)

    def read(self) -> TraceRead:
        """The trace's rows these options select."""
        return read_trace(
            self.trace,
            self.format,
            start_offset_s=self.start_offset_s,
            max_requests=self.max_requests,
            skip_bad_rows=self.skip_bad_rows,
        )

    def plan_fields(self, read: TraceRead, shaped: list[Shaped]) -> dict[str, Any]:
        """What a replay plan says of its trace and of how these options selected, scaled and capped it: the
        scenario's plan and its prediction's alike (`ReplayPlan(**fields, ...)`)."""
        return {
            "trace": self.trace,
            "format": self.format,
            "sha256": read.sha256,
            "trace_rows": read.lines,
            "bad_rows": read.bad_rows,
            "before_offset": read.before_offset,
            "time_scale": self.time_scale,
            "start_offset_s": self.start_offset_s,
            "max_requests": self.max_requests,
            "trace_span_s": round(read.rows[-1].t_s - read.rows[0].t_s, 6),
            "block_tokens": self.block,
            "max_input_tokens": self.max_input_tokens,
            "max_output_tokens": self.max_output_tokens,
            "capped_inputs": sum(s.capped for s in shaped),
            "max_concurrency": self.max_concurrency,
            "slo": dict(self.slo or {}),
            "text_tokens": [s.text_tokens for s in shaped],
            "hash_ids": [list(s.blocks) for s in shaped] if self.format in HASHED else [],
        }

    @model_validator(mode="after")
    def _consistent(self) -> ReplayOptions:
        if not Path(self.trace).expanduser().is_file():
            raise ValueError(f"--trace {self.trace}: no such file")
        if self.format not in HASHED and self.format != "otel" and self.block_tokens is not None:
            raise ValueError(
                "--block-tokens scales a trace's hash-id blocks: it applies to --format mooncake, bailian, weka or otel"
            )
        fields = type(self).model_fields
        given = [f for f in (*AGENT_ONLY, *NOT_AGENT) if getattr(self, f) != fields[f].default]
        if self.format == "otel":
            wrong = [f for f in NOT_AGENT if f in given]
            if wrong:
                raise ValueError(f"{_flags(wrong)}: not for a recorded agent (--format otel)")
        else:
            wrong = [f for f in AGENT_ONLY if f in given]
            if wrong:
                raise ValueError(f"{_flags(wrong)}: for a recorded agent only (--format otel)")
        if self.session_header and self.format not in SESSIONS:
            raise ValueError(
                f"--session-header: a {self.format} trace has no sessions (bailian, weka and otel traces do)"
            )
        if (self.kv_blocks is None) != (self.kv_block_tokens is None):
            raise ValueError("--kv-blocks and --kv-block-tokens go together (the engine's cache: blocks x tokens each)")
        return self


def _flags(fields: list[str]) -> str:
    return ", ".join("--" + f.replace("_", "-") for f in fields)
