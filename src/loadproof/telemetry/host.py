"""Host samples from /proc: CPU busy share, memory, swap, OOM kills. Standard library only."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _cpu_times() -> tuple[int, int] | None:
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values), idle


def _meminfo() -> dict[str, int]:
    out = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            out[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    return out


def _oom_kills() -> int | None:
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class HostSampler:
    def __init__(self) -> None:
        self._last = _cpu_times()

    def sample(self) -> dict[str, Any]:
        now = _cpu_times()
        cpu = None
        if now is not None and self._last is not None and now[0] > self._last[0]:
            total, idle = now[0] - self._last[0], now[1] - self._last[1]
            cpu = round(100.0 * (total - idle) / total, 1)
        self._last = now
        mem = _meminfo()
        return {
            "cpu_busy_pct": cpu,
            "mem_used_bytes": mem.get("MemTotal", 0) - mem.get("MemAvailable", 0) if mem else None,
            "mem_total_bytes": mem.get("MemTotal"),
            "swap_used_bytes": mem.get("SwapTotal", 0) - mem.get("SwapFree", 0) if mem else None,
            "oom_kills": _oom_kills(),
        }
