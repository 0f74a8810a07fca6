"""The synthetic load workload: prompts of an exact token length, output lengths, both fixed or drawn.

Lengths (`--input-tokens`, `--output-tokens`), one value each:

| text | draws |
|---|---|
| `512` | always 512 |
| `uniform:LOW:HIGH` | a whole number in [LOW, HIGH], each equally likely |
| `normal:MEAN:STD` | round(gauss(MEAN, STD)) |
| `lognormal:MEDIAN:SIGMA` | round(MEDIAN * exp(SIGMA * gauss(0, 1))): the log is normal, MEDIAN its median |

Draws come from `random.Random("<seed>:input")` and `random.Random("<seed>:output")` (apart from the
arrival times' stream, so a change of lengths moves no send time), are rounded to whole tokens and
clamped: an input to at least the shortest prompt that can be built (the engine's overhead, the salt
line, a pad) and, with the served context known, to leave room for one output token; an output to at
least 1 and to what the context leaves.

Prompts (`SyntheticPrompts`) reuse the haystack builder's pre-tokenized filler, so a prompt of L tokens
as the engine counts them costs one short tokenization (its salt line, batched) and a join:

    [shared prefix: "Archive shared context <run salt>.\n", filler, a pad line]   (--shared-prefix-tokens P)
    "Archive <k>, run <run salt>.\n", filler from a seeded start in the pool, a pad line

The run salt is random per run and never seeded, so no two runs share a cached prefix, and the request
line makes every request's first block its own; only the P-token shared prefix (which itself carries the
run salt) is common to the requests of one run. The filler is a rotation of the pool from a start drawn
from `random.Random("<seed>:filler")`; the pad line ("Notes: river stone ...") takes the exact remainder.
Standard library only at import; the builder (and its tokenizer) is passed in.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loadproof.errors import UsageError

if TYPE_CHECKING:
    from loadproof.workloads.haystack import HaystackBuilder

DISTRIBUTIONS = ("uniform", "normal", "lognormal")
LENGTHS_SYNTAX = "N, uniform:LOW:HIGH, normal:MEAN:STD or lognormal:MEDIAN:SIGMA"


@dataclass(frozen=True)
class Lengths:
    """A token length, fixed or drawn: `kind` fixed (a), uniform (a..b), normal (mean a, std b) or
    lognormal (median a, sigma b)."""

    kind: str
    a: float
    b: float = 0.0

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"{self.a:g}"
        return f"{self.kind}:{self.a:g}:{self.b:g}"

    @property
    def fixed(self) -> bool:
        return self.kind == "fixed" or (self.kind == "uniform" and self.a == self.b) or self.b == 0

    def draw(self, n: int, rng: random.Random) -> list[int]:
        """`n` lengths, rounded to whole tokens (not yet clamped)."""
        if self.kind == "fixed":
            return [int(self.a)] * n
        if self.kind == "uniform":
            return [rng.randint(int(self.a), int(self.b)) for _ in range(n)]
        if self.kind == "normal":
            return [round(rng.gauss(self.a, self.b)) for _ in range(n)]
        mu = math.log(self.a)
        return [round(rng.lognormvariate(mu, self.b)) for _ in range(n)]


def parse_lengths(value: object) -> Lengths:
    """`512`, `uniform:256:1024`, `normal:512:64` or `lognormal:512:0.5` (see the module's table)."""
    if isinstance(value, Lengths):
        return value
    if isinstance(value, bool):
        raise ValueError(f"takes {LENGTHS_SYNTAX}")
    if isinstance(value, (int, float)):
        value = f"{value:g}"
    if isinstance(value, dict):
        value = str(Lengths(str(value.get("kind")), float(value.get("a", 0)), float(value.get("b", 0))))
    text = str(value).strip()
    kind, sep, rest = text.partition(":")
    if not sep:
        n = _number(text, "a length")
        if n != int(n) or n < 1:
            raise ValueError(f"a fixed length is a whole number of tokens >= 1 (got {text!r})")
        return Lengths("fixed", n)
    kind = kind.strip().lower()
    if kind not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {kind!r}: takes {LENGTHS_SYNTAX}")
    parts = rest.split(":")
    if len(parts) != 2:
        raise ValueError(f"{kind} takes two numbers, {kind}:{_PARAMS[kind]} (got {text!r})")
    a, b = (_number(p, f"{kind}'s parameter") for p in parts)
    if kind == "uniform":
        if a != int(a) or b != int(b) or not 1 <= a <= b:
            raise ValueError(f"uniform:LOW:HIGH takes whole numbers 1 <= LOW <= HIGH (got {text!r})")
    elif kind == "normal":
        if a < 1 or b < 0:
            raise ValueError(f"normal:MEAN:STD takes MEAN >= 1 and STD >= 0 (got {text!r})")
    elif a < 1 or b < 0:
        raise ValueError(f"lognormal:MEDIAN:SIGMA takes MEDIAN >= 1 and SIGMA >= 0 (got {text!r})")
    return Lengths(kind, a, b)


_PARAMS = {"uniform": "LOW:HIGH", "normal": "MEAN:STD", "lognormal": "MEDIAN:SIGMA"}


def _number(text: str, what: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"{what} must be a number (got {text.strip()!r}); takes {LENGTHS_SYNTAX}") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number (got {text.strip()!r})")
    return value


def draw_lengths(spec: Lengths, n: int, seed: int, stream: str) -> list[int]:
    """`n` draws of `spec` from the seeded stream `stream` ("input" or "output")."""
    return spec.draw(n, random.Random(f"{seed}:{stream}"))


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


def _pad(words: int, extra: str = "") -> str:
    if not words:
        return f"Notes{extra}.\n"
    return "Notes: " + " ".join(_PAD_WORDS[i % len(_PAD_WORDS)] for i in range(words)) + extra + ".\n"


class SyntheticPrompts:
    """Prompts of exact token lengths, salted per run and per request, with an optional shared prefix."""

    def __init__(self, builder: HaystackBuilder, *, run_salt: str, seed: int, shared_prefix_tokens: int = 0) -> None:
        self.builder = builder
        self.run_salt = run_salt
        self.seed = seed
        pool, counts = builder.sentences
        self._n = len(pool)
        self._doubled = pool + pool
        self._cum = [0, *itertools.accumulate(counts + counts)]
        self._cycle = self._cum[self._n]
        self._counts = counts
        self._pads = self._pad_table(max(counts))
        self.pad_min = min(self._pads)
        self.shared_prefix_tokens = shared_prefix_tokens
        self.prefix = self._shared_prefix(shared_prefix_tokens) if shared_prefix_tokens else ""

    def _pad_table(self, longest: int) -> dict[int, str]:
        """Token count -> the pad line of that count, for every count from the shortest pad up to
        `longest` beyond it (the most a filler can leave over)."""
        table: dict[int, str] = {}
        words = 0
        while True:
            text = _pad(words)
            table.setdefault(self.builder.count(text), text)
            low = min(table)
            if max(table) >= low + longest + 1 or words > 4 * (longest + 8):
                break
            words += 1
        low = min(table)
        for target in range(low, low + longest + 1):  # fill any hole with a few single characters
            if target in table:
                continue
            for words, unit, k in itertools.product(range(0, 4 * (longest + 8)), (" a", "a", "."), range(1, 9)):
                text = _pad(words, unit * k)
                got = self.builder.count(text)
                table.setdefault(got, text)
                if target in table:
                    break
            if target not in table:
                raise UsageError(f"cannot pad a synthetic prompt to every length with this tokenizer ({target})")
        return table

    def _shared_prefix(self, tokens: int) -> str:
        head = f"Archive shared context {self.run_salt}.\n"
        body = self._fill(
            head, self.builder.count(head), tokens, random.Random(f"{self.seed}:prefix").randrange(self._n)
        )
        if body is None:
            raise UsageError(
                f"--shared-prefix-tokens {tokens} is too short for a shared prefix (at least "
                f"{self.builder.count(head) + self.pad_min} tokens)"
            )
        return body

    def _fill(self, head: str, head_tokens: int, target: int, start: int) -> str | None:
        """`head` + filler from the pool's sentence `start` on + a pad line: exactly `target` tokens of text
        (None when `target` is too short for the head and the shortest pad)."""
        budget = target - head_tokens
        avail = budget - self.pad_min
        if avail < 0:
            return None
        cum, n = self._cum, self._n
        whole, rest = divmod(avail, self._cycle)
        m = bisect.bisect_right(cum, cum[start] + rest) - 1 - start
        while True:
            used = whole * self._cycle + cum[start + m] - cum[start]
            pad = self._pads.get(budget - used)
            if pad is not None:
                break
            if m == 0:
                return None
            m -= 1
        cycle = "".join(self._doubled[start : start + n]) * whole if whole else ""
        text = head + cycle + "".join(self._doubled[start : start + m]) + pad
        if not self.builder.additive:
            text = self._exact(text, target)
        return text

    def _exact(self, text: str, target: int) -> str:
        """A tokenizer whose counts do not add up at line boundaries: adjust the pad on the whole text."""
        body, pad = text[: text.rindex("Notes")], text[text.rindex("Notes") :]
        for _ in range(32):
            got = self.builder.count(body + pad)
            if got == target:
                return body + pad
            want = self.builder.count(pad) + target - got
            pad = self._pads.get(want) or self._pads[min(self._pads, key=lambda k: abs(k - want))]
        raise UsageError(f"cannot make a synthetic prompt of exactly {target} tokens with this tokenizer")

    def request_line(self, index: int) -> str:
        return f"Archive {index}, run {self.run_salt}.\n"

    def build_all(self, lengths: list[int]) -> tuple[list[str], list[int], int]:
        """Prompt texts of `lengths` tokens each as the engine counts them (its overhead included), in
        order; the lengths actually built (each raised to its shortest possible prompt); how many were."""
        overhead = self.builder.overhead_tokens + self.shared_prefix_tokens
        lines = [self.request_line(i) for i in range(len(lengths))]
        line_tokens = self.builder.count_many(lines)
        rng = random.Random(f"{self.seed}:filler")
        texts: list[str] = []
        built: list[int] = []
        raised = 0
        for line, line_count, length in zip(lines, line_tokens, lengths):
            shortest = overhead + line_count + self.pad_min
            if length < shortest:
                length, raised = shortest, raised + 1
            text = self._fill(line, line_count, length - overhead, rng.randrange(self._n))
            if text is None:  # unreachable: `shortest` always fits
                raise UsageError(f"cannot build a synthetic prompt of {length} tokens")
            texts.append(self.prefix + text)
            built.append(length)
        return texts, built, raised

    def shortest(self) -> int:
        """The shortest prompt this can build (for request 0; longer indices may need a token more)."""
        return (
            self.builder.overhead_tokens
            + self.shared_prefix_tokens
            + self.builder.count(self.request_line(0))
            + self.pad_min
        )
