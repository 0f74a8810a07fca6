"""The prompts of a recorded agent's calls, rebuilt from their messages' shapes (`otel_trace.MessageShape`: role,
characters, digest) as synthetic text, so a private trace can be replayed and published.

- **Lengths**: one ratio of tokens per character for the whole trace (`fit_tokens_per_char`), fitted by least
  squares so that each call's prompt (its messages' tokens + its chat template's own) is near its recorded input
  tokens (x a scale); a message of C > 0 characters is round(C x ratio) tokens, at least the shortest a
  synthetic message can be (its head line and a pad); an empty message stays empty.
- **Text** (`MessageTexts`): a pure function of the message's digest and its salt: a head line (a word of six
  consonants drawn from both, so two messages that differ differ in their first tokens) and the haystack
  builder's filler from a start drawn from it, padded to the exact count. Two calls that carried the same
  message carry the same text; a prompt that extends another's (the same messages, then more) keeps it as its
  prefix. The salt is the run's for messages every copy of the agent shares, the copy's for the others.
- **Blocks** (`block_ids`): a prompt as the engine sees it is its messages' segments one after another (each
  segment's tokens from the chat template's counts of the prompt's prefixes); block j of `block_tokens` is known
  by the chain of segment keys up to its end and its end's offset in the last of them, hashed to an integer, so
  two prompts share a block's id exactly when everything before and in it is the same.

Standard library only; the builder is passed in.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from loadproof.errors import UsageError

if TYPE_CHECKING:
    from loadproof.workloads.synthetic import SyntheticPrompts

_CONSONANTS = "bcdfghjklmnpqrstvwxz"


def fit_tokens_per_char(chars: Sequence[int], inputs: Sequence[int | None], template: Sequence[int]) -> float:
    """The ratio r minimising sum over calls of (template_i + r x chars_i - inputs_i)^2 (calls with a recorded
    input and characters); 0 where no call has both. Never negative."""
    pairs = [(c, x - t) for c, x, t in zip(chars, inputs, template) if x is not None and c > 0]
    den = sum(c * c for c, _ in pairs)
    if not den:
        return 0.0
    return max(0.0, sum(c * y for c, y in pairs) / den)


def head(digest: str, salt: str) -> str:
    """A message's head line: six consonants drawn from its digest and salt, capitalized."""
    n = int(hashlib.sha256(f"{digest}|{salt}".encode()).hexdigest()[:15], 16)
    word = ""
    for _ in range(6):
        n, k = divmod(n, len(_CONSONANTS))
        word += _CONSONANTS[k]
    return word.capitalize() + ".\n"


class MessageTexts:
    """Each message's synthetic text, `tokens` long, a pure function of (digest, salt, tokens) and the seed."""

    def __init__(self, prompts: SyntheticPrompts, seed: int) -> None:
        self.prompts = prompts
        self.seed = seed
        self._heads: dict[str, int] = {}
        self._texts: dict[tuple[str, str, int], str] = {}

    def shortest(self, digest: str, salt: str) -> int:
        """The fewest tokens this message's text can be: its head line and the shortest pad."""
        line = head(digest, salt)
        if line not in self._heads:
            self._heads[line] = self.prompts.builder.count(line)
        return self._heads[line] + self.prompts.pad_min

    def tokens(self, chars: int, ratio: float, digest: str, salt: str) -> tuple[int, bool]:
        """A message of `chars` characters in tokens, and whether it was raised to the shortest text."""
        if chars <= 0:
            return 0, False
        least = self.shortest(digest, salt)
        want = round(chars * ratio)
        return max(least, want), want < least

    def text(self, digest: str, salt: str, tokens: int) -> str:
        if tokens <= 0:
            return ""
        key = (digest, salt, tokens)
        known = self._texts.get(key)
        if known is not None:
            return known
        line = head(digest, salt)
        start = random.Random(f"{self.seed}:{line}").randrange(len(self.prompts.builder.sentences[0]))
        text = self.prompts._fill(line, self.shortest(digest, salt) - self.prompts.pad_min, tokens, start)
        if text is None:  # unreachable: `tokens` was raised to the shortest
            raise UsageError(f"a message of {tokens} tokens is too short for its head line and a pad")
        self._texts[key] = text
        return text


def chain(keys: Sequence[str]) -> list[str]:
    """Each segment's key chained with every key before it (a hex digest)."""
    out, last = [], ""
    for key in keys:
        last = hashlib.sha256(f"{last}|{key}".encode()).hexdigest()[:32]
        out.append(last)
    return out


def block_ids(segments: Sequence[tuple[str, int]], block_tokens: int) -> list[int]:
    """The id of each block of a prompt made of `segments` ((chained key, tokens) one after another): its last
    block the prompt's remainder. A block's id hashes the chained key of the segment its end falls in and the
    end's offset there (a segment that ends where a block ends holds that end)."""
    total = sum(max(0, n) for _, n in segments)
    ends = [min(e, total) for e in range(block_tokens, total + block_tokens, block_tokens)]
    out: list[int] = []
    start, s = 0, 0
    live = [(k, n) for k, n in segments if n > 0]
    for end in ends:
        while start + live[s][1] < end:
            start += live[s][1]
            s += 1
        digest = hashlib.sha256(f"{live[s][0]}@{end - start}".encode()).hexdigest()
        out.append(int(digest[:15], 16))
    return out
