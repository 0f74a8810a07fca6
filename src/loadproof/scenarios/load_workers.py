"""Scale-out of `loadproof run load`: `--workers N` (processes on this host) and `--ray-address ADDR` (Ray
tasks spread over a Ray cluster's nodes, the `loadproof[ray]` extra). docs/scenarios.md, "load", "Scale-out".

The parent plans the run as a single process would (the schedule drawn from the seed, every prompt and
body built), then:

1. splits the schedule round-robin by index (`split_schedule`): worker k of N sends requests k, k+N,
   k+2N, ... Round-robin, not contiguous blocks, because every worker then covers the whole span at 1/N of
   the rate (ramps and stages included), so the load is spread over the workers at every moment; blocks
   would hand the first worker the start of the run and the last one its end, one busy at a time.
   `--max-concurrency C` is split too (C // N each, the first C mod N one more), so at most C are in
   flight in all (a cap per worker, not one shared semaphore);
2. starts the workers (`python -m loadproof.scenarios.load_workers SPOOL`, or the same `run_worker` as a
   Ray task pinned to a node), waits until every one is ready (imported, job loaded), then picks the start
   t0 = now + a margin on the wall clock and hands it to all: the start barrier. Each worker measures its
   own offset between the wall clock and its monotonic clock (`measure_offset`), turns t0 into its own
   `perf_counter_ns` and its sender (`load.OpenLoop`) starts the schedule there;
3. each worker writes its records (with its worker id, on its own clock) to its spool, and the parent
   merges them into the run directory's `requests.jsonl` and `chunks.jsonl`, every time mapped onto the
   parent's clock: t_parent = t_worker + (offset_worker - offset_parent).

Clock alignment and its error: an offset is time_ns() read between two perf_counter_ns() readings a and b;
the wall reading happened at a monotonic time in [a, b], so the offset is known to within the bracket
b - a, and the tightest of `OFFSET_SAMPLES` brackets is kept (a few hundred ns). The midpoint estimate is
within ceil(bracket / 2), so a mapped time is within ceil(bracket_worker / 2) + ceil(bracket_parent / 2)
of the parent's clock: the manifest's `workers.alignment_error_bound_ns` (the largest over the workers).
It holds while the wall clocks agree: on one host there is one wall clock (and on Linux one monotonic
clock, so the measured shift is within that bound of 0); across Ray nodes on several hosts the hosts'
wall-clock disagreement (NTP, chrony, PTP) adds to it, which a run cannot see, and which also shifts the
start barrier. Each worker measures its offset again at its end: `drift_ns` shows a wall clock stepped
during the run. Send lag, TTFT and every latency are differences within one worker's clock, exact whatever
the alignment; what the alignment affects is how the workers' times line up (the schedule's start, the
achieved rate, the duration, the engine samples' window).

The engine metrics scraper, the live view and the report stay in the parent; the claims are computed
from the merged records exactly as for one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from loadproof.errors import EnvironmentFailure, UsageError
from loadproof.records import RequestRecord
from loadproof.store.run_dir import CHUNKS, REQUESTS, RunWriter, read_jsonl
from loadproof.units import NS_PER_S

if TYPE_CHECKING:
    from loadproof.scenarios.live import LiveStatus
    from loadproof.scenarios.load import LoadScenario, Planned

OFFSET_SAMPLES = 64  # bracketed wall-clock readings per offset measurement; the tightest is kept
READY_TIMEOUT_S = 120.0  # a worker process or Ray task imports loadproof and loads its job within this
START_MARGIN_NS = 300_000_000  # every worker is ready: the start is this far ahead (the "go" must reach all)
RAY_START_MARGIN_NS = 2_000_000_000  # Ray tasks are launched after the start is picked: more margin
CONNECT_TIMEOUT_S = 5.0  # the Ray cluster's address answers within this
STOP_TIMEOUT_S = 30.0  # after an interrupt, a worker records what was in flight within this
PUMP_INTERVAL_S = 0.5  # a Ray task posts its new records (and reads the stop flag) this often
API_KEY_ENV = "LOADPROOF_WORKER_API_KEY"  # the API key reaches a worker process here, never on its command line
SPOOL = "workers"  # the workers' spools inside the run directory while it runs; removed after the merge
SPLIT = "round-robin by schedule index: worker k of N sends requests k, k+N, k+2N, ..."
TIME_FIELDS = ("send_ns", "first_token_ns", "last_token_ns", "end_ns", "intended_send_ns", "dispatch_ns")


def check_ray_address(value: str | None) -> str | None:
    """`--ray-address`: a non-empty address, and Ray installed (the `loadproof[ray]` extra)."""
    if value is None:
        return None
    if not value.strip():
        raise ValueError("give the Ray cluster's address (auto, HOST:PORT or ray://HOST:PORT)")
    if importlib.util.find_spec("ray") is None:
        raise ValueError("needs Ray, which is not installed: pip install 'loadproof[ray]'")
    return value.strip()


# ----- splitting -----

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


# ----- clocks -----

class ClockOffset(msgspec.Struct, kw_only=True):
    """wall - monotonic (time_ns() - perf_counter_ns()) of one process, from the tightest bracketed reading:
    the true offset is within ceil(bracket_ns / 2) of `offset_ns`."""

    offset_ns: int
    bracket_ns: int

    @property
    def error_ns(self) -> int:
        return (self.bracket_ns + 1) // 2


def measure_offset(samples: int = OFFSET_SAMPLES, wall: Callable[[], int] = time.time_ns,
                   mono: Callable[[], int] = time.perf_counter_ns) -> ClockOffset:
    """Read the wall clock between two monotonic readings `samples` times; keep the tightest bracket."""
    best: ClockOffset | None = None
    for _ in range(max(1, samples)):
        a = mono()
        w = wall()
        b = mono()
        if best is None or b - a < best.bracket_ns:
            best = ClockOffset(offset_ns=w - (a + b) // 2, bracket_ns=b - a)
    assert best is not None
    return best


def shift_ns(worker: ClockOffset, parent: ClockOffset) -> int:
    """What to add to a worker's monotonic time to put it on the parent's."""
    return worker.offset_ns - parent.offset_ns


def alignment_bound_ns(worker: ClockOffset, parent: ClockOffset) -> int:
    """How far a mapped time can be from the parent's clock (one wall clock assumed)."""
    return worker.error_ns + parent.error_ns


