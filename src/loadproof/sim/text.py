"""What the simulator says: a byte-level tokenizer (one token per UTF-8 byte) and deterministic answers.

One byte per token makes every count exact and additive, so loadproof's haystack builder (given the
packaged `byte-tokenizer.json`) plans prompts whose `usage.prompt_tokens` the simulator reproduces.
Answers are a pure function of the prompt: a question about a planted "secret code" is answered with
the planted value (or a wrong one under the `wrong_answer` fault), anything else with seeded filler.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = "<|user|>\n{content}\n<|assistant|>\n"
_FACT = re.compile(r"The secret code of (.+?) is (\d+)\.")
_QUESTION = re.compile(r"[Ww]hat(?:, again,)? is the secret code of (.+?)\?")
_WORDS = (
    "the",
    "river",
    "stone",
    "market",
    "north",
    "lamp",
    "quiet",
    "harbor",
    "window",
    "garden",
    "bright",
    "road",
    "winter",
    "paper",
    "story",
    "hill",
    "bridge",
    "morning",
    "silver",
    "field",
)


def tokenizer_path() -> Path:
    """The packaged tokenizer.json matching the simulator's token counts (pass it as --tokenizer)."""
    return Path(str(files("loadproof") / "data" / "sim" / "byte-tokenizer.json"))


def count_tokens(text: str) -> int:
    return len(text.encode("utf-8"))


def chat_prompt(messages: list[dict[str, Any]]) -> str:
    parts = []
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(CHAT_TEMPLATE.format(content=content) if message.get("role") == "user" else str(content))
    return "".join(parts)


def block_hashes(prompt: bytes, block_size: int, salt: str | None) -> list[int]:
    """Chained hashes of the prompt's full blocks; the salt is folded into the first one."""
    out = []
    parent = hashlib.blake2b((salt or "").encode(), digest_size=8).digest()
    for start in range(0, len(prompt) - block_size + 1, block_size):
        parent = hashlib.blake2b(parent + prompt[start : start + block_size], digest_size=8).digest()
        out.append(int.from_bytes(parent, "big"))
    return out


@cache
def _filler(seed: int) -> str:
    rng = random.Random(seed)
    return " " + " ".join(rng.choice(_WORDS) for _ in range(400)) + "."


def answer(prompt: str, wrong: bool = False) -> tuple[str, int]:
    """(the text to stream, the token index at which the answer would naturally end)."""
    asked = _QUESTION.findall(prompt[-2000:])
    seed = int.from_bytes(hashlib.blake2b(prompt[-256:].encode(), digest_size=4).digest(), "big")
    filler = _filler(seed % 997)
    if asked:
        key = asked[-1]
        facts = {k: v for k, v in _FACT.findall(prompt)}
        value = facts.get(key)
        if value is None:
            head = " I do not know."
        else:
            if wrong:
                value = str((int(value) + 1) % 10 ** len(value)).zfill(len(value))
            head = f" {value}."
        text = head + filler
        return text, len(head) + 24
    return filler, 32 + seed % 32


def thinks(body: dict[str, Any]) -> bool:
    """Whether a chat request asks a reasoning model to think, as a thinking chat template reads it:
    `chat_template_kwargs.enable_thinking` true, or a `reasoning_effort` without enable_thinking false."""
    kwargs = body.get("chat_template_kwargs")
    enable = kwargs.get("enable_thinking") if isinstance(kwargs, dict) else None
    if enable is not None:
        return bool(enable)
    return body.get("reasoning_effort") is not None


def reasoning_tokens(share: float, answer_tokens: int, max_tokens: int, ignore_eos: bool) -> int:
    """Reasoning tokens streamed before the answer: `share` of the whole output, the answer's natural
    length kept (R = round(share * A / (1 - share))); under ignore_eos `share` of max_tokens."""
    if share <= 0:
        return 0
    return round(share * max_tokens) if ignore_eos else round(share * answer_tokens / (1 - share))


def reasoning(prompt: str, n: int) -> str:
    """n tokens (bytes) of reasoning text, a pure function of the prompt."""
    seed = int.from_bytes(hashlib.blake2b(prompt[-256:].encode(), digest_size=4).digest(), "big")
    head = "Let me think."
    body = head + _filler((seed + 1) % 997)
    while len(body) < n:
        body += body
    return body[:n]


def embedding(text: str, dim: int) -> list[float]:
    """A unit vector of `dim` drawn from the text's hash: the same text always embeds the same."""
    rng = random.Random(hashlib.sha256(text.encode("utf-8")).digest())
    vector = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [round(v / norm, 6) for v in vector]
