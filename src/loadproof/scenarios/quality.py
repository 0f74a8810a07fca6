"""`loadproof run quality`: did the deployment still answer correctly?

Suites (docs/quality.md):
- gsm8k: the first N problems of the packaged 200-problem subset; a few-shot completion prompt on the
  completions endpoint (base models), one instruction message on chat; lm-eval's strict and flexible
  extraction;
- authored: short English, Chinese and code tasks with programmatic checkers, in `plain` mode and, for
  a model with a thinking mode, in `low-thinking` mode (`enable_thinking=false`); otherwise that mode is
  recorded as skipped with the reason;
- retrieval: haystack prompts with one planted 7-digit code, at several lengths (those that fit the
  model's max_model_len) and depths;
- image: synthetic pictures as data URLs in chat content parts, when the server accepts images (one
  tiny probe request decides; a 400 means it does not).

All requests are greedy (temperature 0, fixed seed), `concurrency` at a time. As each ends its record
goes to requests.jsonl (with `output_text` emptied: a model can repeat the question) and its scored row
to answers.jsonl; items that cannot run are written as rows with `skipped` and the reason. Claims come
from the answer rows alone (`metrics.quality`).

Under load (`--under-load-rate R`): every item is asked idle first, then asked again while the load
scenario's open-loop sender (`load.sender.send_schedule`, family `load`) sends synthetic requests of the
load's shape at R requests/s to the same target; the schedule starts before the first under-load item and
is cut where the last one ends. Each row stores the sha256 of its whole answer, and a changed answer a
window of both texts (`workloads.quality.changes`).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Annotated, Any, Literal

import msgspec
from pydantic import Field, ValidationError, field_validator, model_validator

from loadproof.client import RequestSpec, StreamingClient
from loadproof.errors import UsageError
from loadproof.metrics.quality import LOAD_FAMILY
from loadproof.plans import attach_plan
from loadproof.plans.quality import AuthoredPlan, Gsm8kPlan, ImagePlan, QualityPlan, RetrievalPlan, UnderLoadPlan
from loadproof.protocol.openai import request_body
from loadproof.records import RequestRecord
from loadproof.scenarios.base import Setup, TokenizerUse
from loadproof.scenarios.constraints import ConstraintOptions
from loadproof.scenarios.demo import DemoSetup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.options import LoadOptions, TokenLengths
from loadproof.scenarios.load.schedule import Planned, describe, schedule_offsets
from loadproof.scenarios.load.sender import send_schedule
from loadproof.scenarios.load.synthetic import synthetic_requests
from loadproof.scenarios.long_context import MetricsScenario, haystack_target
from loadproof.scenarios.options import among, cli
from loadproof.scenarios.recording import Console
from loadproof.scenarios.token_counts import PROBE_LINE
from loadproof.store.run_dir import RunWriter
from loadproof.units import NS_PER_S
from loadproof.workloads.quality import MODES, SUITES, authored, changes, gsm8k, images, retrieval
from loadproof.workloads.synthetic import Lengths


class QualityOptions(ConstraintOptions):  # --tools, --response-format (scenarios/constraints.py)
    suites: Annotated[list[str], among(SUITES, "suites")] = Field(
        default_factory=lambda: list(SUITES), description="suites"
    )
    gsm8k_items: int = Field(
        default=200, ge=0, le=200, description="first N problems of the packaged 200-problem GSM8K subset"
    )
    gsm8k_max_tokens: int = Field(default=256, ge=16, json_schema_extra=cli(hidden=True))
    authored_modes: Annotated[list[str], among(MODES, "authored modes")] = Field(
        default_factory=lambda: list(MODES),
        description="authored-task modes: plain, low-thinking",
        json_schema_extra=cli("--modes"),
    )
    authored_items: int | None = Field(
        default=None, ge=1, description=f"the first N authored tasks (default: all {len(authored.load_tasks())})"
    )
    authored_max_tokens: int = Field(default=64, ge=8, json_schema_extra=cli(hidden=True))
    thinking_mode: bool = Field(
        default=False,
        description="the model has a thinking mode (enable_thinking; default: from the profile)",
        json_schema_extra=cli("--thinking-model"),
    )
    thinking_max_tokens: int = Field(
        default=2048,
        ge=64,
        description="output budget of plain mode when the model thinks",
        json_schema_extra=cli(hidden=True),
    )
    retrieval_lengths: list[int] = Field(
        default_factory=lambda: [1024, 4096, 16384],
        description="retrieval prompt lengths in tokens; those over max_model_len are skipped",
    )
    retrieval_depths: list[float] = Field(default_factory=lambda: [0.25, 0.75], json_schema_extra=cli(hidden=True))
    image_max_tokens: int = Field(default=16, ge=4, json_schema_extra=cli(hidden=True))
    concurrency: int = Field(default=4, ge=1, description="requests in flight at once")
    seed: int = Field(default=731, json_schema_extra=cli(hidden=True))
    deadline_s: float | None = Field(default=900.0, gt=0, description="per-request deadline in seconds")
    # --- under load (docs/quality.md, "Under load"): the load scenario's options, composed ---
    under_load_rate: float | None = Field(
        default=None,
        ge=0,
        description="also ask every item while an open-loop "
        "load of R requests/s runs on the same target, and count the answers that "
        "changed (0 or absent: off)",
    )
    under_load_input_tokens: TokenLengths = Field(
        default=Lengths("fixed", 1024),
        description="the load's prompt tokens (as run load's --input-tokens)",
        json_schema_extra=cli(text=True),
    )
    under_load_output_tokens: TokenLengths = Field(
        default=Lengths("fixed", 128),
        description="the load's output tokens (as run load's --output-tokens)",
        json_schema_extra=cli(text=True),
    )
    under_load_arrival: Literal["poisson", "constant"] = Field(
        default="poisson", description="the gaps between the load's sends"
    )
    idle_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="with --under-load-rate: wait up to this long, "
        "before the idle asking, for the engine to report 0 running and 0 waiting; else "
        "fail with 'engine busy'",
    )
    under_load_max_s: float = Field(
        default=1800.0,
        gt=0,
        description="the load's schedule is drawn for this many "
        "seconds and cut where the last under-load item ends; if the items outlast it, "
        "the load stops first",
    )

    @field_validator("retrieval_lengths")
    @classmethod
    def _lengths(cls, value: list[int]) -> list[int]:
        if any(v < 256 for v in value):
            raise ValueError("retrieval lengths must be at least 256 tokens")
        return value

    @field_validator("retrieval_depths")
    @classmethod
    def _depths(cls, value: list[float]) -> list[float]:
        if not value or any(not 0.0 <= d <= 1.0 for d in value):
            raise ValueError("retrieval depths must be numbers between 0 and 1")
        return value

    @model_validator(mode="after")
    def _load(self) -> QualityOptions:
        if self.under_load_rate:
            self.load_options()  # the load's options hold together, or one line now
        return self

    def load_options(self) -> LoadOptions:
        """The load beside the under-load asking, as `run load` would take it: one schedule drawn for
        `under_load_max_s` at `under_load_rate`, measured beside the items (no idle guard)."""
        try:
            return LoadOptions(
                rate=self.under_load_rate,
                arrival=self.under_load_arrival,
                duration_s=self.under_load_max_s,
                input_tokens=self.under_load_input_tokens,
                output_tokens=self.under_load_output_tokens,
                seed=self.seed,
                deadline_s=self.deadline_s or 600.0,
                idle_timeout_s=0.0,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"the load beside the items: {first['msg'].removeprefix('Value error, ')}") from None


@dataclass
class Job:
    """One request to send and how to score its answer into an answers row."""

    row: dict[str, Any]
    prompt: str
    max_tokens: int
    stop: list[str] | None = None
    messages: list[dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    score: Callable[[str], dict[str, Any]] = lambda text: {}

    @property
    def request_id(self) -> str:
        return f"{self.row['item_id']}.{self.row['mode']}" + (".under-load" if self.row.get("under_load") else "")

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.row["suite"], self.row["item_id"], self.row["mode"])


def compared_with_idle(job: Job, text: str, ok: bool, idle_answers: dict[tuple[str, str, str], str]) -> dict[str, Any]:
    """An asked row's under-load fields: its answer's digest; idle, its answer kept for the second asking;
    under load, where it first differs from the idle answer and a window of both, when they differ."""
    fields: dict[str, Any] = {"answer_sha256": changes.digest(text)}
    if not job.row.get("under_load"):
        if ok:
            idle_answers[job.key] = text
        return fields
    idle = idle_answers.get(job.key)
    change = changes.change(idle, text) if idle is not None and ok else None
    if change is not None:
        fields.update(answer_diff_at=change.at, answer_text=change.under_load, idle_answer_text=change.idle)
    return fields


class CutSchedule(list):  # type: ignore[type-arg]
    """The load's requests as the open-loop sender iterates them, cut once `done` is set: the sender asks
    for its next request right after sending one, so at most one more is sent after the cut. `len` stays
    the drawn count; `taken` counts those handed out, and `started` is set once the first has been sent."""

    def __init__(self, requests: list[Planned]) -> None:
        super().__init__(requests)
        self.done = False
        self.taken = 0
        self.started = asyncio.Event()

    def __iter__(self) -> Iterator[Planned]:
        for item in super().__iter__():
            if self.done:
                break
            if self.taken == 1:  # asked for the second: the first has been sent
                self.started.set()
            self.taken += 1
            yield item
        self.started.set()


def data_sha256(name: str) -> str:
    return hashlib.sha256((resources.files("loadproof") / "data" / "quality" / name).read_bytes()).hexdigest()


class QualityScenario(MetricsScenario):
    name = "quality"
    Options = QualityOptions
    summary = "GSM8K subset, authored tasks, long-context retrieval and image checks, scored item by item."
    tokenizer = TokenizerUse(
        required=False,
        engine=True,
        purpose="needed for retrieval (default: the engine's own /tokenize, where it has one)",
    )
    options: QualityOptions

    @classmethod
    def prepare(cls, setup: Setup, console: Console) -> QualityScenario:
        options = setup.options
        if setup.profile is not None and setup.profile.serving.thinking == "disable":  # the profile knows it can think
            options = options.model_copy(update={"thinking_mode": True})
        return cls(setup.target, options)

    async def run(self, writer: RunWriter, manifest: dict[str, Any], live: LiveStatus | None = None) -> None:
        opts = self.options
        live = live or LiveStatus(self.name)
        constraint = opts.constraint(self.target.endpoint)  # --tools, --response-format: chat only, checked first
        max_model_len = self.target.max_model_len
        jobs: list[Job] = []
        skipped: list[dict[str, Any]] = []
        gsm8k_plan = self._gsm8k(jobs) if "gsm8k" in opts.suites else None
        authored_plan = self._authored(jobs, skipped) if "authored" in opts.suites else None
        retrieval_plan = (
            await asyncio.to_thread(self._retrieval, jobs, skipped, max_model_len)
            if "retrieval" in opts.suites
            else None
        )
        load = await asyncio.to_thread(self._load_requests) if opts.under_load_rate else None
        texts: dict[str, str] = {}

        def sink(record: RequestRecord) -> None:
            if constraint is not None:
                constraint.check(record)
            texts[record.request_id] = record.output_text
            record.output_text = ""  # answers are scored from memory; a model can echo the question
            writer.append(record)

        async with StreamingClient(
            self.target.url,
            api_key=self.target.api_key,
            max_connections=opts.concurrency + 4,
            on_record=sink,
            on_start=live.started,
        ) as client:
            image_plan = await self._image(client, jobs, skipped) if "image" in opts.suites else None
            plan = QualityPlan(
                suites=opts.suites,
                endpoint=self.target.endpoint,
                max_model_len=max_model_len,
                gsm8k=gsm8k_plan,
                authored=authored_plan,
                retrieval=retrieval_plan,
                image=image_plan,
                under_load=load[0] if load else None,
                num_items=len(jobs) + len(skipped),
                num_skipped=len(skipped),
            )
            attach_plan(manifest, plan)
            writer.write_manifest(manifest)
            for row in skipped:
                writer.answer(row)
            live.planned = len(jobs) * (2 if load else 1)
            live.phase(
                "requests", detail=f"{len(jobs)} items, {opts.concurrency} at a time" + (", idle" if load else "")
            )
            idle_answers: dict[tuple[str, str, str], str] | None = {} if load else None
            if load is not None:  # idle means nothing else on the engine, as the idle guard checks it
                await self.wait_until_idle(writer, opts.idle_timeout_s)
            await self._ask(client, jobs, writer, live, texts, idle_answers)
            if load is not None and idle_answers is not None:
                cut = await self._under_load(client, jobs, writer, manifest, live, texts, idle_answers, load)
                attach_plan(manifest, msgspec.structs.replace(plan, under_load=cut))
                writer.write_manifest(manifest)

    async def _ask(
        self,
        client: StreamingClient,
        jobs: list[Job],
        writer: RunWriter,
        live: LiveStatus,
        texts: dict[str, str],
        idle_answers: dict[tuple[str, str, str], str] | None,
    ) -> None:
        """Ask `jobs`, `concurrency` at a time, each scored into its answers row as it ends. With under load
        on (`idle_answers` not None) every row gets its answer's digest; an idle answer is kept there, and an
        under-load one compared with it."""
        gate = asyncio.Semaphore(self.options.concurrency)

        async def one(job: Job) -> None:
            async with gate:
                record = await client.stream(self._spec(job))
            text = texts.pop(record.request_id, "") if record.ok else ""
            row = {**job.row, **await asyncio.to_thread(job.score, text)}
            row["request_id"] = record.request_id
            if not record.ok:
                row["error"] = record.error_kind
            if idle_answers is not None:
                row.update(compared_with_idle(job, text, record.ok, idle_answers))
            writer.answer(row)
            live.ended(record)

        await asyncio.gather(*(one(job) for job in jobs))

    def _load_requests(self) -> tuple[UnderLoadPlan, list[Planned]]:
        """The load beside the under-load asking, every body built before the first send (as `run load`)."""
        opts = self.options.load_options()
        hs = haystack_target(self.target, opts.seed, PROBE_LINE)  # its prompts end with a line's newline
        plan, requests = synthetic_requests(opts, schedule_offsets(opts), hs, self.target.max_model_len)
        return UnderLoadPlan(
            rate_rps=float(self.options.under_load_rate or 0),
            max_s=self.options.under_load_max_s,
            drawn_requests=len(requests),
            load=plan,
        ), requests

    async def _under_load(
        self,
        client: StreamingClient,
        jobs: list[Job],
        writer: RunWriter,
        manifest: dict[str, Any],
        live: LiveStatus,
        texts: dict[str, str],
        idle_answers: dict[tuple[str, str, str], str],
        load: tuple[UnderLoadPlan, list[Planned]],
    ) -> UnderLoadPlan:
        """Every job again while the load runs: the schedule starts first (its first request sent), the
        items follow, and the schedule is cut once the last item has ended; its requests still in flight
        finish. The plan of what the load sent, for the manifest."""
        plan, requests = load
        schedule = CutSchedule(requests)
        live.phase("under load", detail=f"{len(jobs)} items beside {describe(plan.load)}")
        sender = asyncio.create_task(
            send_schedule(
                self,
                writer,
                manifest,
                LiveStatus(LOAD_FAMILY),
                schedule,
                plan.load.schedule_span_s,
                describe(plan.load),
                None,
                1.0,
                family=LOAD_FAMILY,
            )
        )
        try:
            started = asyncio.create_task(schedule.started.wait())
            await asyncio.wait({sender, started}, return_when=asyncio.FIRST_COMPLETED)
            started.cancel()
            if not sender.done():
                await self._ask(
                    client,
                    [replace(job, row={**job.row, "under_load": True}) for job in jobs],
                    writer,
                    live,
                    texts,
                    idle_answers,
                )
        finally:
            schedule.done = True
            await sender
        sent = schedule.taken
        span_s = round(requests[sent - 1].offset_ns / NS_PER_S, 9) if sent else 0.0
        self.status(
            f"load: cut where the last under-load item ended, {sent} of the {len(requests)} drawn requests "
            f"sent over {span_s:.1f} s"
            if schedule.done and sent < len(requests)
            else f"load: all {len(requests)} drawn requests sent before the last item ended (raise --under-load-max-s)"
        )
        return msgspec.structs.replace(
            plan, load=msgspec.structs.replace(plan.load, planned_requests=sent, schedule_span_s=span_s)
        )

    # ----- planning -----

    def _extra(self, mode: str) -> dict[str, Any]:
        """The target's extra body for a mode: plain leaves thinking at the model's default, low-thinking
        switches it off."""
        extra = dict(self.target.extra_body)
        kwargs = dict(extra.pop("chat_template_kwargs", None) or {})
        kwargs.pop("enable_thinking", None)
        if mode == "low-thinking":
            kwargs["enable_thinking"] = False
        if kwargs:
            extra["chat_template_kwargs"] = kwargs
        return extra

    def _budget(self, mode: str, max_tokens: int) -> int:
        """A model that thinks by default needs room to think before it answers, in plain mode."""
        if self.options.thinking_mode and mode == "plain" and self.target.endpoint == "chat":
            return max(max_tokens, self.options.thinking_max_tokens)
        return max_tokens

    @property
    def _chat(self) -> bool:
        return self.target.endpoint == "chat"

    def _gsm8k(self, jobs: list[Job]) -> Gsm8kPlan:
        opts = self.options
        problems = gsm8k.load_subset(opts.gsm8k_items)
        for problem in problems:
            expected = problem.expected
            prompt = gsm8k.chat_prompt(problem.question) if self._chat else gsm8k.fewshot_prompt(problem.question)
            jobs.append(
                Job(
                    row={"suite": "gsm8k", "item_id": problem.id, "mode": "plain"},
                    prompt=prompt,
                    max_tokens=self._budget("plain", opts.gsm8k_max_tokens),
                    stop=None if self._chat else list(gsm8k.STOP),
                    extra=self._extra("plain"),
                    score=lambda text, e=expected: gsm8k.score(text, e),
                )
            )
        return Gsm8kPlan(
            file=gsm8k.SUBSET_FILE,
            sha256=data_sha256(gsm8k.SUBSET_FILE),
            items=len(problems),
            prompt="chat instruction" if self._chat else f"{len(gsm8k.EXEMPLARS)}-shot completion",
            max_tokens=opts.gsm8k_max_tokens,
        )

    def _low_thinking_skip_reason(self) -> str | None:
        if not self._chat:
            return "completions endpoint (base model): no chat template to switch thinking off"
        if not self.options.thinking_mode:
            return "the model has no thinking mode (profile serving.thinking = unsupported; --thinking-model if it has)"
        return None

    def _authored(self, jobs: list[Job], skipped: list[dict[str, Any]]) -> AuthoredPlan:
        opts = self.options
        tasks = authored.load_tasks()[: opts.authored_items]
        modes: dict[str, str] = {}
        for mode in opts.authored_modes:
            reason = self._low_thinking_skip_reason() if mode == "low-thinking" else None
            modes[mode] = f"skipped: {reason}" if reason else "asked"
            for task in tasks:
                row = {"suite": "authored", "item_id": task.id, "lang": task.lang, "mode": mode}
                if reason:
                    skipped.append({**row, "skipped": reason})
                    continue
                if self._chat:
                    prompt, stop = task.prompt, None
                else:
                    prompt = authored.completion_prompt(task)
                    stop = ["\n\n", "Question:"] if task.multiline else ["\n", "Question:"]
                jobs.append(
                    Job(
                        row=row,
                        prompt=prompt,
                        max_tokens=self._budget(mode, opts.authored_max_tokens),
                        stop=stop,
                        extra=self._extra(mode),
                        score=lambda text, t=task: authored.check(t, text),
                    )
                )
        return AuthoredPlan(
            file=authored.AUTHORED_FILE,
            sha256=data_sha256(authored.AUTHORED_FILE),
            tasks=len(tasks),
            modes=modes,
            max_tokens=opts.authored_max_tokens,
        )

    def _retrieval(self, jobs: list[Job], skipped: list[dict[str, Any]], max_model_len: int | None) -> RetrievalPlan:
        opts = self.options
        plan = RetrievalPlan(lengths=opts.retrieval_lengths, depths=opts.retrieval_depths, asked_lengths=[])
        room = self._budget("plain", retrieval.MAX_TOKENS)
        fits = [L for L in opts.retrieval_lengths if max_model_len is None or L + room <= max_model_len]
        self._skip_retrieval(
            skipped,
            [L for L in opts.retrieval_lengths if L not in fits],
            f"longer than the model's max_model_len {max_model_len} with the answer",
        )
        if not fits:
            return plan
        if self.target.tokenizer_source is None:
            self._skip_retrieval(
                skipped,
                fits,
                "no --tokenizer, and the target does not count tokens (/tokenize): "
                "retrieval prompts are built to an exact token length with the "
                "model's tokenizer",
            )
            return plan
        try:
            hs = haystack_target(self.target, opts.seed)
        except UsageError as exc:  # e.g. a chat server without /tokenize: the template's length is unknown
            self._skip_retrieval(skipped, fits, str(exc))
            return plan
        items = retrieval.build_items(hs.builder, fits, opts.retrieval_depths)
        for item in items:
            jobs.append(
                Job(
                    row={"suite": "retrieval", "item_id": item.item_id, "mode": "plain"},
                    prompt=item.prompt.text,
                    max_tokens=room,
                    extra=self._extra("plain"),
                    score=lambda text, i=item: retrieval.score(i, text),
                )
            )
        return RetrievalPlan(
            lengths=opts.retrieval_lengths,
            depths=opts.retrieval_depths,
            asked_lengths=fits,
            overhead_tokens=hs.builder.overhead_tokens,
            overhead_source=hs.overhead_source,
            salts={item.item_id: item.prompt.salt for item in items},
        )

    def _skip_retrieval(self, skipped: list[dict[str, Any]], lengths: list[int], reason: str) -> None:
        for length in lengths:
            for depth in self.options.retrieval_depths:
                skipped.append(
                    {
                        "suite": "retrieval",
                        "item_id": retrieval.item_id(length, depth),
                        "mode": "plain",
                        "length_tokens": length,
                        "depth": depth,
                        "skipped": reason,
                    }
                )

    async def _image(self, client: StreamingClient, jobs: list[Job], skipped: list[dict[str, Any]]) -> ImagePlan:
        tasks = images.image_tasks()
        reason = None
        if not self._chat:
            reason = "completions endpoint: images are sent as chat content parts"
        else:
            probe = Job(
                row={"item_id": "image-probe", "mode": "plain"},
                prompt="",
                max_tokens=1,
                messages=images.probe_messages(),
                extra=self._extra("plain"),
            )
            record = await client.stream(self._spec(probe, family="image-probe"))
            if record.http_status == 400:
                reason = f"the server does not accept images (HTTP 400: {(record.error_message or '')[:120]})"
            elif not record.ok:
                reason = f"the image probe failed ({record.error_kind}: {(record.error_message or '')[:120]})"
        for task in tasks:
            row = {"suite": "image", "item_id": task.id, "mode": "plain"}
            if reason:
                skipped.append({**row, "skipped": reason})
                continue
            jobs.append(
                Job(
                    row=row,
                    prompt=task.question,
                    messages=images.chat_messages(task.question, task.data_url()),
                    max_tokens=self._budget("plain", self.options.image_max_tokens),
                    extra=self._extra("plain"),
                    score=lambda text, t=task.task(): authored.check(t, text),  # noqa: B008 (binds this task now)
                )
            )
        return ImagePlan(items=len(tasks), status=f"skipped: {reason}" if reason else "asked")

    def _spec(self, job: Job, family: str | None = None) -> RequestSpec:
        constraint = self.options.constraint(self.target.endpoint)
        extra = {**job.extra, **(constraint.body() if constraint is not None else {})}
        if job.stop:
            extra["stop"] = job.stop
        if job.messages is not None:
            extra["messages"] = job.messages  # replaces the plain-text message request_body builds
        body = request_body(
            self.target.endpoint,
            self.target.model,
            job.prompt,
            max_tokens=job.max_tokens,
            temperature=0.0,
            seed=self.options.seed,
            extra=extra,
        )
        labels = {
            "scenario": self.name,
            "family": family or job.row["suite"],
            "prompt_id": job.row["item_id"],
            "concurrency": self.options.concurrency,
        }
        return RequestSpec(
            request_id=job.request_id,
            endpoint=self.target.endpoint,
            body=body,
            deadline_s=self.options.deadline_s,
            labels=labels,
        )


def demo(setup: DemoSetup) -> QualityScenario:
    """For `loadproof demo`: 5 GSM8K problems, the authored tasks in plain mode, retrieval at 1,024 and 2,048
    tokens."""
    return QualityScenario(
        setup.target, QualityOptions(gsm8k_items=5, authored_modes=["plain"], retrieval_lengths=[1024, 2048])
    )