def to_worker_clock(start_wall_ns: int, clock: ClockOffset) -> int:
    """The agreed start (wall clock) on a process's monotonic clock."""
    return start_wall_ns - clock.offset_ns


def align(record: RequestRecord, shift: int) -> RequestRecord:
    """The record's times moved onto the parent's clock (a time never taken, 0 or None, stays so)."""
    for name in TIME_FIELDS:
        value = getattr(record, name)
        if value:
            setattr(record, name, value + shift)
    if record.chunk_ns:
        record.chunk_ns = [t + shift for t in record.chunk_ns]
    return record


def merge(shards: list[tuple[list[RequestRecord], int]]) -> list[RequestRecord]:
    """Every worker's records (with the shift of its clock) on the parent's clock, in order of their end,
    as one process would have appended them."""
    merged = [align(record, shift) for records, shift in shards for record in records]
    merged.sort(key=lambda r: (r.end_ns, r.batch))
    return merged


# ----- what a worker gets and gives back -----

class JobRequest(msgspec.Struct, array_like=True):
    index: int
    offset_ns: int
    request_id: str
    endpoint: str
    body: bytes
    deadline_s: float | None
    input_tokens: int
    output_tokens: int


class WorkerJob(msgspec.Struct, kw_only=True):
    worker: int
    url: str
    max_concurrency: int | None
    requests: list[JobRequest]
    scenario: str = "load"
    parent_pid: int | None = None  # a worker process stops when its parent is gone
    family: str = "synthetic"  # what the prompts are (each record's family)


class WorkerResult(msgspec.Struct, kw_only=True):
    worker: int
    pid: int
    node: str | None = None  # the Ray node id
    clock_start: ClockOffset
    clock_end: ClockOffset | None = None
    start_ns: int  # the agreed start on the worker's clock
    late_ns: int = 0  # how far past the start the worker was when its sender began (0: waited for it)
    planned: int
    dispatched: int = 0
    recorded: int = 0
    failed: int = 0
    interrupted: bool = False
    last_intended_offset_ns: int = 0
    end_ns: int = 0  # the worker's clock
    error: str | None = None


