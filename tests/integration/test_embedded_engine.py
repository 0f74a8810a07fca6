"""The client, the throughput scenario and the run directory against the real embedded engine."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from loadproof.client import RequestSpec, StreamingClient
from loadproof.engines.vllm import REQUIRED_METRICS, VLLM_METRICS
from loadproof.metrics.throughput import batch_aggregate_per_s, decode_rate_per_s
from loadproof.protocol.routes import request_body
from loadproof.records import RequestRecord
from loadproof.telemetry.server_metrics import split_name
from loadproof.workloads.prompts import load_family
from tests.polling import eventually, poll

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]


def spec(engine, prompt: str, i: int = 0, max_tokens: int = 32, endpoint: str = "completions") -> RequestSpec:
    body = request_body(endpoint, engine.model, prompt, max_tokens=max_tokens, seed=731, ignore_eos=True)
    return RequestSpec(request_id=f"it-{i}", endpoint=endpoint, body=body, deadline_s=300)


def test_engine_exposes_the_metric_names_loadproof_maps(engine):
    for name in (VLLM_METRICS[k] for k in REQUIRED_METRICS):
        engine.metric(split_name(name)[0])  # KeyError if this vLLM does not expose it (a `name{label}`: by its name)


@pytest.mark.asyncio
async def test_batch_of_four_usage_matches_the_client_tokenizer(engine):
    tokenizer = Tokenizer.from_file(str(engine.tokenizer))
    prompts = [p.text for p in load_family("english")[:4]]
    async with StreamingClient(engine.url) as client:
        records = await asyncio.gather(*(client.stream(spec(engine, p, i)) for i, p in enumerate(prompts)))
    for prompt, rec in zip(prompts, records):
        assert rec.ok, rec.error_message
        assert rec.output_tokens == 32 and sum(rec.chunk_tokens) == 32  # ignore_eos: exactly max_tokens
        assert rec.prompt_tokens == len(tokenizer.encode(prompt).ids)  # BOS included, as the engine counts
        recount = len(tokenizer.encode(rec.output_text, add_special_tokens=False).ids)
        assert abs(recount - rec.output_tokens) <= 3, (recount, rec.output_text)
        assert rec.latency_ns - rec.ttft_ns == sum(rec.itl_ns())
        assert decode_rate_per_s(rec) > 1.0
    # the four overlapped: each started before any other finished
    assert max(r.send_ns for r in records) < min(r.end_ns for r in records)
    assert batch_aggregate_per_s(records) > decode_rate_per_s(records[0]) * 0.5


@pytest.mark.asyncio
async def test_chat_endpoint_streams_with_the_added_template(engine):
    async with StreamingClient(engine.url) as client:
        rec = await client.stream(spec(engine, "Name three colours.", endpoint="chat", max_tokens=8))
    assert rec.ok, rec.error_message
    assert rec.output_tokens == 8 and rec.first_token_ns is not None


@pytest.mark.asyncio
async def test_cancelled_stream_keeps_its_record_and_the_engine_frees_the_request(engine):
    seen: list[RequestRecord] = []
    live = RequestRecord(request_id="it-0", endpoint="completions")
    async with StreamingClient(engine.url, on_record=seen.append) as client:
        task = asyncio.create_task(client.stream(spec(engine, "Tell a very long story.", max_tokens=4000), live))
        # well under way: tokens are arriving, and the engine shows the request running
        await eventually(lambda: sum(live.chunk_tokens) >= 8, 120, "the first tokens of the story", every_s=0.1)
        await eventually(
            lambda: engine.metric("vllm:num_requests_running") == 1, 30, "the engine running it", every_s=0.1
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert len(seen) == 1 and seen[0].error_kind == "cancelled"
    assert 0 < sum(seen[0].chunk_tokens) < 4000
    await eventually(
        lambda: engine.metric("vllm:num_requests_running") == 0,
        15,
        "the engine freeing the request of a client that left",
        every_s=0.2,
    )


@pytest.mark.asyncio
async def test_over_long_prompt_is_a_clear_http_error(engine):
    async with StreamingClient(engine.url) as client:
        rec = await client.stream(spec(engine, "word " * 40_000))
    assert not rec.ok and rec.error_kind == "http_status" and rec.http_status == 400
    assert "32768" in rec.error_message and "context" in rec.error_message.lower()


def loadproof(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=500, **kw)


def test_run_throughput_writes_claims_under_contract_names(engine, tmp_path):
    result = loadproof(
        "run",
        "throughput",
        "--url",
        engine.url,
        "--endpoint",
        "completions",
        "--families",
        "code",
        "--concurrency",
        "1,2",
        "--num-prompts",
        "2",
        "--max-tokens",
        "16",
        "--tokenizer",
        str(engine.tokenizer),
        "--out",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    (run_dir,) = tmp_path.iterdir()
    claims = {c["name"]: c for c in json.loads((run_dir / "claims.json").read_text())["claims"]}
    c1 = claims["throughput.code.c1.decode_tokens_per_s"]
    assert c1["value"] > 1.0 and c1["unit"] == "tokens/s" and c1["formula"]
    assert claims["throughput.code.c2.aggregate_tokens_per_s"]["value"] > 1.0
    rows = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == 2 + 2 and all(r["ok"] for r in rows)
    assert all(r["client_output_tokens"] is not None for r in rows)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["engine_version"] == "0.32.0" and manifest["end_wall_time"]
    # the report recomputes the same claims from the stored records alone
    first = (run_dir / "claims.json").read_text()
    (run_dir / "claims.json").unlink()
    assert loadproof("report", str(run_dir)).returncode == 0
    assert (run_dir / "claims.json").read_text() == first


def test_interrupted_run_keeps_every_finished_request(engine, tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "throughput",
            "--url",
            engine.url,
            "--endpoint",
            "completions",
            "--families",
            "english",
            "--concurrency",
            "1",
            "--max-tokens",
            "48",
            "--out",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def two_finished() -> list[Path]:
        requests = list(tmp_path.glob("*/requests.jsonl"))
        return requests if requests and len(requests[0].read_text().splitlines()) >= 2 else []

    requests = poll(two_finished, 120, every_s=0.2)  # the asserts below tell whether they came
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    lines = requests[0].read_text().splitlines()
    assert len(lines) >= 2
    finished = [json.loads(line) for line in lines]
    assert sum(r["ok"] for r in finished) >= 2
    assert loadproof("report", str(requests[0].parent)).returncode == 0


def test_planner_predicts_the_engines_own_kv_report_within_two_percent(engine):
    from importlib import resources

    assert engine.log is not None and engine.log.is_file()
    profile = resources.files("loadproof") / "profiles" / "embedded.toml"
    result = loadproof("plan", str(profile), "--startup-log", str(engine.log))
    assert result.returncode == 0, result.stderr
    reported = int(re.search(r"engine reported\s*│\s*([\d,]+) tokens", result.stdout).group(1).replace(",", ""))
    predicted = int(re.search(r"predicted KV cache tokens\s*│\s*([\d,]+)", result.stdout).group(1).replace(",", ""))
    assert abs(predicted - reported) / reported <= 0.02, result.stdout
    # and without the log, from the profile's own budget (VLLM_CPU_KVCACHE_SPACE), the same figure
    alone = loadproof("plan", str(profile))
    assert f"{predicted:,}" in alone.stdout


@pytest.mark.parametrize("endpoint", ["responses", "messages"])
def test_a_conversation_goes_on_through_the_responses_and_messages_apis(engine, tmp_path, endpoint):
    """Each turn sends the whole conversation again in the API's own shape: the engine takes every earlier
    turn (it refused an assistant's Responses turn given as output_text parts), and its prefix cache sees the
    conversation grow, as the client expects it to."""
    result = loadproof(
        "run", "sessions", "--url", engine.url, "--endpoint", endpoint, "--no-ignore-eos", "-u", "2", "-t", "2",
        "--first-tokens", "120", "--output-tokens", "8", "--tokenizer", str(engine.tokenizer), "--out", str(tmp_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (run_dir,) = tmp_path.iterdir()
    rows = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    turns = [r for r in rows if r["scenario"] == "sessions" and r["family"] != "prime"]
    assert len(turns) == 4 and all(r["ok"] and r["endpoint"] == endpoint for r in turns)
    warm = [r for r in turns if r["family"] == "warm"]
    cold = {r["prompt_id"]: r for r in turns if r["family"] == "cold"}
    # a warm turn's prompt holds the cold turn's prompt and answer: it is longer by at least the answer
    assert all(
        r["prompt_tokens"] > cold[r["prompt_id"]]["prompt_tokens"] + cold[r["prompt_id"]]["output_tokens"] for r in warm
    )
    claims = {c["name"]: c["value"] for c in json.loads((run_dir / "claims.json").read_text())["claims"]}
    assert claims["crosscheck.prompt_tokens.diff_pct"] == 0.0 and claims["crosscheck.generation_tokens.diff_pct"] == 0.0
