"""`run load --dataset` with an empty or a garbage file, against the simulator (a real process): one line
naming the file and what is wrong, exit 2, before any run directory is made (issue #37: an empty run
directory was left behind in `runs/`); a data set that only its filters leave without a usable row,
which is known once the run has its tokenizer, removes the run directory it had made."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadproof.sim.text import tokenizer_path
from tests.integration.sim_process import SimProcess

pytestmark = pytest.mark.timeout(120)

GARBAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 16  # a binary file, its first line not UTF-8


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with SimProcess(tmp_path_factory.mktemp("sim") / "sim.log", config={"time_scale": 10.0}) as process:
        yield process


def run_load(sim: SimProcess, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "loadproof", "run", "load", "--url", sim.url, "--tokenizer", str(tokenizer_path())]
    argv += ["--out", str(out), "--rate", "4", "-n", "4", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90)


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("empty.jsonl", b"", "--dataset {path}: empty: no rows"),
        ("empty.json", b"", "{path}: empty: no ShareGPT rows"),
        ("garbage.jsonl", GARBAGE, "{path}: row 0 (line 1): not valid UTF-8"),
        ("garbage.json", GARBAGE, "{path}: row 0 (line 1): not JSON"),
        ("blank.jsonl", b"\n\n  \n", "--dataset {path}: empty: no rows"),
    ],
)
def test_an_empty_or_garbage_data_set_is_one_line_before_any_run_directory(
    sim: SimProcess, tmp_path: Path, name: str, content: bytes, said: str
):
    path = tmp_path / name
    path.write_bytes(content)
    out = tmp_path / "runs"
    proc = run_load(sim, out, "--dataset", str(path))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert said.format(path=path) in lines[0]
    assert not out.exists() or not any(out.iterdir())  # no run directory, not even an empty one


def test_a_data_set_its_filters_leave_without_a_prompt_removes_the_run_directory(sim: SimProcess, tmp_path: Path):
    path = tmp_path / "short.jsonl"
    path.write_text('{"prompt": "hello there"}\n{"prompt": "hi"}\n')
    out = tmp_path / "runs"
    proc = run_load(sim, out, "--dataset", str(path), "--dataset-min-input-tokens", "1000")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"error: --dataset {path}: no usable prompt among 2 rows" in proc.stderr
    assert "run directory removed: the run was refused before its first request" in proc.stderr
    assert not any(out.iterdir())  # made, then removed