def job_of(worker: int, url: str, requests: list[Planned], cap: int | None, parent_pid: int | None,
           family: str = "synthetic") -> WorkerJob:
    return WorkerJob(worker=worker, url=url, max_concurrency=cap, parent_pid=parent_pid, family=family, requests=[
        JobRequest(p.index, p.offset_ns, p.spec.request_id, p.spec.endpoint, p.spec.body, p.spec.deadline_s,
                   p.input_tokens, p.output_tokens) for p in requests])


_encode = msgspec.msgpack.Encoder().encode


def read_spool(path: Path) -> list[RequestRecord]:
    """A worker's records (its requests.jsonl joined with its chunks.jsonl), on its own clock."""
    rows, _ = read_jsonl(path / REQUESTS)
    chunk_rows, _ = read_jsonl(path / CHUNKS)
    chunks = {row.get("request_id"): row for row in chunk_rows}
    records = []
    for row in rows:
        extra = chunks.get(row.get("request_id"))
        if extra is not None:
            row["chunk_ns"], row["chunk_tokens"] = extra.get("t_ns", []), extra.get("tokens", [])
        records.append(msgspec.convert(row, RequestRecord))
    return records


# ----- the worker: one process or one Ray task -----

class _Progress:
    def __init__(self) -> None:
        self.recorded = self.failed = self.dispatched = 0
        self.last_offset_ns = 0
        self.late_ns = 0
        self.end_ns = 0


def run_worker(job: WorkerJob, records_dir: Path, api_key: str | None, start_wall_ns: int,
               node: str | None = None, on_clock: Callable[[ClockOffset, int], None] | None = None,
               stop: threading.Event | None = None) -> WorkerResult:
    """Send `job`'s requests on the schedule from the agreed start (wall clock), each record appended to
    `records_dir` (requests.jsonl, chunks.jsonl) as it ends, on this process's monotonic clock. `stop` set
    (from another thread) ends the run as an interrupt does: what was in flight is recorded as cancelled."""
    clock_start = measure_offset()
    start_ns = to_worker_clock(start_wall_ns, clock_start)
    if on_clock is not None:
        on_clock(clock_start, start_ns)
    progress = _Progress()
    interrupted, error = False, None
    writer = RunWriter(records_dir)
    try:
        asyncio.run(_drive(job, writer, start_ns, api_key, progress, stop))
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
    except Exception as exc:  # noqa: BLE001 -- reported to the parent, which fails the run with it
        error = f"{type(exc).__name__}: {exc}"
    finally:
        writer.close()
    return WorkerResult(worker=job.worker, pid=os.getpid(), node=node, clock_start=clock_start,
                        clock_end=measure_offset(), start_ns=start_ns, late_ns=progress.late_ns,
                        planned=len(job.requests), dispatched=progress.dispatched, recorded=progress.recorded,
                        failed=progress.failed, interrupted=interrupted or error is not None,
                        last_intended_offset_ns=progress.last_offset_ns,
                        end_ns=progress.end_ns or time.perf_counter_ns(), error=error)


async def _drive(job: WorkerJob, writer: RunWriter, start_ns: int, api_key: str | None, progress: _Progress,
                 stop: threading.Event | None = None) -> None:
    from loadproof.client import RequestSpec, StreamingClient
    from loadproof.scenarios.load import OpenLoop, Planned, raise_open_files_limit

    raise_open_files_limit()
    requests = [Planned(r.index, r.offset_ns, RequestSpec(request_id=r.request_id, endpoint=r.endpoint, body=r.body,
                                                          deadline_s=r.deadline_s), r.input_tokens, r.output_tokens)
                for r in job.requests]
    cap = job.max_concurrency

    def sink(record: RequestRecord) -> None:
        writer.append(record)
        progress.recorded += 1
        progress.failed += not record.ok

    watchdog = None
    if job.parent_pid is not None or stop is not None:
        watchdog = asyncio.create_task(_watch(job.parent_pid, stop, asyncio.current_task()))
    sender = None
    try:
        async with StreamingClient(job.url, api_key=api_key, max_connections=cap + 4 if cap else 0, on_record=sink,
                                   keep_text=False) as client:
            sender = OpenLoop(client, requests, max_concurrency=cap, scenario=job.scenario, worker=job.worker,
                              family=job.family,
                              start_ns=start_ns)
            progress.late_ns = max(0, time.perf_counter_ns() - start_ns)
            await sender.run()
    finally:
        progress.end_ns = time.perf_counter_ns()
        if sender is not None:
            progress.dispatched, progress.last_offset_ns = sender.dispatched, sender.last_offset_ns
        if watchdog is not None:
            watchdog.cancel()


