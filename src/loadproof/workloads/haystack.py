"""Haystack prompts: long, uniquely salted contexts of an exact token length with planted facts (probes).

Each prompt is, in order: a salt line (random per run, so no two sessions and no two runs share a
prefix-cache block), seeded varied filler sentences with probe sentences ("The secret code of
session 417 is 4829105.") planted at chosen depths, and a tail: a pad line that makes the length exact,
then the question. The tail ends so that a base model first states the fact and then keeps writing.

Exact length without re-tokenizing megabytes: the filler pool is tokenized once; every pool sentence
and probe ends with a newline and starts with a letter, a boundary this tokenizer never merges across
(checked once on the whole pool at start-up: count(concatenation) == sum(counts)), so a prompt's
length is the sum of its parts. Only the short tail is encoded per prompt, and its pad is adjusted
until `overhead + salt + body + tail == num_tokens`. `overhead_tokens` is what the engine adds around
the text (BOS for completions, the chat template for chat); the caller measures it on the engine.
If the additivity check fails, every prompt is encoded whole instead (correct, slower).

The counts come from a `workloads.tokens.Tokens`: the model's tokenizer here, or the engine's own
/tokenize (where no tokenizer is given); a `tokenizers.Tokenizer` passed in is taken as the former.
"""

from __future__ import annotations

import bisect
import random
import secrets
from dataclasses import dataclass, field
from typing import Literal

from tokenizers import Tokenizer

from loadproof.errors import UsageError
from loadproof.workloads.answer_window import states
from loadproof.workloads.tokens import LocalTokens, Tokens

Style = Literal["completion", "chat"]

_ADJ = (
    "amber",
    "quiet",
    "distant",
    "silver",
    "ancient",
    "bright",
    "hollow",
    "narrow",
    "patient",
    "restless",
    "gentle",
    "crooked",
    "golden",
    "weathered",
    "hidden",
    "northern",
    "careful",
    "sudden",
    "humble",
    "lively",
    "scarlet",
    "frozen",
    "busy",
    "modest",
    "curious",
    "tired",
    "clever",
    "open",
    "stone",
    "wooden",
)
_NOUN = (
    "falcon",
    "merchant",
    "river",
    "lantern",
    "orchard",
    "engineer",
    "library",
    "harbour",
    "village",
    "teacher",
    "bridge",
    "garden",
    "market",
    "painter",
    "station",
    "forest",
    "sailor",
    "tower",
    "valley",
    "baker",
    "clock",
    "island",
    "farmer",
    "mountain",
    "choir",
    "workshop",
    "meadow",
    "courier",
    "castle",
    "fisherman",
    "scholar",
    "mill",
    "canal",
    "shepherd",
    "theatre",
    "glacier",
    "printer",
    "vineyard",
)
_VERB = (
    "crossed",
    "repaired",
    "painted",
    "visited",
    "described",
    "measured",
    "guarded",
    "followed",
    "carried",
    "watched",
    "sketched",
    "cleaned",
    "counted",
    "opened",
    "mapped",
    "praised",
    "rebuilt",
    "studied",
    "photographed",
    "remembered",
    "ignored",
    "admired",
    "inspected",
    "circled",
)
_PLACE = (
    "near the old harbour",
    "beside the northern road",
    "under the stone arch",
    "across the quiet valley",
    "behind the busy market",
    "along the frozen canal",
    "inside the wooden tower",
    "past the golden orchard",
    "at the edge of the forest",
    "on the far side of the island",
    "below the weathered castle",
)
_TIME = (
    "at dawn",
    "before the storm",
    "late in the evening",
    "during the long winter",
    "every spring",
    "after the festival",
    "on a rainy Tuesday",
    "in the first week of autumn",
    "before anyone woke",
    "while the bells rang",
    "long ago",
)
_TEMPLATES = (
    "The {a} {n} {v} the {a2} {n2} {p} {t}.",
    "{T} the {a} {n} {v} the {n2} {p}.",
    "Nobody knew why the {n} {v} the {a2} {n2} {t}.",
    "According to the {a} {n}, the {n2} was {a2} {p}.",
    "A {a} {n} and a {a2} {n2} met {p} {t}.",
    "The story of the {n} who {v} the {n2} is still told {p}.",
    "Each {n} in the {a} {n2} {v} a {a2} map {t}.",
    "It is said that the {a} {n2} {v} the {n} {p}.",
)
_PAD_WORDS = (
    "river",
    "stone",
    "garden",
    "lamp",
    "window",
    "field",
    "road",
    "cloud",
    "table",
    "bread",
    "paper",
    "music",
    "water",
    "light",
    "house",
    "boat",
    "tree",
    "wind",
    "door",
    "book",
)


