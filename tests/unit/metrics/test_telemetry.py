"""Telemetry claims from real samples recorded on an H200 (a bf16 matmul loop; see the fixture's README)."""

import json
from pathlib import Path

from loadproof.metrics.telemetry import telemetry_claims

FIXTURE = Path(__file__).parents[2] / "fixtures" / "telemetry" / "h200-matmul.jsonl"


def test_h200_matmul_recording():
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    claims = {c.name: c for c in telemetry_claims(rows)}
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
    claims = {c.name: c for c in telemetry_claims(rows)}
    assert claims["telemetry.pcie_max_link_under_load"].value is False


def test_host_only_rows_give_host_claims_and_no_gpu_claims():
    rows = [{"t_ns": i * 10**9, "host": {"mem_used_bytes": (i + 1) * 1024**3, "oom_kills": 3}} for i in range(5)]
    claims = {c.name: c for c in telemetry_claims(rows)}
    assert claims["telemetry.host_max_mem_used_gib"].value == 5.0 and claims["telemetry.oom_kills"].value == 0
    assert not any(name.startswith("telemetry.max_gpu") for name in claims)


def _two_gpu_rows():
    rows = []
    for i in range(4):
        gpus = [{"index": k, "util_pct": 90, "pcie_gen": 5, "pcie_width": 16, "pcie_gen_max": 5, "pcie_width_max": 16,
                 "pcie_tx_kbps": 1000 * (i + 1) * (k + 1), "pcie_rx_kbps": 500,
                 "nvlink_tx_kib": 1024**2 * i * (k + 1), "nvlink_rx_kib": 1024**2 * i} for k in range(2)]
        rows.append({"t_ns": i * 10**9, "gpus": gpus})
    return rows


def test_pcie_peak_and_nvlink_traffic_come_from_the_samples():
    claims = {c.name: c for c in telemetry_claims(_two_gpu_rows())}
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
    claims = {c.name: c for c in telemetry_claims(rows)}
    assert "telemetry.nvlink_gib" not in claims and "telemetry.max_pcie_mb_s" in claims