async def _watch(parent_pid: int | None, stop: threading.Event | None, main: asyncio.Task[Any] | None) -> None:
    """A worker whose parent is gone (killed without forwarding the interrupt), or whose stop flag is set (a
    Ray task: the parent was interrupted), stops, keeping its records."""
    while (parent_pid is None or os.getppid() == parent_pid) and (stop is None or not stop.is_set()):
        await asyncio.sleep(0.1)
    if main is not None:
        main.cancel()


def worker_main(argv: list[str]) -> int:
    """`python -m loadproof.scenarios.load_workers SPOOL`: read SPOOL/job.msgpack, print `ready`, read the
    agreed start (wall ns) from stdin, run, write SPOOL/result.json. The records go to SPOOL/records/."""
    spool = Path(argv[0])
    job = msgspec.msgpack.decode((spool / "job.msgpack").read_bytes(), type=WorkerJob)
    api_key = os.environ.pop(API_KEY_ENV, "") or None
    try:
        _warm_up()
        print("ready", flush=True)
        line = sys.stdin.readline().strip()
        if not line:
            return 1  # the parent went away before the start
        start_wall_ns = int(line)

        def on_clock(clock: ClockOffset, start_ns: int) -> None:
            (spool / "clock.json").write_bytes(msgspec.json.encode({"clock_start": clock, "start_ns": start_ns}))

        result = run_worker(job, spool / "records", api_key, start_wall_ns, on_clock=on_clock)
    except KeyboardInterrupt:
        return 130
    (spool / "result.json").write_bytes(msgspec.json.encode(result))
    return 3 if result.error else 0


def _warm_up() -> None:
    """What a worker imports before it says it is ready, so that nothing is imported after the start."""
    import loadproof.client  # noqa: F401
    import loadproof.scenarios.load  # noqa: F401


def ray_ready() -> tuple[str, int]:
    """A Ray task that imports this module on its node: the node's worker process is up before the start."""
    import ray

    _warm_up()
    return ray.get_runtime_context().get_node_id(), os.getpid()


class RayHub:
    """A Ray actor (no CPU) between the parent and its Ray tasks: the stop flag the parent raises when it is
    interrupted, and what each task posts as it runs (its clock, then its new request records), which the
    parent takes every half second for its live view and its spool. A task's complete records still come
    back as its return value; what was posted is what the parent keeps if a task never returns."""

    def __init__(self) -> None:
        self.stopped = False
        self.inbox: list[tuple[int, str, bytes]] = []

    def stop(self) -> None:
        self.stopped = True

    def post(self, worker: int, kind: str, data: bytes) -> bool:
        if data:
            self.inbox.append((worker, kind, data))
        return self.stopped

    def take(self) -> list[tuple[int, str, bytes]]:
        out, self.inbox = self.inbox, []
        return out


def ray_worker(job_bytes: bytes, api_key: str | None, start_wall_ns: int, hub: Any) -> tuple[bytes, bytes, bytes]:
    """The same `run_worker`, as a Ray task: the records are spooled to a temporary folder on the node,
    posted to the hub as they end, and returned (result, requests.jsonl, chunks.jsonl)."""
    import ray

    job = msgspec.msgpack.decode(job_bytes, type=WorkerJob)
    folder = Path(tempfile.mkdtemp(prefix="loadproof-worker-"))
    stop, done = threading.Event(), threading.Event()

    def on_clock(clock: ClockOffset, start_ns: int) -> None:
        ray.get(hub.post.remote(job.worker, "clock", msgspec.json.encode({"clock_start": clock, "start_ns": start_ns})))

    def pump() -> None:  # new complete lines of requests.jsonl to the hub; the stop flag back
        pos = 0
        while True:
            finished = done.wait(PUMP_INTERVAL_S)
            data = b""
            with contextlib.suppress(OSError), open(folder / "records" / REQUESTS, "rb") as handle:
                handle.seek(pos)
                data = handle.read()
                data = data[:data.rfind(b"\n") + 1]
                pos += len(data)
            with contextlib.suppress(Exception):  # noqa: BLE001 -- the hub gone: the return value still carries all
                if ray.get(hub.post.remote(job.worker, "requests", data)):
                    stop.set()
            if finished:
                return

    pumper = threading.Thread(target=pump, name="loadproof-pump", daemon=True)
    pumper.start()
    try:
        result = run_worker(job, folder / "records", api_key, start_wall_ns,
                            node=ray.get_runtime_context().get_node_id(), on_clock=on_clock, stop=stop)
        done.set()
        pumper.join()
        return (msgspec.json.encode(result), (folder / "records" / REQUESTS).read_bytes(),
                (folder / "records" / CHUNKS).read_bytes())
    finally:
        done.set()
        shutil.rmtree(folder, ignore_errors=True)