@dataclass(frozen=True)
class Probe:
    """A planted fact: `The secret code of <key> is <value>.` at a relative depth of the body."""

    key: str
    value: str
    depth: float
    planted: bool = True

    @property
    def sentence(self) -> str:
        return f"The secret code of {self.key} is {self.value}.\n"


@dataclass(frozen=True)
class HaystackPrompt:
    session_id: str
    salt: str
    text: str
    num_tokens: int
    probes: tuple[Probe, ...]
    asked: Probe
    context: str = field(repr=False)
    style: Style = "completion"

    def followup(self) -> str:
        """The same context (its prefix-cache blocks reusable) with a different question."""
        return self.context + _question(self.asked, self.style, followup=True)


def _question(probe: Probe, style: Style, followup: bool = False) -> str:
    if style == "chat":  # short: measured best on a base model behind a plain chat template (32/32 at 1,536 tokens)
        lead = "What, again," if followup else "What"
        return f"\nQuestion: {lead} is the secret code of {probe.key}? Give the code."
    lead = "Repeat it: the" if followup else "The"
    return f"\nQuestion: What is the secret code of {probe.key}?\nAnswer: {lead} secret code of {probe.key} is"


def retrieved(probe: Probe, output_text: str) -> bool:
    """The fact counts as retrieved when its value appears near the start of the answer (answer_window)."""
    return states(output_text, probe.value)


