"""`loadproof run quality`'s items: each suite's requests (`Job`: a request and how its answer is scored into an
answers row), the rows of the items that cannot run, each suite's plan, and the request a job sends."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from typing import Any

from loadproof.client import RequestSpec, StreamingClient
from loadproof.errors import UsageError
from loadproof.plans.quality import AuthoredPlan, Gsm8kPlan, ImagePlan, RetrievalPlan
from loadproof.protocol.routes import request_body
from loadproof.scenarios.long_context import haystack_target
from loadproof.scenarios.quality_options import QualityOptions
from loadproof.scenarios.target import Target
from loadproof.workloads.quality import authored, gsm8k, images, retrieval

NAME = "quality"  # the scenario's name, on every request's labels


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


def data_sha256(name: str) -> str:
    return hashlib.sha256((resources.files("loadproof") / "data" / "quality" / name).read_bytes()).hexdigest()


@dataclass
class QualityItems:
    """The items of the suites asked of `target` with `options`, built into jobs (and skipped rows)."""

    target: Target
    options: QualityOptions

    def extra(self, mode: str) -> dict[str, Any]:
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

    def budget(self, mode: str, max_tokens: int) -> int:
        """A model that thinks by default needs room to think before it answers, in plain mode."""
        if self.options.thinking_mode and mode == "plain" and self.target.route.switches_thinking:
            return max(max_tokens, self.options.thinking_max_tokens)
        return max_tokens

    @property
    def chat(self) -> bool:
        return self.target.route.conversational

    def gsm8k_jobs(self, jobs: list[Job]) -> Gsm8kPlan:
        opts = self.options
        problems = gsm8k.load_subset(opts.gsm8k_items)
        for problem in problems:
            expected = problem.expected
            prompt = gsm8k.chat_prompt(problem.question) if self.chat else gsm8k.fewshot_prompt(problem.question)
            jobs.append(
                Job(
                    row={"suite": "gsm8k", "item_id": problem.id, "mode": "plain"},
                    prompt=prompt,
                    max_tokens=self.budget("plain", opts.gsm8k_max_tokens),
                    stop=None if self.chat else list(gsm8k.STOP),
                    extra=self.extra("plain"),
                    score=partial(gsm8k.score, expected=expected),
                )
            )
        return Gsm8kPlan(
            file=gsm8k.SUBSET_FILE,
            sha256=data_sha256(gsm8k.SUBSET_FILE),
            items=len(problems),
            prompt="chat instruction" if self.chat else f"{len(gsm8k.EXEMPLARS)}-shot completion",
            max_tokens=opts.gsm8k_max_tokens,
        )

    def low_thinking_skip_reason(self) -> str | None:
        if not self.chat:
            return "completions endpoint (base model): no chat template to switch thinking off"
        if not self.options.thinking_mode:
            return "the model has no thinking mode (profile serving.thinking = unsupported; --thinking-model if it has)"
        return None

    def authored_jobs(self, jobs: list[Job], skipped: list[dict[str, Any]]) -> AuthoredPlan:
        opts = self.options
        tasks = authored.load_tasks()[: opts.authored_items]
        modes: dict[str, str] = {}
        for mode in opts.authored_modes:
            reason = self.low_thinking_skip_reason() if mode == "low-thinking" else None
            modes[mode] = f"skipped: {reason}" if reason else "asked"
            for task in tasks:
                row = {"suite": "authored", "item_id": task.id, "lang": task.lang, "mode": mode}
                if reason:
                    skipped.append({**row, "skipped": reason})
                    continue
                if self.chat:
                    prompt, stop = task.prompt, None
                else:
                    prompt = authored.completion_prompt(task)
                    stop = ["\n\n", "Question:"] if task.multiline else ["\n", "Question:"]
                jobs.append(
                    Job(
                        row=row,
                        prompt=prompt,
                        max_tokens=self.budget(mode, opts.authored_max_tokens),
                        stop=stop,
                        extra=self.extra(mode),
                        score=partial(authored.check, task),
                    )
                )
        return AuthoredPlan(
            file=authored.AUTHORED_FILE,
            sha256=data_sha256(authored.AUTHORED_FILE),
            tasks=len(tasks),
            modes=modes,
            max_tokens=opts.authored_max_tokens,
        )

    def retrieval_jobs(
        self, jobs: list[Job], skipped: list[dict[str, Any]], max_model_len: int | None
    ) -> RetrievalPlan:
        opts = self.options
        plan = RetrievalPlan(lengths=opts.retrieval_lengths, depths=opts.retrieval_depths, asked_lengths=[])
        room = self.budget("plain", retrieval.MAX_TOKENS)
        fits = [L for L in opts.retrieval_lengths if max_model_len is None or L + room <= max_model_len]
        self.skip_retrieval(
            skipped,
            [L for L in opts.retrieval_lengths if L not in fits],
            f"longer than the model's max_model_len {max_model_len} with the answer",
        )
        if not fits:
            return plan
        if self.target.tokenizer_source is None:
            self.skip_retrieval(
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
            self.skip_retrieval(skipped, fits, str(exc))
            return plan
        items = retrieval.build_items(hs.builder, fits, opts.retrieval_depths)
        for item in items:
            jobs.append(
                Job(
                    row={"suite": "retrieval", "item_id": item.item_id, "mode": "plain"},
                    prompt=item.prompt.text,
                    max_tokens=room,
                    extra=self.extra("plain"),
                    score=partial(retrieval.score, item),
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

    def skip_retrieval(self, skipped: list[dict[str, Any]], lengths: list[int], reason: str) -> None:
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

    async def image_jobs(self, client: StreamingClient, jobs: list[Job], skipped: list[dict[str, Any]]) -> ImagePlan:
        tasks = images.image_tasks()
        reason = None
        if not self.chat:
            reason = "completions endpoint: images are sent as chat content parts"
        else:
            probe = Job(
                row={"item_id": "image-probe", "mode": "plain"},
                prompt="",
                max_tokens=1,
                messages=images.probe_messages(),
                extra=self.extra("plain"),
            )
            record = await client.stream(self.spec(probe, family="image-probe"))
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
                    max_tokens=self.budget("plain", self.options.image_max_tokens),
                    extra=self.extra("plain"),
                    score=partial(authored.check, task.task()),
                )
            )
        return ImagePlan(items=len(tasks), status=f"skipped: {reason}" if reason else "asked")

    def spec(self, job: Job, family: str | None = None) -> RequestSpec:
        constraint = self.options.constraint(self.target.endpoint)
        extra = {**job.extra, **(constraint.body() if constraint is not None else {})}
        if job.stop:
            extra["stop"] = job.stop
        body = request_body(
            self.target.endpoint,
            self.target.model,
            job.prompt,
            messages=job.messages,
            max_tokens=job.max_tokens,
            temperature=0.0,
            seed=self.options.seed,
            extra=extra,
        )
        labels = {
            "scenario": NAME,
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
