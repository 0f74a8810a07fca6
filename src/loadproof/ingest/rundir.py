"""A `ParsedRun` written as a run directory (docs/import.md, "What an imported run holds").

Every imported run is a load run (`metrics.load.SCENARIO`), so `report`, `compare` with a loadproof load run,
`export`, `verify` and the results store take it as they take one. Its manifest says where it came from
(`Manifest.source`: the tool, its version, the file and its sha256, whether it holds per-request data, the
figures the file states), its plan is the workload the file states (`plans.load.LoadPlan`: the arrival, the rate
or the streams, the lengths, what the tool drew), and its profile is `--profile`'s, where one was given: the
deployment, which the file does not name, for `sim calibrate`. Its start and end wall times are the tool's where
the file states them (`ParsedRun.started`, `ended`; `Source.dated` names the field), so `history` and the store
date it by when it ran; where the file states none, the start is left out and the end is the import's, and
`Source.dated` says so (`DATED_BY_IMPORT`).

With per-request data each request is a `RequestRecord` on a clock of the run's own (the tool's times, shifted so
the first send is 1 s), its chunk times those the file gives, so the load claims, their intervals included, are
recomputed from the records as for a run loadproof measured. Without, the run has no records and its claims are
the stated figures (`metrics.imported`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from loadproof.config.profile import Profile
from loadproof.ingest.parsed import Length, ParsedRun, Request, Workload
from loadproof.metrics.load import SCENARIO
from loadproof.plans import attach_plan
from loadproof.plans.load import LoadLengths, LoadPlan
from loadproof.protocol.routes import ROUTES, route_of
from loadproof.records import RequestRecord
from loadproof.rundir import Manifest
from loadproof.rundir.manifest import TargetInfo
from loadproof.rundir.source import DATED_BY_IMPORT, Source
from loadproof.store.run_dir import RunWriter, new_run_id
from loadproof.units import NS_PER_S

ORIGIN_NS = NS_PER_S  # the first send, on the run's clock: a send time of 0 reads as never sent
WALL_TIME = "%Y-%m-%dT%H:%M:%SZ"  # the manifest's start and end wall times (UTC)


def write_run(parsed: ParsedRun, out_root: Path, profile: Profile | None = None) -> Path:
    """The run directory of `parsed` under `out_root`, its manifest written last (see the module doc)."""
    out_root.mkdir(parents=True, exist_ok=True)
    writer = RunWriter(out_root / new_run_id(f"import-{parsed.tool}"))
    records = records_of(parsed) if parsed.requests is not None else []
    try:
        for record in records:
            writer.append(record)
        manifest = manifest_of(parsed, writer.run_id, records, profile)
        writer.write_manifest(manifest)
    finally:
        writer.close()
    return writer.path


def records_of(parsed: ParsedRun) -> list[RequestRecord]:
    """The file's requests in the order they were sent, on the run's clock."""
    requests = sorted(parsed.requests or [], key=lambda r: r.start_s)
    if not requests:
        return []
    t0 = min(
        min(r.start_s for r in requests),
        min((r.scheduled_s for r in requests if r.scheduled_s is not None), default=requests[0].start_s),
    )

    def ns(t: float) -> int:
        return ORIGIN_NS + round((t - t0) * NS_PER_S)

    return [_record(parsed, i, r, ns) for i, r in enumerate(requests)]


def _record(parsed: ParsedRun, i: int, r: Request, to_ns: Callable[[float], int]) -> RequestRecord:
    ok = r.ok and r.first_s is not None and r.last_s is not None
    chunks = [to_ns(t) for t in r.chunk_s] if ok else []
    first = to_ns(r.first_s) if ok and r.first_s is not None else None
    last = to_ns(r.last_s) if ok and r.last_s is not None else None
    return RequestRecord(
        request_id=f"{parsed.tool}-{i + 1}",
        endpoint=parsed.workload.endpoint,
        scenario=SCENARIO,
        ok=ok,
        error_kind=None if ok else "imported",
        error_message=None if ok else (r.error or "failed (the file says no more)"),
        send_ns=to_ns(r.start_s),
        first_token_ns=first,
        last_token_ns=last,
        end_ns=max(to_ns(r.end_s), last or 0),
        prompt_tokens=r.prompt_tokens,
        output_tokens=r.output_tokens,
        num_chunks=len(chunks),
        chunk_usage=False,
        intended_send_ns=to_ns(r.scheduled_s) if r.scheduled_s is not None else None,
        chunk_ns=chunks,
        chunk_tokens=[0] * len(chunks),
    )


def plan_of(workload: Workload, records: list[RequestRecord], max_model_len: int | None) -> LoadPlan:
    """The load plan of the workload the file states (what the tool drew: its requests, its span)."""
    sends = [r.intended_send_ns if r.intended_send_ns is not None else r.send_ns for r in records]
    endpoint = workload.endpoint if workload.endpoint in ROUTES else None
    every = workload.rate_rps is None
    return LoadPlan(
        arrival="poisson" if workload.arrival == "concurrent" else workload.arrival,
        rate_rps=workload.rate_rps,
        all_at_once=every,
        burstiness=workload.burstiness,
        num_requests=workload.num_requests,
        duration_s=workload.duration_s,
        max_concurrency=workload.max_concurrency,
        seed=workload.seed,
        planned_requests=len(records) if records else (workload.num_requests or 0),
        schedule_span_s=round((max(sends) - min(sends)) / NS_PER_S, 9) if sends else 0.0,
        input_tokens=_lengths(workload.input_tokens),
        output_tokens=_lengths(workload.output_tokens),
        ignore_eos=workload.ignore_eos,
        endpoint=endpoint,
        route=route_of(endpoint).traits() if endpoint is not None else None,
        max_model_len=max_model_len,
        steady_window=bool(records),
    )


def _lengths(length: Length) -> LoadLengths:
    return LoadLengths(kind=length.kind or "dataset", a=length.a, b=length.b, text=length.text)


def manifest_of(parsed: ParsedRun, run_id: str, records: list[RequestRecord], profile: Profile | None) -> Manifest:
    max_model_len = profile.model.max_model_len if profile is not None else None
    manifest = Manifest(
        run_id=run_id,
        scenario=SCENARIO,
        target=TargetInfo(
            url=parsed.url, model=parsed.model, endpoint=parsed.workload.endpoint, token_counts=parsed.tool
        ),
        versions={"loadproof": _version(), parsed.tool: parsed.version},
        start_wall_time=parsed.started.astimezone(UTC).strftime(WALL_TIME) if parsed.started else None,
        end_wall_time=(parsed.ended if parsed.started and parsed.ended else datetime.now(UTC)).strftime(WALL_TIME),
        profile=profile.model_dump(mode="json") if profile is not None else None,
        num_records=len(records),
        source=Source(
            tool=parsed.tool,
            version=parsed.version,
            file=parsed.file,
            sha256=parsed.sha256,
            per_request=parsed.requests is not None,
            part=parsed.part,
            imported_by=_version() or "",
            stated=list(parsed.stated),
            dated=parsed.dated if parsed.started is not None and parsed.dated else DATED_BY_IMPORT,
        ),
    )
    attach_plan(manifest, plan_of(parsed.workload, records, max_model_len))
    return manifest


def _version() -> str | None:
    try:
        return metadata.version("loadproof")
    except metadata.PackageNotFoundError:
        return None
