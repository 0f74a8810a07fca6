"""The telemetry sampler: GPU (when there is one) and host, every `interval_s`, in a background thread,
appended to `telemetry.jsonl` as it goes. Without an NVIDIA GPU it records host samples and says so
once. Standard library (and pynvml) only: `python -m loadproof.telemetry.record` runs it alone.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from loadproof.telemetry.gpu import GPUSampler, NoGPU
from loadproof.telemetry.host import HostSampler


class TelemetrySampler:
    def __init__(self, path: Path, interval_s: float = 1.0, say: Callable[[str], None] | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.path = path
        self.interval_s = interval_s
        self.clock = clock
        self.num_samples = 0
        self.gpu_note = ""
        self._host = HostSampler()
        try:
            self._gpu: GPUSampler | None = GPUSampler()
        except NoGPU as exc:
            self._gpu = None
            self.gpu_note = f"no GPU telemetry: {exc}; recording host samples only"
            if say is not None:
                say(self.gpu_note)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._out: IO[str] | None = None

    def describe(self) -> dict[str, Any]:
        if self._gpu is None:
            return {"gpus": 0, "note": self.gpu_note}
        return {"gpus": len(self._gpu.handles), "names": self._gpu.names, "driver": self._gpu.driver}

    def sample_once(self) -> dict[str, Any]:
        row: dict[str, Any] = {"t_ns": self.clock(), "wall_time_s": time.time(), "host": self._host.sample()}
        if self._gpu is not None:
            row["gpus"] = self._gpu.sample()
            xids = self._gpu.xid_events()
            if xids:
                row["xid_events"] = xids
        assert self._out is not None
        self._out.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._out.flush()
        self.num_samples += 1
        return row

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample_once()

    def __enter__(self) -> TelemetrySampler:
        self._out = open(self.path, "a", encoding="utf-8")
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