# ----- the parent -----

class _Tail:
    """New complete lines of a worker's requests.jsonl, for the live view (times moved onto the parent's)."""

    def __init__(self, spool: Path) -> None:
        self.spool = spool
        self.pos = 0
        self.rest = b""
        self.shift: int | None = None

    def poll(self, parent: ClockOffset) -> list[RequestRecord]:
        if self.shift is None:
            try:
                clock = msgspec.json.decode((self.spool / "clock.json").read_bytes())
            except (OSError, msgspec.DecodeError):
                return []
            self.shift = clock["clock_start"]["offset_ns"] - parent.offset_ns
        try:
            with open(self.spool / "records" / REQUESTS, "rb") as handle:
                handle.seek(self.pos)
                data = handle.read()
        except OSError:
            return []
        self.pos += len(data)
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        out = []
        for line in lines:
            with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                out.append(align(msgspec.json.decode(line, type=RequestRecord), self.shift))
        return out


class Processes:
    """Worker processes on this host: `python -m loadproof.scenarios.load_workers SPOOL`."""

    how = "processes"

    def connect(self) -> None:
        pass

    def count(self, asked: int | None) -> int:
        return asked or 1

    async def run(self, jobs: list[WorkerJob], spools: list[Path], api_key: str | None,
                  released: Callable[[int], None], live: LiveStatus, parent: ClockOffset) -> None:
        """Each worker leaves SPOOL/result.json and SPOOL/records/, also when interrupted."""
        env = {**os.environ, API_KEY_ENV: api_key or ""}
        procs: list[asyncio.subprocess.Process] = []
        tails = [_Tail(spool) for spool in spools]
        try:
            for job, spool in zip(jobs, spools):
                spool.mkdir(parents=True)
                (spool / "job.msgpack").write_bytes(_encode(job))
                with open(spool / "stderr.log", "wb") as log:
                    procs.append(await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "loadproof.scenarios.load_workers", str(spool),
                        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
                        start_new_session=True, env=env))  # its own group: an interrupt reaches it once, from here
            for k, proc in enumerate(procs):  # the start barrier, first half: every worker ready
                assert proc.stdout is not None
                try:
                    line = await asyncio.wait_for(proc.stdout.readline(), READY_TIMEOUT_S)
                except TimeoutError:
                    line = b""
                if line.strip() != b"ready":
                    raise EnvironmentFailure(f"load worker {k} did not start: {_last_line(spools[k] / 'stderr.log')}")
            start_wall_ns = time.time_ns() + START_MARGIN_NS  # second half: one start for all
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(f"{start_wall_ns}\n".encode())
                await proc.stdin.drain()
                proc.stdin.close()
            released(start_wall_ns)
            waits = [asyncio.ensure_future(proc.wait()) for proc in procs]
            while not all(w.done() for w in waits):
                await asyncio.wait(waits, timeout=0.5)
                _show(live, tails, parent)
            _show(live, tails, parent)
        except BaseException:
            await _stop(procs)
            raise
        finally:
            for proc in procs:
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()


def _show(live: LiveStatus, tails: list[_Tail], parent: ClockOffset) -> None:
    for tail in tails:
        for record in tail.poll(parent):
            live.started(record)
            live.ended(record)


async def _stop(procs: list[asyncio.subprocess.Process]) -> None:
    """Interrupt every worker still running (each records what it had in flight), then wait for them."""
    running = [p for p in procs if p.returncode is None]
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
    if running:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in running)), STOP_TIMEOUT_S)


def _result_of(spool: Path) -> WorkerResult | None:
    try:
        return msgspec.json.decode((spool / "result.json").read_bytes(), type=WorkerResult)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    return lines[-1][:300] if lines else "no output"


