"""`publish(run_dirs, out)`: a sanitized, checksummed bundle whose every claim `verify` can recompute offline.

A rate search or sweep folder (`run load --search rate` / `--sweep`) publishes as its trial runs plus a
series entry: bundle.json's `series` lists the trial folders in order, and for a search
`series/<name>/claims.json` holds `load.search.*` recomputed from the published trials, which `verify`
recomputes again (docs/publish-and-verify.md, "Series"). An interrupted search's rate is a lower bound, not
a result: publish refuses it unless asked (`allow_interrupted`), and then its entry says `interrupted: true`
and its claims name the rate `load.search.rate_lower_bound_rps`.

Per run the bundle holds the run's data sanitized by each field's declared kind (numbers untouched),
the manifest with a `publication` block of provenance, claims.json recomputed from the sanitized data,
and report.md rendered from it; bundle.json lists the runs and SHA256SUMS covers every file.

Every file is sanitized by the declared kind of each field (publish.fields, publish.sanitize). Model
output is not published. `output_text` is cut down to the planted values (the plan's fields its
scenario declares `planted`, public already) that the answer stated in its first 200 characters:
exactly what the capacity and interference probe checks read, so those claims still recompute, and
nothing else. A reasoning model's `reasoning_text` is dropped, and of its tool calls only the names stay
(the validity verdicts in `output_valid` are numbers, and stay).

Before the bundle appears at `out` it must pass three checks, or publish fails and leaves nothing:
the claims recomputed from the sanitized data equal the claims of the original run (sanitizing must
never move a number), no secret or host name publish knows of is left in any file in any encoding
(publish.leaks), and `verify` passes on the finished bundle.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from loadproof import __version__
from loadproof.errors import LoadproofError, RunDirError, UsageError
from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim, claims_payload
from loadproof.metrics.load_series import judge_trials, lower_bound, recompute_search, trial_of
from loadproof.publish.fields import PLAN, PLANTED, declarations, values_of_kind
from loadproof.publish.leaks import find_leak, known_secrets
from loadproof.publish.sanitize import Sanitizer
from loadproof.publish.shapes import PLACEHOLDERS
from loadproof.report.build import REPORT, render_markdown
from loadproof.rundir import Manifest
from loadproof.rundir.bundle import FORMAT, Bundle, BundleRun, BundleSeries
from loadproof.rundir.manifest import Publication as Provenance
from loadproof.rundir.manifest import TelemetryInfo
from loadproof.rundir.series import RateSearch
from loadproof.store.files import ZST, compressed
from loadproof.store.run_dir import (
    ANSWERS,
    CHUNKS,
    EVENTS,
    MANIFEST,
    METRICS,
    REQUESTS,
    TELEMETRY,
    Run,
    load_run,
    read_jsonl,
    write_claims,
)
from loadproof.store.schema import bundle_json, manifest_json, read_manifest
from loadproof.store.series import SEARCH_JSON, SWEEP_JSON, read_rate_search, read_sweep
from loadproof.verify import verify
from loadproof.verify.checksums import write_sums
from loadproof.verify.layout import BUNDLE_JSON, RUNS_DIR, SERIES_DIR
from loadproof.workloads.answer_window import ANSWER_WINDOW_CHARS  # what the probe claims read of an answer

DATA_FILES = (REQUESTS, CHUNKS, METRICS, EVENTS, TELEMETRY, ANSWERS)  # answers: quality runs' scored items
RAW_DATA_NOTE = (
    "raw data is not rounded: times are integer ns on each run's monotonic clock, token counts "
    "integers, samples as recorded; only the printed figures in claims.json are rounded"
)


@dataclass
class PublishedRun:
    run_id: str
    folder: str
    source: Path
    num_claims: int
    num_torn_lines: int


@dataclass
class Series:
    """A search or sweep folder given to publish: its trial run directories in order."""

    kind: str  # "search" or "sweep"
    source: Path
    trials: list[Path]
    attainment: float | None = None  # a search's target
    interrupted: bool = False  # a search stopped before it finished: its rate a lower bound
    decision: str | None = None  # a search's rule: interval; None: the point value (before #41)


@dataclass
class Publication:
    path: Path
    runs: list[PublishedRun] = field(default_factory=list)
    series: list[BundleSeries] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a reader must know of a published figure (a bound)


def expand_series(paths: Sequence[Path], allow_interrupted: bool = False) -> tuple[list[Path], list[Series]]:
    """The run directories to publish, a search or sweep folder replaced by its trial runs, and the series;
    an interrupted search only with `allow_interrupted` (UsageError otherwise: its rate is a lower bound)."""
    runs: list[Path] = []
    series: list[Series] = []
    for path in paths:
        kind = "search" if (path / SEARCH_JSON).is_file() else "sweep" if (path / SWEEP_JSON).is_file() else None
        if kind is None:
            runs.append(path)
            continue
        name = SEARCH_JSON if kind == "search" else SWEEP_JSON
        try:  # through the reader of its version: a search of before `interrupted` was recorded was not
            summary = read_rate_search(path / name) if kind == "search" else read_sweep(path / name)
        except RunDirError as exc:
            raise UsageError(f"{path / name} is not a {kind} summary loadproof wrote: {exc}") from None
        entries = summary.trials if isinstance(summary, RateSearch) else summary.points
        trials = [path / entry.run_dir for entry in entries]
        attainment = summary.attainment if isinstance(summary, RateSearch) else None
        interrupted = isinstance(summary, RateSearch) and summary.interrupted
        if interrupted and not allow_interrupted:
            raise UsageError(
                f"publish refused, no bundle written: {path} is an interrupted search, so its rate is a lower bound, "
                "not a result; --allow-interrupted publishes it as one (load.search.rate_lower_bound_rps)"
            )
        for trial in trials:
            if trial.parent != path or not trial.is_dir():
                raise UsageError(f"{path / name} names a trial that is not a run folder inside it: {trial.name}")
        if not trials:
            raise UsageError(f"{path}: the {kind} has no finished trial; nothing to publish")
        runs.extend(trials)
        decision = summary.decision if isinstance(summary, RateSearch) and summary.decision == "interval" else None
        series.append(Series(kind, path, trials, attainment, interrupted, decision))
    return runs, series


def publish(
    run_dirs: Sequence[Path],
    out: Path,
    engine_image: str | None = None,
    sanitizer: Sanitizer | None = None,
    allow_interrupted: bool = False,
) -> Publication:
    if not run_dirs:
        raise UsageError("publish needs at least one RUN_DIR")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file; --out names a new bundle folder")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} already exists and is not empty; publish writes a new bundle folder")
    run_dirs, series = expand_series(run_dirs, allow_interrupted)
    sources = [(path, *_load(path)) for path in run_dirs]
    sanitizer = sanitizer or Sanitizer()
    for path, run, _ in sources:
        manifest = manifest_json(run.manifest)
        declared = declarations(manifest.get("scenario"))
        sanitizer.learn_declared(manifest, declared[MANIFEST])
        for name in DATA_FILES:
            for row in read_jsonl(path / name)[0]:
                sanitizer.learn_declared(row, declared[name])
    if engine_image:
        sanitizer.learn(engine_image)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        publication = Publication(path=out)
        entries = []
        for path, run, claims in sources:
            published, entry = _publish_run(staging, path, run, claims, sanitizer, engine_image, publication)
            publication.runs.append(published)
            entries.append(entry)
        for one in series:
            publication.series.append(_publish_series(staging, one, publication, sanitizer))
        described = Bundle(
            format=FORMAT,
            format_version=Bundle.version,
            loadproof_version=__version__,
            published_wall_time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            engine_image=sanitizer.text(engine_image) if engine_image else None,
            raw_data=RAW_DATA_NOTE,
            runs=entries,
            series=publication.series,
        )
        (staging / BUNDLE_JSON).write_text(
            json.dumps(bundle_json(described), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        write_sums(staging)
        leak = find_leak(
            staging,
            known_secrets(sanitizer),
            sanitizer.known_hosts,
            tool_text=f"{RAW_DATA_NOTE} loadproof {__version__}",
        )
        if leak:
            raise UsageError(f"publish refused, no bundle written: {leak}, which the sanitizer should have removed")
        check = verify(staging)
        if not check.ok:
            first = next(iter([p.line() for p in check.problems] + [c.line() for c in check.checks if not c.ok]))
            raise UsageError(f"publish self-check failed, no bundle written: {first}")
        if out.exists():
            out.rmdir()  # empty, checked above
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return publication


def _load(path: Path) -> tuple[Run, list[Claim]]:
    try:
        run = load_run(path)
    except LoadproofError:
        raise
    except Exception as exc:
        raise UsageError(f"{path} does not load as a run: {type(exc).__name__}: {exc}") from None
    try:
        claims = compute_claims(run)
    except LoadproofError as exc:
        raise UsageError(f"{path}: claims cannot be computed: {exc}") from None
    except Exception as exc:
        raise UsageError(f"{path}: claims cannot be computed: {type(exc).__name__}: {exc}") from None
    if not claims:
        raise UsageError(f"{path} produces no claims; nothing to publish")
    return run, claims


def _publish_run(
    staging: Path,
    source: Path,
    run: Run,
    original: list[Claim],
    sanitizer: Sanitizer,
    engine_image: str | None,
    publication: Publication,
) -> tuple[PublishedRun, BundleRun]:
    raw = manifest_json(run.manifest)
    declared = declarations(run.manifest.scenario)
    sanitized = read_manifest(sanitizer.declared(raw, declared[MANIFEST]), source / MANIFEST)
    run_id = sanitized.run_id or sanitizer.text(source.name)
    folder = re.sub(r"[^A-Za-z0-9._-]", "_", run_id).strip("._") or "run"
    if any(p.folder == folder for p in publication.runs):
        raise UsageError(f"two runs would publish as {RUNS_DIR}/{folder} (the same run given twice?): {source}")
    target = staging / RUNS_DIR / folder
    target.mkdir(parents=True)
    expected = list(dict.fromkeys(values_of_kind(raw.get(PLAN), declared[MANIFEST].child(PLAN)[0], PLANTED)))
    torn = 0
    for name in DATA_FILES:
        rows, num_torn = read_jsonl(source / name)
        torn += num_torn
        if not rows and not (source / name).is_file():
            continue
        if name == REQUESTS:
            rows = [_without_output(row, expected) for row in rows]
        _write_jsonl(target / name, [sanitizer.declared(row, declared[name]) for row in rows])
    made_by = provenance(sanitized, sanitizer.text(engine_image) if engine_image else None, torn)
    manifest = msgspec.structs.replace(sanitized, run_id=run_id, publication=made_by)
    (target / MANIFEST).write_text(
        json.dumps(manifest_json(manifest), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )

    published_run = load_run(target)
    try:
        claims = compute_claims(published_run)
    except Exception as exc:
        raise UsageError(
            f"{source}: sanitizing broke the claims ({type(exc).__name__}: {exc}); no bundle written"
        ) from None
    difference = claims_difference(original, claims, sanitizer)
    if difference:
        raise UsageError(f"{source}: sanitizing changed a claim, no bundle written: {difference}")
    write_claims(target, claims_payload(run_id, claims))
    (target / REPORT).write_text(render_markdown(published_run, claims), encoding="utf-8")
    entry = BundleRun(
        run_id=run_id,
        path=f"{RUNS_DIR}/{folder}",
        scenario=manifest.scenario,
        num_records=len(published_run.records),
        num_claims=len(claims),
        provenance=made_by,
    )
    return PublishedRun(run_id, folder, source, len(claims), torn), entry


def _publish_series(staging: Path, series: Series, publication: Publication, sanitizer: Sanitizer) -> BundleSeries:
    """bundle.json's entry for a search or sweep; a search's claims recomputed from its published trials
    (they must equal those recomputed from the original folder) in series/<name>/claims.json."""
    folder_of = {p.source: p.folder for p in publication.runs}
    name = re.sub(r"[^A-Za-z0-9._-]", "_", sanitizer.text(series.source.name)).strip("._") or series.kind
    if any(s.series_id == name for s in publication.series):
        raise UsageError(f"two series would publish as {name} (the same folder given twice?): {series.source}")
    runs = [f"{RUNS_DIR}/{folder_of[t]}" for t in series.trials]
    if series.kind != "search":
        return BundleSeries(kind="sweep", series_id=name, runs=runs)
    entry = BundleSeries(kind="search", series_id=name, runs=runs, path=f"{SERIES_DIR}/{name}")
    trials = [trial_of(load_run(staging / rel)) for rel in runs]
    try:
        rows, claims = judge_trials(trials, series.attainment or 0.0, series.interrupted, series.decision)
        _, _, original = recompute_search(series.source)
    except (ValueError, LoadproofError) as exc:
        raise UsageError(f"{series.source}: the search's claims cannot be recomputed: {exc}") from None
    difference = claims_difference(original, claims, sanitizer)
    if difference:
        raise UsageError(f"{series.source}: publishing changed a search claim, no bundle written: {difference}")
    target = staging / SERIES_DIR / name
    target.mkdir(parents=True)
    write_claims(target, claims_payload(name, claims))
    entry.attainment, entry.interrupted, entry.decision = series.attainment, series.interrupted, series.decision
    bound = lower_bound(claims, rows)
    if bound is not None:
        publication.notes.append(f"series {name}: {bound}")
    return entry


def provenance(manifest: Manifest, engine_image: str | None, torn: int) -> Provenance:
    """What produced the run, from the (sanitized) manifest: versions, engine, driver, GPU model; and how many
    torn lines publish dropped."""
    telemetry = manifest.telemetry or TelemetryInfo()
    profile_engine = (manifest.profile or {}).get("engine")
    return Provenance(
        published_by=f"loadproof {__version__}",
        loadproof=manifest.versions.get("loadproof"),
        git=manifest.git,
        python=manifest.versions.get("python"),
        engine=(manifest.engine.kind if manifest.engine else None)
        or (profile_engine if isinstance(profile_engine, str) else None),
        engine_version=manifest.engine_version,
        engine_image=engine_image,
        torch=manifest.versions.get("torch"),
        driver=telemetry.driver,
        gpu_models=sorted({n for n in telemetry.names or [] if n is not None}),  # a refused name: None
        num_gpus=telemetry.gpus or None,  # no GPU seen: null, as in every bundle before (0 was never written)
        model=manifest.target.model,
        num_torn_lines_dropped=torn,
        raw_data=RAW_DATA_NOTE,
    )


def claims_difference(before: list[Claim], after: list[Claim], sanitizer: Sanitizer) -> str | None:
    """The first way the sanitized run's claims differ from the original's; None when they agree.

    Numbers, units and the printed figures of numbers must be identical. A name or a string value built
    from a private string (a family called after a host, a skip reason naming a path) may differ only by
    the sanitizer's placeholders.
    """
    if len(before) != len(after):
        return f"{len(before)} claims before sanitizing, {len(after)} after"
    for b, a in zip(before, after):
        if a.name != b.name and not any(p in a.name for p in PLACEHOLDERS):
            return f"claim {sanitizer.text(b.name)} became {a.name}"  # the message is sanitized too
        if isinstance(b.value, str) and isinstance(a.value, str):
            same = a.value == sanitizer.text(b.value) and a.printed == sanitizer.text(b.printed)
        else:
            same = _same_value(b.value, a.value) and a.printed == b.printed
        if b.unit != a.unit or not same:
            return (
                f"{sanitizer.text(b.name)} was {sanitizer.text(repr(b.value))} ({sanitizer.text(b.printed)}), "
                f"is {a.value!r} ({a.printed}) after sanitizing"
            )
    return None


def _same_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _without_output(row: dict[str, Any], expected: list[str]) -> dict[str, Any]:
    row = dict(row)
    row.pop("reasoning_text", None)  # the model's own words: never published
    if isinstance(row.get("tool_calls"), list):  # which tools were called, not what with
        row["tool_calls"] = [
            {k: v for k, v in c.items() if k != "arguments"} if isinstance(c, dict) else c for c in row["tool_calls"]
        ]
    text = row.pop("output_text", None)
    if isinstance(text, str) and expected:
        head = text[:ANSWER_WINDOW_CHARS]
        stated = list(dict.fromkeys(e for e in expected if e in head))
        if stated:
            row["output_text"] = "\n".join(stated)
    return row


def _write_jsonl(path: Path, rows: list[Any]) -> None:
    """Stored compressed, as NAME.jsonl.zst (store.files reads either form; the leak check reads the content)."""
    text = "".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows)
    path.with_name(path.name + ZST).write_bytes(compressed(text.encode("utf-8")))
