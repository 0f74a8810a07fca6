"""Telemetry summary claims, as pure functions of `telemetry.jsonl` rows (`rundir.TelemetrySample`, written
by telemetry.sampler)."""

from __future__ import annotations

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.rundir.telemetry_sample import GPUSample, TelemetrySample
from loadproof.units import NS_PER_S

LOADED_UTIL_PCT = 50  # a GPU counts as under load at or above this utilization


def telemetry_claims(rows: list[TelemetrySample]) -> list[Claim]:
    if not rows:
        return []
    rows = sorted(rows, key=lambda r: r.t_ns)
    claims = [
        count("telemetry.samples", len(rows), "samples", "rows in telemetry.jsonl", direction="neither"),
        number(
            "telemetry.duration_s",
            (rows[-1].t_ns - rows[0].t_ns) / NS_PER_S,
            "s",
            "last sample - first sample",
            1,
            direction="neither",
        ),
    ]
    mem = [r.host.mem_used_bytes for r in rows if r.host.mem_used_bytes is not None]
    if mem:
        claims.append(
            number(
                "telemetry.host_max_mem_used_gib",
                max(mem) / 1024**3,
                "GiB",
                "max over samples of MemTotal - MemAvailable",
                2,
                direction="neither",
            )
        )
    outside = [r.host.cpu_outside_pct for r in rows if r.host.cpu_outside_pct is not None]
    if outside:  # what else on the host competed with the run (runs recorded since this field exists)
        claims.append(
            number(
                "telemetry.host_cpu_outside_mean_pct",
                sum(outside) / len(outside),
                "%",
                "mean over samples of the host's CPU used outside loadproof's process tree",
                1,
                direction="neither",
            )
        )
    ooms = [r.host.oom_kills for r in rows if r.host.oom_kills is not None]
    if ooms:
        claims.append(
            number(
                "telemetry.oom_kills",
                max(ooms) - min(ooms),
                "kills",
                "growth of /proc/vmstat oom_kill",
                direction="lower",
            )
        )
    gpu_rows = [r.gpus for r in rows if r.gpus]
    if not gpu_rows:
        return claims
    temps = [g.temp_c for gs in gpu_rows for g in gs if g.temp_c is not None]
    if temps:
        claims.append(
            number(
                "telemetry.max_gpu_temp_c",
                max(temps),
                "C",
                "max over samples and GPUs of the GPU temperature",
                direction="neither",
            )
        )
    sums = [
        sum(g.power_w for g in gs if g.power_w is not None) for gs in gpu_rows if all(g.power_w is not None for g in gs)
    ]
    if sums:
        claims.append(
            number(
                "telemetry.max_gpu_power_sum_w",
                max(sums),
                "W",
                "max over samples of the power drawn by all GPUs together",
                0,
                direction="neither",
            )
        )
    loaded = [g for gs in gpu_rows for g in gs if (g.util_pct or 0) >= LOADED_UTIL_PCT]
    if loaded:
        held = all(g.pcie_gen == g.pcie_gen_max and g.pcie_width == g.pcie_width_max for g in loaded)
        claims.append(
            fact(
                "telemetry.pcie_max_link_under_load",
                held,
                f"every sample with utilization >= {LOADED_UTIL_PCT}% ran at its maximum PCIe generation and width",
            )
        )
    pcie = [
        ((g.pcie_tx_kbps or 0) + (g.pcie_rx_kbps or 0), g.index)
        for gs in gpu_rows
        for g in gs
        if g.pcie_tx_kbps is not None or g.pcie_rx_kbps is not None
    ]
    if pcie:
        peak, index = max(pcie)
        claims.append(
            number(
                "telemetry.max_pcie_mb_s",
                peak / 1000,
                "MB/s",
                f"max over samples and GPUs of PCIe TX + RX as NVML samples it (GPU {index})",
                1,
                direction="neither",
            )
        )
    moved = _nvlink_growth(gpu_rows)
    if moved is not None:
        claims.append(
            number(
                "telemetry.nvlink_gib",
                moved / 1024**2,
                "GiB",
                "growth of the NVLink TX + RX data counters, summed over GPUs, first sample to last",
                2,
                direction="neither",
            )
        )
    xids = sum(len(r.xid_events) for r in rows)
    claims.append(
        count("telemetry.xid_events", xids, "events", "NVML Xid critical error events recorded", direction="lower")
    )
    return claims


def _nvlink_growth(gpu_rows: list[list[GPUSample]]) -> int | None:
    """Last - first of the cumulative per-GPU NVLink TX and RX counters, summed; None when no GPU has them
    at both ends."""
    total, seen = 0, False
    first, last = {g.index: g for g in gpu_rows[0]}, {g.index: g for g in gpu_rows[-1]}
    for index, end in last.items():
        start = first.get(index)
        if start is None:
            continue
        for a, b in ((start.nvlink_tx_kib, end.nvlink_tx_kib), (start.nvlink_rx_kib, end.nvlink_rx_kib)):
            if a is not None and b is not None:
                total += b - a
                seen = True
    return total if seen else None
