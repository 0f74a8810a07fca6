"""`loadproof track RUN --mlflow URI`: one MLflow run per loadproof run (the `mlflow` extra).

What it logs (`record`, pure, no mlflow needed):

- params: `scenario`, `profile`, `model`, `engine`, `engine_version`, `route`, `plan_version`, `loadproof_version`,
  `git`, each option of the command as `option.<name>` and each plain field of the plan as `plan.<name>` (a list
  or a table as its JSON); none that the run did not record. From the manifest as `publish` sanitizes it, so no
  URL, host, path or secret leaves. A value past MLflow's 6,000 characters is cut and ends in `...`.
- metrics: every figure and count of claims.json under its own name, and its interval, where it has one, as
  `<name>.low` and `<name>.high` (numbers, so MLflow plots and compares them beside the figure); step 0, stamped
  with the run's end.
- tags: `loadproof.run_id`, `loadproof.scenario`, `loadproof.source` (loadproof, or the tool an imported run
  came from), `loadproof.verdict` (PASS or FAIL, where the run has a verdict), `loadproof.artifact` (bundle or
  run); each interval's level and method as `<name>.interval` ("95% order statistics ..."); each fact, verdict
  and criterion as `<name>` with its printed value.
- the artifact: the folder given, under `bundle/` (a bundle, which `loadproof verify` checks where it lands) or
  `run/` (a run directory, as it is on disk: publish a bundle first for a server others read).

A claim's name is its key where MLflow allows it (letters, digits, `_ - . /` and space, at most 250 characters,
read as a path only as itself); any other character becomes `_` (a slash too, where the name would read as another
path), and the tag `loadproof.renamed.<key>` holds the claim's name.

Idempotent by run id: the experiment's runs are searched for `loadproof.run_id`; a run already there is said and
nothing is logged again. A run whose logging failed is deleted, so the next `track` starts it afresh.
"""

from __future__ import annotations

import contextlib
import io
import json
import posixpath
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from loadproof.errors import UsageError
from loadproof.trackers.source import TrackedRun

EXPERIMENT = "loadproof"
RUN_ID_TAG = "loadproof.run_id"
MAX_KEY = 250  # MLflow's longest param, metric or tag key
MAX_PARAM = 6000  # its longest param value
MAX_TAG = 8000  # its longest tag value
PARAMS_PER_BATCH = 100  # log_batch takes at most 100 params and tags, 1,000 metrics, 1,000 in all
METRICS_PER_BATCH = 1000
PROBE_TIMEOUT_S = 5.0
_BAD_KEY_CHARS = re.compile(r"[^A-Za-z0-9_\-./ ]")


@dataclass
class Record:
    """What one loadproof run becomes in MLflow."""

    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Tracked:
    uri: str
    experiment_id: str
    mlflow_run_id: str
    new: bool  # False: the run was already there, nothing was logged
    metrics: int = 0
    params: int = 0


def key(name: str) -> str:
    """`name` as an MLflow key: its characters kept where MLflow allows them (colons too, on no platform), others
    `_`, at most 250 long; a name that reads as another path (`a//b`, `a/./b`, `..`) has its slashes `_`."""
    cleaned = _BAD_KEY_CHARS.sub("_", name)[:MAX_KEY] or "_"
    normal = posixpath.normpath(cleaned)
    if normal != cleaned or normal.startswith(("..", "/")) or normal == ".":
        cleaned = cleaned.replace("/", "_")
    return cleaned.replace("..", "._") if cleaned.startswith("..") or cleaned == "." else cleaned


def _cut(value: str, limit: int) -> str:
    return value if len(value) <= limit else value[: limit - 3] + "..."


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def record(tracked: TrackedRun) -> Record:
    """The params, metrics and tags of `tracked` (see the module's docstring)."""
    out = Record()
    published = tracked.published
    target, versions = _table(published, "target"), _table(published, "versions")
    plain = {
        "scenario": tracked.scenario,
        "profile": tracked.profile,
        "model": tracked.model,
        "engine": tracked.engine_kind,
        "engine_version": tracked.engine_version,
        "route": target.get("endpoint"),
        "plan_version": published.get("plan_version"),
        "loadproof_version": versions.get("loadproof"),
        "git": published.get("git"),
    }
    _put(out.params, plain.items(), MAX_PARAM)
    _put(out.params, ((f"option.{k}", v) for k, v in _table(published, "options").items()), MAX_PARAM)
    plan = _table(published, "plan")
    scalar = ((f"plan.{k}", v) for k, v in plan.items() if not isinstance(v, (dict, list)) or len(_text(v)) <= 500)
    _put(out.params, scalar, MAX_PARAM)

    out.tags.update(
        {
            RUN_ID_TAG: _cut(tracked.run_id, MAX_TAG),
            "loadproof.scenario": tracked.scenario,
            "loadproof.source": tracked.source,
            "loadproof.artifact": "bundle" if tracked.bundled else "run",
        }
    )
    if tracked.verdict is not None:
        out.tags["loadproof.verdict"] = tracked.verdict
    taken = set(out.tags) | set(out.params)
    for claim in tracked.claims:
        name = _distinct(key(claim.name), taken)
        if name != claim.name:
            out.tags[_distinct(key(f"loadproof.renamed.{name}"), taken)] = _cut(claim.name, MAX_TAG)
        number = claim.number
        if number is None:
            out.tags[name] = _cut(claim.printed, MAX_TAG)
            continue
        out.metrics[name] = number
        if claim.interval is not None:
            out.metrics[_distinct(key(f"{name}.low"), taken)] = float(claim.interval.low)
            out.metrics[_distinct(key(f"{name}.high"), taken)] = float(claim.interval.high)
            level = f"{claim.interval.confidence:.0%} {claim.interval.method}"
            out.tags[_distinct(key(f"{name}.interval"), taken)] = _cut(level, MAX_TAG)
    return out


