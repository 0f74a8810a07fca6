"""`verify(bundle)`: check the checksums, recompute every claim from the bundle's data, compare with claims.json.

Reads only the bundle and uses only the claim definitions (metrics, through report.compute_claims):
no client, no engine, no model, no network. A claim is `ok` when the published and recomputed claims
have the same name and unit, equal string or boolean values, and, for numbers, when both the
recomputed value and the published `value` round to the published `printed` figure (intervals.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadproof.errors import LoadproofError, UsageError
from loadproof.metrics.claims import Claim
from loadproof.report.build import compute_claims
from loadproof.store.run_dir import CLAIMS, load_run
from loadproof.verify.checksums import FileProblem, check_sums
from loadproof.verify.intervals import matches_printed, printed_interval
from loadproof.verify.layout import BUNDLE_JSON, RUNS_DIR, SUMS

_ABSENT = "(none)"


@dataclass(frozen=True)
class ClaimCheck:
    run_id: str
    name: str
    ok: bool
    published: str  # the published printed figure, or (none)
    recomputed: str  # the recomputed exact value, or (none)
    reason: str = ""

    def line(self) -> str:
        if self.ok:
            return f"ok  {self.name}  {self.published}"
        return f"MISMATCH  {self.name}  published {self.published} recomputed {self.recomputed}" + (
            f"  ({self.reason})" if self.reason else "")


@dataclass
class RunResult:
    run_id: str
    path: str
    checks: list[ClaimCheck] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)


@dataclass
class VerifyResult:
    bundle: Path
    files: list[FileProblem] = field(default_factory=list)
    runs: list[RunResult] = field(default_factory=list)

    @property
    def checks(self) -> list[ClaimCheck]:
        return [c for run in self.runs for c in run.checks]

    @property
    def problems(self) -> list[FileProblem]:
        return self.files + [p for run in self.runs for p in run.problems]

    @property
    def num_mismatches(self) -> int:
        return sum(not c.ok for c in self.checks)

    @property
    def ok(self) -> bool:
        return not self.problems and self.num_mismatches == 0

    def lines(self) -> list[str]:
        out = [p.line() for p in self.files]
        for run in self.runs:
            out.append(f"run {run.run_id} ({run.path})")
            out += [p.line() for p in run.problems]
            out += [c.line() for c in run.checks]
        return out

    def summary(self) -> str:
        checks = self.checks
        verdict = "VERIFIED" if self.ok else "FAILED"
        return (f"{verdict}: {len(checks) - self.num_mismatches}/{len(checks)} claims ok in {len(self.runs)} run(s), "
                f"{self.num_mismatches} mismatched, {len(self.problems)} file problem(s)")


def verify(bundle: Path) -> VerifyResult:
    if not bundle.is_dir():
        raise UsageError(f"no bundle directory at {bundle}")
    if not (bundle / BUNDLE_JSON).is_file() and not (bundle / SUMS).is_file():
        raise UsageError(f"{bundle} is not a loadproof bundle (no {BUNDLE_JSON}, no {SUMS})")
    result = VerifyResult(bundle=bundle, files=check_sums(bundle))
    for run_id, rel in _runs(bundle, result.files):
        result.runs.append(verify_run(bundle, run_id, rel))
    if not result.runs:
        result.files.append(FileProblem("MISSING", RUNS_DIR, "the bundle holds no run"))
    return result


def _runs(bundle: Path, problems: list[FileProblem]) -> list[tuple[str, str]]:
    """(run_id, relative folder) of each run: from bundle.json, plus any run folder it does not list."""
    listed: list[tuple[str, str]] = []
    try:
        meta = json.loads((bundle / BUNDLE_JSON).read_text(encoding="utf-8"))
        listed = [(str(r["run_id"]), str(r["path"])) for r in meta["runs"]]
    except FileNotFoundError:
        pass  # check_sums reports it missing when it was listed
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        problems.append(FileProblem("UNREADABLE", BUNDLE_JSON, f"not a bundle description ({type(exc).__name__})"))
    seen = {rel for _, rel in listed}
    runs_root = bundle / RUNS_DIR
    if runs_root.is_dir():
        for folder in sorted(p for p in runs_root.iterdir() if p.is_dir()):
            rel = f"{RUNS_DIR}/{folder.name}"
            if rel not in seen:
                if listed:
                    problems.append(FileProblem("UNLISTED", rel, f"a run folder {BUNDLE_JSON} does not list"))
                listed.append((folder.name, rel))
    return listed


def verify_run(bundle: Path, run_id: str, rel: str) -> RunResult:
    result = RunResult(run_id=run_id, path=rel)
    path = (bundle / rel).resolve()
    if bundle.resolve() not in path.parents:
        result.problems.append(FileProblem("BAD_LINE", rel, f"{BUNDLE_JSON} names a folder outside the bundle"))
        return result
    published = _published_claims(path, rel, run_id, result.problems)
    try:
        recomputed = compute_claims(load_run(path))
    except LoadproofError as exc:
        result.problems.append(FileProblem("UNREADABLE", rel, f"claims cannot be recomputed: {exc}"))
        return result
    except Exception as exc:  # noqa: BLE001  tampered data may break a claim function in any way; report, go on
        result.problems.append(FileProblem("UNREADABLE", rel,
                                           f"claims cannot be recomputed: {type(exc).__name__}: {exc}"))
        return result
    if published is None:
        return result
    result.checks = compare_claims(run_id, published, recomputed)
    return result


def _published_claims(path: Path, rel: str, run_id: str, problems: list[FileProblem]) -> list[dict[str, Any]] | None:
    try:
        payload = json.loads((path / CLAIMS).read_text(encoding="utf-8"))
        claims = payload["claims"]
        if not isinstance(claims, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                                   for c in claims):
            raise TypeError("claims is not a list of named claims")
    except FileNotFoundError:
        problems.append(FileProblem("MISSING", f"{rel}/{CLAIMS}", "no published claims"))
        return None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        problems.append(FileProblem("UNREADABLE", f"{rel}/{CLAIMS}", f"not a claims file ({exc})"))
        return None
    if payload.get("run_id") != run_id:
        problems.append(FileProblem("CHANGED", f"{rel}/{CLAIMS}",
                                    f"run_id {payload.get('run_id')!r} is not the run's {run_id!r}"))
    return claims


def compare_claims(run_id: str, published: list[dict[str, Any]], recomputed: list[Claim]) -> list[ClaimCheck]:
    """One check per claim name on either side, in the recomputed order, then published-only names."""
    by_name: dict[str, dict[str, Any]] = {}
    checks: list[ClaimCheck] = []
    for claim in published:
        if claim["name"] in by_name:
            checks.append(ClaimCheck(run_id, claim["name"], False, _printed(claim), _ABSENT,
                                     "published twice"))
        by_name[claim["name"]] = claim
    recomputed_names = set()
    for claim in recomputed:
        recomputed_names.add(claim.name)
        pub = by_name.get(claim.name)
        if pub is None:
            checks.append(ClaimCheck(run_id, claim.name, False, _ABSENT, _exact(claim.value), "not published"))
            continue
        reason = compare_claim(pub, claim)
        checks.append(ClaimCheck(run_id, claim.name, reason is None, _printed(pub), _exact(claim.value), reason or ""))
    for name, pub in by_name.items():
        if name not in recomputed_names:
            checks.append(ClaimCheck(run_id, name, False, _printed(pub), _ABSENT, "the data does not produce it"))
    return checks


def compare_claim(pub: dict[str, Any], claim: Claim) -> str | None:
    """Why the published claim does not match the recomputed one; None when it does."""
    value, printed = pub.get("value"), pub.get("printed")
    if not isinstance(printed, str):
        return "published claim has no printed figure"
    if pub.get("unit") != claim.unit:
        return f"unit {pub.get('unit')!r}, recomputed {claim.unit!r}"
    if isinstance(claim.value, (bool, str)) or isinstance(value, (bool, str)):
        if type(value) is not type(claim.value) or value != claim.value:
            return "value differs"
        if printed != claim.printed:
            return f"printed {printed!r}, recomputed {claim.printed!r}"
        return None
    if not isinstance(value, (int, float)):
        return "published value is not a number"
    if not matches_printed(value, printed):
        return f"published value {_exact(value)} does not round to its printed {printed}"
    if not matches_printed(claim.value, printed):
        interval = printed_interval(printed)
        where = f"[{interval[0]}, {interval[1]}]" if interval else printed
        return f"recomputed value outside {where}"
    return None


def _printed(claim: dict[str, Any]) -> str:
    printed = claim.get("printed")
    return printed if isinstance(printed, str) else _ABSENT


def _exact(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)
