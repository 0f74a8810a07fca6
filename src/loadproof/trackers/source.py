"""The run a tracker is sent: a run directory (`runs/<id>`, or a bundle's `runs/<folder>`), or a bundle folder that
holds exactly one run, read once and typed for every tracker (MLflow, OpenTelemetry, llm-d's report).

- `claims`: the run's claims.json, as `report` wrote it (or `publish`, in a bundle); a run without one (interrupted
  before its report) has its claims recomputed from the records as `report` would (`metrics.compute_claims`).
- `published`: the manifest sanitized as `publish` sanitizes it (publish.fields' declared kinds), so no URL, host,
  path or secret the run recorded leaves in a parameter, a tag or an attribute. Numbers are never touched.
- `artifact`: what a tracker that keeps files uploads, the folder given: the bundle (whole, so `loadproof verify`
  checks it where it lands) or the run directory.

A path that is neither, a bundle of several runs, or a claims.json that is not one is one UsageError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from loadproof.errors import LoadproofError, UsageError
from loadproof.metrics import compute_claims
from loadproof.publish.fields import declarations
from loadproof.publish.sanitize import Sanitizer
from loadproof.store.files import read_json_file
from loadproof.store.run_dir import CLAIMS, MANIFEST, Run, load_run
from loadproof.store.schema import manifest_json, read_bundle
from loadproof.verify.layout import BUNDLE_JSON

CLAIMS_BYTES = 64 * 1024 * 1024  # a claims.json past this is not one loadproof wrote


class Interval(msgspec.Struct, frozen=True):
    low: float
    high: float
    confidence: float
    method: str


class ClaimEntry(msgspec.Struct, frozen=True):
    """One claim as claims.json holds it (metrics/claims.py, `Claim.as_dict`)."""

    name: str
    value: float | int | str | bool
    unit: str
    printed: str
    formula: str
    kind: str
    direction: str
    interval: Interval | None = None

    @property
    def number(self) -> float | None:
        """The value of a figure or a count (None for a fact, a verdict or a criterion)."""
        if self.kind not in ("figure", "count") or isinstance(self.value, (bool, str)):
            return None
        return float(self.value)


class _ClaimsFile(msgspec.Struct):
    run_id: str | None = None
    claims: list[ClaimEntry] = []


@dataclass(frozen=True)
class TrackedRun:
    path: Path  # the run directory
    artifact: Path  # the folder given: a bundle, or the run directory
    run: Run
    claims: list[ClaimEntry]
    published: dict[str, Any]  # the manifest's fields as publish sanitizes them (its declared kinds)

    @property
    def run_id(self) -> str:
        return self.run.manifest.run_id or self.path.name

    @property
    def scenario(self) -> str:
        return self.run.manifest.scenario or "unknown"

    @property
    def model(self) -> str | None:
        target = self.published.get("target") or {}
        model = target.get("model") if isinstance(target, dict) else None
        return model if isinstance(model, str) and model else None

    @property
    def engine_version(self) -> str | None:
        return self.run.manifest.engine_version

    @property
    def engine_kind(self) -> str | None:
        engine = self.run.manifest.engine
        return engine.kind if engine is not None else None

    @property
    def profile(self) -> str | None:
        profile = self.published.get("profile")
        name = profile.get("name") if isinstance(profile, dict) else None
        return name if isinstance(name, str) and name else None

    @property
    def verdict(self) -> str | None:
        """FAIL if any verdict claim failed, PASS if there are verdicts and none did, None without one."""
        verdicts = [str(c.value) for c in self.claims if c.kind == "verdict"]
        if not verdicts:
            return None
        return "FAIL" if "FAIL" in verdicts else "PASS"

    @property
    def source(self) -> str:
        """Who measured it: `loadproof`, or the tool an imported run was read from (`loadproof import`)."""
        source = self.run.manifest.source
        return source.tool if source is not None else "loadproof"

    @property
    def bundled(self) -> bool:
        return self.artifact != self.path

    def start_ns(self) -> int | None:
        """The run's first send as wall-clock nanoseconds since the epoch (None without a clock anchor or a send)."""
        sent = [r.send_ns for r in self.run.records if r.send_ns]
        return self.wall_ns(min(sent)) if sent else None

    def end_ns(self) -> int | None:
        ends = [r.end_ns for r in self.run.records if r.end_ns]
        return self.wall_ns(max(ends)) if ends else None

    def wall_ns(self, t_ns: int) -> int | None:
        """A time on the run's monotonic clock as wall-clock nanoseconds (the manifest's clock anchor)."""
        anchor = self.run.manifest.clock_anchor
        return None if anchor is None else anchor.wall_time_ns + (t_ns - anchor.perf_counter_ns)


def open_run(path: Path) -> TrackedRun:
    """The run at `path` (a run directory, or a bundle folder holding one run), read and sanitized."""
    path = path.expanduser()
    if not path.is_dir():
        raise UsageError(f"{path}: no such folder (give a run directory, runs/<id>, or a bundle)")
    run_dir, artifact = _run_folder(path), path
    run = load_run(run_dir)
    return TrackedRun(run_dir, artifact, run, _claims(run), _sanitized_manifest(run))


def _run_folder(path: Path) -> Path:
    if (path / MANIFEST).is_file():
        return path
    if not (path / BUNDLE_JSON).is_file():
        raise UsageError(f"{path} is neither a run directory (no {MANIFEST}) nor a bundle (no {BUNDLE_JSON})")
    bundle = read_bundle(read_json_file(path / BUNDLE_JSON, CLAIMS_BYTES), path / BUNDLE_JSON)
    if len(bundle.runs) != 1:
        listed = ", ".join(str(path / r.path) for r in bundle.runs) or "none"
        raise UsageError(f"{path} is a bundle of {len(bundle.runs)} runs; give one run directory: {listed}")
    return path / bundle.runs[0].path


def _claims(run: Run) -> list[ClaimEntry]:
    where = run.path / CLAIMS
    if not where.is_file():
        try:
            payload: Any = {"claims": [c.as_dict() for c in compute_claims(run)]}
        except LoadproofError as exc:
            raise UsageError(f"{run.path}: no {CLAIMS}, and its claims cannot be computed: {exc}") from None
    else:
        payload = read_json_file(where, CLAIMS_BYTES)  # RunDirError (exit 2) names the file it cannot read
    try:
        return msgspec.convert(payload, _ClaimsFile).claims
    except msgspec.ValidationError as exc:
        raise UsageError(f"{where}: not a claims file: {exc}") from None


def _sanitized_manifest(run: Run) -> dict[str, Any]:
    raw = manifest_json(run.manifest)
    node = declarations(run.manifest.scenario)[MANIFEST]
    sanitizer = Sanitizer()
    sanitizer.learn_declared(raw, node)
    clean: dict[str, Any] = sanitizer.declared(raw, node)
    return clean
