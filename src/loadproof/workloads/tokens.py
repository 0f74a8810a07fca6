"""Token counts of prompt texts, as the model's tokenizer makes them: what the exact-length workloads size
their prompts with.

`Tokens` is what a builder asks: `count(text)` and `count_many(texts)`, the text's own tokens (no special
tokens unless `special`). Two sources give them: the model's tokenizer.json read here (`LocalTokens`,
`--tokenizer`), or the engine's own /tokenize (`scenarios.token_counts.EngineTokens`), where none is given.
`key` names the source, for caches of counts kept across runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

from tokenizers import Tokenizer

from loadproof.errors import UsageError

Source = Literal["local", "engine"]


class Tokens(Protocol):
    source: Source
    key: str

    def count(self, text: str, special: bool = False) -> int:
        """Tokens of `text`; `special`: with the special tokens the tokenizer adds (a BOS)."""

    def count_many(self, texts: list[str]) -> list[int]:
        """Tokens of each text, no special tokens, in one call where the source can batch."""


def tokenizer_file(path: Path) -> Path:
    """The tokenizer.json at `path` (the file, or its folder); UsageError when there is none."""
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise UsageError(f"no tokenizer.json at {path}")
    return file


class LocalTokens:
    """The model's tokenizer.json, read here (`load`), or a tokenizer already loaded."""

    source: Source = "local"

    def __init__(self, tokenizer: Tokenizer, key: str) -> None:
        self._tok = tokenizer
        self.key = key

    @classmethod
    def load(cls, path: Path) -> LocalTokens:
        file = tokenizer_file(path)
        st = file.stat()
        return cls(Tokenizer.from_file(str(file)), f"{file.resolve()}:{st.st_size}:{st.st_mtime_ns}")

    def count(self, text: str, special: bool = False) -> int:
        return len(self._tok.encode(text, add_special_tokens=special).ids)

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._tok.encode_batch(texts, add_special_tokens=False)]
