"""How many GPUs this host shows: counted before every start, so a deployment never comes back degraded."""

from __future__ import annotations

import shutil
import subprocess


def visible_gpus() -> int:
    """GPUs this host shows (NVML, else `nvidia-smi -L`); 0 when neither answers."""
    try:
        import pynvml  # optional (the loadproof[gpu] extra): a host without it counts with nvidia-smi

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no pynvml, no driver: fall back to the CLI
        pass
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))
