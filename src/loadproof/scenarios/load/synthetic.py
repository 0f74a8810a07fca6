"""The synthetic workload of a load run: one prompt of exactly the drawn length per request of the schedule
(`workloads.synthetic`: salted per run, the engine's overhead included), every body built before the
first send. On the embeddings endpoint each request embeds `--inputs-per-request` such prompts (one vector
each), its planned input the sum of their lengths, and asks for no output. With --images, --audio-s or
--video-frames each request carries its seeded media before its text (`workloads.media`); on a route that
sends media alone (a transcription) the media are the whole request."""

from __future__ import annotations

import secrets

from loadproof.client import RequestSpec
from loadproof.errors import UsageError
from loadproof.plans.load import LoadLengths, LoadPlan, MediaPlan
from loadproof.protocol.request import Message, Part, Text
from loadproof.protocol.routes import Route, request_body
from loadproof.scenarios.constraints import request_extra
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.schedule import Planned, lengths_of, load_plan
from loadproof.scenarios.long_context import HaystackTarget
from loadproof.scenarios.target import Target
from loadproof.units import NS_PER_S
from loadproof.workloads.media import counts_of, images_text, media_tokens_text, request_media
from loadproof.workloads.synthetic import SyntheticPrompts, draw_lengths


def synthetic_requests(
    opts: LoadOptions,
    offsets: list[float],
    hs: HaystackTarget,
    max_model_len: int | None,
    models: list[str] | None = None,
) -> tuple[LoadPlan, list[Planned]]:
    """The plan and every request: lengths drawn from the seed (clamped to the served context), prompts
    built to them exactly."""
    target = hs.target
    n = len(offsets)
    # embeddings: the inputs a request embeds; rerank: its query and the documents scored against it
    route = target.route
    per = opts.inputs_per_request + route.extra_inputs if route.pooling else 1
    salt = secrets.token_hex(8)
    prompts = SyntheticPrompts(
        hs.builder, run_salt=salt, seed=opts.seed, shared_prefix_tokens=opts.shared_prefix_tokens
    )
    if media_alone(opts, route):  # a transcription of each file: no text
        return media_alone_requests(opts, offsets, target, max_model_len, models)
    shortest = prompts.shortest()
    if opts.input_tokens.kind == "fixed" and opts.input_tokens.a < shortest:
        raise UsageError(
            f"--input-tokens {opts.input_tokens} is shorter than the shortest synthetic prompt "
            f"({shortest} tokens: the engine's {hs.builder.overhead_tokens}, the shared prefix, a "
            "salt line and a pad)"
        )
    inputs = draw_lengths(opts.input_tokens, n * per, opts.seed, "input")
    if route.pooling:
        return _pooling(opts, offsets, hs, max_model_len, prompts, inputs, per, models)
    outputs = draw_lengths(opts.output_tokens, n, opts.seed, "output")
    if (
        max_model_len is not None
        and opts.input_tokens.fixed
        and opts.output_tokens.fixed
        and inputs[0] + outputs[0] > max_model_len
    ):
        raise UsageError(
            f"--input-tokens {inputs[0]} + --output-tokens {outputs[0]} do not fit the served "
            f"context of {max_model_len}"
        )
    drawn = list(zip(inputs, outputs))
    if max_model_len is not None:
        inputs = [min(i, max_model_len - 1) for i in inputs]
    texts, built, _ = prompts.build_all(inputs)
    outputs = [max(1, o if max_model_len is None else min(o, max_model_len - i)) for o, i in zip(outputs, built)]
    clamped = sum((i, o) != d for i, o, d in zip(built, outputs, drawn))
    requests = []
    extra = request_extra(opts, target)
    media = request_media(opts.media_spec(), n, opts.seed, salt) if opts.synthetic_media else None
    rules = opts.media_tokens or ()
    for k, (offset, text, length, out) in enumerate(zip(offsets, texts, built, outputs)):
        model = models[k] if models else ""  # --model-mix: the drawn model, else the target's
        parts: tuple[Part, ...] = (*media[k], Text(text)) if media is not None else ()
        body = request_body(
            target.endpoint,
            model or target.model,
            text,
            messages=[Message("user", parts)] if parts else None,
            max_tokens=out,
            temperature=0.0,
            ignore_eos=opts.ignore_eos,
            extra=extra,
        )
        spec = RequestSpec(request_id=f"load-{k:07d}", endpoint=target.endpoint, body=body, deadline_s=opts.deadline_s)
        counts = counts_of(media[k], rules) if media is not None else None
        requests.append(Planned(k, round(offset * NS_PER_S), spec, length, out, model, counts))
    plan = load_plan(
        opts,
        offsets,
        target,
        hs,
        max_model_len,
        input_tokens=lengths_of(opts.input_tokens),
        shared_prefix_tokens=opts.shared_prefix_tokens,
        clamped=clamped,
    )
    plan.media = media_plan(opts) if media is not None else None
    return plan, requests