class HaystackBuilder:
    """Builds exact-length haystack prompts from a pool of pre-tokenized filler sentences."""

    def __init__(
        self,
        tokenizer: Tokens | Tokenizer,
        *,
        overhead_tokens: int,
        seed: int = 731,
        pool_size: int = 4096,
        style: Style = "completion",
    ) -> None:
        if isinstance(tokenizer, Tokenizer):
            tokenizer = LocalTokens(tokenizer, f"tokenizer:{id(tokenizer)}")
        self._tok: Tokens = tokenizer
        self.overhead_tokens = overhead_tokens
        self.seed = seed
        self.style = style
        rng = random.Random(seed)
        pool = sorted({self._sentence(rng) for _ in range(pool_size)})
        rng.shuffle(pool)
        self._pool = pool
        counts = self._tok.count_many(pool)
        self._counts = counts
        self.additive = self.count("".join(pool)) == sum(counts)
        self._mean = sum(counts) / len(counts)
        self._max = max(counts)

    @staticmethod
    def _sentence(rng: random.Random) -> str:
        t = rng.choice(_TIME)
        return (
            rng.choice(_TEMPLATES).format(
                a=rng.choice(_ADJ),
                a2=rng.choice(_ADJ),
                n=rng.choice(_NOUN),
                n2=rng.choice(_NOUN),
                v=rng.choice(_VERB),
                p=rng.choice(_PLACE),
                t=t,
                T=t[0].upper() + t[1:],
            )
            + "\n"
        )

    def count(self, text: str) -> int:
        return self._tok.count(text)

    def count_many(self, texts: list[str]) -> list[int]:
        """Token counts of many short texts in one call (the source batches them)."""
        return self._tok.count_many(texts)

    @property
    def tokenizer(self) -> Tokens:
        """Where the counts come from (`source`: local or engine)."""
        return self._tok

    @property
    def sentences(self) -> tuple[list[str], list[int]]:
        """The filler pool and each sentence's token count (every sentence ends with a newline and starts
        with a letter: where `additive`, a text's count is the sum of its sentences')."""
        return self._pool, self._counts

    def build(
        self,
        session_id: str,
        num_tokens: int,
        *,
        num_probes: int = 1,
        depths: list[float] | None = None,
        plant: bool = True,
    ) -> HaystackPrompt:
        """One prompt of exactly `num_tokens` tokens as the engine counts them (overhead included).

        `plant=False` asks about a fact that was never planted: a negative control whose retrieval
        must fail.
        """
        rng = random.Random(f"{self.seed}:{session_id}")
        salt = secrets.token_hex(8)  # never seeded: two runs must not share a cached prefix
        depths = depths if depths is not None else [rng.random() for _ in range(num_probes)]
        if len(depths) != num_probes or not all(0.0 <= d <= 1.0 for d in depths):
            raise UsageError("probe depths must be num_probes numbers between 0 and 1")
        keys = rng.sample(range(100, 1000), num_probes)
        probes = tuple(
            Probe(key=f"session {k}", value=str(rng.randrange(1_000_000, 10_000_000)), depth=d, planted=plant)
            for k, d in zip(keys, depths)
        )
        asked = probes[0]
        salt_line = f"Archive {session_id}, salt {salt}.\n"
        probe_tokens = [self.count(p.sentence) if p.planted else 0 for p in probes]
        head = self.overhead_tokens + self.count(salt_line)
        tail_min = self.count(self._tail(asked, 0))
        body_budget = num_tokens - head - tail_min - sum(probe_tokens)
        if body_budget < 0:
            raise UsageError(
                f"{num_tokens} tokens is too short for a haystack prompt "
                f"(salt, probe and question alone take {num_tokens - body_budget})"
            )
        # filler sentences in seeded random order until the remaining budget fits in the tail's pad
        pieces: list[str] = []
        cumulative: list[int] = []
        used = 0
        pool, counts, n = self._pool, self._counts, len(self._pool)
        order = list(range(n))
        rng.shuffle(order)
        k = 0
        while body_budget - used >= self._max:
            index = order[k % n]
            k += 1
            pieces.append(pool[index])
            used += counts[index]
            cumulative.append(used)
        # plant probes at their depths (by token position in the body), deepest first so the
        # insertions do not shift the positions still to be used
        for probe in sorted(probes, key=lambda p: -p.depth):
            if probe.planted:
                pieces.insert(bisect.bisect_left(cumulative, probe.depth * used), probe.sentence)
        body_tokens = used + sum(probe_tokens)
        remaining = num_tokens - head - body_tokens
        context_body = salt_line + "".join(pieces)
        tail = self._fit_tail(asked, remaining)
        text = context_body + tail
        if not self.additive:
            tail = self._fit_whole(context_body, asked, num_tokens - self.overhead_tokens)
            text = context_body + tail
        pad = tail[: len(tail) - len(_question(asked, self.style))]
        return HaystackPrompt(
            session_id=session_id,
            salt=salt,
            text=text,
            num_tokens=num_tokens,
            probes=probes,
            asked=asked,
            context=context_body + pad,
            style=self.style,
        )

    def _tail(self, probe: Probe, pad_words: int, extra: str = "") -> str:
        words = " ".join(_PAD_WORDS[i % len(_PAD_WORDS)] for i in range(pad_words))
        pad = f"Notes: {words}{extra}.\n" if pad_words else f"Notes{extra}.\n"
        return pad + _question(probe, self.style)

    def _fit_tail(self, probe: Probe, target: int) -> str:
        """The tail whose token count is exactly `target`: the most pad words that do not overshoot
        (bisected: the count grows with the words), then, where a word is several tokens (a byte-level
        tokenizer), a few single characters."""
        lo, hi = 0, max(0, target)
        if self.count(self._tail(probe, 0)) > target:
            lo = hi = -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.count(self._tail(probe, mid)) <= target:
                lo = mid
            else:
                hi = mid - 1
        if lo >= 0:
            if self.count(self._tail(probe, lo)) == target:
                return self._tail(probe, lo)
            for unit in (" a", "a", ".", " "):
                for k in range(1, 17):
                    tail = self._tail(probe, lo, unit * k)
                    got = self.count(tail)
                    if got == target:
                        return tail
                    if got > target:
                        break
        raise UsageError(f"cannot pad the haystack tail to exactly {target} tokens with this tokenizer")

    def _fit_whole(self, body: str, probe: Probe, target: int) -> str:
        words = 0
        for _ in range(256):
            got = self.count(body + self._tail(probe, words))
            if got == target:
                return self._tail(probe, words)
            words = max(0, words + (target - got))
        raise UsageError(f"cannot make a haystack prompt of exactly {target} tokens with this tokenizer")
