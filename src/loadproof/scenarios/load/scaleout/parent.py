"""The parent of a scaled-out load run: it plans the run as one process would, splits the schedule among
the workers, starts them (`processes` or `ray_tasks`) behind one start barrier, samples the engine's
/metrics meanwhile, and merges the workers' records into the run directory on its own clock."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from msgspec import UNSET

from loadproof.errors import EnvironmentFailure
from loadproof.plans import attach_plan
from loadproof.plans.load import LoadPlan
from loadproof.rundir import Manifest
from loadproof.rundir.manifest import ParentClock, Schedule, WorkerInfo, WorkersInfo
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.scaleout.clock import (
    OFFSET_SAMPLES,
    ClockOffset,
    alignment_bound_ns,
    measure_offset,
    merge,
    shift_ns,
    to_worker_clock,
)
from loadproof.scenarios.load.scaleout.processes import Processes
from loadproof.scenarios.load.scaleout.protocol import (
    RECORDS,
    WorkerJob,
    WorkerResult,
    job_of,
    read_spool,
    result_of,
    spooled_clock,
)
from loadproof.scenarios.load.scaleout.ray_tasks import RayTasks
from loadproof.scenarios.load.schedule import Planned, describe
from loadproof.scenarios.target import Target
from loadproof.store.run_dir import RunWriter
from loadproof.units import NS_PER_S

SPOOL = "workers"  # the workers' spools inside the run directory while it runs; removed after the merge
SPLIT = "round-robin by schedule index: worker k of N sends requests k, k+N, k+2N, ..."


class LoadRun(Protocol):
    """What the parent needs of the load scenario it runs for."""

    options: LoadOptions
    target: Target
    metric_names: Any
    status: Callable[[str], None]

    @property
    def family(self) -> str: ...

    def plan(self) -> tuple[LoadPlan, list[Planned]]: ...


def split_schedule(requests: list[Planned], workers: int) -> list[list[Planned]]:
    """Round-robin by index: worker k gets requests k, k+N, k+2N, ... (each keeps its index and offset)."""
    if workers < 1:
        raise ValueError("at least one worker")
    return [requests[k::workers] for k in range(workers)]


def split_concurrency(cap: int | None, workers: int) -> list[int | None]:
    """A --max-concurrency cap shared out: C // N each, the first C mod N one more (None: no cap)."""
    if cap is None:
        return [None] * workers
    if cap < workers:
        raise ValueError(f"--max-concurrency {cap} gives no slot to some of {workers} workers")
    return [cap // workers + (k < cap % workers) for k in range(workers)]


async def run_scaled_out(scenario: LoadRun, writer: RunWriter, manifest: Manifest, live: LiveStatus) -> None:
    """A load run with --workers N or --ray-address: plan here, send in the workers, merge here."""
    opts = scenario.options
    backend: Processes | RayTasks = RayTasks(opts.ray_address) if opts.ray_address else Processes()
    backend.connect()  # Ray: fails here, before the plan is built, when the cluster cannot be reached
    try:
        started = time.perf_counter()
        plan, requests = scenario.plan()
        attach_plan(manifest, plan)
        total = live.planned = len(requests)
        n = min(backend.count(opts.workers), total)
        shards = split_schedule(requests, n)
        caps = split_concurrency(opts.max_concurrency, n)
        parent_pid = os.getpid() if backend.how == "processes" else None
        jobs = [
            job_of(k, scenario.target.url, shard, caps[k], parent_pid, scenario.family)
            for k, shard in enumerate(shards)
        ]
        del requests, shards
        where = (
            f"{n} Ray tasks on {min(n, len(backend.nodes))} node(s) of {opts.ray_address}"
            if isinstance(backend, RayTasks)
            else f"{n} worker processes"
        )
        workers = manifest.workers = WorkersInfo(
            count=n, how=backend.how, ray_address=opts.ray_address, split=SPLIT, max_concurrency=caps
        )
        writer.write_manifest(manifest)
        scenario.status(
            f"schedule: {plan.planned_requests} requests over {plan.schedule_span_s:.1f} s "
            f"({describe(plan)}), built in {time.perf_counter() - started:.2f} s; split round-robin "
            f"among {where}"
        )
        spool_root = writer.path / SPOOL
        spools = [spool_root / f"w{k}" for k in range(n)]
        parent = measure_offset()
        t0: list[int] = []

        def released(start_wall_ns: int) -> None:
            start = to_worker_clock(start_wall_ns, parent)
            t0.append(start)
            for job in jobs:
                writer.event("schedule_start", t_ns=start, worker=job.worker, planned=len(job.requests))
            live.phase("requests", end_ns=start + round(plan.schedule_span_s * NS_PER_S), detail=describe(plan))

        results: list[WorkerResult | None] = [None] * n
        completed = False
        async with scenario.target.scraper(
            scenario.metric_names,
            interval_s=opts.sample_interval_s or None,
            sink=writer.metric_sample,
        ) as scraper:
            live.watch_engine(scraper.samples)
            try:
                await backend.run(jobs, spools, scenario.target.api_key, released, live, parent)
                completed = True
            finally:
                results = [result_of(spool) for spool in spools]
                _merge_into(
                    writer,
                    manifest,
                    workers,
                    jobs,
                    spools,
                    results,
                    parent,
                    t0[0] if t0 else None,
                    completed,
                    backend.how,
                    scenario.status,
                    plan.schedule_span_s,
                )
                shutil.rmtree(spool_root, ignore_errors=True)
    finally:
        if isinstance(backend, RayTasks):
            backend.close()
    failed = [r for r in results if r is not None and r.error]
    missing = [job.worker for job, r in zip(jobs, results) if r is None]
    if failed:
        raise EnvironmentFailure(f"load worker {failed[0].worker} failed: {failed[0].error}")
    if missing:
        raise EnvironmentFailure(f"load worker {missing[0]} ended without a result (see the schedule in the manifest)")


def _merge_into(
    writer: RunWriter,
    manifest: Manifest,
    workers: WorkersInfo,
    jobs: list[WorkerJob],
    spools: list[Path],
    results: list[WorkerResult | None],
    parent: ClockOffset,
    t0: int | None,
    completed: bool,
    how: str,
    say: Callable[[str], None],
    span_s: float,
) -> None:
    """The workers' records merged into the run directory on the parent's clock; their schedule_end events;
    the manifest's `schedule` and `workers` (the clock alignment and its bound)."""
    shards = []
    per_worker = []
    for job, spool, result in zip(jobs, spools, results):
        clock = result.clock_start if result is not None else spooled_clock(spool)
        records = read_spool(spool / RECORDS) if clock is not None else []
        shift = shift_ns(clock, parent) if clock is not None else 0
        shards.append((records, shift))
        row = WorkerInfo(
            worker=job.worker, requests=len(job.requests), recorded=len(records), max_concurrency=job.max_concurrency
        )
        if result is not None:
            end = result.end_ns + shift
            row.pid, row.node, row.error = result.pid, result.node, result.error
            row.dispatched, row.failed, row.interrupted = result.dispatched, result.failed, result.interrupted
            row.late_start_ms = round(result.late_ns / 1e6, 3)
            writer.event(
                "schedule_end",
                t_ns=end,
                worker=job.worker,
                planned=len(job.requests),
                dispatched=result.dispatched,
                recorded=len(records),
                failed=result.failed,
                interrupted=result.interrupted,
            )
        if clock is not None:
            row.offset_ns, row.bracket_ns, row.shift_ns = clock.offset_ns, clock.bracket_ns, shift
            row.alignment_error_bound_ns = alignment_bound_ns(clock, parent)
            if result is not None and result.clock_end is not None:
                row.drift_ns = result.clock_end.offset_ns - clock.offset_ns
        per_worker.append(row)
    merged = merge(shards)
    for record in merged:
        writer.append(record)
    parent_end = measure_offset()
    bounds = [row.alignment_error_bound_ns for row in per_worker if row.alignment_error_bound_ns is not UNSET]
    bound = max(bounds) if bounds else None
    workers.start_ns = t0
    workers.clock = (
        "t_parent = t_worker + (offset_worker - offset_parent); offset = time_ns() - perf_counter_ns() "
        f"at the midpoint of the tightest of {OFFSET_SAMPLES} bracketed readings, each within ceil(bracket "
        "/ 2); the bound assumes one wall clock (one host, or hosts whose clocks agree)"
    )
    workers.alignment_error_bound_ns = bound
    workers.parent_clock = ParentClock(
        offset_ns=parent.offset_ns, bracket_ns=parent.bracket_ns, drift_ns=parent_end.offset_ns - parent.offset_ns
    )
    workers.per_worker = per_worker
    dispatched = sum(r.dispatched for r in results if r is not None)
    failed = sum(not r.ok for r in merged)
    interrupted = not completed or any(r is None or r.interrupted for r in results)
    last_offset = max((r.last_intended_offset_ns for r in results if r is not None), default=0)
    ended = max((r.end_ns + s for r, (_, s) in zip(results, shards) if r is not None), default=None)
    total = sum(len(job.requests) for job in jobs)
    manifest.schedule = Schedule(
        planned=total,
        dispatched=dispatched,
        recorded=len(merged),
        failed=failed,
        interrupted=interrupted,
        last_intended_offset_s=round(last_offset / NS_PER_S, 6),
        elapsed_s=round((ended - t0) / NS_PER_S, 6) if ended is not None and t0 else 0.0,
    )
    if bound is not None:
        say(
            f"workers: {len(jobs)} {'Ray tasks' if how == 'ray' else 'processes'}, records merged on this "
            f"process's clock within {bound / 1000:.1f} us (clock alignment bound)"
        )
    late = [r for r in results if r is not None and r.late_ns > 1_000_000]
    for r in late:
        say(f"worker {r.worker} reached the start {r.late_ns / 1e6:.1f} ms late (its send lag shows it)")
    if interrupted:
        say(
            f"schedule interrupted: sent {dispatched} of {total} requests (up to {last_offset / NS_PER_S:.1f} s of "
            f"{span_s:.1f} s), {len(merged)} recorded"
        )
    else:
        say(f"schedule: sent {dispatched} of {total} requests, {failed} failed")
