"""Scale-out workers as processes on this host (`--workers N`): each started as
`python -m loadproof.scenarios.load.scaleout.worker SPOOL` in its own process group, the start barrier
kept over its stdin and stdout (`ready`, then the agreed start), interrupted with SIGINT when the parent is."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from loadproof.errors import EnvironmentFailure
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.scaleout.clock import ClockOffset
from loadproof.scenarios.load.scaleout.protocol import (
    API_KEY_ENV,
    JOB,
    READY_TIMEOUT_S,
    STOP_TIMEOUT_S,
    Tail,
    WorkerJob,
    encode,
    show,
)

WORKER_MODULE = "loadproof.scenarios.load.scaleout.worker"  # what each worker process runs
START_MARGIN_NS = 300_000_000  # every worker is ready: the start is this far ahead (the "go" must reach all)


class Processes:
    """Worker processes on this host: `python -m loadproof.scenarios.load.scaleout.worker SPOOL`."""

    how = "processes"

    def connect(self) -> None:
        pass

    def count(self, asked: int | None) -> int:
        return asked or 1

    async def run(
        self,
        jobs: list[WorkerJob],
        spools: list[Path],
        api_key: str | None,
        released: Callable[[int], None],
        live: LiveStatus,
        parent: ClockOffset,
    ) -> None:
        """Each worker leaves SPOOL/result.json and SPOOL/records/, also when interrupted."""
        env = {**os.environ, API_KEY_ENV: api_key or ""}
        procs: list[asyncio.subprocess.Process] = []
        tails = [Tail(spool) for spool in spools]
        try:
            for job, spool in zip(jobs, spools):
                spool.mkdir(parents=True)
                (spool / JOB).write_bytes(encode(job))
                with open(spool / "stderr.log", "wb") as log:
                    procs.append(
                        await asyncio.create_subprocess_exec(
                            sys.executable,
                            "-m",
                            WORKER_MODULE,
                            str(spool),
                            stdin=asyncio.subprocess.PIPE,
                            stdout=asyncio.subprocess.PIPE,
                            stderr=log,
                            start_new_session=True,
                            env=env,
                        )
                    )  # its own group: an interrupt reaches it once, from here
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
                show(live, tails, parent)
            show(live, tails, parent)
        except BaseException:
            await _stop(procs)
            raise
        finally:
            for proc in procs:
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()


async def _stop(procs: list[asyncio.subprocess.Process]) -> None:
    """Interrupt every worker still running (each records what it had in flight), then wait for them."""
    running = [p for p in procs if p.returncode is None]
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
    if running:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in running)), STOP_TIMEOUT_S)


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    return lines[-1][:300] if lines else "no output"