class RayTasks:
    """Ray tasks, one per worker, each pinned to a node of the cluster (round-robin over the alive nodes
    with a CPU), running `run_worker`."""

    how = "ray"

    def __init__(self, address: str) -> None:
        self.address = address
        self.nodes: list[str] = []
        self.cpus: list[int] = []

    def connect(self) -> None:
        import logging

        try:
            import ray
        except ImportError:
            raise UsageError("--ray-address needs Ray, which is not installed: pip install 'loadproof[ray]'") from None
        host, port = _host_port(self.address)
        if port is not None:  # Ray's driver waits for an unreachable cluster for minutes: look first
            try:
                socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
            except OSError as exc:
                raise EnvironmentFailure(f"cannot reach the Ray cluster at {self.address}: "
                                         f"{exc.strerror or exc}") from None
        extra = {"_node_ip_address": host} if host.startswith("127.") else {}  # a cluster of this machine's loopback
        try:
            ray.init(address=self.address, log_to_driver=False, logging_level=logging.ERROR,
                     ignore_reinit_error=True, **extra)
        except Exception as exc:  # noqa: BLE001 -- Ray raises ConnectionError, RuntimeError, ValueError, ...
            raise EnvironmentFailure(f"cannot connect to the Ray cluster at {self.address}: "
                                     f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
                                     ) from None
        alive = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
        self.nodes = [n["NodeID"] for n in alive]
        self.cpus = [int(n["Resources"]["CPU"]) for n in alive]
        if not self.nodes:
            self.close()
            raise EnvironmentFailure(f"the Ray cluster at {self.address} has no alive node with a CPU")

    def close(self) -> None:
        import ray

        with contextlib.suppress(Exception):
            ray.shutdown()

    def count(self, asked: int | None) -> int:
        """One task per node by default; more than the cluster's CPUs would start some tasks late."""
        if asked is not None and asked > sum(self.cpus):
            self.close()
            raise UsageError(f"--workers {asked}: the Ray cluster at {self.address} has {sum(self.cpus)} CPU(s) on "
                             f"{len(self.nodes)} node(s); each worker task takes one")
        return asked or len(self.nodes)

    async def run(self, jobs: list[WorkerJob], spools: list[Path], api_key: str | None,
                  released: Callable[[int], None], live: LiveStatus, parent: ClockOffset) -> None:
        """Each task's result and records come back to SPOOL/result.json and SPOOL/records/."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        placement = [{"scheduling_strategy": NodeAffinitySchedulingStrategy(self._node_of(k), soft=False)}
                     for k in range(len(jobs))]
        ready = ray.remote(num_cpus=1, max_retries=0)(ray_ready)
        task = ray.remote(num_cpus=1, max_retries=0)(ray_worker)
        try:
            await asyncio.to_thread(ray.get, [ready.options(**p).remote() for p in placement], timeout=READY_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001
            raise EnvironmentFailure(f"the Ray tasks did not start on the cluster's nodes: {exc}") from None
        hub = ray.remote(num_cpus=0)(RayHub).remote()
        for spool in spools:
            (spool / "records").mkdir(parents=True)
        tails = [_Tail(spool) for spool in spools]
        job_refs = [ray.put(_encode(job)) for job in jobs]
        start_wall_ns = time.time_ns() + RAY_START_MARGIN_NS
        refs = [task.options(**p).remote(ref, api_key, start_wall_ns, hub) for p, ref in zip(placement, job_refs)]
        released(start_wall_ns)
        outs: list[Any] = [None] * len(refs)
        try:
            pending = list(refs)
            while pending:
                done, pending = await asyncio.to_thread(ray.wait, pending, num_returns=1, timeout=PUMP_INTERVAL_S)
                for ref in done:
                    outs[refs.index(ref)] = ref
                await self._take(hub, spools)
                _show(live, tails, parent)
        except BaseException:
            with contextlib.suppress(Exception):  # every task records what it has in flight and returns
                hub.stop.remote()
            done, _ = await asyncio.to_thread(ray.wait, refs, num_returns=len(refs), timeout=STOP_TIMEOUT_S)
            for ref in done:
                outs[refs.index(ref)] = ref
            for ref, out in zip(refs, outs):
                if out is None:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
            raise
        finally:
            with contextlib.suppress(Exception):
                await self._take(hub, spools)
            for k, ref in enumerate(outs):
                if ref is not None:
                    _fetch(ray, ref, spools[k])
            _show(live, tails, parent)

    def _node_of(self, k: int) -> str:
        """Task k's node: round-robin over the nodes, skipping a node whose CPUs are all taken."""
        slots = [node for turn in range(max(self.cpus)) for node, cpus in zip(self.nodes, self.cpus) if turn < cpus]
        return slots[k % len(slots)]

    @staticmethod
    async def _take(hub: Any, spools: list[Path]) -> None:
        """What the tasks posted: a clock to SPOOL/clock.json, request lines appended to SPOOL/records/."""
        import ray

        for worker, kind, data in await asyncio.to_thread(ray.get, hub.take.remote(), timeout=CONNECT_TIMEOUT_S):
            if kind == "clock":
                (spools[worker] / "clock.json").write_bytes(data)
            else:
                with open(spools[worker] / "records" / REQUESTS, "ab") as handle:
                    handle.write(data)


