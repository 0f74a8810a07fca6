"""SHA256SUMS: written over every file of a bundle, checked file by file (missing, unlisted, changed).

Before anything is hashed or read the bundle's tree is scanned without following anything
(`scan`): a symbolic link (to a file or a folder), a FIFO, a socket or a device is UNSAFE and never
opened; a file over `MAX_FILE_BYTES`, a bundle over `MAX_BUNDLE_BYTES` or `MAX_ENTRIES` is TOO_LARGE;
a name that could not be listed in SHA256SUMS or shown on a terminal (a control character, a
backslash, bytes that are not UTF-8) is BAD_PATH. A compressed file (`NAME.zst`) counts at the size its
frame header declares, the only part of it the scan reads: over `MAX_FILE_BYTES` it is TOO_LARGE, without
a readable header UNREADABLE, before a byte of it is decompressed. Checksums are of the files as stored.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from loadproof.errors import RunDirError
from loadproof.store.files import ZST, content_size, kind_of, open_regular, read_regular
from loadproof.verify.display import shown, unsafe_char
from loadproof.verify.layout import MAX_BUNDLE_BYTES, MAX_DOCUMENT_BYTES, MAX_ENTRIES, MAX_FILE_BYTES, SUMS

_LINE_RE = re.compile(r"([0-9a-fA-F]{64}) [ *](.+)")


@dataclass(frozen=True)
class FileProblem:
    kind: str  # MISSING | UNLISTED | CHANGED | BAD_LINE | BAD_PATH | UNREADABLE | UNSAFE | TOO_LARGE
    path: str
    detail: str

    def line(self) -> str:
        return f"{self.kind}  {shown(self.path)}  {shown(self.detail)}"


@dataclass
class Scan:
    """What lies in a bundle: its regular files (POSIX paths relative to the root, SHA256SUMS included)
    and the entries refused, each with its problem."""

    files: list[str] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)

    def refused(self) -> set[str]:
        return {p.path for p in self.problems}


def covered(rel: str, refused: set[str]) -> bool:
    """True when `rel` is a refused entry or lies under a refused folder (reported already)."""
    parts = rel.split("/")
    return any("/".join(parts[:i]) in refused for i in range(1, len(parts) + 1))


def bad_name(rel: str) -> str | None:
    """Why `rel` cannot name a file of a bundle; None when it can."""
    if not rel:
        return "an empty path"
    if rel.startswith("/") or "\\" in rel:
        return "an absolute path or a backslash"
    if any(unsafe_char(ch) for ch in rel):
        return "a control character in the name (or bytes that are not UTF-8)"
    if ".." in PurePosixPath(rel).parts:
        return "a path outside the bundle"
    return None


def scan(root: Path) -> Scan:
    """Walk `root` with lstat only; nothing is followed and nothing but folders is opened."""
    result = Scan()
    pending = [""]
    entries = total = 0
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(root / folder if folder else root) as listing:
                children = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            result.problems.append(FileProblem("UNREADABLE", folder or ".", str(exc.strerror or exc)))
            continue
        for entry in children:
            rel = f"{folder}/{entry.name}" if folder else entry.name
            entries += 1
            if entries > MAX_ENTRIES:
                result.problems.append(
                    FileProblem(
                        "TOO_LARGE", ".", f"more than {MAX_ENTRIES:,} files and folders; the rest was not looked at"
                    )
                )
                return result
            why = bad_name(rel)
            if why is not None:
                result.problems.append(FileProblem("BAD_PATH", rel, why))
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError as exc:
                result.problems.append(FileProblem("UNREADABLE", rel, str(exc.strerror or exc)))
                continue
            if stat.S_ISDIR(info.st_mode):
                pending.append(rel)
            elif stat.S_ISLNK(info.st_mode):
                result.problems.append(
                    FileProblem(
                        "UNSAFE",
                        rel,
                        f"a symbolic link (to {_link_target(root / rel)}); "
                        "verify reads regular files only, never follows",
                    )
                )
            elif not stat.S_ISREG(info.st_mode):
                result.problems.append(
                    FileProblem(
                        "UNSAFE", rel, f"{kind_of(info.st_mode)}; verify reads regular files only and did not open it"
                    )
                )
            elif info.st_size > MAX_FILE_BYTES:
                result.problems.append(
                    FileProblem(
                        "TOO_LARGE", rel, f"{info.st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte cap on one file"
                    )
                )
            else:
                size = _content_size(root, rel, info.st_size, result.problems)
                if size is None:
                    continue
                total += size
                if total > MAX_BUNDLE_BYTES:
                    result.problems.append(
                        FileProblem(
                            "TOO_LARGE", ".", f"over {MAX_BUNDLE_BYTES:,} bytes in all; the rest was not looked at"
                        )
                    )
                    return result
                result.files.append(rel)
    result.files.sort()
    return result


def _content_size(root: Path, rel: str, stored: int, problems: list[FileProblem]) -> int | None:
    """A regular file's size as the bundle's caps count it: as stored, or for a `.zst` file its content's
    size as its header declares it (which reading enforces); None, with a problem, when it is refused."""
    if not rel.endswith(ZST):
        return stored
    try:
        size = content_size(root / rel, MAX_FILE_BYTES)
    except (OSError, RunDirError) as exc:
        problems.append(FileProblem("UNREADABLE", rel, _relative(exc, root)))
        return None
    if size > MAX_FILE_BYTES:
        problems.append(
            FileProblem(
                "TOO_LARGE", rel, f"decompresses to {size:,} bytes, over the {MAX_FILE_BYTES:,}-byte cap on one file"
            )
        )
        return None
    return size


def _relative(exc: BaseException, root: Path) -> str:
    return str(getattr(exc, "strerror", None) or exc).replace(f"{root}{os.sep}", "")


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def sha256_file(path: Path) -> str:
    """sha256 of a regular file; a link is not followed, a FIFO not read (RunDirError)."""
    digest = hashlib.sha256()
    with os.fdopen(open_regular(path, MAX_FILE_BYTES), "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def bundle_files(root: Path) -> list[str]:
    """Every regular file under `root` but SHA256SUMS itself, as sorted POSIX paths relative to `root`."""
    return [rel for rel in scan(root).files if rel != SUMS]


def write_sums(root: Path) -> None:
    lines = [f"{sha256_file(root / rel)}  {rel}\n" for rel in bundle_files(root)]
    (root / SUMS).write_text("".join(lines), encoding="utf-8")


def check_sums(root: Path, found: Scan | None = None) -> list[FileProblem]:
    """Problems found comparing SHA256SUMS with the files present (the scan's own problems included);
    empty when every file matches."""
    found = found or scan(root)
    problems = list(found.problems)
    if any(p.path == "." for p in found.problems):
        return problems  # the scan stopped early: comparing with a partial listing would only add noise
    present = {rel for rel in found.files if rel != SUMS}
    listed = _read_sums(root, found, problems)
    if listed is None:
        return problems
    refused = found.refused()
    for rel in sorted(set(listed) | present):
        if covered(rel, refused):
            continue  # refused by the scan, reported there, never opened
        if rel not in present:
            problems.append(FileProblem("MISSING", rel, "listed in SHA256SUMS, not in the bundle"))
        elif rel not in listed:
            problems.append(FileProblem("UNLISTED", rel, "in the bundle, not in SHA256SUMS"))
        else:
            try:
                actual = sha256_file(root / rel)
            except (OSError, RunDirError) as exc:
                problems.append(FileProblem("UNREADABLE", rel, str(getattr(exc, "strerror", None) or exc)))
                continue
            if actual != listed[rel]:
                problems.append(FileProblem("CHANGED", rel, "sha256 differs from SHA256SUMS"))
    return problems


def _read_sums(root: Path, found: Scan, problems: list[FileProblem]) -> dict[str, str] | None:
    """SHA256SUMS as {path: sha256}; None (with a problem) when there is none to read."""
    if SUMS in found.refused():
        return None
    if SUMS not in found.files:
        problems.append(FileProblem("MISSING", SUMS, "the bundle has no checksum list"))
        return None
    try:
        text = read_regular(root / SUMS, MAX_DOCUMENT_BYTES).decode("utf-8")
    except (OSError, RunDirError) as exc:
        problems.append(FileProblem("UNREADABLE", SUMS, str(getattr(exc, "strerror", None) or exc)))
        return None
    except UnicodeDecodeError as exc:
        problems.append(FileProblem("BAD_LINE", SUMS, f"not UTF-8 at byte {exc.start}"))
        return None
    lines = text.split("\n")
    if len(lines) > MAX_ENTRIES + 1:
        problems.append(FileProblem("TOO_LARGE", SUMS, f"{len(lines):,} lines, over the {MAX_ENTRIES:,}-entry cap"))
        return None
    listed: dict[str, str] = {}
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        match = _LINE_RE.fullmatch(raw)
        if match is None:
            problems.append(FileProblem("BAD_LINE", SUMS, f"line {number} is not '<sha256>  <path>'"))
            continue
        digest, rel = match.group(1).lower(), match.group(2)
        why = bad_name(rel)
        if why is not None:
            problems.append(FileProblem("BAD_LINE", rel, f"line {number} names {why}"))
            continue
        rel = PurePosixPath(rel).as_posix()
        if rel == SUMS:
            problems.append(FileProblem("BAD_LINE", rel, f"line {number}: SHA256SUMS cannot list itself"))
        elif rel in listed:
            problems.append(FileProblem("BAD_LINE", rel, f"line {number} lists it a second time"))
        else:
            listed[rel] = digest
    return listed
