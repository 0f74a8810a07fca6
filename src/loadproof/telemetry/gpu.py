"""GPU samples through NVML (`nvidia-ml-py`, the `gpu` extra). Standard library and pynvml only, so the
recorder also runs on a GPU host that has nothing else of loadproof's dependencies.

Every field NVML does not offer on a device is None, never guessed. Xid (critical error) events are
collected through an NVML event set where the driver allows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# NVML field ids (nvml.h): NVLink data throughput counters, KiB, per link (scopeId = link)
NVLINK_DATA_TX = 138
NVLINK_DATA_RX = 139
MAX_NVLINKS = 18  # NVML_NVLINK_MAX_LINKS for Hopper


class NoGPU(Exception):
    """No NVIDIA GPU or no NVML on this machine."""


class GPUSampler:
    def __init__(self) -> None:
        try:
            import pynvml  # optional (the loadproof[gpu] extra): without it there is no GPU telemetry
        except ImportError:
            raise NoGPU("nvidia-ml-py is not installed (pip install 'loadproof[gpu]')") from None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NoGPU(f"NVML not available: {exc}") from None
        self.nvml = pynvml
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            raise NoGPU("NVML sees no GPU")
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.names = [self._call(pynvml.nvmlDeviceGetName, h) for h in self.handles]
        self.driver = self._call(pynvml.nvmlSystemGetDriverVersion)
        # the energy counter (mJ since the driver loaded; Volta and later): which GPUs answer, and why not
        self.energy_note = self._energy_check()
        self._events = None
        try:
            events = pynvml.nvmlEventSetCreate()
            for h in self.handles:
                pynvml.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError, events)
            self._events = events
        except pynvml.NVMLError:
            self._events = None  # not every driver or container allows event registration

    def _energy_check(self) -> str | None:
        """None when every GPU answers nvmlDeviceGetTotalEnergyConsumption; else why not (NVML's words)."""
        for index, h in enumerate(self.handles):
            try:
                self.nvml.nvmlDeviceGetTotalEnergyConsumption(h)
            except (self.nvml.NVMLError, AttributeError) as exc:
                return f"GPU {index} has no energy counter (nvmlDeviceGetTotalEnergyConsumption: {exc})"
        return None

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            value = fn(*args)
        except self.nvml.NVMLError:
            return None
        return value.decode() if isinstance(value, bytes) else value

    def sample(self) -> list[dict[str, Any]]:
        n = self.nvml
        out = []
        for index, h in enumerate(self.handles):
            util = self._call(n.nvmlDeviceGetUtilizationRates, h)
            mem = self._call(n.nvmlDeviceGetMemoryInfo, h)
            power_mw = self._call(n.nvmlDeviceGetPowerUsage, h)
            reasons_fn = (
                getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or n.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            out.append(
                {
                    "index": index,
                    # cumulative mJ since the driver loaded (None where the GPU has no counter)
                    "energy_mj": self._call(n.nvmlDeviceGetTotalEnergyConsumption, h),
                    "temp_c": self._call(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU),
                    "power_w": None if power_mw is None else power_mw / 1000.0,
                    "util_pct": None if util is None else util.gpu,
                    "mem_used_bytes": None if mem is None else mem.used,
                    "mem_total_bytes": None if mem is None else mem.total,
                    "sm_clock_mhz": self._call(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM),
                    "pcie_gen": self._call(n.nvmlDeviceGetCurrPcieLinkGeneration, h),
                    "pcie_width": self._call(n.nvmlDeviceGetCurrPcieLinkWidth, h),
                    "pcie_gen_max": self._call(n.nvmlDeviceGetMaxPcieLinkGeneration, h),
                    "pcie_width_max": self._call(n.nvmlDeviceGetMaxPcieLinkWidth, h),
                    "throttle_reasons": self._call(reasons_fn, h),
                    # KB/s over NVML's last 20 ms window, each direction
                    "pcie_tx_kbps": self._call(n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_TX_BYTES),
                    "pcie_rx_kbps": self._call(n.nvmlDeviceGetPcieThroughput, h, n.NVML_PCIE_UTIL_RX_BYTES),
                    # cumulative KiB of data over all NVLinks (None where the GPU has none)
                    "nvlink_tx_kib": self._nvlink_total(h, NVLINK_DATA_TX),
                    "nvlink_rx_kib": self._nvlink_total(h, NVLINK_DATA_RX),
                }
            )
        return out

    def _nvlink_total(self, handle: Any, field_id: int) -> int | None:
        """The counter summed over every link NVML answers for; None if it answers for none."""
        try:
            values = self.nvml.nvmlDeviceGetFieldValues(handle, [(field_id, link) for link in range(MAX_NVLINKS)])
        except (self.nvml.NVMLError, AttributeError):
            return None
        answered = [v.value.ullVal for v in values if v.nvmlReturn == 0]
        return sum(answered) if answered else None

    def xid_events(self) -> list[dict[str, Any]]:
        """Xid events that arrived since the last call (non-blocking)."""
        if self._events is None:
            return []
        found: list[dict[str, Any]] = []
        while True:
            try:
                data = self.nvml.nvmlEventSetWait(self._events, 0)
            except self.nvml.NVMLError:
                return found
            found.append(
                {
                    "xid": int(data.eventData),
                    "device": self.handles.index(data.device) if data.device in self.handles else None,
                }
            )

    def close(self) -> None:
        try:
            if self._events is not None:
                self.nvml.nvmlEventSetFree(self._events)
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass
