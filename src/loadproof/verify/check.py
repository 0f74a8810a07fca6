"""`verify(bundle)`: check the checksums, recompute every claim from the bundle's data, compare with claims.json.

Reads only the bundle and uses only the claim definitions (metrics.compute_claims) and the run
reader (store): no client, no engine, no model, no network. A claim is `ok` when the published and
recomputed claims have the same name and unit, the same kind and direction where the published claim
states them (bundles published before claims carried them do not), equal string or boolean values,
and, for numbers, when both the recomputed value and the published `value` round to the published
`printed` figure (intervals.py).

A bundle is a stranger's: nothing in it is followed (links), opened unless it is a regular file,
read past its cap, or trusted to parse; every such problem, and any error a crafted value provokes
while claims are recomputed, is one FAILED line, never an exception. VERIFIED means the bundle is
consistent with itself (its claims follow from its data and its files from SHA256SUMS), not that it
is authentic: anyone can recompute claims and checksums over data they made up.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadproof.errors import LoadproofError, UsageError
from loadproof.metrics.claims import Claim
from loadproof.metrics.load_series import judge_trials, trial_of
from loadproof.rundir.bundle import Bundle, BundleSeries
from loadproof.store.digest import measurement_digest
from loadproof.store.files import read_json_file
from loadproof.store.run_dir import CLAIMS, ReadLimits, load_run
from loadproof.store.schema import read_bundle
from loadproof.verify.checksums import FileProblem, Scan, check_sums, covered, scan
from loadproof.verify.confidence import checked_interval, compare_interval
from loadproof.verify.display import shown
from loadproof.verify.intervals import matches_printed, printed_interval
from loadproof.verify.layout import (
    BUNDLE_JSON,
    MAX_DOCUMENT_BYTES,
    MAX_ENTRIES,
    MAX_FILE_BYTES,
    RUNS_DIR,
    SERIES_DIR,
    SUMS,
)

BUNDLE_LIMITS = ReadLimits(max_file_bytes=MAX_FILE_BYTES, max_document_bytes=MAX_DOCUMENT_BYTES)
_ABSENT = "(none)"
MEANING = ("kind", "direction")  # checked when published; absent from bundles made before claims carried them
_RUN_FOLDER = re.compile(r"[A-Za-z0-9._-]+")  # what publish names a run folder


@dataclass(frozen=True)
class ClaimCheck:
    run_id: str
    name: str
    ok: bool
    published: str  # the published printed figure, or (none)
    recomputed: str  # the recomputed exact value, or (none)
    reason: str = ""
    interval: str | None = None  # None: no interval published; else the recomputed one, as shown ("": none)

    def line(self) -> str:
        if self.ok:
            return f"ok  {shown(self.name)}  {shown(self.published)}" + (f" {self.interval}" if self.interval else "")
        return (
            f"MISMATCH  {shown(self.name)}  published {shown(self.published)} recomputed {shown(self.recomputed)}"
            + (f"  ({shown(self.reason)})" if self.reason else "")
        )


@dataclass
class RunResult:
    run_id: str
    path: str
    checks: list[ClaimCheck] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)
    recomputed: list[Claim] | None = field(default=None, repr=False)  # a run's claims, for the series that list it
    rate_rps: float | None = None  # the run's constant rate where its plan has one, for a search that lists it
    digest: str | None = None  # its records' measured numbers: what a contract names as a calibration input
    contract_inputs: list[tuple[str, str]] = field(default_factory=list)  # its contract's (name, sha256) inputs


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
        """Every line to print, each safe for a terminal (bundle text escaped, see display.py)."""
        out = [p.line() for p in self.files]
        for run in self.runs:
            out.append(f"run {shown(run.run_id)} ({shown(run.path)})")
            out += [p.line() for p in run.problems]
            out += [c.line() for c in run.checks]
        return out

    def summary(self) -> str:
        """The verdict and its counts; how many published intervals were recomputed, where any were."""
        checks = self.checks
        verdict = "VERIFIED" if self.ok else "FAILED"
        intervals = sum(c.interval is not None for c in checks)
        return (
            f"{verdict}: {len(checks) - self.num_mismatches}/{len(checks)} claims ok in {len(self.runs)} run(s), "
            f"{self.num_mismatches} mismatched, {len(self.problems)} file problem(s)"
            + (f"; {intervals} published interval(s) recomputed" if intervals else "")
        )


def verify(bundle: Path) -> VerifyResult:
    if not bundle.is_dir():
        raise UsageError(f"no bundle directory at {bundle}")
    if not os.path.lexists(bundle / BUNDLE_JSON) and not os.path.lexists(bundle / SUMS):
        raise UsageError(f"{bundle} is not a loadproof bundle (no {BUNDLE_JSON}, no {SUMS})")
    found = scan(bundle)
    result = VerifyResult(bundle=bundle, files=check_sums(bundle, found))
    described = _described(bundle, result.files) if BUNDLE_JSON in found.files else None
    for run_id, rel in _runs(described, found, result.files):
        result.runs.append(verify_run(bundle, run_id, rel))
    by_rel = {run.path: run for run in result.runs}
    series = described.series if described is not None else []
    for entry in series:
        result.runs.append(verify_series(bundle, entry, by_rel))
    check_contract_inputs(result.runs)
    listed = {entry.path for entry in series}
    for rel in sorted({"/".join(rel.split("/")[:2]) for rel in found.files if rel.startswith(f"{SERIES_DIR}/")}):
        if rel not in listed and not covered(rel, found.refused()):
            result.files.append(FileProblem("UNLISTED", rel, f"a series folder {BUNDLE_JSON} does not list"))
    if not result.runs:
        result.files.append(FileProblem("MISSING", RUNS_DIR, "the bundle holds no run"))
    return result


def check_contract_inputs(runs: list[RunResult]) -> None:
    """A run judged by a prediction contract: each calibration input the contract names that is a run of
    this bundle (its folder name) must have the digest the contract recorded; a check per input. Inputs
    published elsewhere, or given by hand, are not checked here."""
    by_folder = {run.path.rsplit("/", 1)[-1]: run for run in runs if run.digest is not None}
    for run in runs:
        for name, sha256 in run.contract_inputs:
            other = by_folder.get(name)
            if other is None or other is run:
                continue
            ok = other.digest == sha256
            run.checks.append(
                ClaimCheck(
                    run.run_id,
                    f"prediction.calibration_input {name}",
                    ok,
                    sha256[:16],
                    (other.digest or "")[:16],
                    "" if ok else "the bundle's run is not the one the contract was calibrated on",
                )
            )


def run_folder_problem(rel: str) -> str | None:
    """Why `rel` is not a run folder's place in a bundle (`runs/<name>`); None when it is."""
    head, _, name = rel.partition("/")
    if head != RUNS_DIR or name in ("", ".", "..") or not _RUN_FOLDER.fullmatch(name):
        return f"not a folder {RUNS_DIR}/<name> of letters, digits, '.', '_' and '-'"
    return None


