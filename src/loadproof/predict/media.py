"""Media in a predicted open-loop run (`plan --simulate load --images ...`, docs/simulator.md, "Media in a
prediction"): what the simulator would be sent, charged as it charges it.

- Each item's prompt tokens by a rule (`protocol.media.MediaTokens`): `--media-tokens`' where it gives one of the
  item's kind, else the deployment profile's `[model] image_tokens` or `audio_tokens` (`plan PROFILE`, put in the
  config by `predict.deployment`), else the sim profile's `image_tokens` (an image, each frame of a video) or
  `audio_tokens`; an item of a kind none states is refused (a text-only sim profile refuses media, as the
  simulator does).
- Those tokens are prefilled as prompt tokens (the simulator has no encoder cost of its own: `sim.prompt` adds
  them to the prompt it prefills), so a request's prompt is its text's tokens plus its media's.
- `--media-reuse P`: the requests `workloads.media.reuse_sources` draws send an earlier request's media again.
  The simulator's multimodal cache (`sim.prompt.MediaCache`, `mm_cache_items` items) counts them as hits, and a
  hit saves no prefill there: the cache is a counter (vLLM's processor cache skips preprocessing, which the
  simulator does not model). What a repeat does save is the prefix cache: media stand first in the prompt
  (after the chat template's head on a conversational route, `sim.prompt.USER_HEAD`), so a repeat shares the
  KV blocks that lie wholly inside the head and the media with the request it repeats, as the simulator keys a
  block by the content hash of the media it holds; the blocks after are the request's own.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from loadproof.errors import UsageError
from loadproof.metrics.media import HITS, QUERIES
from loadproof.protocol.media import MediaTokens
from loadproof.records import MediaCounts, RequestRecord
from loadproof.rundir import EngineSample
from loadproof.sim.config import SimConfig
from loadproof.sim.prompt import USER_HEAD, MediaCache
from loadproof.units import NS_PER_S
from loadproof.workloads.media import MediaSpec, images_text, reuse_sources

GIVEN, PROFILE = "--media-tokens", "the sim profile"


@dataclass(frozen=True)
class Rule:
    """The rule a prediction charges one kind of media by, and where it came from."""

    rule: MediaTokens
    source: str  # GIVEN, PROFILE, or the deployment profile that states it ("profile NAME [model] image_tokens")
    profile: str = ""  # the profile's own rule of the kind ("": none, a text-only model)
    stated_by: str = PROFILE  # whose rule `profile` is: the sim profile's, or the deployment profile's [model]

    def __str__(self) -> str:
        told = self.source != GIVEN or not self.profile or self.profile == str(self.rule)
        return f"{self.rule} ({self.source}" + ("" if told else f"; {self.stated_by} states {self.profile}") + ")"


def media_rules(spec: MediaSpec, given: tuple[MediaTokens, ...], config: SimConfig) -> tuple[Rule | None, Rule | None]:
    """(the image rule, the audio rule) of `spec`'s media on `config`: `given`'s where it has the kind's, else the
    sim profile's; None for a kind `spec` does not send. One line (UsageError) for a kind no rule states."""
    image = audio = None
    if spec.images or spec.video:
        option = "--images" if spec.images else "--video-frames"
        image = _rule(given, False, config.image_tokens, option, "image_tokens", "fixed:N or patches:P", config)
    if spec.audio_s is not None:
        audio = _rule(given, True, config.audio_tokens, "--audio-s", "audio_tokens", "per_s:R", config)
    return image, audio


def _rule(
    given: tuple[MediaTokens, ...], audio: bool, own: str, option: str, field: str, forms: str, config: SimConfig
) -> Rule:
    by = config.media_tokens_from.get(field, PROFILE)  # a deployment profile's [model], else the sim profile
    stated = next((r for r in given if (r.kind == "per_s") == audio), None)
    if stated is not None:
        return Rule(stated, GIVEN, own, by)
    if own:
        return Rule(MediaTokens.parse(own), by, own, by)
    raise UsageError(
        f"{option}: the sim profile's model {config.model} is text-only (no {field} in its sim profile): give "
        f"the model's rule with --media-tokens {forms}, or a sim profile with {field}"
    )


