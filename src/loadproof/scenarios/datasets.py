"""`run load --dataset FILE`: the user's own prompts on the open-loop schedule (docs/scenarios.md, "Data sets").

`DatasetOptions` are the options (`LoadOptions` takes them in); `dataset_load_plan` builds the load plan
and every request from the data set (`workloads.datasets`) instead of synthetic prompts: the schedule,
the seed, the SLOs and the sender are the load scenario's own.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from loadproof.client import RequestSpec
from loadproof.config.base import StrictModel
from loadproof.errors import UsageError
from loadproof.plans.datasets import DatasetRef
from loadproof.protocol.openai import request_body
from loadproof.scenarios.options import cli
from loadproof.units import NS_PER_S
from loadproof.workloads.datasets import (FORMATS, SAMPLES, DatasetSpec, Item, parse_columns, resolve, select,
                                           token_cache)
from loadproof.workloads.synthetic import draw_lengths

if TYPE_CHECKING:
    from loadproof.plans.load import LoadPlan
    from loadproof.scenarios.load import LoadScenario, Planned
    from loadproof.scenarios.long_context import HaystackTarget

Columns = Annotated[dict[str, str], BeforeValidator(parse_columns)]
_DEFAULTS = {"dataset_format": "auto", "dataset_columns": {}, "dataset_sample": "random", "dataset_repeat": False,
             "dataset_min_input_tokens": None, "dataset_max_input_tokens": None, "dataset_output": "data"}


class DatasetOptions(StrictModel):
    dataset: str | None = Field(default=None, description="send the prompts of this data set file or folder instead "
                                "of synthetic ones (ShareGPT JSON, JSONL, Parquet, Arrow; local only)")
    dataset_format: Literal[FORMATS] = Field(default="auto", description="the data set's format; auto: by its "
                                             "extension (.json sharegpt, .jsonl, .parquet, .arrow)")  # type: ignore[valid-type]
    dataset_columns: Columns = Field(default={}, description="FIELD=COLUMN,... maps prompt, messages, output_tokens "
                                     "or conversations to the data set's own names", json_schema_extra=cli(text=True))
    dataset_sample: Literal[SAMPLES] = Field(default="random", description="random: a seeded uniform sample of the "
                                             "usable rows, shuffled; first: the first rows in file order")  # type: ignore[valid-type]
    dataset_repeat: bool = Field(default=False, description="with fewer usable rows than requests, send them again "
                                 "in the same order")
    dataset_min_input_tokens: int | None = Field(default=None, ge=1, description="drop rows whose prompt is shorter "
                                                 "(tokens as the engine counts them)")
    dataset_max_input_tokens: int | None = Field(default=None, ge=1, description="drop rows whose prompt is longer "
                                                 "(the served context drops them too)")
    dataset_output: Literal["data", "option"] = Field(default="data", description="data: each row's own output "
                                                      "length where it has one (ShareGPT: its reply's tokens), else "
                                                      "--output-tokens; option: always --output-tokens")
    skip_bad_rows: bool = Field(default=False, description="skip rows that do not parse, counting them, instead of "
                                "stopping at the first")

    @model_validator(mode="after")
    def _dataset_options(self) -> DatasetOptions:
        if self.dataset is None:
            given = [k for k, v in _DEFAULTS.items() if getattr(self, k) != v]
            if given:
                raise ValueError(f"--{given[0].replace('_', '-')} applies with --dataset FILE")
        else:
            try:
                resolve(self.dataset, self.dataset_format)  # the file is there (a hub id says so), its format known
            except UsageError as exc:
                raise ValueError(str(exc)) from None
        if self.dataset is not None and getattr(self, "shared_prefix_tokens", 0):
            raise ValueError("--shared-prefix-tokens shapes synthetic prompts: it does not apply with --dataset")
        if self.dataset is not None and self.dataset_min_input_tokens and self.dataset_max_input_tokens \
                and self.dataset_min_input_tokens > self.dataset_max_input_tokens:
            raise ValueError("--dataset-min-input-tokens is above --dataset-max-input-tokens")
        return self


def tokenizer_key(scenario: Any) -> str:
    path = scenario.target.tokenizer_path
    try:
        st = Path(path).stat()
        return f"{Path(path).resolve()}:{st.st_size}:{st.st_mtime_ns}"
    except (OSError, TypeError):
        return str(path)


def dataset_load_plan(scenario: LoadScenario, offsets: list[float], hs: HaystackTarget,
                      max_model_len: int | None) -> tuple[LoadPlan, list[Planned]]:
    """The load plan and every request, each a row of the data set, sent at the schedule's offsets."""
    from loadproof.plans.load import LoadPlan
    from loadproof.scenarios.load import Planned, _lengths

    opts, target = scenario.options, scenario.target
    builder = hs.builder
    n = len(offsets)
    cache = token_cache(tokenizer_key(scenario), builder.count_many)
    chat = target.endpoint == "chat"

    def count(items: list[Item]) -> list[int]:
        texts = [_single_text(i, chat) for i in items]
        return [builder.overhead_tokens + c for c in cache.count_many(texts)]

    ceiling = opts.dataset_max_input_tokens
    if max_model_len is not None:
        ceiling = min(ceiling or math.inf, max_model_len - 1)  # type: ignore[assignment]
    spec = DatasetSpec(path=opts.dataset, format=opts.dataset_format, columns=dict(opts.dataset_columns),  # type: ignore[arg-type]
                       min_input_tokens=opts.dataset_min_input_tokens,
                       max_input_tokens=None if ceiling is None else int(ceiling), sample=opts.dataset_sample,
                       seed=opts.seed, repeat=opts.dataset_repeat, skip_bad_rows=opts.skip_bad_rows)
    sel = select(spec, n, count)
    scenario.status(f"data set {Path(opts.dataset).name} ({sel.format}): {sel.rows} rows read, {sel.usable} usable"  # type: ignore[arg-type]
                    + (f", {sel.bad_rows} malformed skipped (first: {sel.first_bad})" if sel.bad_rows else "")
                    + f"; {n} requests" + (f", {sel.repeated} repeated" if sel.repeated else "")
                    + f"; {cache.tokenized} texts tokenized, the rest from the cache")
    if chat:  # the selection above used text + overhead; each prompt sent is now counted as the engine renders it
        from loadproof.scenarios.token_counts import chat_prompt_counter

        exact_count, how = chat_prompt_counter(target, builder.tokenizer)
        unique = list({id(i): i for i in sel.items}.values())
        for item in unique:
            item.input_tokens = exact_count(item.messages or [{"role": "user", "content": item.text()}])
        scenario.status(f"chat prompts counted exactly ({how}): {len(unique)} prompts")
    drawn = draw_lengths(opts.output_tokens, n, opts.seed, "output")
    replied = [i for i in {id(i): i for i in sel.items}.values() if i.reply is not None and i.output_tokens is None]
    if opts.dataset_output == "data" and replied:  # ShareGPT: the reply's token count is the output length
        for item, tokens in zip(replied, cache.count_many([i.reply for i in replied])):  # type: ignore[misc]
            item.output_tokens = max(1, tokens)
    requests: list[Planned] = []
    outputs_from_data = estimated = clamped = 0
    for k, (offset, item, fallback) in enumerate(zip(offsets, sel.items, drawn)):
        out = item.output_tokens if opts.dataset_output == "data" and item.output_tokens else fallback
        outputs_from_data += out is item.output_tokens and opts.dataset_output == "data"
        inputs = item.input_tokens or 0
        if max_model_len is not None and out > max_model_len - inputs:
            out, clamped = max(1, max_model_len - inputs), clamped + 1
        extra = dict(target.extra_body)
        exact = True  # chat: counted as rendered, above
        if chat and item.messages is not None:
            extra["messages"] = item.messages
            text = ""
        else:
            text = item.text()
        estimated += not exact
        body = request_body(target.endpoint, target.model, text, max_tokens=out, temperature=0.0,
                            ignore_eos=opts.ignore_eos, extra=extra)
        spec_ = RequestSpec(request_id=f"load-{k:07d}", endpoint=target.endpoint, body=body, deadline_s=opts.deadline_s)
        requests.append(Planned(k, round(offset * NS_PER_S), spec_, inputs if exact else None, out))  # type: ignore[arg-type]
    ref = DatasetRef(path=str(opts.dataset), format=sel.format, files=sel.files, sha256=sel.sha256,
                     columns=dict(opts.dataset_columns), sample=opts.dataset_sample, seed=opts.seed,
                     repeat=opts.dataset_repeat, min_input_tokens=opts.dataset_min_input_tokens,
                     max_input_tokens=opts.dataset_max_input_tokens, output_from=opts.dataset_output, rows=sel.rows,
                     bad_rows=sel.bad_rows, no_prompt=sel.no_prompt, too_short=sel.too_short, too_long=sel.too_long,
                     usable=sel.usable, repeated=sel.repeated, rows_sent=[i.row for i in sel.items],
                     outputs_from_data=outputs_from_data, estimated_inputs=estimated)
    plan = LoadPlan(
        arrival=opts.arrival,
        rate_rps=None if opts.rate is None or math.isinf(opts.rate) else opts.rate,
        all_at_once=opts.rate is not None and math.isinf(opts.rate),
        burstiness=opts.burstiness, ramp_up_s=opts.ramp_up_s,
        stages=[_stage(s) for s in opts.stages or ()],
        num_requests=opts.num_requests, duration_s=opts.duration_s, max_concurrency=opts.max_concurrency,
        seed=opts.seed, planned_requests=n, rescaled=opts.arrival_spec().rescaled,
        schedule_span_s=round(offsets[-1], 9),
        input_tokens=_lengths_text("dataset"), output_tokens=_lengths(opts.output_tokens),
        shared_prefix_tokens=0, clamped_requests=clamped, ignore_eos=opts.ignore_eos,
        deadline_s=opts.deadline_s, slo=dict(opts.slo or {}), endpoint=target.endpoint,
        max_model_len=max_model_len, overhead_tokens=builder.overhead_tokens,
        overhead_source=hs.overhead_source, haystack_additive=builder.additive, dataset=ref,
    )
    return plan, requests


def _single_text(item: Item, chat: bool) -> str:
    """The text whose tokens, plus the engine's overhead for one prompt, are the prompt's length (exact for a
    prompt or one user message; for several chat messages, an estimate)."""
    if chat and item.messages is not None:
        return "".join(str(m.get("content", "")) for m in item.messages)
    return item.text()


def _stage(stage: Any) -> Any:
    from loadproof.plans.load import LoadStage

    return LoadStage(rate_rps=stage.rate_rps, duration_s=stage.duration_s)


def _lengths_text(text: str) -> Any:
    from loadproof.plans.load import LoadLengths

    return LoadLengths(kind="dataset", a=0, text=text)

