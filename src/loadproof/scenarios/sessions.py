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

The options are `scenarios.sessions_options`; the users' messages from a data set, `scenarios.sessions_dataset`.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from typing import Any

from loadproof.client import RequestSpec, StreamingClient
from loadproof.engines import engines
from loadproof.errors import UsageError
from loadproof.metrics.sessions import PRIME
from loadproof.plans import attach_plan
from loadproof.plans.load import MixedModel
from loadproof.plans.sessions import SessionsPlan
from loadproof.protocol.routes import GENERATING, request_body
from loadproof.records import RequestRecord
from loadproof.rundir import Manifest
from loadproof.scenarios.base import Example, Setup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.scenario import check_mix, mixed_models
from loadproof.scenarios.long_context import EXACT_LENGTH, MetricsScenario, haystack_target
from loadproof.scenarios.recording import Console
from loadproof.scenarios.session_header import session_headers
from loadproof.scenarios.sessions_dataset import messages_from_dataset
from loadproof.scenarios.sessions_options import SessionsOptions
from loadproof.scenarios.sliding_window import checkpoint_window
from loadproof.scenarios.token_counts import PROBE_LINE
from loadproof.store.run_dir import RunWriter
from loadproof.telemetry.cache_config import read_cache_config
from loadproof.telemetry.server_metrics import MetricsScraper
from loadproof.workloads.agent import Conversation, tool_definitions, tools_text
from loadproof.workloads.constraints import tool_choice_body
from loadproof.workloads.synthetic import SyntheticPrompts

CACHE_INFO = "vllm:cache_config_info"  # vLLM's info gauge: block_size, kv_cache_size_tokens, num_gpu_blocks labels


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
    examples = (
        Example(
            "8 users, 6 turns each, behind a 1,024-token system prompt they share",
            "--url http://127.0.0.1:8000 -u 8 -t 6 --system-tokens 1024",
        ),
        Example(
            "Coding agents: shared tool definitions, primed once, and 3 tool calls per conversation",
            "--url http://127.0.0.1:8000 --tool-definitions-tokens 4000 --tool-turns 3 --prime-shared",
        ),
    )
    tokenizer = EXACT_LENGTH
    endpoints = GENERATING  # the Responses and Messages APIs too
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

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> None:
        opts, target = self.options, self.target
        live = live or LiveStatus(self.name)
        opts.constraint(target.endpoint)  # one line before anything is sent: a route that cannot ask them
        if opts.idle_timeout_s > 0:
            await self.wait_until_idle(writer, opts.idle_timeout_s)
        hs = haystack_target(target, opts.seed, PROBE_LINE)
        builder = hs.builder
        salt = secrets.token_hex(4)
        prompts = SyntheticPrompts(builder, run_salt=salt, seed=opts.seed)
        chat = target.route.conversational  # the conversation goes as messages (else as one prompt's text)
        forced = target.route.forces_length  # ignore_eos holds each reply to its max_tokens
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
            ref = messages_from_dataset(opts, opts.dataset, said, self.status)
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
        window, window_source = await asyncio.to_thread(checkpoint_window, target, opts.engine_sliding_window)
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
            checkpoint_window_tokens=window,
            checkpoint_source=window_source,
            cpu_tier_tokens=opts.cpu_tier_tokens,
            kv_bytes_per_token=opts.kv_bytes_per_token,
            h2d_gbps=opts.h2d_gbps,
            slo=dict(opts.slo or {}),
            model_mix=[MixedModel(model=m, weight=w) for m, w in (opts.model_mix or {}).items()],
            session_header=opts.session_header,
            session_ids=[f"{salt}-u{u}" for u in range(opts.users)],
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
            + (
                f"; engine KV {kv} tokens in blocks of {block}"
                if kv
                else f"; engine KV blocks of {block}"
                if block
                else ""
            )
            + (f" ({kv_source})" if block and kv_source else "")  # an unknown size or source is left out, never None
            + (f"; its {window}-token sliding window kept at checkpoints ({window_source})" if window else "")
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
                    messages=list(convo.messages) if chat else None,
                    max_tokens=opts.output_tokens,
                    temperature=0.0,
                    ignore_eos=opts.ignore_eos and free,
                    extra=extra,
                )
                spec = RequestSpec(
                    request_id=f"sessions-u{u}-t{turn}",
                    endpoint=target.endpoint,
                    body=body,
                    deadline_s=opts.deadline_s,
                    headers=session_headers(opts.session_header, f"{salt}-u{u}"),
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
                    planned_output_tokens=opts.output_tokens if free and forced else None,
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
                if definitions:
                    extra.update(tools=definitions, tool_choice="none")
            started = time.perf_counter()
            primed = []
            for k, model in enumerate(dict.fromkeys(models)):  # each model's own cache, in the users' order
                body = request_body(
                    target.endpoint,
                    model or target.model,
                    "" if chat else system + first,
                    messages=Conversation.opened(system, first).messages if chat else None,
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
        async with target.scraper(
            self.metric_names,
            interval_s=opts.sample_interval_s or None,
            sink=writer.metric_sample,
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
