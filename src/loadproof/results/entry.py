"""A run directory (or a published bundle's run) read into what the results store keeps: `read_run(path)`.

Everything is read and checked before anything is written, so a run the store cannot use is one line (exit 2)
and nothing of it is stored:

- the manifest through store.schema's readers (`store.load_run`, with verify's caps: a bundle is a stranger's);
- claims.json in full: a JSON object of this run (`run_id`), a list of claims each with a name, a value (a finite
  number, a text or a yes/no), its unit, printed figure and meaning, and an interval (finite low and high,
  confidence in (0, 1), a method) or none; a truncated or hostile one is refused naming the file and the claim;
- the digest of its records (`store.digest.measurement_digest`), the same for a run and its published copy.

What is kept of the target and the names is private-free (`results.privacy`): the server's address keeps only
its scheme, port and a loopback host, anything else `<host>`; no user, password, path or query; a URL or an
absolute path in a name becomes `<url>` or `<path>`. The API key is never in a manifest.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from loadproof.errors import RunDirError, UsageError
from loadproof.metrics.claims import DIRECTIONS, KINDS
from loadproof.results.model import StoredClaim, StoredRun
from loadproof.results.privacy import address, name
from loadproof.rundir import Manifest
from loadproof.rundir.source import DATED_BY_IMPORT
from loadproof.store.digest import measurement_digest
from loadproof.store.files import read_json_file
from loadproof.store.run_dir import CLAIMS, MANIFEST, load_run
from loadproof.verify.check import BUNDLE_LIMITS
from loadproof.verify.display import shown
from loadproof.verify.layout import BUNDLE_JSON, MAX_DOCUMENT_BYTES, MAX_ENTRIES, RUNS_DIR

MAX_NAME = 300  # the claims table's name column
MAX_TEXT = 100_000  # a fact's text value
MAX_FIELD = 500  # a manifest field kept (model, profile, target)
MAX_ENVIRONMENT_ITEMS = 200
WALL_TIME = "%Y-%m-%dT%H:%M:%SZ"  # the manifest's start and end wall times


def read_run(path: Path) -> StoredRun:
    """A run directory as the store keeps it (not yet stored: no `store_id`); UsageError naming the file when
    any part of it cannot be used."""
    if not (path / MANIFEST).is_file():
        raise UsageError(f"{path} is not a run directory (no {MANIFEST})")
    run = load_run(path, BUNDLE_LIMITS)
    manifest = run.manifest
    run_id = run.run_id
    if not 0 < len(run_id) <= 200:
        raise RunDirError(f"{path / MANIFEST}: run_id is empty or longer than 200 characters")
    claims = read_claims(path, run_id)
    started = _time(manifest.start_wall_time) or _anchor(manifest) or _time(manifest.end_wall_time)
    profile, engine = _profile(manifest)
    publication = manifest.publication
    return StoredRun(
        run_id=run_id,
        digest=measurement_digest(run.records),
        started_at=started or datetime.now(UTC).replace(microsecond=0),
        scenario=_text(manifest.scenario, 100),
        profile=_text(profile),
        model=_text(manifest.target.model or (publication.model if publication else None)),
        engine=_text(engine, 100),
        engine_version=_text(manifest.engine_version or (publication.engine_version if publication else None), 100),
        endpoint=_text(manifest.target.endpoint, 100),
        target=address(manifest.target.url),
        plan_version=manifest.plan_version,
        num_records=len(run.records),
        ended_at=_time(manifest.end_wall_time),
        path=str(path.resolve()),
        source="bundle" if is_bundle_run(path) else "run",
        environment=environment(manifest),
        claims=claims,
    )


def is_bundle_run(path: Path) -> bool:
    """A run folder of a published bundle: BUNDLE/runs/RUN, with BUNDLE/bundle.json."""
    return path.parent.name == RUNS_DIR and (path.parent.parent / BUNDLE_JSON).is_file()


def _profile(manifest: Manifest) -> tuple[str | None, str | None]:
    """The profile's name and its engine (an A/B run: both arms' names, `a / b`)."""
    engine = manifest.engine.kind if manifest.engine is not None else None
    profile = manifest.profile
    if isinstance(profile, dict):
        name: Any = profile.get("name")
        kind: Any = profile.get("engine")
        engine = engine or (kind if isinstance(kind, str) else None)
        return (name if isinstance(name, str) else None), engine
    if manifest.profiles:
        names = [p.get("name") for p in manifest.profiles.values() if isinstance(p, dict)]
        return (" / ".join(n for n in names if isinstance(n, str)) or None), engine
    return None, engine


def environment(manifest: Manifest) -> dict[str, Any]:
    """The versions, the git commit, the engine's kind, the GPUs and driver, a published run's provenance, and an
    imported run's origin (`imported`: the tool, its version, and where its dates come from: `dated`, the file's
    field, or `import` where the file states none and the run is dated by its import)."""
    out: dict[str, Any] = {}
    versions = {str(k): v for k, v in list(manifest.versions.items())[:MAX_ENVIRONMENT_ITEMS]}
    if versions:
        out["versions"] = {_text(k, 100): _text(v, 100) for k, v in versions.items()}
    if manifest.git:
        out["git"] = _text(manifest.git, 100)
    if manifest.engine is not None and manifest.engine.kind:
        out["engine_kind"] = _text(manifest.engine.kind, 100)
    telemetry = manifest.telemetry
    if telemetry is not None:
        out["gpus"] = telemetry.gpus
        if telemetry.names:
            out["gpu_names"] = [_text(n, 100) for n in telemetry.names[:MAX_ENVIRONMENT_ITEMS]]
        if telemetry.driver:
            out["driver"] = _text(telemetry.driver, 100)
    source = manifest.source
    if source is not None:
        out["imported"] = {
            "tool": _text(source.tool, 100),
            "version": _text(source.version, 100),
            "dated": DATED_BY_IMPORT if source.dated_by_import else _text(source.dated, 200),
        }
    publication = manifest.publication
    if publication is not None:
        kept = {k: v for k, v in msgspec.to_builtins(publication).items() if k not in ("raw_data", "published_by")}
        out["publication"] = {
            k: ([_text(x, 100) for x in v[:MAX_ENVIRONMENT_ITEMS]] if isinstance(v, list) else v)
            if not isinstance(v, str)
            else _text(v, 100)
            for k, v in kept.items()
        }
    return out


def _text(value: Any, limit: int = MAX_FIELD) -> str | None:
    return name(str(value), limit) if value is not None else None


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, WALL_TIME).replace(tzinfo=UTC)
    except ValueError:
        return None


def _anchor(manifest: Manifest) -> datetime | None:
    anchor = manifest.clock_anchor
    if anchor is None or not 0 < anchor.wall_time_ns < 2**63:
        return None
    return datetime.fromtimestamp(anchor.wall_time_ns // 1_000_000_000, UTC)


# --- claims.json -----------------------------------------------------------------------------------


def read_claims(path: Path, run_id: str) -> dict[str, StoredClaim]:
    """Every claim of `path`/claims.json, checked; UsageError naming the file and the claim otherwise."""
    file = path / CLAIMS
    try:
        payload = read_json_file(file, MAX_DOCUMENT_BYTES)
    except FileNotFoundError:
        raise UsageError(f"{file}: missing: the run has no claims (`loadproof report {path}` writes them)") from None
    except IsADirectoryError:
        raise UsageError(f"{file}: not a file") from None
    except OSError as exc:
        raise UsageError(f"{file}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("claims"), list):
        raise UsageError(f"{file}: not a claims file (a JSON object with a list of claims)")
    if payload.get("run_id") != run_id:
        raise UsageError(f"{file}: claims of run {shown(str(payload.get('run_id')), 80)}, not of {shown(run_id, 80)}")
    listed = payload["claims"]
    if len(listed) > MAX_ENTRIES * 10:
        raise UsageError(f"{file}: {len(listed):,} claims, more than {MAX_ENTRIES * 10:,}")
    claims: dict[str, StoredClaim] = {}
    for number, raw in enumerate(listed, 1):
        claim = _claim(raw)
        if isinstance(claim, str):
            raise UsageError(f"{file}: claim {number}: {claim}")
        if claim.name in claims:
            raise UsageError(f"{file}: claim {number}: {shown(claim.name, 80)} is listed twice")
        claims[claim.name] = claim
    return claims


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _claim(raw: Any) -> StoredClaim | str:
    """The claim, or why it is refused (in words that never repeat a hostile value whole)."""
    if not isinstance(raw, dict):
        return "not a JSON object"
    name: Any = raw.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or shown(name) != name:
        return "its name is not a claim name (a printable text of 1 to 300 characters)"
    value: Any = raw.get("value")
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            return f"{name}: a text value longer than {MAX_TEXT:,} characters"
    elif not isinstance(value, bool) and not _finite(value):
        return f"{name}: its value is not a finite number, a text or a yes/no"
    unit, printed = raw.get("unit", ""), raw.get("printed", str(value))
    kind = raw.get("kind", "figure" if _finite(value) else "fact")
    direction = raw.get("direction", "neither")
    if not isinstance(unit, str) or len(unit) > 100:
        return f"{name}: its unit is not a text of at most 100 characters"
    if not isinstance(printed, str) or len(printed) > MAX_TEXT:
        return f"{name}: its printed figure is not a text"
    if kind not in KINDS or direction not in DIRECTIONS:
        return f"{name}: kind or direction is not one of {', '.join(KINDS)} / {', '.join(DIRECTIONS)}"
    interval = raw.get("interval")
    if interval is None:
        return StoredClaim(name, value, unit, printed, kind, direction)
    if not isinstance(interval, dict):
        return f"{name}: its interval is not a JSON object"
    low: Any = interval.get("low")
    high: Any = interval.get("high")
    level: Any = interval.get("confidence")
    method: Any = interval.get("method")
    if not (_finite(low) and _finite(high) and low <= high):
        return f"{name}: its interval's low and high are not finite numbers with low <= high"
    if not (_finite(level) and 0 < level < 1):
        return f"{name}: its interval's confidence is not a number between 0 and 1"
    if not isinstance(method, str) or not 0 < len(method) <= 200:
        return f"{name}: its interval's method is not a text of 1 to 200 characters"
    return StoredClaim(name, value, unit, printed, kind, direction, float(low), float(high), float(level), method)
