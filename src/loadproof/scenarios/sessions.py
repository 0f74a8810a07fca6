"""`loadproof run sessions`: U users, each a conversation of T turns sent whole every turn; cold vs warm TTFT
and the engine's prefix-cache reuse.

Each user's first turn is `[system prompt] + first message`; every later turn appends the model's actual
reply to the previous turn, then (the agent pattern) a tool output, then a new user message, waits the
think time after the reply, and sends the whole history again. Messages are exact-length text from the
haystack builder's filler (`SyntheticPrompts`), each headed by a line naming the user, the turn and the
run's salt, so no two users and no two runs share anything but the system prompt (shared by every user
of the run, as an agent's long system prompt is). On the completions endpoint the history is one text;
on the chat endpoint a list of messages (system, user, assistant, ...). Claims: `metrics.sessions`.
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
from loadproof.config.base import StrictModel
from loadproof.errors import UsageError
from loadproof.plans import attach_plan
from loadproof.plans.datasets import DatasetRef
from loadproof.plans.sessions import SessionsPlan
from loadproof.protocol.openai import request_body
from loadproof.records import RequestRecord
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.long_context import EXACT_LENGTH, MetricsScenario, haystack_target
from loadproof.scenarios.options import cli, idle_timeout_field, sample_interval_field
from loadproof.scenarios.token_counts import PROBE_LINE
from loadproof.store.run_dir import RunWriter
from loadproof.telemetry.server_metrics import MetricsScraper
from loadproof.scenarios.datasets import Columns
from loadproof.workloads.datasets import FORMATS, DatasetSpec, content_text, resolve, select
from loadproof.workloads.synthetic import SyntheticPrompts

THINK_SYNTAX = "seconds X, or uniform:LOW:HIGH"


def parse_think(value: object) -> str:
    text = f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value).strip()
    parts = text.split(":")
    try:
        numbers = [float(p) for p in (parts[1:] if parts[0] == "uniform" else parts)]
    except ValueError:
        raise ValueError(f"takes {THINK_SYNTAX} (got {text!r})") from None
    if parts[0] == "uniform" and len(numbers) == 2 and 0 <= numbers[0] <= numbers[1] and all(map(math.isfinite, numbers)):
        return f"uniform:{numbers[0]:g}:{numbers[1]:g}"
    if len(parts) == 1 and len(numbers) == 1 and numbers[0] >= 0 and math.isfinite(numbers[0]):
        return f"{numbers[0]:g}"
    raise ValueError(f"takes {THINK_SYNTAX}, never negative (got {text!r})")


Think = Annotated[str, BeforeValidator(parse_think), PlainSerializer(str)]


class SessionsOptions(StrictModel):
    users: int = Field(default=4, ge=1, le=10_000, description="concurrent users, each one conversation",
                       json_schema_extra=cli(aliases=["-u"]))
    turns: int = Field(default=4, ge=1, le=1000, description="turns per conversation", json_schema_extra=cli(aliases=["-t"]))
    first_tokens: int = Field(default=512, ge=8, description="tokens of each user's first message")
    turn_tokens: int = Field(default=64, ge=8, description="tokens of each later user message")
    system_tokens: int = Field(default=0, ge=0, description="a system prompt of this many tokens every user shares "
                               "(the agent pattern; 0: none)")
    tool_tokens: int = Field(default=0, ge=0, description="a tool output of this many tokens appended before each "
                             "later user message (the agent pattern; 0: none)")
    output_tokens: int = Field(default=32, ge=1, description="tokens of each reply (max_tokens)")
    think_time_s: Think = Field(default="0", description=f"wait after a reply before the next turn: {THINK_SYNTAX}",
                                json_schema_extra=cli(text=True))
    stagger_s: float = Field(default=0.0, ge=0, description="spread the users' first turns evenly over this many "
                             "seconds")
    ignore_eos: bool = Field(default=True, description="generate exactly --output-tokens (--no-ignore-eos: let the "
                             "model stop)")
    dataset: str | None = Field(default=None, description="the users' messages from a data set: a ShareGPT file or "
                                "JSONL of `messages` gives each user a conversation (its user turns); a file of "
                                "prompts (JSONL, Parquet, Arrow) gives each message a row (seeded samples)")
    dataset_format: Literal[FORMATS] = Field(default="auto", description="the data set's format; auto: by its "  # type: ignore[valid-type]
                                             "extension (.json sharegpt, .jsonl, .parquet, .arrow)")
    dataset_columns: Columns = Field(default={}, description="FIELD=COLUMN,... maps prompt, messages or conversations "
                                     "to the data set's own names", json_schema_extra=cli(text=True))
    seed: int = Field(default=731, description="seed of the filler and the think times")
    deadline_s: float = Field(default=600.0, gt=0, description="per-request deadline in seconds")
    idle_timeout_s: float = idle_timeout_field()
    sample_interval_s: float = sample_interval_field()

    @model_validator(mode="after")
    def _dataset(self) -> SessionsOptions:
        if self.dataset is not None:
            try:
                resolve(self.dataset, self.dataset_format)
            except UsageError as exc:
                raise ValueError(str(exc)) from None
        return self


class SessionsScenario(MetricsScenario):
    name = "sessions"
    Options = SessionsOptions
    summary = ("Multi-turn conversations: U users, T turns each, the whole history sent every turn; cold vs warm "
               "TTFT and the engine's prefix-cache reuse.")
    tokenizer = EXACT_LENGTH
    options: SessionsOptions

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
        spec = DatasetSpec(path=opts.dataset, format=fmt, columns=dict(opts.dataset_columns),  # type: ignore[arg-type]
                           seed=opts.seed, repeat=True)
        probe = select(DatasetSpec(path=opts.dataset, format=fmt, columns=dict(opts.dataset_columns),  # type: ignore[arg-type]
                                   sample="first", seed=opts.seed, repeat=True), 1, lambda items: [0] * len(items))
        conversations = bool(probe.items) and (probe.items[0].turns is not None or probe.items[0].messages is not None)
        n = opts.users if conversations else opts.users * opts.turns
        sel = select(spec, n, lambda items: [0] * len(items))
        from_data = 0
        for k, item in enumerate(sel.items):
            if conversations:
                texts = item.turns if item.turns is not None else [
                    content_text(m.get("content")) for m in item.messages or () if m.get("role", "user") == "user"]
                places = [(k, t) for t in range(min(len(texts), opts.turns))]
            else:
                texts, places = [item.text()], [divmod(k, opts.turns)]
            for (u, t), text in zip(places, texts):
                said[u][t] = text if text.endswith("\n") else text + "\n"
                from_data += 1
        unit = "conversations" if conversations else "prompts"
        self.status(f"data set {sel.files[0]} ({sel.format}): {sel.usable} {unit}, {opts.users} users, {from_data} of "
                    f"{opts.users * opts.turns} messages from it" + (" (filler where a conversation ends)"
                                                                     if conversations else ""))
        return DatasetRef(path=str(opts.dataset), format=sel.format, files=sel.files, sha256=sel.sha256,
                          columns=dict(opts.dataset_columns), sample="random", seed=opts.seed, repeat=True,
                          rows=sel.rows, bad_rows=sel.bad_rows, no_prompt=sel.no_prompt, usable=sel.usable,
                          repeated=sel.repeated, rows_sent=[i.row for i in sel.items], messages_from_data=from_data)

    async def run(self, writer: RunWriter, manifest: dict[str, Any], live: LiveStatus | None = None) -> None:
        opts, target = self.options, self.target
        live = live or LiveStatus(self.name)
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
                raise UsageError(f"{tokens} tokens is too short for a message: its head line {head.strip()!r} and a pad "
                                 f"need {builder.count(head) + prompts.pad_min}")
            return text

        # every message before the first send: a length too short for its head is refused before anything is sent
        system = message(f"System {salt}.\n", opts.system_tokens) if opts.system_tokens else ""
        said = [[message(f"User {u}.{t} {salt}.\n", opts.turn_tokens if t else opts.first_tokens)
                 for t in range(opts.turns)] for u in range(opts.users)]
        ref = None
        if opts.dataset is not None:  # the users' messages from the data set (filler where it has none)
            ref = self._conversations(said, builder)
        tools = [[message(f"Tool {u}.{t} {salt}.\n", opts.tool_tokens) if opts.tool_tokens and t else ""
                  for t in range(opts.turns)] for u in range(opts.users)]
        plan = SessionsPlan(users=opts.users, turns=opts.turns, first_tokens=opts.first_tokens,
                            turn_tokens=opts.turn_tokens, system_tokens=opts.system_tokens, tool_tokens=opts.tool_tokens,
                            output_tokens=opts.output_tokens, think_time=opts.think_time_s, stagger_s=opts.stagger_s,
                            seed=opts.seed, ignore_eos=opts.ignore_eos, deadline_s=opts.deadline_s,
                            endpoint=target.endpoint, overhead_tokens=builder.overhead_tokens, dataset=ref)
        attach_plan(manifest, plan)
        writer.write_manifest(manifest)
        total = live.planned = opts.users * opts.turns
        self.status(f"sessions: {opts.users} users x {opts.turns} turns ({total} requests), first message "
                    f"{opts.first_tokens} tokens, then {opts.turn_tokens} a turn"
                    + (f", system prompt {opts.system_tokens}" if opts.system_tokens else "")
                    + (f", tool output {opts.tool_tokens} a turn" if opts.tool_tokens else "")
                    + f", replies {opts.output_tokens}, think time {opts.think_time_s} s")
        failed = 0

        def sink(record: RequestRecord) -> None:
            nonlocal failed
            writer.append(record)
            failed += not record.ok

        async def user(client: StreamingClient, u: int) -> None:
            rng = random.Random(f"{opts.seed}:think:{u}")
            if opts.stagger_s and opts.users > 1:
                await asyncio.sleep(opts.stagger_s * u / opts.users)
            text = system + said[u][0]
            messages: list[dict[str, str]] = ([{"role": "system", "content": system}] if system else []) + \
                [{"role": "user", "content": said[u][0]}]
            for turn in range(opts.turns):
                if turn:
                    text += tools[u][turn] + said[u][turn]
                    messages.append({"role": "user", "content": tools[u][turn] + said[u][turn]})
                extra = dict(target.extra_body)
                if chat:
                    extra["messages"] = list(messages)
                body = request_body(target.endpoint, target.model, "" if chat else text, max_tokens=opts.output_tokens,
                                    temperature=0.0, ignore_eos=opts.ignore_eos, extra=extra)
                spec = RequestSpec(request_id=f"sessions-u{u}-t{turn}", endpoint=target.endpoint, body=body,
                                   deadline_s=opts.deadline_s)
                exact = builder.overhead_tokens + opts.system_tokens + opts.first_tokens if turn == 0 and not (
                    chat and system) and ref is None else None
                record = RequestRecord(request_id=spec.request_id, endpoint=target.endpoint, scenario=self.name,
                                       family="cold" if turn == 0 else "warm", prompt_id=f"u{u}",
                                       concurrency=opts.users, batch=turn, planned_input_tokens=exact,
                                       planned_output_tokens=opts.output_tokens)
                await client.stream(spec, record)
                if not record.ok:
                    return  # the conversation cannot go on without its reply
                reply = record.output_text
                text += reply + "\n"
                messages.append({"role": "assistant", "content": reply})
                if turn + 1 < opts.turns:
                    think = self._think(rng)
                    if think:
                        await asyncio.sleep(think)

        live.phase("requests", detail=f"{opts.users} users x {opts.turns} turns")
        async with MetricsScraper(target.metrics, self.metric_names, interval_s=opts.sample_interval_s or None,
                                  sink=writer.metric_sample, api_key=target.metrics_api_key) as scraper:
            live.watch_engine(scraper.samples)
            async with StreamingClient(target.url, api_key=target.api_key, max_connections=opts.users + 4,
                                       on_record=live.recording(sink), on_start=live.started,
                                       keep_text=True) as client:
                started = time.perf_counter()
                tasks = [asyncio.create_task(user(client, u)) for u in range(opts.users)]
                try:
                    await asyncio.gather(*tasks)
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                self.status(f"sessions: {total} turns planned, {failed} failed, in {time.perf_counter() - started:.1f} s")