@dataclass(frozen=True)
class PredictedMedia:
    """Every request's media in a prediction: each sends `spec`'s items (its own, or those of `sources[i]`)."""

    spec: MediaSpec
    image: Rule | None
    audio: Rule | None
    sources: tuple[int | None, ...]  # the earlier request whose media request i sends again (None: its own)
    head_tokens: int  # the prompt's tokens before the media (the chat template's head; 0 for media alone)
    seed: int

    @property
    def tokens(self) -> int:
        """The prompt tokens of one request's media (every request sends the same shapes)."""
        n = 0
        if self.image is not None:
            for group in self.spec.images:
                n += group.count * self.image.rule.image(group.width, group.height)
            if self.spec.video is not None:
                v = self.spec.video
                n += v.count * self.image.rule.image(v.width, v.height)
        if self.audio is not None and self.spec.audio_s is not None:
            n += self.audio.rule.audio(self.spec.audio_s)
        return n

    def own(self, i: int) -> int:
        """The request whose media request i sends (itself unless it repeats an earlier one's)."""
        source = self.sources[i]
        return i if source is None else source

    def digests(self, i: int) -> list[str]:
        """Request i's items, each named by the request that sent it first (the content the caches key on)."""
        items = sum(g.count for g in self.spec.images) + (self.spec.video is not None) + (self.spec.audio_s is not None)
        base = f"{self.seed}:{self.own(i)}"
        return [hashlib.sha256(f"{base}:{k}".encode()).hexdigest()[:16] for k in range(items)]

    def counts(self, i: int) -> MediaCounts:
        """What request i's record keeps of its media, as `workloads.media.counts_of` would (no bytes: the
        prediction encodes no file)."""
        images = sum(g.count for g in self.spec.images)
        v = self.spec.video
        pixels = sum(g.count * g.width * g.height for g in self.spec.images) + (
            v.count * v.width * v.height if v else 0
        )
        return MediaCounts(
            images=images,
            video_frames=v.count if v else 0,
            audio_s=round(self.spec.audio_s or 0.0, 6),
            pixels=pixels,
            hashes=",".join(self.digests(i)),
            tokens=self.tokens,
        )

    def block_hashes(self, prompt_tokens: list[int], block_size: int, salt: str) -> list[list[int]]:
        """Each request's full KV blocks as the simulator hashes them: the blocks wholly inside the head and the
        media are keyed on the media's first sender, so a repeat shares them; the rest are the request's own."""
        shared = (self.head_tokens + self.tokens) // block_size
        out = []
        for i, n in enumerate(prompt_tokens):
            blocks = n // block_size
            first = min(shared, blocks)
            own = self.own(i)
            out.append(
                [hash((salt, "media", own, b)) for b in range(first)]
                + [hash((salt, i, b)) for b in range(first, blocks)]
            )
        return out

    def mark(self, records: list[RequestRecord], text_tokens: list[int] | None) -> None:
        """Each predicted record with its media and its prompt's parts: the text's planned tokens (None for media
        alone) beside the prompt's whole, as a run's record holds them."""
        for i, record in enumerate(records):
            self.counts(i).apply(record)
            record.planned_input_tokens = None if text_tokens is None else text_tokens[i]

    def cache_samples(self, order: list[int], capacity: int, end_s: float) -> list[EngineSample]:
        """The simulator's multimodal cache counters before and after the run (two /metrics samples), every
        request's items queried in `order` (the order they reach the engine), least recently used out."""
        cache = MediaCache(capacity)
        for i in order:
            for digest in self.digests(i):
                cache.query(digest)
        zero = EngineSample(t_ns=0, values={QUERIES: 0.0, HITS: 0.0})
        end = EngineSample(
            t_ns=int(end_s * NS_PER_S) + 1, values={QUERIES: float(cache.queries), HITS: float(cache.hits)}
        )
        return [zero, end]

    def rules_text(self) -> tuple[str, str]:
        """The rules charged and where they came from, as a run's plan keeps them (`MediaPlan.tokens`,
        `tokens_source`)."""
        rules = [r for r in (self.image, self.audio) if r is not None]
        return ",".join(str(r.rule) for r in rules), ", ".join(dict.fromkeys(r.source for r in rules))

    def lines(self, route: str) -> list[str]:
        """What the prediction assumes of the media, for its output."""
        out = []
        if self.image is not None:
            shapes = [(g.width, g.height, g.count) for g in self.spec.images]
            if self.spec.video is not None:
                shapes.append((self.spec.video.width, self.spec.video.height, self.spec.video.count))
            each = ", ".join(f"{w}x{h}: {self.image.rule.image(w, h)} tokens ({n} a request)" for w, h, n in shapes)
            out.append(f"media tokens per image (a video: per frame) by {self.image}: {each}")
        if self.audio is not None and self.spec.audio_s is not None:
            out.append(
                f"media tokens per audio item by {self.audio}: "
                f"{self.audio.rule.audio(self.spec.audio_s)} for {self.spec.audio_s:g} s"
            )
        sent = images_text(self.spec.images) or "no images"
        out.append(
            f"media: {sent} a request on the {route} route, {self.tokens} prompt tokens of media a request, "
            "prefilled as the prompt's other tokens at the sim profile's prefill cost"
        )
        if self.spec.reuse:
            repeats = sum(s is not None for s in self.sources)
            out.append(
                f"--media-reuse {self.spec.reuse:g}: {repeats} of {len(self.sources)} requests send an earlier "
                "request's media again; the simulator's multimodal cache counts them as hits, which save no "
                f"prefill there; their first {self.head_tokens + self.tokens} tokens' full KV blocks hit the "
                "prefix cache where still cached"
            )
        return out


def predicted_media(
    spec: MediaSpec, rules: tuple[Rule | None, Rule | None], n: int, seed: int, conversational: bool
) -> PredictedMedia:
    """The media of `n` predicted requests of `spec` (`sources` drawn as `run load` draws them)."""
    image, audio = rules
    head = len(USER_HEAD.encode()) if conversational else 0
    return PredictedMedia(spec, image, audio, tuple(reuse_sources(n, spec.reuse, seed)), head, seed)