def _host_port(address: str) -> tuple[str, int | None]:
    """The GCS host and port of HOST:PORT or ray://HOST:PORT (no port: auto, or a name Ray resolves)."""
    rest = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return rest, None
    return host.strip("[]"), int(port)


def _fetch(ray: Any, ref: Any, spool: Path) -> None:
    """A finished Ray task's result and its complete records, written to its spool as a worker process leaves
    them (replacing the request lines posted as it ran, of which they are a prefix)."""
    try:
        result, requests, chunks = ray.get(ref)
    except Exception:  # noqa: BLE001 -- cancelled or failed: what it posted is kept
        return
    (spool / "records").mkdir(parents=True, exist_ok=True)
    (spool / "records" / REQUESTS).write_bytes(requests)
    (spool / "records" / CHUNKS).write_bytes(chunks)
    (spool / "result.json").write_bytes(result)


async def run_scaled_out(scenario: LoadScenario, writer: RunWriter, manifest: dict[str, Any],
                         live: LiveStatus) -> None:
    """`LoadScenario.run` with --workers N or --ray-address: plan here, send in the workers, merge here."""
    from loadproof.plans import attach_plan
    from loadproof.scenarios.load import _describe
    from loadproof.telemetry.server_metrics import MetricsScraper

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
        jobs = [job_of(k, scenario.target.url, shard, caps[k], parent_pid, scenario.family)
                for k, shard in enumerate(shards)]
        del requests, shards
        where = (f"{n} worker processes" if backend.how == "processes"
                 else f"{n} Ray tasks on {min(n, len(backend.nodes))} node(s) of {opts.ray_address}")  # type: ignore[union-attr]
        manifest["workers"] = {"count": n, "how": backend.how, "ray_address": opts.ray_address, "split": SPLIT,
                               "max_concurrency": caps}
        writer.write_manifest(manifest)
        scenario.status(f"schedule: {plan.planned_requests} requests over {plan.schedule_span_s:.1f} s "
                        f"({_describe(plan)}), built in {time.perf_counter() - started:.2f} s; split round-robin "
                        f"among {where}")
        spool_root = writer.path / SPOOL
        spools = [spool_root / f"w{k}" for k in range(n)]
        parent = measure_offset()
        t0: list[int] = []

        def released(start_wall_ns: int) -> None:
            start = to_worker_clock(start_wall_ns, parent)
            t0.append(start)
            for job in jobs:
                writer.event("schedule_start", t_ns=start, worker=job.worker, planned=len(job.requests))
            live.phase("requests", end_ns=start + round(plan.schedule_span_s * NS_PER_S), detail=_describe(plan))

        results: list[WorkerResult | None] = [None] * n
        completed = False
        async with MetricsScraper(scenario.target.metrics, scenario.metric_names,
                                  interval_s=opts.sample_interval_s or None, sink=writer.metric_sample,
                                  api_key=scenario.target.metrics_api_key) as scraper:
            live.watch_engine(scraper.samples)
            try:
                await backend.run(jobs, spools, scenario.target.api_key, released, live, parent)
                completed = True
            finally:
                results = [_result_of(spool) for spool in spools]
                _merge_into(writer, manifest, jobs, spools, results, parent, t0[0] if t0 else None, completed,
                            backend.how, scenario.status, plan.schedule_span_s)
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


