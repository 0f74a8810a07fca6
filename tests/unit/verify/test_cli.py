"""`loadproof publish` and `loadproof verify` as a user runs them: lines, summary and exit codes."""

import subprocess
import sys

from tests.unit.publish.synthetic import S, read_jsonl, reseal, throughput_run, write_jsonl

TP = "runs/throughput-20261130-083713-1022"


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=120)


def test_publish_then_verify_then_tamper(tmp_path):
    run = throughput_run(tmp_path / "src")
    done = loadproof("publish", str(run), "--out", str(tmp_path / "bundle"), "--engine-image", "sha256:" + "c" * 64)
    assert done.returncode == 0, done.stderr
    assert "loadproof verify" in done.stdout

    ok = loadproof("verify", str(tmp_path / "bundle"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok  throughput.english.c1.decode_tokens_per_s  7.3" in ok.stdout.splitlines()
    assert ok.stdout.splitlines()[0].startswith("VERIFIED")  # the verdict first
    assert ok.stdout.splitlines()[-1] == ok.stdout.splitlines()[0]  # and again where the listing ends

    rows = read_jsonl(tmp_path / "bundle" / TP / "requests.jsonl")
    rows[0]["last_token_ns"] -= int(3.7 * S)  # decode median 7.3 -> 8.0
    write_jsonl(tmp_path / "bundle" / TP / "requests.jsonl", rows)
    changed = loadproof("verify", str(tmp_path / "bundle"))
    assert changed.returncode == 1
    assert f"CHANGED  {TP}/requests.jsonl.zst  sha256 differs from SHA256SUMS" in changed.stdout  # as stored
    assert any(
        line.startswith("MISMATCH  throughput.english.c1.decode_tokens_per_s  published 7.3 recomputed 8.0")
        for line in changed.stdout.splitlines()
    )
    assert changed.stdout.splitlines()[0].startswith("FAILED")
    assert changed.stdout.splitlines()[-1].startswith("FAILED")

    reseal(tmp_path / "bundle")
    resealed = loadproof("verify", str(tmp_path / "bundle"))
    assert resealed.returncode == 1 and "CHANGED" not in resealed.stdout and "MISMATCH" in resealed.stdout


def test_user_mistakes_are_one_line_and_exit_2(tmp_path):
    run = throughput_run(tmp_path / "src")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    for args, needle in [
        (["publish", str(run), "--out", str(tmp_path / "full")], "already exists and is not empty"),
        (["publish", str(tmp_path / "nope"), "--out", str(tmp_path / "b")], "no run directory at"),
        (["verify", str(tmp_path / "nope")], "no bundle directory at"),
        (["verify", str(tmp_path / "src")], "not a loadproof bundle"),
    ]:
        result = loadproof(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert needle in result.stderr
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
