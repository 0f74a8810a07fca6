"""The data-set workload of a load run (`run load --dataset FILE`, docs/scenarios.md, "Data sets"): each
request of the schedule sends a row of the user's data set (`workloads.datasets` reads, filters and
samples it) instead of a synthetic prompt; the schedule, the seed, the SLOs and the sender are the load
run's own. A row's media (`workloads.dataset_media`) go as typed parts, in the message they came in, before
its text; its record keeps their counts, sizes and digests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadproof.client import RequestSpec
from loadproof.plans.datasets import DatasetRef
from loadproof.plans.load import LoadLengths, LoadPlan, MediaPlan
from loadproof.protocol.request import Message, Part, Text
from loadproof.protocol.routes import request_body
from loadproof.scenarios.constraints import request_extra
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.schedule import Planned, load_plan
from loadproof.scenarios.long_context import HaystackTarget
from loadproof.scenarios.token_counts import chat_prompt_counter
from loadproof.units import NS_PER_S
from loadproof.workloads.datasets import DatasetSpec, Item, select, token_cache
from loadproof.workloads.media import counts_of, media_tokens_text
from loadproof.workloads.synthetic import draw_lengths

DATASET_LENGTHS = LoadLengths(kind="dataset", a=0, text="dataset")  # the plan's input lengths: the rows'


def dataset_requests(
    opts: LoadOptions,
    offsets: list[float],
    hs: HaystackTarget,
    max_model_len: int | None,
    say: Callable[[str], None],
    models: list[str] | None = None,
) -> tuple[LoadPlan, list[Planned]]:
    """The load plan and every request, each a row of the data set, sent at the schedule's offsets."""
    assert opts.dataset is not None
    target, builder = hs.target, hs.builder
    n = len(offsets)
    cache = token_cache(builder.tokenizer.key, builder.count_many)
    chat = target.route.conversational  # a row's messages go as they are, through the chat template

    def count(items: list[Item]) -> list[int]:
        texts = [_single_text(i, chat) for i in items]
        return [builder.overhead_tokens + c for c in cache.count_many(texts)]

    ceiling = opts.dataset_max_input_tokens
    if max_model_len is not None:
        ceiling = max_model_len - 1 if not ceiling else min(ceiling, max_model_len - 1)
    spec = DatasetSpec(
        path=opts.dataset,
        format=opts.dataset_format,
        columns=dict(opts.dataset_columns),
        min_input_tokens=opts.dataset_min_input_tokens,
        max_input_tokens=None if ceiling is None else int(ceiling),
        sample=opts.dataset_sample,
        seed=opts.seed,
        repeat=opts.dataset_repeat,
        skip_bad_rows=opts.skip_bad_rows,
    )
    sel = select(spec, n, count)
    say(
        f"data set {Path(opts.dataset).name} ({sel.format}): {sel.rows} rows read, {sel.usable} usable"
        + (f", {sel.bad_rows} malformed skipped (first: {sel.first_bad})" if sel.bad_rows else "")
        + f"; {n} requests"
        + (f", {sel.repeated} repeated" if sel.repeated else "")
        + f"; {cache.tokenized} texts tokenized, the rest from the cache"
    )
    if chat:  # the selection above used text + overhead; each prompt sent is now counted as the engine renders it
        exact_count, how = chat_prompt_counter(target, builder.tokenizer)
        unique = list({id(i): i for i in sel.items}.values())
        for item in unique:
            item.input_tokens = exact_count(item.messages or [{"role": "user", "content": item.text()}])
        say(f"chat prompts counted exactly ({how}): {len(unique)} prompts")
    drawn = draw_lengths(opts.output_tokens, n, opts.seed, "output")
    unique_items = {id(i): i for i in sel.items}.values()
    replied = [(i, i.reply) for i in unique_items if i.reply is not None and i.output_tokens is None]
    if opts.dataset_output == "data" and replied:  # ShareGPT: the reply's token count is the output length
        for (item, _), tokens in zip(replied, cache.count_many([reply for _, reply in replied])):
            item.output_tokens = max(1, tokens)
    requests: list[Planned] = []
    outputs_from_data = clamped = with_media = 0
    body_extra = request_extra(opts, target)
    for k, (offset, item, fallback) in enumerate(zip(offsets, sel.items, drawn)):
        out = item.output_tokens if opts.dataset_output == "data" and item.output_tokens else fallback
        inputs: int | None = item.input_tokens or 0
        if target.route.pooling:  # one row embedded: no output
            out = 0
        else:
            outputs_from_data += out is item.output_tokens and opts.dataset_output == "data"
        if out and max_model_len is not None and inputs is not None and out > max_model_len - inputs:
            out, clamped = max(1, max_model_len - inputs), clamped + 1
        messages: list[Message] | list[dict[str, Any]] | None = (
            item.messages if chat and item.messages is not None else None
        )
        counts = None
        if item.media:
            messages = typed_messages(item, chat)
            counts = counts_of([p for parts in item.media.values() for p in parts], opts.media_tokens or ())
            with_media += 1
            if not chat:
                inputs = None  # media alone (a transcription): its text, if any, is context, not a prompt
        model = models[k] if models else ""  # --model-mix: the drawn model, else the target's
        body = request_body(
            target.endpoint,
            model or target.model,
            "" if messages is not None else item.text(),
            messages=messages,
            max_tokens=out,
            temperature=0.0,
            ignore_eos=opts.ignore_eos,
            extra=body_extra,
        )
        request = RequestSpec(
            request_id=f"load-{k:07d}", endpoint=target.endpoint, body=body, deadline_s=opts.deadline_s
        )
        requests.append(Planned(k, round(offset * NS_PER_S), request, inputs, out, model, counts))
    ref = DatasetRef(
        path=str(opts.dataset),
        format=sel.format,
        files=sel.files,
        sha256=sel.sha256,
        columns=dict(opts.dataset_columns),
        sample=opts.dataset_sample,
        seed=opts.seed,
        repeat=opts.dataset_repeat,
        min_input_tokens=opts.dataset_min_input_tokens,
        max_input_tokens=opts.dataset_max_input_tokens,
        output_from=opts.dataset_output,
        rows=sel.rows,
        bad_rows=sel.bad_rows,
        no_prompt=sel.no_prompt,
        too_short=sel.too_short,
        too_long=sel.too_long,
        usable=sel.usable,
        repeated=sel.repeated,
        rows_sent=[i.row for i in sel.items],
        outputs_from_data=outputs_from_data,
        estimated_inputs=0,
    )
    plan = load_plan(
        opts,
        offsets,
        target,
        hs,
        max_model_len,
        input_tokens=DATASET_LENGTHS,
        shared_prefix_tokens=0,
        clamped=clamped,
        dataset=ref,
    )
    if with_media:
        plan.media = MediaPlan(
            source="dataset",
            tokens=media_tokens_text(opts.media_tokens or ()),
            tokens_source=opts.media_tokens_source,
            media_alone=not chat,
        )
    return plan, requests


def typed_messages(item: Item, chat: bool) -> list[Message]:
    """A row's conversation with its media, each message's before its text; for a route of media alone, one
    message of every media item and the row's text."""
    media = item.media or {}
    if not chat:
        text = item.text().strip()
        alone: tuple[Part, ...] = tuple(p for parts in media.values() for p in parts)
        return [Message("user", alone + ((Text(text),) if text else ()))]
    rows = item.messages if item.messages is not None else [{"role": "user", "content": item.text()}]
    out: list[Message] = []
    for i, m in enumerate(rows):
        content = str(m.get("content", ""))
        parts: tuple[Part, ...] = (*media.get(i, ()), *((Text(content),) if content else ()))
        out.append(Message(m.get("role", "user"), parts or (Text(""),)))
    return out


def _single_text(item: Item, chat: bool) -> str:
    """The text whose tokens, plus the engine's overhead for one prompt, are the prompt's length (exact for a
    prompt or one user message; for several chat messages, an estimate)."""
    if chat and item.messages is not None:
        return "".join(str(m.get("content", "")) for m in item.messages)
    return item.text()
