"""`tune.jsonl`: what a tune has done, one JSON line as each step ends (flushed), so an interrupted tune
resumes where it stopped. Its lines are typed (`rundir.tune`): the first (`TuneStarted`) says what the tune
is (profile, sim profile, each with its digest, the grid, run load's options, the tokenizer), then one
`Predicted` line per point and one `Measured` line per real run. The file is read through the reader of its
version (`store.series.read_tune_journal`), so a tune an older loadproof wrote resumes with the same options.
A folder holding another tune is refused rather than mixed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from pydantic import ValidationError

from loadproof.errors import UsageError
from loadproof.rundir.tune import Measured, Predicted, TuneSpec, TuneStarted
from loadproof.scenarios.load.options import LoadOptions
from loadproof.store.series import TUNE_JOURNAL, encode_line, read_tune_journal

JOURNAL = TUNE_JOURNAL
Step = TypeVar("Step", Predicted, Measured)


class Journal:
    def __init__(self, folder: Path, spec: TuneSpec) -> None:
        self.path = folder / JOURNAL
        self.entries: list[Predicted | Measured] = []
        folder.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            lines = read_tune_journal(self.path)
            if not lines or not isinstance(lines[0], TuneStarted):
                raise UsageError(f"{self.path} is not a tune's journal; give another --out")
            differs = differences(lines[0].tune, spec)
            if differs:
                raise UsageError(
                    f"{folder} holds another tune (its {', '.join(differs)} differ); give another --out "
                    "or the same options to resume it"
                )
            self.entries = [line for line in lines[1:] if not isinstance(line, TuneStarted)]
        else:
            self._append(TuneStarted(tune=spec))

    @property
    def resumed(self) -> bool:
        return bool(self.entries)

    def find(self, kind: type[Step], point: str) -> Step | None:
        return next((e for e in self.entries if isinstance(e, kind) and e.point == point), None)

    def add(self, entry: Predicted | Measured) -> None:
        self.entries.append(entry)
        self._append(entry)

    def _append(self, entry: msgspec.Struct) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(encode_line(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())


def differences(stored: TuneSpec, wanted: TuneSpec) -> list[str]:
    """The parts of a stored tune that differ from the one wanted: `grid`, `sha256`..., and run load's
    options by name (`load.attainment`), the stored ones read as run load reads them today (an option a
    later loadproof added takes its default)."""
    a, b = msgspec.to_builtins(stored), msgspec.to_builtins(wanted)
    differs = sorted(k for k in {*a, *b} if k != "load" and a.get(k) != b.get(k))
    old, new = _load(stored.load), _load(wanted.load)
    differs += [f"load.{k}" for k in sorted({*old, *new}) if old.get(k) != new.get(k)]
    return differs


def _load(options: dict[str, Any]) -> dict[str, Any]:
    try:
        dumped: dict[str, Any] = LoadOptions.model_validate(options).model_dump(mode="json")
        return dumped
    except ValidationError:  # not run load's options (any more): compared as stored
        return dict(options)


__all__ = ["JOURNAL", "Journal", "differences"]
