"""One telemetry sample, a row of `telemetry.jsonl` (written by telemetry.sampler): the host, and each
NVIDIA GPU where there is one (NVML; a reading NVML refused is None).

Version 1: the shape every run wrote before versions were recorded. Version 2 adds each GPU's cumulative
energy counter (`energy_mj`), and the manifest's telemetry description says whether it was read
(`TelemetryInfo.energy_note`).
"""

from __future__ import annotations

from typing import ClassVar

import msgspec


class HostSample(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    cpu_busy_pct: float | None = None
    cpu_outside_pct: float | None = None  # the host's CPU used outside loadproof's process tree
    mem_used_bytes: int | None = None  # MemTotal - MemAvailable
    mem_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    oom_kills: int | None = None  # /proc/vmstat oom_kill, cumulative


class GPUSample(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    index: int
    temp_c: int | None = None
    power_w: float | None = None
    energy_mj: int | None = None  # NVML's cumulative energy counter (mJ since the driver loaded); version 2
    util_pct: int | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    sm_clock_mhz: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    throttle_reasons: int | None = None
    pcie_tx_kbps: int | None = None
    pcie_rx_kbps: int | None = None
    nvlink_tx_kib: int | None = None  # cumulative NVLink data counters, summed over links
    nvlink_rx_kib: int | None = None


class XidEvent(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    xid: int
    device: int | None = None


class TelemetrySample(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    version: ClassVar[int] = 2

    t_ns: int
    wall_time_s: float | None = None
    host: HostSample = msgspec.field(default_factory=HostSample)
    gpus: list[GPUSample] | None = None  # None: no GPU telemetry (no NVIDIA GPU, or NVML absent)
    xid_events: list[XidEvent] = []


__all__ = ["GPUSample", "HostSample", "TelemetrySample", "XidEvent"]
