"""Host samples from /proc: CPU busy share (all of it, and the part outside loadproof's own process tree),
memory, swap, OOM kills. Standard library only."""

from __future__ import annotations

import os
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


def _tree_cpu_ticks(root: int, proc: Path = Path("/proc")) -> int | None:
    """CPU ticks (user + system, with those of reaped children) of `root` and every live descendant (in the
    demo, the engine it started). Same unit as /proc/stat. One pass over /proc: about 1 ms per 66 processes."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    try:
        entries = os.listdir(proc)
    except OSError:
        return None
    for name in entries:
        if not name.isdigit():
            continue
        try:
            text = (proc / name / "stat").read_text()
        except OSError:  # gone since the listing
            continue
        fields = text[text.rfind(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
        if len(fields) < 15:
            continue
        pid = int(name)
        parents[pid] = int(fields[1])
        ticks[pid] = sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    if root not in ticks:
        return None
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += ticks.get(pid, 0)
        stack.extend(children.get(pid, ()))
    return total


def host_memory_bytes() -> int | None:
    """MemTotal of this host (None where /proc/meminfo is not there)."""
    return _meminfo().get("MemTotal")


def host_available_bytes() -> int | None:
    """MemAvailable of this host: what new processes can take without swapping (None where /proc/meminfo is not
    there)."""
    return _meminfo().get("MemAvailable")


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
    """`cpu_outside_pct`: the share of all the host's CPU time used outside loadproof's process tree, what
    else on the machine competed with the run (the engine counts as outside unless loadproof started it)."""

    def __init__(self) -> None:
        self._root = os.getpid()
        self._last = _cpu_times()
        self._last_tree = _tree_cpu_ticks(self._root)

    def sample(self) -> dict[str, Any]:
        now = _cpu_times()
        tree = _tree_cpu_ticks(self._root)
        cpu = outside = None
        if now is not None and self._last is not None and now[0] > self._last[0]:
            total, idle = now[0] - self._last[0], now[1] - self._last[1]
            cpu = round(100.0 * (total - idle) / total, 1)
            if tree is not None and self._last_tree is not None:
                # kept within 0-100: /proc/stat and the processes' counters are not read at the same instant
                outside = round(max(0.0, min(100.0, 100.0 * (total - idle - (tree - self._last_tree)) / total)), 1)
        self._last, self._last_tree = now, tree
        mem = _meminfo()
        return {
            "cpu_busy_pct": cpu,
            "cpu_outside_pct": outside,
            "mem_used_bytes": mem.get("MemTotal", 0) - mem.get("MemAvailable", 0) if mem else None,
            "mem_total_bytes": mem.get("MemTotal"),
            "swap_used_bytes": mem.get("SwapTotal", 0) - mem.get("SwapFree", 0) if mem else None,
            "oom_kills": _oom_kills(),
        }
