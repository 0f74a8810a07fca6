"""`loadproof run sessions`: U users, each a conversation of T turns sent whole every turn; cold vs warm TTFT
and the engine's prefix-cache reuse.

Each user's first turn is `[system prompt] + first message`; every later turn appends the model's actual
reply to the previous turn, then (the agent pattern) a tool output, then a new user message, waits the
think time after the reply, and sends the whole history again. Messages are exact-length text from the
haystack builder's filler (`SyntheticPrompts`), each headed by a line naming the user, the turn and the
run's salt, so no two users and no two runs share anything but the system prompt (shared by every user
of the run, as an agent's long system prompt is). On the completions endpoint the history is one text;
on the chat endpoint a list of messages (system, user, assistant, ...). Claims: `metrics.sessions`.

Agent turns (`--tool-turns N`, the coding-agent shape): generated tool definitions (`--tool-definitions-tokens`)
written into the shared system message and sent as the request's `tools`; turns 0 to N-1 force a call
(`tool_choice` required or a named tool: the engine constrains the answer to a call), and the next turn
appends the assistant's call and a `tool` message with a result of `--tool-result-tokens` tokens instead
of a user message. On the completions endpoint the answer text stands in for the call.

A user's own tools (`--tools FILE`, the same option as load's: `scenarios.constraints`) take the generated
definitions' place; `--tool-choice` is the agent turns' (default required) or, without agent turns, every
turn's; `--response-format` is asked of every turn that is no agent turn. Those answers are checked against
their schemas and counted as load counts them (`metrics.constraints`).
"""

from __future__ import annotations

import asyncio
import math
import random
import secrets
import time
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, model_validator

from loadproof.client import RequestSpec, StreamingClient
from loadproof.engines import engines
from loadproof.errors import UsageError
from loadproof.metrics.sessions import PRIME
from loadproof.plans import attach_plan
from loadproof.plans.datasets import DatasetRef
from loadproof.plans.load import MixedModel
from loadproof.plans.sessions import SessionsPlan
from loadproof.protocol.openai import request_body
from loadproof.records import RequestRecord
from loadproof.scenarios.base import Setup
from loadproof.scenarios.constraints import ConstraintOptions
from loadproof.scenarios.datasets import Columns
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.options import ModelMix
from loadproof.scenarios.load.scenario import check_mix, mixed_models
from loadproof.scenarios.load.slo import SLO_SYNTAX, Slo
from loadproof.scenarios.long_context import EXACT_LENGTH, MetricsScenario, haystack_target
from loadproof.scenarios.options import cli, idle_timeout_field, sample_interval_field
from loadproof.scenarios.recording import Console
from loadproof.scenarios.token_counts import PROBE_LINE
from loadproof.store.run_dir import RunWriter
from loadproof.telemetry.cache_config import read_cache_config
from loadproof.telemetry.server_metrics import MetricsScraper
from loadproof.workloads.agent import Conversation, tool_definitions, tool_names, tools_text
from loadproof.workloads.constraints import CHOICES, Constraint, tool_choice_body
from loadproof.workloads.datasets import FORMATS, DatasetSpec, content_text, resolve, select
from loadproof.workloads.model_mix import MIX_SYNTAX
from loadproof.workloads.synthetic import SyntheticPrompts

