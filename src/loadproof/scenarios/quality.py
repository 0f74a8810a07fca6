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

The options are `scenarios.quality_options`, the suites' items `scenarios.quality_items`, the load beside the
under-load asking `scenarios.quality_under_load`.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import msgspec

from loadproof.client import StreamingClient
from loadproof.metrics.quality import LOAD_FAMILY
from loadproof.plans import attach_plan
from loadproof.plans.quality import QualityPlan, UnderLoadPlan
from loadproof.records import RequestRecord
from loadproof.rundir import Manifest
from loadproof.scenarios.base import Example, Setup, TokenizerUse
from loadproof.scenarios.demo import DemoSetup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.schedule import Planned, describe
from loadproof.scenarios.load.sender import send_schedule
from loadproof.scenarios.long_context import MetricsScenario
from loadproof.scenarios.quality_items import Job, QualityItems
from loadproof.scenarios.quality_options import QualityOptions
from loadproof.scenarios.quality_under_load import CutSchedule, compared_with_idle, load_requests
from loadproof.scenarios.recording import Console
from loadproof.store.run_dir import RunWriter
from loadproof.units import NS_PER_S


class QualityScenario(MetricsScenario):
    name = "quality"
    Options = QualityOptions
    summary = "GSM8K subset, authored tasks, long-context retrieval and image checks, scored item by item."
    examples = (
        Example(
            "50 GSM8K problems and retrieval at 4,096 tokens",
            "--url http://127.0.0.1:8000 --suites gsm8k,retrieval --gsm8k-items 50 --retrieval-lengths 4096",
        ),
        Example(
            "Every item asked idle and again under 2 requests/s of load: the answers that changed",
            "--url http://127.0.0.1:8000 --under-load-rate 2",
        ),
    )
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

    @property
    def items(self) -> QualityItems:
        """The suites' items as this run asks them (its target, its options)."""
        return QualityItems(self.target, self.options)

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> None:
        opts = self.options
        live = live or LiveStatus(self.name)
        constraint = opts.constraint(self.target.endpoint)  # --tools, --response-format: chat only, checked first
        max_model_len = self.target.max_model_len
        jobs: list[Job] = []
        skipped: list[dict[str, Any]] = []
        gsm8k_plan = self.items.gsm8k_jobs(jobs) if "gsm8k" in opts.suites else None
        authored_plan = self.items.authored_jobs(jobs, skipped) if "authored" in opts.suites else None
        retrieval_plan = (
            await asyncio.to_thread(self.items.retrieval_jobs, jobs, skipped, max_model_len)
            if "retrieval" in opts.suites
            else None
        )
        load = await asyncio.to_thread(load_requests, self.target, opts) if opts.under_load_rate else None
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
            image_plan = await self.items.image_jobs(client, jobs, skipped) if "image" in opts.suites else None
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
                record = await client.stream(self.items.spec(job))
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

    async def _under_load(
        self,
        client: StreamingClient,
        jobs: list[Job],
        writer: RunWriter,
        manifest: Manifest,
        live: LiveStatus,
        texts: dict[str, str],
        idle_answers: dict[tuple[str, str, str], str],
        load: tuple[UnderLoadPlan, list[Planned]],
    ) -> UnderLoadPlan:
        """Every job again while the load runs: the schedule starts first (its first request sent), the
        items follow, and the schedule is cut once the last item has ended: nothing more is sent, and the
        load's requests still in flight are cancelled there. The plan of what the load sent, for the manifest."""
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
                cut=schedule.cut,
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
            schedule.cut.set()
            await sender
        # send_schedule set the schedule as it ended; in schedule order: the first `sent` of those drawn
        sent = manifest.schedule.dispatched if manifest.schedule is not None else 0
        span_s = round(requests[sent - 1].offset_ns / NS_PER_S, 9) if sent else 0.0
        self.status(
            f"load: cut where the last under-load item ended, {sent} of the {len(requests)} drawn requests "
            f"sent over {span_s:.1f} s, those still in flight cancelled there"
            if sent < len(requests)
            else f"load: all {len(requests)} drawn requests sent before the last item ended (raise --under-load-max-s)"
        )
        return msgspec.structs.replace(
            plan, load=msgspec.structs.replace(plan.load, planned_requests=sent, schedule_span_s=span_s)
        )


def demo(setup: DemoSetup) -> QualityScenario:
    """For `loadproof demo`: 5 GSM8K problems, the authored tasks in plain mode, retrieval at 1,024 and 2,048
    tokens."""
    return QualityScenario(
        setup.target, QualityOptions(gsm8k_items=5, authored_modes=["plain"], retrieval_lengths=[1024, 2048])
    )