def _runs(described: Bundle | None, found: Scan, problems: list[FileProblem]) -> list[tuple[str, str]]:
    """(run_id, relative folder) of each run: from bundle.json, plus any run folder it does not list."""
    listed = _listed_runs(described, problems) if described is not None else []
    refused = found.refused()
    seen = {rel for _, rel in listed}
    any_listed = bool(listed)
    folders = sorted(
        {"/".join(rel.split("/")[:2]) for rel in found.files if rel.startswith(f"{RUNS_DIR}/") and rel.count("/") >= 2}
    )
    for rel in folders:
        if rel in seen or covered(rel, refused):
            continue
        why = run_folder_problem(rel)
        if why is not None:
            problems.append(FileProblem("BAD_PATH", rel, why))
            continue
        if any_listed:
            problems.append(FileProblem("UNLISTED", rel, f"a run folder {BUNDLE_JSON} does not list"))
        listed.append((rel.split("/", 1)[1], rel))
    return listed


def _described(bundle: Path, problems: list[FileProblem]) -> Bundle | None:
    """bundle.json, typed by the reader of its version (store.schema.read_bundle); None, and one problem,
    when it cannot be read or does not fit (its run folders are then verified as found). A list of runs
    or series over the entry cap is a problem, and left empty."""
    try:
        described = read_bundle(read_json_file(bundle / BUNDLE_JSON, MAX_DOCUMENT_BYTES), Path(BUNDLE_JSON))
    except LoadproofError as exc:
        problems.append(FileProblem("UNREADABLE", BUNDLE_JSON, _relative(str(exc), bundle)))
        return None
    except OSError as exc:
        problems.append(FileProblem("UNREADABLE", BUNDLE_JSON, str(exc.strerror or exc)))
        return None
    for what, entries in (("runs", described.runs), ("series", described.series)):
        if len(entries) > MAX_ENTRIES:
            problems.append(
                FileProblem(
                    "TOO_LARGE", BUNDLE_JSON, f"lists {len(entries):,} {what}, over the {MAX_ENTRIES:,}-entry cap"
                )
            )
            entries.clear()
    return described


