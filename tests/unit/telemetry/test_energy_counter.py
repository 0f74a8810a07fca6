"""NVML's energy counter through the GPU sampler (a stand-in pynvml): read with every sample where every GPU
has it; where one does not, no reading is made up and the manifest's telemetry says why in NVML's words."""

from __future__ import annotations

import sys
import types

import pytest

from loadproof.telemetry import sampler


class NVMLError(Exception):
    pass


def fake_nvml(energy: dict[int, int | None]) -> types.ModuleType:
    """Two GPUs; GPU i's counter is energy[i] mJ, None: NVML answers NotSupported."""
    n = types.ModuleType("pynvml")
    n.NVMLError = NVMLError
    n.NVML_TEMPERATURE_GPU = n.NVML_CLOCK_SM = n.NVML_PCIE_UTIL_TX_BYTES = n.NVML_PCIE_UTIL_RX_BYTES = 0
    n.nvmlEventTypeXidCriticalError = 0
    n.nvmlInit = n.nvmlShutdown = lambda: None
    n.nvmlDeviceGetCount = lambda: len(energy)
    n.nvmlDeviceGetHandleByIndex = lambda i: i
    n.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    n.nvmlSystemGetDriverVersion = lambda: "580.159.04"

    def refuse(*_args):
        raise NVMLError("Not Supported")

    n.nvmlEventSetCreate = refuse
    for name in (
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetCurrPcieLinkGeneration",
        "nvmlDeviceGetCurrPcieLinkWidth",
        "nvmlDeviceGetMaxPcieLinkGeneration",
        "nvmlDeviceGetMaxPcieLinkWidth",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetPcieThroughput",
        "nvmlDeviceGetFieldValues",
    ):
        setattr(n, name, refuse)
    n.nvmlDeviceGetPowerUsage = lambda h: 350_000

    def total_energy(h):
        if energy[h] is None:
            raise NVMLError("Not Supported")
        return energy[h]

    n.nvmlDeviceGetTotalEnergyConsumption = total_energy
    return n


@pytest.mark.parametrize("energy", [{0: 5_000, 1: 7_000}, {0: 5_000, 1: None}])
def test_the_counter_is_sampled_or_the_reason_kept(tmp_path, monkeypatch, energy):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(energy))
    recorder = sampler.TelemetrySampler(tmp_path / "telemetry.jsonl")
    info = recorder.describe()
    with open(tmp_path / "telemetry.jsonl", "wb") as recorder._out:
        row = recorder.sample_once()
    assert [g.energy_mj for g in row.gpus] == [energy[0], energy[1]] and row.gpus[0].power_w == 350.0
    if None in energy.values():
        assert info.energy_note == "GPU 1 has no energy counter (nvmlDeviceGetTotalEnergyConsumption: Not Supported)"
    else:
        assert info.energy_note is None and info.gpus == 2


def test_without_nvml_the_reason_is_nvmls_absence(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    info = sampler.TelemetrySampler(tmp_path / "telemetry.jsonl").describe()
    assert info.gpus == 0 and info.energy_note.startswith("no GPU energy counter: nvidia-ml-py is not installed")
