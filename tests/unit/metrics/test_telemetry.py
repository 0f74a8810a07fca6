"""Telemetry claims from real samples recorded on an H200 (a bf16 matmul loop; see the fixture's README)."""

import json
from pathlib import Path

from loadproof.metrics.telemetry import telemetry_claims
from tests import rundir_values as rv

FIXTURE = Path(__file__).parents[2] / "fixtures" / "telemetry" / "h200-matmul.jsonl"


def test_h200_matmul_recording():
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    claims = {c.name: c for c in telemetry_claims(rv.telemetry(rows))}
    # read off the file with jq-like inspection when it was recorded: 141 samples over 70.0 s,
    # peak 58 C and 695.524 W, PCIe 5.0 x16 (the maximum) whenever utilization was high
    assert claims["telemetry.samples"].value == 141
    assert claims["telemetry.duration_s"].printed == "70.0"
    assert claims["telemetry.max_gpu_temp_c"].value == 58
    assert claims["telemetry.max_gpu_power_sum_w"].printed == "696"
    assert claims["telemetry.pcie_max_link_under_load"].value is True
    assert claims["telemetry.xid_events"].value == 0


def test_a_downshifted_link_under_load_is_reported():
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    busy = next(r for r in rows if r["gpus"][0]["util_pct"] == 100)
    busy["gpus"][0]["pcie_gen"] = 4
    claims = {c.name: c for c in telemetry_claims(rv.telemetry(rows))}
    assert claims["telemetry.pcie_max_link_under_load"].value is False


def test_host_only_rows_give_host_claims_and_no_gpu_claims():
    rows = [{"t_ns": i * 10**9, "host": {"mem_used_bytes": (i + 1) * 1024**3, "oom_kills": 3}} for i in range(5)]
    claims = {c.name: c for c in telemetry_claims(rv.telemetry(rows))}
    assert claims["telemetry.host_max_mem_used_gib"].value == 5.0 and claims["telemetry.oom_kills"].value == 0
    assert not any(name.startswith("telemetry.max_gpu") for name in claims)


def _two_gpu_rows():
    rows = []
    for i in range(4):
        gpus = [
            {
                "index": k,
                "util_pct": 90,
                "pcie_gen": 5,
                "pcie_width": 16,
                "pcie_gen_max": 5,
                "pcie_width_max": 16,
                "pcie_tx_kbps": 1000 * (i + 1) * (k + 1),
                "pcie_rx_kbps": 500,
                "nvlink_tx_kib": 1024**2 * i * (k + 1),
                "nvlink_rx_kib": 1024**2 * i,
            }
            for k in range(2)
        ]
        rows.append({"t_ns": i * 10**9, "gpus": gpus})
    return rows


def test_pcie_peak_and_nvlink_traffic_come_from_the_samples():
    claims = {c.name: c for c in telemetry_claims(rv.telemetry(_two_gpu_rows()))}
    # peak: sample 3 on GPU 1: 1000 * 4 * 2 + 500 KB/s
    assert claims["telemetry.max_pcie_mb_s"].printed == "8.5"
    assert "GPU 1" in claims["telemetry.max_pcie_mb_s"].formula
    # growth over 3 s: GPU 0 tx 3 + rx 3 GiB, GPU 1 tx 6 + rx 3 GiB
    assert claims["telemetry.nvlink_gib"].printed == "15.00"


def test_gpus_without_nvlink_counters_give_no_nvlink_claim():
    rows = _two_gpu_rows()
    for r in rows:
        for g in r["gpus"]:
            g["nvlink_tx_kib"] = g["nvlink_rx_kib"] = None
    claims = {c.name: c for c in telemetry_claims(rv.telemetry(rows))}
    assert "telemetry.nvlink_gib" not in claims and "telemetry.max_pcie_mb_s" in claims


def test_cpu_used_outside_loadproof_is_a_mean_claim_only_where_samples_carry_it():
    rows = [{"t_ns": i * 10**9, "host": {"cpu_outside_pct": pct}} for i, pct in enumerate([None, 10.0, 30.0])]
    claims = {c.name: c for c in telemetry_claims(rv.telemetry(rows))}
    assert claims["telemetry.host_cpu_outside_mean_pct"].value == 20.0
    old = {c.name for c in telemetry_claims(rv.telemetry([{"t_ns": 0, "host": {"cpu_busy_pct": 50.0}}]))}
    assert "telemetry.host_cpu_outside_mean_pct" not in old


def _stat(pid: int, comm: str, ppid: int, ticks: tuple[int, int, int, int]) -> str:
    # /proc/PID/stat: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    # cutime cstime ...
    return f"{pid} ({comm}) S {ppid} 1 1 0 -1 0 0 0 0 0 {ticks[0]} {ticks[1]} {ticks[2]} {ticks[3]} 20 0 1 0\n"


def test_the_process_tree_ticks_are_loadproof_and_its_descendants_only(tmp_path):
    from loadproof.telemetry.host import _tree_cpu_ticks

    tree = {
        100: ("loadproof", 1, (50, 5, 7, 1)),
        101: ("vllm (engine) core", 100, (400, 20, 0, 0)),
        102: ("worker) x", 101, (900, 30, 0, 0)),
        200: ("stranger", 1, (10_000, 0, 0, 0)),
        201: ("stranger child", 200, (5_000, 0, 0, 0)),
    }
    for pid, (comm, ppid, ticks) in tree.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(_stat(pid, comm, ppid, ticks))
    (tmp_path / "self").mkdir()  # not a process
    assert _tree_cpu_ticks(100, tmp_path) == 63 + 420 + 930
    assert _tree_cpu_ticks(999, tmp_path) is None


def test_a_child_burning_cpu_counts_inside_the_tree():
    # CPU time, not wall time: the child spins until it has used 0.3 s of CPU, however busy the machine is
    import os
    import subprocess
    import sys

    from loadproof.telemetry.host import _tree_cpu_ticks

    before = _tree_cpu_ticks(os.getpid())
    assert before is not None
    subprocess.run(
        [sys.executable, "-c", "import time\nwhile time.process_time() < 0.3: pass"], check=True, timeout=120
    )
    grown = (_tree_cpu_ticks(os.getpid()) - before) / os.sysconf("SC_CLK_TCK")
    assert grown >= 0.25, grown  # the reaped child's time is in this process's cutime
