"""`tune.jsonl`: what a tune has done, one JSON line as each step ends (flushed), so an interrupted tune
resumes where it stopped: the first line says what the tune is (profile, grid, SLO, traffic, sim profile,
each with its digest), then one `predicted` line per point and one `measured` line per real run. A
folder holding another tune is refused rather than mixed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from loadproof.errors import UsageError

JOURNAL = "tune.jsonl"


class Journal:
    def __init__(self, folder: Path, header: dict[str, Any]) -> None:
        self.path = folder / JOURNAL
        self.entries: list[dict[str, Any]] = []
        folder.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            lines = _entries(self.path.read_text(encoding="utf-8"))
            if not lines or lines[0].get("kind") != "tune":
                raise UsageError(f"{self.path} is not a tune's journal; give another --out")
            if lines[0].get("tune") != header:
                differs = sorted(
                    k for k in {*header, *lines[0].get("tune", {})} if header.get(k) != lines[0].get("tune", {}).get(k)
                )
                raise UsageError(
                    f"{folder} holds another tune (its {', '.join(differs)} differ); give another --out "
                    "or the same options to resume it"
                )
            self.entries = lines[1:]
        else:
            self._append({"kind": "tune", "tune": header})

    @property
    def resumed(self) -> bool:
        return bool(self.entries)

    def find(self, kind: str, point: str) -> dict[str, Any] | None:
        return next((e for e in self.entries if e.get("kind") == kind and e.get("point") == point), None)

    def add(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)
        self._append(entry)

    def _append(self, entry: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _entries(text: str) -> list[dict[str, Any]]:
    """The journal's lines; one an interrupt cut short (the last) does not parse and is dropped."""
    out = []
    for line in filter(str.strip, text.splitlines()):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
