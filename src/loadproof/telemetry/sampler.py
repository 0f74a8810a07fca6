"""The telemetry sampler: GPU (when there is one) and host, every `interval_s`, in a background thread,
appended to `telemetry.jsonl` as it goes (one `rundir.TelemetrySample` a line). Without an NVIDIA GPU it
records host samples and says so once. Standard library, msgspec (and pynvml) only:
`python -m loadproof.telemetry.record` runs it alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import msgspec

from loadproof.rundir.manifest import TelemetryInfo
from loadproof.rundir.telemetry_sample import GPUSample, HostSample, TelemetrySample, XidEvent
from loadproof.telemetry.gpu import GPUSampler, NoGPU
from loadproof.telemetry.host import HostSampler

_encode = msgspec.json.Encoder().encode


class TelemetrySampler:
    def __init__(
        self,
        path: Path,
        interval_s: float = 1.0,
        say: Callable[[str], None] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.path = path
        self.interval_s = interval_s
        self.clock = clock
        self.num_samples = 0
        self.gpu_note = ""
        self.energy_note: str | None = None  # why no GPU energy figures; None: every GPU's counter is read
        self._host = HostSampler()
        try:
            self._gpu: GPUSampler | None = GPUSampler()
        except NoGPU as exc:
            self._gpu = None
            self.gpu_note = f"no GPU telemetry: {exc}; recording host samples only"
            self.energy_note = f"no GPU energy counter: {exc}"
            if say is not None:
                say(self.gpu_note)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._out: IO[bytes] | None = None

    def describe(self) -> TelemetryInfo:
        if self._gpu is None:
            return TelemetryInfo(gpus=0, note=self.gpu_note, energy_note=self.energy_note)
        return TelemetryInfo(
            gpus=len(self._gpu.handles),
            names=self._gpu.names,
            driver=self._gpu.driver,
            energy_note=self._gpu.energy_note,
        )

    def sample_once(self) -> TelemetrySample:
        t_ns, wall = self.clock(), time.time()
        host = msgspec.convert(self._host.sample(), HostSample)
        gpus, xids = None, []
        if self._gpu is not None:
            gpus = msgspec.convert(self._gpu.sample(), list[GPUSample])
            xids = msgspec.convert(self._gpu.xid_events(), list[XidEvent])
        sample = TelemetrySample(t_ns=t_ns, wall_time_s=wall, host=host, gpus=gpus, xid_events=xids)
        assert self._out is not None
        self._out.write(_encode(sample) + b"\n")
        self._out.flush()
        self.num_samples += 1
        return sample

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample_once()

    def __enter__(self) -> TelemetrySampler:
        self._out = open(self.path, "ab")
        self.sample_once()
        self._thread = threading.Thread(target=self._loop, name="loadproof-telemetry", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sample_once()
        if self._out is not None:
            self._out.close()
        if self._gpu is not None:
            self._gpu.close()
