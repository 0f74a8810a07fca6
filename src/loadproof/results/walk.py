"""What `store add PATH` adds: a run directory; a published bundle's runs; or every run and bundle under a
folder (a rate search's trials, `runs/`, a folder of bundles), found without following a symbolic link."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from loadproof.errors import UsageError
from loadproof.store.run_dir import CLAIMS, MANIFEST
from loadproof.verify.layout import BUNDLE_JSON, MAX_ENTRIES, RUNS_DIR

MAX_DEPTH = 8  # runs/ > a search > its trials is 3; a folder of bundles 4


@dataclass
class Found:
    runs: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # a run left out, and why


def find_runs(path: Path) -> Found:
    """The run directories at or under `path`, in path order. Under a folder, a run without claims.json (ended
    before it was reported, or still running) is skipped and said; named alone, it is not skipped (read_run
    refuses it). Nothing there to add is one line."""
    if path.is_symlink() or not path.is_dir():
        raise UsageError(f"{path}: no run directory, bundle or folder there")
    found = Found()
    if (path / MANIFEST).is_file():
        found.runs.append(path)
        return found
    _walk(path, found, 0)
    if not found.runs:
        why = f" ({len(found.skipped)} run(s) without {CLAIMS})" if found.skipped else ""
        raise UsageError(f"{path}: no run directory or bundle to add under it{why}")
    return found


def _walk(folder: Path, found: Found, depth: int) -> None:
    if depth > MAX_DEPTH or len(found.runs) > MAX_ENTRIES * 10:
        return
    try:
        children = sorted(c for c in folder.iterdir() if not c.name.startswith("."))
    except OSError:
        return
    if (folder / BUNDLE_JSON).is_file() and (folder / RUNS_DIR).is_dir():
        children = [folder / RUNS_DIR]
    for child in children:
        if child.is_symlink() or not child.is_dir():
            continue
        if (child / MANIFEST).is_file():
            if (child / CLAIMS).is_file():
                found.runs.append(child)
            else:
                found.skipped.append((child, f"no {CLAIMS}"))
            continue
        _walk(child, found, depth + 1)


def all_run_dirs(folder: Path) -> list[Path]:
    """Every run directory at or under `folder`, with claims or not (none where it does not exist)."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    if (folder / MANIFEST).is_file():
        return [folder]
    found = Found()
    _walk(folder, found, 0)
    return found.runs + [path for path, _ in found.skipped]
