"""A user mistake is one clear line on stderr with exit 2 (3 for an unreachable server), never a traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (
            ["run", "throughput", "--url", "http://127.0.0.1:9", "--concurrency", "1,x"],
            2,
            "--concurrency takes whole numbers",
        ),
        (["run", "throughput", "--url", "http://127.0.0.1:9", "--families", "klingon"], 2, "families must be among"),
        (
            ["run", "throughput", "--url", "http://127.0.0.1:9", "--endpoint", "grpc"],
            2,
            "--endpoint grpc: must be completions, chat, responses, messages, embeddings, rerank or transcriptions",
        ),
        (
            ["run", "throughput", "--url", "http://127.0.0.1:9", "--endpoint", "embeddings"],
            2,
            "`run throughput` does not measure the embeddings endpoint",
        ),
        (
            ["run", "interference", "--url", "http://127.0.0.1:9", "--endpoint", "rerank"],
            2,
            "`run interference` does not measure the rerank endpoint",
        ),
        (
            [
                "run",
                "load",
                "--url",
                "http://127.0.0.1:9",
                "--endpoint",
                "rerank",
                "--rate",
                "1",
                "-n",
                "2",
                "--dataset",
                str(EXAMPLES / "conversations.sharegpt.json"),
            ],
            2,
            "--dataset with --endpoint rerank",
        ),
        (["run", "throughput", "--url", "http://127.0.0.1:9"], 3, "cannot reach http://127.0.0.1:9"),
        (["report", "/nonexistent/run"], 2, "no run directory at /nonexistent/run"),
        (["serve"], 2, "give either a PROFILE or --embedded"),
        (["serve", "/nonexistent.toml"], 2, "profile not found"),
        (["plan", "/nonexistent.toml", "--simulate", "capacity"], 2, "profile not found: /nonexistent.toml"),
        (["run", "throughput"], 2, "Missing option '--url'"),
    ],
)
def test_user_mistakes(args, code, needle):
    result = loadproof(*args)
    assert result.returncode == code, result.stderr
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


def test_embedded_dry_run_prints_the_engine_command():
    result = loadproof("serve", "--embedded", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "vllm.entrypoints.openai.api_server" in result.stdout
    assert "VLLM_CPU_KVCACHE_SPACE=4" in result.stdout