THINK_SYNTAX = "seconds X, or uniform:LOW:HIGH"
CACHE_INFO = "vllm:cache_config_info"  # vLLM's info gauge: block_size, kv_cache_size_tokens, num_gpu_blocks labels


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
        description="concurrent users, each one conversation",
        json_schema_extra=cli(aliases=["-u"]),
    )
    turns: int = Field(
        default=4, ge=1, le=1000, description="turns per conversation", json_schema_extra=cli(aliases=["-t"])
    )
    first_tokens: int = Field(default=512, ge=8, description="tokens of each user's first message")
    turn_tokens: int = Field(default=64, ge=8, description="tokens of each later user message")
    system_tokens: int = Field(
        default=0,
        ge=0,
        description="a system prompt of this many tokens every user shares (the agent pattern; 0: none)",
    )
    tool_tokens: int = Field(
        default=0,
        ge=0,
        description="a tool output of this many tokens appended before each "
        "later user message (the agent pattern; 0: none)",
    )
    output_tokens: int = Field(default=32, ge=1, description="tokens of each reply (max_tokens)")
    think_time_s: Think = Field(
        default="0",
        description=f"wait after a reply before the next turn: {THINK_SYNTAX}",
        json_schema_extra=cli(text=True),
    )
    stagger_s: float = Field(
        default=0.0, ge=0, description="spread the users' first turns evenly over this many seconds"
    )
    ignore_eos: bool = Field(
        default=True, description="generate exactly --output-tokens (--no-ignore-eos: let the model stop)"
    )
    dataset: str | None = Field(
        default=None,
        description="the users' messages from a data set: a ShareGPT file or "
        "JSONL of `messages` gives each user a conversation (its user turns); a file of "
        "prompts (JSONL, Parquet, Arrow) gives each message a row (seeded samples)",
    )
    dataset_format: Literal[FORMATS] = Field(
        default="auto",
        description="the data set's format; auto: by its "  # type: ignore[valid-type]
        "extension (.json sharegpt, .jsonl, .parquet, .arrow)",
    )
    dataset_columns: Columns = Field(
        default={},
        description="FIELD=COLUMN,... maps prompt, messages or conversations to the data set's own names",
        json_schema_extra=cli(text=True),
    )
    tool_definitions_tokens: int = Field(
        default=0,
        ge=0,
        description="generated tool definitions of about this "
        "many tokens (--tool-count tools, descriptions of filler), shared by every "
        "user after the system prompt (the coding-agent shape; 0: none)",
    )
    tool_count: int = Field(default=8, ge=1, le=100, description="how many tools the generated definitions define")
    tools_in_prompt: bool = Field(
        default=True,
        description="write the tool definitions into the system message "
        "(--no-tools-in-prompt: leave them to the engine's chat template, for templates "
        "that render `tools` themselves; the embedded Gemma's does not)",
    )
    tool_turns: int = Field(
        default=0,
        ge=0,
        description="agent turns: turns 0 to N-1 each ask for a tool call, and "
        "the next turn appends the call and a tool result (no user message)",
    )
    tool_choice: str | None = Field(
        default=None,
        description="the agent turns' tool_choice (default required), or "
        "without --tool-turns every turn's: auto, required, or a tool's name (of "
        "--tools FILE or the generated tools)",
    )
    tool_result_tokens: int = Field(default=256, ge=8, description="tokens of each tool result appended after a call")
    prime_shared: bool = Field(
        default=False,
        description="before the users start, send the shared prefix (the "
        "system prompt and tool definitions) once with a one-token reply, as a deployment "
        "whose agents share it has it cached; the users' first turns then prefill only their "
        "own message (its record is family prime, no turn's)",
    )
    engine_block_tokens: int | None = Field(
        default=None,
        ge=1,
        description="the engine's KV block size in tokens, "
        "for the prefix-cache expectations (default: its /metrics "
        "cache_config_info)",
    )
    engine_kv_tokens: int | None = Field(
        default=None,
        ge=1,
        description="the engine's KV cache in tokens, for the "
        "bounded expectation (default: its /metrics cache_config_info; its startup "
        "log's 'KV cache size')",
    )
    cpu_tier_tokens: int | None = Field(
        default=None,
        ge=1,
        description="the engine's CPU tier for the KV cache in "
        "tokens (`loadproof plan PROFILE` shows it), for the tokens the tier should "
        "supply (docs/scenarios.md, sessions, A CPU tier)",
    )
    kv_bytes_per_token: int | None = Field(
        default=None,
        ge=1,
        description="bytes one token's KV takes (`loadproof "
        "plan`), for each warm turn's transfer from the tier (with --h2d-gbps)",
    )
    h2d_gbps: float | None = Field(
        default=None,
        gt=0,
        description="the host-to-device bandwidth you measured, in "
        "GB/s (1e9 bytes/s), for the transfer bound (with --kv-bytes-per-token)",
    )
    seed: int = Field(default=731, description="seed of the filler and the think times")
    model_mix: ModelMix | None = Field(
        default=None,
        description="which model or LoRA adapter each user's "
        f"conversation asks for, drawn per user with the seed: {MIX_SYNTAX} (the "
        "shared prefix is shared within one model: --prime-shared primes each)",
        json_schema_extra=cli(text=True),
    )
    deadline_s: float = Field(default=600.0, gt=0, description="per-request deadline in seconds")
    slo: Slo | None = Field(
        default=None,
        description=f"per-request SLOs: which requests are good, for goodput and "
        f"the energy and cost per good token: {SLO_SYNTAX}",
        json_schema_extra=cli(text=True),
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


def engine_cache_size(target: Any) -> tuple[int, int, str] | None:
    """(block tokens, KV cache tokens, where from) from the engine's /metrics cache_config_info
    (telemetry.cache_config); None where the source is no exposition or shows neither."""
    found = read_cache_config(target.metrics, target.metrics_api_key)
    if found is None or found.tokens is None:
        return None
    return found.block_tokens, found.tokens, f"the engine's /metrics {CACHE_INFO}"


class SessionsScenario(MetricsScenario):
    name = "sessions"
    Options = SessionsOptions
    summary = (
        "Multi-turn conversations: U users, T turns each, the whole history sent every turn; cold vs warm "
        "TTFT and the engine's prefix-cache reuse."
    )
    tokenizer = EXACT_LENGTH
    options: SessionsOptions

    @classmethod
    def perform(cls, setup: Setup, console: Console) -> None:
        if setup.options.model_mix:  # a model the target does not list: one line before any run directory
            check_mix(setup.options.model_mix, setup.target)
        super().perform(setup, console)

    def _think(self, rng: random.Random) -> float:
        text = self.options.think_time_s
        if text.startswith("uniform:"):
            low, high = (float(x) for x in text.split(":")[1:])
            return rng.uniform(low, high)
        return float(text)

    def _conversations(self, said: list[list[str]], builder: Any) -> DatasetRef:
        """Replace the users' messages with the data set's (in place). A conversation per user where the rows
        are conversations (ShareGPT: its human turns; JSONL `messages`: its user messages; filler where one
        ends); otherwise one row's prompt per message, users x turns rows sampled with the seed."""
        opts = self.options
        _, fmt = resolve(opts.dataset, opts.dataset_format)  # type: ignore[arg-type]
        spec = DatasetSpec(
            path=opts.dataset,
            format=fmt,
            columns=dict(opts.dataset_columns),  # type: ignore[arg-type]
            seed=opts.seed,
            repeat=True,
        )
        probe = select(
            DatasetSpec(
                path=opts.dataset,
                format=fmt,
                columns=dict(opts.dataset_columns),  # type: ignore[arg-type]
                sample="first",
                seed=opts.seed,
                repeat=True,
            ),
            1,
            lambda items: [0] * len(items),
        )
        conversations = bool(probe.items) and (probe.items[0].turns is not None or probe.items[0].messages is not None)
        n = opts.users if conversations else opts.users * opts.turns
        sel = select(spec, n, lambda items: [0] * len(items))
        from_data = 0
        for k, item in enumerate(sel.items):
            if conversations:
                texts = (
                    item.turns
                    if item.turns is not None
                    else [
                        content_text(m.get("content")) for m in item.messages or () if m.get("role", "user") == "user"
                    ]
                )
                places = [(k, t) for t in range(min(len(texts), opts.turns))]
            else:
                texts, places = [item.text()], [divmod(k, opts.turns)]
            for (u, t), text in zip(places, texts):
                said[u][t] = text if text.endswith("\n") else text + "\n"
                from_data += 1
        unit = "conversations" if conversations else "prompts"
        self.status(
            f"data set {sel.files[0]} ({sel.format}): {sel.usable} {unit}, {opts.users} users, {from_data} of "
            f"{opts.users * opts.turns} messages from it"
            + (" (filler where a conversation ends)" if conversations else "")
        )
        return DatasetRef(
            path=str(opts.dataset),
            format=sel.format,
            files=sel.files,
            sha256=sel.sha256,
            columns=dict(opts.dataset_columns),
            sample="random",
            seed=opts.seed,
            repeat=True,
            rows=sel.rows,
            bad_rows=sel.bad_rows,
            no_prompt=sel.no_prompt,
            usable=sel.usable,
            repeated=sel.repeated,
            rows_sent=[i.row for i in sel.items],
            messages_from_data=from_data,
        )

    def _cache_size(self) -> tuple[int | None, int | None, str | None]:
        """The engine's KV block size and cache size in tokens, and where they came from: the options, else its
        /metrics."""
        opts = self.options
        found = (
            engine_cache_size(self.target)
            if opts.engine_block_tokens is None or opts.engine_kv_tokens is None
            else None
        )
        block = opts.engine_block_tokens or (found[0] if found else None)
        kv = opts.engine_kv_tokens or (found[1] if found else None)
        given = [
            f
            for f, v in (
                ("--engine-block-tokens", opts.engine_block_tokens),
                ("--engine-kv-tokens", opts.engine_kv_tokens),
            )
            if v is not None
        ]
        source = (
            " and ".join(
                filter(None, [", ".join(given) if given else None, found[2] if found and len(given) < 2 else None])
            )
            or None
        )
        if block is None:  # the adapter's default block size: the unbounded expectation still holds
            block = engines.get(self.target.engine).default_block_size
            source = f"the {self.target.engine} adapter's default block size" + (f"; {source}" if source else "")
        return block, kv, source

    async def run(self, writer: RunWriter, manifest: dict[str, Any], live: LiveStatus | None = None) -> None:
        opts, target = self.options, self.target
        live = live or LiveStatus(self.name)
        opts.constraint(target.endpoint)  # one line before anything is sent: --tools, --response-format need chat
        if opts.idle_timeout_s > 0:
            await self.wait_until_idle(writer, opts.idle_timeout_s)
        hs = haystack_target(target, opts.seed, PROBE_LINE)
        builder = hs.builder
        salt = secrets.token_hex(4)
        prompts = SyntheticPrompts(builder, run_salt=salt, seed=opts.seed)
        chat = target.endpoint == "chat"
        fill_rng = random.Random(f"{opts.seed}:sessions")

        def message(head: str, tokens: int) -> str:
            text = prompts._fill(head, builder.count(head), tokens, fill_rng.randrange(prompts._n))
            if text is None:
                raise UsageError(
                    f"{tokens} tokens is too short for a message: its head line {head.strip()!r} and a pad "
                    f"need {builder.count(head) + prompts.pad_min}"
                )
            return text

        # every message before the first send: a length too short for its head is refused before anything is sent
        system = message(f"System {salt}.\n", opts.system_tokens) if opts.system_tokens else ""
        names = opts.tool_names()
        definitions: list[dict[str, Any]] = list(opts.tools.definitions) if opts.tools is not None else []
        if opts.tools is not None and opts.tools_in_prompt:
            system += tools_text(definitions)
        if opts.tool_definitions_tokens:  # each description sized so the definitions come to about the tokens asked
            frame = builder.count(tools_text(tool_definitions(names, [""] * len(names))))
            each = (opts.tool_definitions_tokens - frame) // len(names)
            least = max(builder.count(f"Tool {name} {salt}.\n") for name in names) + prompts.pad_min
            if each < least:
                raise UsageError(
                    f"--tool-definitions-tokens {opts.tool_definitions_tokens} is too few for "
                    f"{len(names)} tools: they need at least {frame + least * len(names)} (or fewer "
                    "--tool-count)"
                )
            definitions = tool_definitions(names, [message(f"Tool {name} {salt}.\n", each) for name in names])
            if opts.tools_in_prompt:
                system += tools_text(definitions)
        shared = builder.count(system) if system else 0
        said = [
            [
                message(f"User {u}.{t} {salt}.\n", opts.turn_tokens if t else opts.first_tokens)
                for t in range(opts.turns)
            ]
            for u in range(opts.users)
        ]
        ref = None
        if opts.dataset is not None:  # the users' messages from the data set (filler where it has none)
            ref = self._conversations(said, builder)
        tools = [
            [
                message(f"Tool {u}.{t} {salt}.\n", opts.tool_tokens) if opts.tool_tokens and t else ""
                for t in range(opts.turns)
            ]
            for u in range(opts.users)
        ]
        results = [
            [
                message(f"Result {u}.{t} {salt}.\n", opts.tool_result_tokens) if t < opts.tool_turns else ""
                for t in range(opts.turns)
            ]
            for u in range(opts.users)
        ]
        # --model-mix: each user's model, drawn with the seed ("" everywhere: the target's, not recorded)
        models = mixed_models(opts.model_mix, opts.seed, target, opts.users) if opts.model_mix else [""] * opts.users
        # one short /metrics read before anything is sent, off the event loop (the live view keeps ticking)
        block, kv, kv_source = await asyncio.to_thread(self._cache_size)
        plan = SessionsPlan(
            users=opts.users,
            turns=opts.turns,
            first_tokens=opts.first_tokens,
            turn_tokens=opts.turn_tokens,
            system_tokens=opts.system_tokens,
            tool_tokens=opts.tool_tokens,
            output_tokens=opts.output_tokens,
            think_time=opts.think_time_s,
            stagger_s=opts.stagger_s,
            seed=opts.seed,
            ignore_eos=opts.ignore_eos,
            deadline_s=opts.deadline_s,
            endpoint=target.endpoint,
            overhead_tokens=builder.overhead_tokens,
            dataset=ref,
            tool_definitions_tokens=opts.tool_definitions_tokens,
            tool_names=names,
            tools_in_prompt=opts.tools_in_prompt,
            tool_turns=opts.tool_turns,
            tool_result_tokens=opts.tool_result_tokens if opts.tool_turns else 0,
            tool_choice=opts.turn_choice(0) if opts.tool_turns else None,
            tool_call_mode=("tools" if chat else "text") if opts.tool_turns else None,
            shared_prefix_tokens=shared,
            prime_shared=opts.prime_shared,
            block_tokens=block,
            kv_cache_tokens=kv,
            kv_source=kv_source,
            cpu_tier_tokens=opts.cpu_tier_tokens,
            kv_bytes_per_token=opts.kv_bytes_per_token,
            h2d_gbps=opts.h2d_gbps,
            slo=dict(opts.slo or {}),
            model_mix=[MixedModel(model=m, weight=w) for m, w in (opts.model_mix or {}).items()],
        )
        attach_plan(manifest, plan)
        writer.write_manifest(manifest)
        total = live.planned = opts.users * opts.turns
        self.status(
            f"sessions: {opts.users} users x {opts.turns} turns ({total} requests), first message "
            f"{opts.first_tokens} tokens, then {opts.turn_tokens} a turn"
            + (f", system prompt {opts.system_tokens}" if opts.system_tokens else "")
            + (
                f", {len(names)} tool definitions{f' from {opts.tools}' if opts.tools else ''} ({shared} "
                "shared tokens in all)"
                if names
                else ""
            )
            + (f", tool output {opts.tool_tokens} a turn" if opts.tool_tokens else "")
            + (
                f", {opts.tool_turns} agent turns (tool_choice {opts.turn_choice(0)}, results of "
                f"{opts.tool_result_tokens})"
                if opts.tool_turns
                else ""
            )
            + f", replies {opts.output_tokens}, think time {opts.think_time_s} s"
            + (f"; engine KV {kv} tokens in blocks of {block} ({kv_source})" if block else "")
        )
        constrained = [opts.turn_constraint(t) for t in range(opts.turns)]
        if opts.tool_turns and not chat:
            self.status(
                "sessions: the completions endpoint takes no tools: each agent turn's answer text stands in "
                "for its call"
            )
        failed = 0

        def sink(record: RequestRecord) -> None:
            nonlocal failed
            check = constrained[record.batch] if record.family != PRIME else None
            if check is not None:
                check.check(record)
            writer.append(record)
            failed += not record.ok

        async def user(client: StreamingClient, u: int) -> None:
            rng = random.Random(f"{opts.seed}:think:{u}")
            if opts.stagger_s and opts.users > 1:
                await asyncio.sleep(opts.stagger_s * u / opts.users)
            convo = Conversation.opened(system, said[u][0])
            for turn in range(opts.turns):
                if turn and turn > opts.tool_turns:  # a plain turn follows a reply: the user says something new
                    convo.say(tools[u][turn] + said[u][turn])
                calls = turn < opts.tool_turns
                check = constrained[turn]
                free = not (calls and chat) and check is None  # a call or a checked answer ends where the model stops
                extra = dict(target.extra_body)
                if chat:
                    extra["messages"] = list(convo.messages)
                    if definitions:  # every turn: the same definitions, so the same shared prefix
                        extra["tools"] = definitions
                        choice = opts.turn_choice(turn)
                        if choice is not None:
                            extra["tool_choice"] = tool_choice_body(choice)
                    if check is not None and check.response_format is not None:
                        extra["response_format"] = check.response_format.body()
                body = request_body(
                    target.endpoint,
                    models[u] or target.model,
                    "" if chat else convo.text,
                    max_tokens=opts.output_tokens,
                    temperature=0.0,
                    ignore_eos=opts.ignore_eos and free,
                    extra=extra,
                )
                spec = RequestSpec(
                    request_id=f"sessions-u{u}-t{turn}", endpoint=target.endpoint, body=body, deadline_s=opts.deadline_s
                )
                exact = (
                    builder.overhead_tokens + shared + opts.first_tokens
                    if turn == 0 and not (chat and system) and ref is None
                    else None
                )
                record = RequestRecord(
                    request_id=spec.request_id,
                    endpoint=target.endpoint,
                    scenario=self.name,
                    family="cold" if turn == 0 else "warm",
                    prompt_id=f"u{u}",
                    concurrency=opts.users,
                    batch=turn,
                    planned_input_tokens=exact,
                    planned_output_tokens=opts.output_tokens if free else None,
                    model=models[u],
                )
                await client.stream(spec, record)  # the sink checks the answer (--tools, --response-format)
                if not record.ok:
                    return  # the conversation cannot go on without its reply
                convo.answered(record, results[u][turn] if calls else None, f"call-{u}-{turn}")
                if turn + 1 < opts.turns:
                    think = self._think(rng)
                    if think:
                        await asyncio.sleep(think)

        async def prime(client: StreamingClient, scraper: MetricsScraper) -> None:
            """The shared prefix once for each model the users ask for (a model's cache is its own), answered with
            one token, then a sample of the engine's counters (the turns' window starts after it)."""
            first = f"Ready {salt}.\n"
            extra = dict(target.extra_body)
            if chat:
                extra["messages"] = Conversation.opened(system, first).messages
                if definitions:
                    extra.update(tools=definitions, tool_choice="none")
            started = time.perf_counter()
            primed = []
            for k, model in enumerate(dict.fromkeys(models)):  # each model's own cache, in the users' order
                body = request_body(
                    target.endpoint,
                    model or target.model,
                    "" if chat else system + first,
                    max_tokens=1,
                    temperature=0.0,
                    ignore_eos=True,
                    extra=extra,
                )
                spec = RequestSpec(
                    request_id="sessions-prime" + (f"-{k}" if k else ""),
                    endpoint=target.endpoint,
                    body=body,
                    deadline_s=opts.deadline_s,
                )
                record = RequestRecord(
                    request_id=spec.request_id,
                    endpoint=target.endpoint,
                    scenario=self.name,
                    family=PRIME,
                    prompt_id="shared",
                    concurrency=1,
                    planned_output_tokens=1,
                    model=model,
                )
                await client.stream(spec, record)
                if not record.ok:  # its users still run, cold; the expectations then count no priming for them
                    self.status(
                        f"sessions: the priming request{f' of {model}' if model else ''} failed "
                        f"({record.error_message}); its users start cold"
                    )
                    continue
                primed.append(record)
            if not primed:
                return
            await scraper.sample()
            record = primed[0]
            self.status(
                f"sessions: the shared prefix ({record.prompt_tokens} tokens with the priming message) "
                f"primed in {time.perf_counter() - started:.1f} s"
            )

        turns = f"{opts.users} users x {opts.turns} turns"
        if opts.prime_shared:
            live.phase("prime", detail=f"the shared prefix, {shared} tokens, once")
        else:
            live.phase("requests", detail=turns)
        async with MetricsScraper(
            target.metrics,
            self.metric_names,
            interval_s=opts.sample_interval_s or None,
            sink=writer.metric_sample,
            api_key=target.metrics_api_key,
        ) as scraper:
            live.watch_engine(scraper.samples)
            async with StreamingClient(
                target.url,
                api_key=target.api_key,
                max_connections=opts.users + 4,
                on_record=live.recording(sink),
                on_start=live.started,
                keep_text=True,
            ) as client:
                if opts.prime_shared:
                    await prime(client, scraper)
                    live.phase("requests", detail=turns)
                started = time.perf_counter()
                tasks = [asyncio.create_task(user(client, u)) for u in range(opts.users)]
                try:
                    await asyncio.gather(*tasks)
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                self.status(
                    f"sessions: {total} turns planned, {failed} failed, in {time.perf_counter() - started:.1f} s"
                )