def _listed_runs(described: Bundle, problems: list[FileProblem]) -> list[tuple[str, str]]:
    listed: list[tuple[str, str]] = []
    seen: set[str] = set()
    for number, entry in enumerate(described.runs, 1):
        run_id, rel = entry.run_id, entry.path
        why = run_folder_problem(rel)
        if why is not None:
            problems.append(FileProblem("BAD_PATH", rel, f"{BUNDLE_JSON} run {number} names {why}"))
        elif rel in seen:
            problems.append(FileProblem("BAD_LINE", rel, f"{BUNDLE_JSON} lists this run folder twice"))
        else:
            seen.add(rel)
            listed.append((run_id, rel))
    return listed


def verify_run(bundle: Path, run_id: str, rel: str) -> RunResult:
    result = RunResult(run_id=run_id, path=rel)
    why = run_folder_problem(rel)
    if why is not None:  # verify() checked; a caller of verify_run may not have
        result.problems.append(FileProblem("BAD_PATH", rel, why))
        return result
    path = bundle / rel
    for folder in (RUNS_DIR, rel):  # each step a real folder: a linked `runs` would lead outside
        try:
            mode = os.lstat(bundle / folder).st_mode
        except OSError:
            result.problems.append(FileProblem("MISSING", folder, f"{BUNDLE_JSON} lists a run folder the bundle lacks"))
            return result
        if not stat.S_ISDIR(mode):
            result.problems.append(FileProblem("UNSAFE", folder, "not a folder (a link is never followed)"))
            return result
    published = _published_claims(path, rel, run_id, result.problems)
    try:
        run = load_run(path, BUNDLE_LIMITS)
        result.rate_rps, recomputed = trial_of(run)  # the rate: for a search that lists the run
        result.recomputed = recomputed
        result.digest = measurement_digest(run.records)
        if run.manifest.prediction is not None:
            result.contract_inputs = [(i.name, i.sha256) for i in run.manifest.prediction.calibration_inputs]
    except LoadproofError as exc:
        result.problems.append(
            FileProblem("UNREADABLE", rel, f"claims cannot be recomputed: {_relative(str(exc), path)}")
        )
        return result
    except Exception as exc:
        result.problems.append(FileProblem("UNREADABLE", rel, f"claims cannot be recomputed: {_describe(exc)}"))
        return result
    if published is None:
        return result
    try:
        result.checks = compare_claims(run_id, published, recomputed)
    except Exception as exc:
        result.problems.append(FileProblem("UNREADABLE", f"{rel}/{CLAIMS}", f"cannot be compared: {_describe(exc)}"))
    return result


def verify_series(bundle: Path, entry: BundleSeries, runs: dict[str, RunResult]) -> RunResult:
    """A rate search's claims (load.search.*) recomputed from its trial runs' recomputed claims and plans,
    whether it was interrupted (its entry's `interrupted`; absent: it was not) and the rule it decided on
    (`decision`: interval; absent: the point value), against
    series/<name>/claims.json; a sweep: only that every run it lists is in the bundle."""
    series_id, kind, listed = entry.series_id, entry.kind, entry.runs
    name = series_id if _RUN_FOLDER.fullmatch(series_id) else None
    result = RunResult(run_id=f"{kind}:{name or '?'}", path=f"{SERIES_DIR}/{name or '?'}")
    named = name is not None and name not in (".", "..")
    if name is None or not named or not listed:
        problem = "lists no trial runs" if named else "has no series_id of letters, digits, '.', '_' and '-'"
        result.problems.append(FileProblem("UNREADABLE", BUNDLE_JSON, f"series {_brief(series_id)} {problem}"))
        return result
    trials = []
    for rel in listed:
        run = runs.get(rel)
        if run is None:
            result.problems.append(FileProblem("MISSING", rel, f"series {name} lists a run the bundle does not"))
        elif run.recomputed is None:
            result.problems.append(
                FileProblem("UNREADABLE", rel, f"series {name}: the trial's claims were not recomputed")
            )
        else:
            trials.append((run.rate_rps, run.recomputed))
    if kind == "sweep" or result.problems:
        return result
    rel, attainment = f"{SERIES_DIR}/{name}", entry.attainment
    if entry.path != rel:
        result.problems.append(FileProblem("BAD_PATH", BUNDLE_JSON, f"series {name}: path is not {rel}"))
        return result
    if attainment is None or not 0 < attainment <= 1:
        result.problems.append(
            FileProblem("UNREADABLE", BUNDLE_JSON, f"series {name}: attainment {_brief(attainment)} is not in (0, 1]")
        )
        return result
    for folder in (SERIES_DIR, rel):  # each step a real folder, never a link
        try:
            mode = os.lstat(bundle / folder).st_mode
        except OSError:
            result.problems.append(
                FileProblem("MISSING", folder, f"{BUNDLE_JSON} lists a series folder the bundle lacks")
            )
            return result
        if not stat.S_ISDIR(mode):
            result.problems.append(FileProblem("UNSAFE", folder, "not a folder (a link is never followed)"))
            return result
    published = _published_claims(bundle / rel, rel, name, result.problems)
    try:
        # absent: not interrupted, decided on the point value
        _, recomputed = judge_trials(trials, attainment, entry.interrupted is True, entry.decision)
    except Exception as exc:
        result.problems.append(
            FileProblem("UNREADABLE", rel, f"the search's claims cannot be recomputed: {_describe(exc)}")
        )
        return result
    if published is not None:
        result.checks = compare_claims(result.run_id, published, recomputed)
    return result