def _merge_into(writer: RunWriter, manifest: dict[str, Any], jobs: list[WorkerJob], spools: list[Path],
                results: list[WorkerResult | None], parent: ClockOffset, t0: int | None, completed: bool, how: str,
                say: Callable[[str], None], span_s: float) -> None:
    """The workers' records merged into the run directory on the parent's clock; their schedule_end events;
    the manifest's `schedule` and `workers` (the clock alignment and its bound)."""
    shards = []
    per_worker = []
    for job, spool, result in zip(jobs, spools, results):
        clock = result.clock_start if result is not None else _spooled_clock(spool)
        records = read_spool(spool / "records") if clock is not None else []
        shift = shift_ns(clock, parent) if clock is not None else 0
        shards.append((records, shift))
        row: dict[str, Any] = {"worker": job.worker, "requests": len(job.requests), "recorded": len(records),
                               "max_concurrency": job.max_concurrency}
        if result is not None:
            end = result.end_ns + shift
            row.update(pid=result.pid, node=result.node, dispatched=result.dispatched, failed=result.failed,
                       interrupted=result.interrupted, error=result.error,
                       late_start_ms=round(result.late_ns / 1e6, 3))
            writer.event("schedule_end", t_ns=end, worker=job.worker, planned=len(job.requests),
                         dispatched=result.dispatched, recorded=len(records), failed=result.failed,
                         interrupted=result.interrupted)
        if clock is not None:
            row.update(offset_ns=clock.offset_ns, bracket_ns=clock.bracket_ns, shift_ns=shift,
                       alignment_error_bound_ns=alignment_bound_ns(clock, parent))
            if result is not None and result.clock_end is not None:
                row["drift_ns"] = result.clock_end.offset_ns - clock.offset_ns
        per_worker.append(row)
    merged = merge(shards)
    for record in merged:
        writer.append(record)
    parent_end = measure_offset()
    bounds = [row["alignment_error_bound_ns"] for row in per_worker if "alignment_error_bound_ns" in row]
    manifest["workers"].update({
        "start_ns": t0,
        "clock": "t_parent = t_worker + (offset_worker - offset_parent); offset = time_ns() - perf_counter_ns() "
                 f"at the midpoint of the tightest of {OFFSET_SAMPLES} bracketed readings, each within ceil(bracket "
                 "/ 2); the bound assumes one wall clock (one host, or hosts whose clocks agree)",
        "alignment_error_bound_ns": max(bounds) if bounds else None,
        "parent_clock": {"offset_ns": parent.offset_ns, "bracket_ns": parent.bracket_ns,
                         "drift_ns": parent_end.offset_ns - parent.offset_ns},
        "per_worker": per_worker,
    })
    dispatched = sum(r.dispatched for r in results if r is not None)
    failed = sum(not r.ok for r in merged)
    interrupted = not completed or any(r is None or r.interrupted for r in results)
    last_offset = max((r.last_intended_offset_ns for r in results if r is not None), default=0)
    end = max((r.end_ns + s for r, (_, s) in zip(results, shards) if r is not None), default=None)
    total = sum(len(job.requests) for job in jobs)
    manifest["schedule"] = {"planned": total, "dispatched": dispatched, "recorded": len(merged), "failed": failed,
                            "interrupted": interrupted, "last_intended_offset_s": round(last_offset / NS_PER_S, 6),
                            "elapsed_s": round((end - t0) / NS_PER_S, 6) if end is not None and t0 else 0.0}
    bound = manifest["workers"]["alignment_error_bound_ns"]
    if bound is not None:
        say(f"workers: {len(jobs)} {'Ray tasks' if how == 'ray' else 'processes'}, records merged on this "
            f"process's clock within {bound / 1000:.1f} us (clock alignment bound)")
    late = [r for r in results if r is not None and r.late_ns > 1_000_000]
    for r in late:
        say(f"worker {r.worker} reached the start {r.late_ns / 1e6:.1f} ms late (its send lag shows it)")
    if interrupted:
        say(f"schedule interrupted: sent {dispatched} of {total} requests (up to {last_offset / NS_PER_S:.1f} s of "
            f"{span_s:.1f} s), {len(merged)} recorded")
    else:
        say(f"schedule: sent {dispatched} of {total} requests, {failed} failed")


def _spooled_clock(spool: Path) -> ClockOffset | None:
    """The clock a worker process wrote when it started (it ended without a result)."""
    try:
        return msgspec.json.decode((spool / "clock.json").read_bytes(), type=_SpooledClock).clock_start
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


class _SpooledClock(msgspec.Struct):
    clock_start: ClockOffset
    start_ns: int


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