def _table(fields: dict[str, Any], name: str) -> dict[str, Any]:
    value = fields.get(name)
    return value if isinstance(value, dict) else {}


def _put(into: dict[str, str], items: Any, limit: int) -> None:
    for name, value in items:
        if value is None or value == "":
            continue
        into[key(name)] = _cut(_text(value), limit)


def _distinct(name: str, taken: set[str]) -> str:
    """`name`, or `name_2`, `name_3`... where a key is already taken (two claim names that clean alike)."""
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name[: MAX_KEY - 1 - len(str(n))]}_{n}"
    taken.add(out)
    return out


def probe(uri: str) -> None:
    """A tracking server at an http(s) URI answers /health, or one UsageError saying it does not (MLflow's own
    client retries for minutes first)."""
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=PROBE_TIMEOUT_S) as reply:
            if reply.status == 200:
                return
            reason = f"HTTP {reply.status}"
    except urllib.error.HTTPError as exc:
        reason = f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        reason = str(getattr(exc, "reason", exc))
    raise UsageError(f"--mlflow {uri}: no MLflow tracking server answers there ({reason})")


def track(tracked: TrackedRun, uri: str, experiment: str = EXPERIMENT) -> Tracked:
    """Log `tracked` to the MLflow tracking server at `uri` (or a local store URI), once per run id."""
    try:
        from mlflow.exceptions import MlflowException  # optional: the loadproof[mlflow] extra
    except ImportError:
        raise UsageError("--mlflow needs the mlflow package: pip install 'loadproof[mlflow]'") from None
    probe(uri)
    try:
        return _track(tracked, uri, experiment)
    except MlflowException as exc:
        first = str(exc.message).strip().splitlines()[0] if str(exc.message).strip() else type(exc).__name__
        raise UsageError(f"--mlflow {uri}: {first}") from None


def _track(tracked: TrackedRun, uri: str, experiment: str) -> Tracked:
    from mlflow.entities import Metric, Param, RunTag  # optional: the loadproof[mlflow] extra, found by `track`
    from mlflow.tracking import MlflowClient  # optional: the loadproof[mlflow] extra, found by `track`

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    quoted = tracked.run_id.replace("'", "\\'")
    for earlier in client.search_runs([experiment_id], filter_string=f"tags.`{RUN_ID_TAG}` = '{quoted}'"):
        if earlier.info.status == "FINISHED":
            return Tracked(uri, experiment_id, earlier.info.run_id, new=False)
        client.delete_run(earlier.info.run_id)  # a track that failed half-way: started afresh
    logged = record(tracked)
    start_ns, end_ns = tracked.start_ns(), tracked.end_ns()
    stamp = (end_ns // 1_000_000) if end_ns is not None else int(time.time() * 1000)
    run = client.create_run(
        experiment_id,
        start_time=start_ns // 1_000_000 if start_ns is not None else None,
        tags={RUN_ID_TAG: logged.tags[RUN_ID_TAG]},
        run_name=tracked.run_id,
    )
    run_id = run.info.run_id
    try:
        params = [Param(k, v) for k, v in logged.params.items()]
        tags = [RunTag(k, v) for k, v in logged.tags.items()]
        metrics = [Metric(k, v, stamp, 0) for k, v in logged.metrics.items()]
        for i in range(0, len(params), PARAMS_PER_BATCH):
            client.log_batch(run_id, params=params[i : i + PARAMS_PER_BATCH])
        for i in range(0, len(tags), PARAMS_PER_BATCH):
            client.log_batch(run_id, tags=tags[i : i + PARAMS_PER_BATCH])
        for i in range(0, len(metrics), METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=metrics[i : i + METRICS_PER_BATCH])
        client.log_artifacts(run_id, str(tracked.artifact), "bundle" if tracked.bundled else "run")
        with contextlib.redirect_stdout(io.StringIO()):  # its "View run ... at" lines: the command says it in one
            client.set_terminated(run_id, "FINISHED", end_time=stamp if end_ns is not None else None)
    except BaseException:
        client.delete_run(run_id)
        raise
    return Tracked(uri, experiment_id, run_id, new=True, metrics=len(metrics), params=len(params))