def media_plan(opts: LoadOptions, alone: bool = False) -> MediaPlan:
    return MediaPlan(
        images=images_text(opts.images or ()),
        audio_s=opts.audio_s,
        video_frames=str(opts.video_frames or ""),
        reuse=opts.media_reuse,
        tokens=media_tokens_text(opts.media_tokens or ()),
        tokens_source=opts.media_tokens_source,
        media_alone=alone,
    )


def media_alone(opts: LoadOptions, route: Route) -> bool:
    """Whether a run of `opts` on `route` sends synthetic media alone (a transcription of each file): no text to
    size, so no tokenizer and no engine /tokenize."""
    return opts.dataset is None and opts.synthetic_media and not route.takes_text


def media_alone_requests(
    opts: LoadOptions,
    offsets: list[float],
    target: Target,
    max_model_len: int | None,
    models: list[str] | None = None,
) -> tuple[LoadPlan, list[Planned]]:
    """A route of media alone (a transcription): each request its seeded file and no text; its output as drawn
    (`--output-tokens`, the answer's budget). Nothing is tokenized: the plan has no overhead."""
    n = len(offsets)
    salt = secrets.token_hex(8)
    outputs = draw_lengths(opts.output_tokens, n, opts.seed, "output")
    media = request_media(opts.media_spec(), n, opts.seed, salt)
    rules = opts.media_tokens or ()
    extra = request_extra(opts, target)
    requests = []
    for k, (offset, out) in enumerate(zip(offsets, outputs)):
        model = models[k] if models else ""
        body = request_body(
            target.endpoint,
            model or target.model,
            messages=[Message("user", tuple(media[k]))],
            max_tokens=out,
            temperature=0.0,
            ignore_eos=opts.ignore_eos,
            extra=extra,
        )
        spec = RequestSpec(request_id=f"load-{k:07d}", endpoint=target.endpoint, body=body, deadline_s=opts.deadline_s)
        requests.append(Planned(k, round(offset * NS_PER_S), spec, None, out, model, counts_of(media[k], rules)))
    plan = load_plan(
        opts,
        offsets,
        target,
        None,
        max_model_len,
        input_tokens=LoadLengths(kind="none", a=0, text="none: media alone"),
        shared_prefix_tokens=0,
        clamped=0,
    )
    plan.media = media_plan(opts, alone=True)
    return plan, requests


def _pooling(
    opts: LoadOptions,
    offsets: list[float],
    hs: HaystackTarget,
    max_model_len: int | None,
    prompts: SyntheticPrompts,
    inputs: list[int],
    per: int,
    models: list[str] | None,
) -> tuple[LoadPlan, list[Planned]]:
    """A pooling route's requests: `per` prompts each (a rerank's first the query, the rest its documents), each
    of its drawn length (cut to the served context)."""
    target = hs.target
    cut = [min(i, max_model_len) for i in inputs] if max_model_len is not None else inputs
    texts, built, _ = prompts.build_all(cut)
    extra = request_extra(opts, target)
    requests = []
    for k, offset in enumerate(offsets):
        model = models[k] if models else ""
        group = slice(k * per, (k + 1) * per)
        body = request_body(target.endpoint, model or target.model, max_tokens=0, inputs=texts[group], extra=extra)
        spec = RequestSpec(request_id=f"load-{k:07d}", endpoint=target.endpoint, body=body, deadline_s=opts.deadline_s)
        requests.append(Planned(k, round(offset * NS_PER_S), spec, sum(built[group]), 0, model))
    plan = load_plan(
        opts,
        offsets,
        target,
        hs,
        max_model_len,
        input_tokens=lengths_of(opts.input_tokens),
        shared_prefix_tokens=opts.shared_prefix_tokens,
        clamped=sum(c != i for c, i in zip(cut, inputs)),
    )
    return plan, requests