def _published_claims(path: Path, rel: str, run_id: str, problems: list[FileProblem]) -> list[dict[str, Any]] | None:
    try:
        payload = read_json_file(path / CLAIMS, MAX_DOCUMENT_BYTES)
    except FileNotFoundError:
        problems.append(FileProblem("MISSING", f"{rel}/{CLAIMS}", "no published claims"))
        return None
    except (LoadproofError, OSError) as exc:
        problems.append(FileProblem("UNREADABLE", f"{rel}/{CLAIMS}", _relative(str(exc), path)))
        return None
    claims = payload.get("claims") if isinstance(payload, dict) else None
    if not isinstance(claims, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in claims):
        problems.append(FileProblem("UNREADABLE", f"{rel}/{CLAIMS}", "not a claims file (no list of named claims)"))
        return None
    if payload.get("run_id") != run_id:
        problems.append(
            FileProblem(
                "CHANGED", f"{rel}/{CLAIMS}", f"run_id {_brief(payload.get('run_id'))} is not the run's {run_id!r}"
            )
        )
    return claims


def compare_claims(run_id: str, published: list[dict[str, Any]], recomputed: list[Claim]) -> list[ClaimCheck]:
    """One check per claim name on either side, in the recomputed order, then published-only names."""
    by_name: dict[str, dict[str, Any]] = {}
    checks: list[ClaimCheck] = []
    for stated in published:
        if stated["name"] in by_name:
            checks.append(ClaimCheck(run_id, stated["name"], False, _printed(stated), _ABSENT, "published twice"))
        by_name[stated["name"]] = stated
    recomputed_names = set()
    for claim in recomputed:
        recomputed_names.add(claim.name)
        pub = by_name.get(claim.name)
        if pub is None:
            checks.append(ClaimCheck(run_id, claim.name, False, _ABSENT, _exact(claim.value), "not published"))
            continue
        reason = compare_claim(pub, claim)
        interval = checked_interval(pub, claim)
        checks.append(
            ClaimCheck(run_id, claim.name, reason is None, _printed(pub), _exact(claim.value), reason or "", interval)
        )
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
        return f"unit {_brief(pub.get('unit'))}, recomputed {claim.unit!r}"
    for meaning in MEANING:
        if meaning in pub and pub[meaning] != getattr(claim, meaning):
            return f"{meaning} {_brief(pub[meaning])}, recomputed {getattr(claim, meaning)!r}"
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
    return compare_interval(pub, claim)


def _printed(claim: dict[str, Any]) -> str:
    printed = claim.get("printed")
    return printed if isinstance(printed, str) else _ABSENT


def _exact(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _brief(value: Any) -> str:
    """A published value in a message: strings quoted, anything else by its type (never its repr)."""
    if value is None:
        return "none"
    return repr(value) if isinstance(value, str) else f"a {type(value).__name__}"


def _relative(message: str, folder: Path) -> str:
    """An error message with the bundle's own location cut from its paths."""
    return message.replace(f"{folder}{os.sep}", "")


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return type(exc).__name__
