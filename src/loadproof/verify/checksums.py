"""SHA256SUMS: written over every file of a bundle, checked file by file (missing, unlisted, changed)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from loadproof.verify.layout import SUMS

_LINE_RE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")


@dataclass(frozen=True)
class FileProblem:
    kind: str  # MISSING | UNLISTED | CHANGED | BAD_LINE | UNREADABLE
    path: str
    detail: str

    def line(self) -> str:
        return f"{self.kind}  {self.path}  {self.detail}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def bundle_files(root: Path) -> list[str]:
    """Every file under `root` but SHA256SUMS itself, as sorted POSIX paths relative to `root`."""
    found = (p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return sorted(rel for rel in found if rel != SUMS)


def write_sums(root: Path) -> None:
    lines = [f"{sha256_file(root / rel)}  {rel}\n" for rel in bundle_files(root)]
    (root / SUMS).write_text("".join(lines), encoding="utf-8")


def check_sums(root: Path) -> list[FileProblem]:
    """Problems found comparing SHA256SUMS with the files present; empty when every file matches."""
    sums_path = root / SUMS
    if not sums_path.is_file():
        return [FileProblem("MISSING", SUMS, "the bundle has no checksum list")]
    problems: list[FileProblem] = []
    listed: dict[str, str] = {}
    for number, raw in enumerate(sums_path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not raw.strip():
            continue
        match = _LINE_RE.match(raw)
        if match is None:
            problems.append(FileProblem("BAD_LINE", SUMS, f"line {number} is not '<sha256>  <path>'"))
            continue
        digest, rel = match.group(1).lower(), match.group(2)
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts or "\\" in rel:
            problems.append(FileProblem("BAD_LINE", rel, f"line {number} names a path outside the bundle"))
            continue
        listed[pure.as_posix()] = digest
    present = set(bundle_files(root))
    for rel in sorted(set(listed) | present):
        if rel not in present:
            problems.append(FileProblem("MISSING", rel, "listed in SHA256SUMS, not in the bundle"))
        elif rel not in listed:
            problems.append(FileProblem("UNLISTED", rel, "in the bundle, not in SHA256SUMS"))
        else:
            try:
                actual = sha256_file(root / rel)
            except OSError as exc:
                problems.append(FileProblem("UNREADABLE", rel, str(exc.strerror or exc)))
                continue
            if actual != listed[rel]:
                problems.append(FileProblem("CHANGED", rel, "sha256 differs from SHA256SUMS"))
    return problems
