"""`loadproof run replay` and `run load --dataset` against the simulator (a real process, with vLLM's prefix
cache by block hashes): the shipped Mooncake slice replayed with the engine's prefix-cache hit rate
beside the trace's, a bundle that verifies, a bad trace as one line and exit 2, and a ShareGPT and a
Parquet data set through the open-loop scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import msgspec
import pytest

from loadproof.metrics.replay import by_model, expected_hits
from loadproof.plans.replay import ReplayPlan
from loadproof.sim.text import tokenizer_path
from tests.integration.bundles import publish_and_verify
from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario

pytestmark = pytest.mark.timeout(240)

SLICE = str(files("loadproof") / "data" / "traces" / "mooncake-conversation-300.jsonl")


def test_the_mooncake_slice_replays_with_the_engines_hit_rate_beside_the_traces(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "replay",
            "--trace",
            SLICE,
            "--format",
            "mooncake",
            "--block-tokens",
            "32",
            "--time-scale",
            "10",
            "--max-requests",
            "120",
            "--max-output-tokens",
            "4",
            "--slo",
            "ttft=2s",
        )
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    assert value["replay.requests"] == value["replay.planned_requests"] == 120 and value["replay.failed_requests"] == 0
    assert value["replay.input_tokens_mismatched"] == 0 and value["replay.output_tokens_mismatched"] == 0
    for name in (
        "replay.ttft_s.p50",
        "replay.ttft_s.p99",
        "replay.send_lag_s.p99",
        "replay.goodput_rps",
        "replay.slo_attainment_pct",
        "replay.e2el_from_intended_s.p50",
    ):
        assert name in value, name
    expected, engine = value["replay.prefix_hit_rate.expected_pct"], value["replay.prefix_hit_rate.engine_pct"]
    assert expected > 2  # the slice's first 120 rows share their first blocks
    assert abs(expected - engine) < 1.0, (expected, engine)
    # the engine's TTFT in the client's seconds at time scale 10 (it read -90% when /metrics were modeled seconds)
    assert abs(value["crosscheck.ttft_mean_s.diff_pct"]) < 25, value["crosscheck.ttft_mean_s.diff_pct"]
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    assert {r["family"] for r in records} == {"trace"}
    # sent at the trace's times / 10: the intended offsets are the plan's
    rows = [json.loads(line) for line in Path(SLICE).read_text().splitlines()[:120]]
    t0 = min(r["intended_send_ns"] for r in records)
    for r in records:
        assert r["intended_send_ns"] - t0 == pytest.approx(rows[r["batch"]]["timestamp"] / 10 * 1e6, abs=1e3)
        assert r["prompt_tokens"] == plan["text_tokens"][r["batch"]] + plan["overhead_tokens"]
    publish_and_verify(run, tmp_path / "bundle")


def test_a_model_mix_shares_each_prefix_only_within_its_model(tmp_path: Path):
    """The slice replayed half to the base model, half to an adapter: the simulator keys its cache by adapter as
    vLLM does, so the expectation keyed by model matches the engine's rate, and is below the unmixed one."""
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0, "lora_modules": ["adapter-a"]}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "replay",
            "--trace",
            SLICE,
            "--format",
            "mooncake",
            "--block-tokens",
            "32",
            "--time-scale",
            "10",
            "--max-requests",
            "120",
            "--max-output-tokens",
            "4",
            "--model-mix",
            "sim=1,adapter-a=1",
        )
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    assert value["replay.model.sim.requests"] + value["replay.model.adapter-a.requests"] == 120
    expected, engine = value["replay.prefix_hit_rate.expected_pct"], value["replay.prefix_hit_rate.engine_pct"]
    assert abs(expected - engine) < 1.0, (expected, engine)
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    assert all(r["model"] == plan["models"][r["batch"]] for r in records)
    unmixed = dict(plan, models=[])  # the same requests as if one model served them all
    typed = msgspec.convert(unmixed, ReplayPlan)
    alone = sum(
        expected_hits(
            typed.text_tokens, [by_model(typed, i, ids) for i, ids in enumerate(typed.hash_ids)], typed.block_tokens
        )
    )
    mixed = msgspec.convert(plan, ReplayPlan)
    apart = sum(
        expected_hits(
            mixed.text_tokens, [by_model(mixed, i, ids) for i, ids in enumerate(mixed.hash_ids)], mixed.block_tokens
        )
    )
    assert apart < alone  # prefixes a request shared with the other model's requests are no hits here
    publish_and_verify(run, tmp_path / "bundle")


def test_a_bad_trace_is_one_line_and_exit_2(tmp_path: Path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n'
        '{"timestamp": 2, "input_length": 10, "output_length": 1, "hash_ids": [2]}\n'
    )
    with SimProcess(tmp_path / "sim.log") as sim:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadproof",
                "run",
                "replay",
                "--url",
                sim.url,
                "--tokenizer",
                str(tokenizer_path()),
                "--trace",
                str(trace),
                "--block-tokens",
                "32",
                "--out",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "t.jsonl: line 2: timestamp goes back" in lines[0], proc.stderr


def test_a_sharegpt_and_a_parquet_data_set_run_through_load(tmp_path: Path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    sharegpt = tmp_path / "sg.json"
    sharegpt.write_text(
        json.dumps(
            [
                {
                    "id": str(i),
                    "conversations": [
                        {"from": "human", "value": f"Question {i}: tell me about the river stone. " * (1 + i % 4)},
                        {"from": "gpt", "value": "It is a stone. " * (1 + i % 3)},
                    ],
                }
                for i in range(30)
            ]
        )
    )
    parquet = tmp_path / "d.parquet"
    pq.write_table(pa.table({"question": [f"What is {i} squared?" for i in range(30)], "n": [3] * 30}), parquet)
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim, tmp_path / "a", "load", "--rate", "20", "-n", "12", "--dataset", str(sharegpt)
        )
        assert code == 0, claims
        value = {name: c["value"] for name, c in claims.items()}
        plan = json.loads((run / "manifest.json").read_text())["plan"]
        assert value["load.requests"] == 12 and value["load.failed_requests"] == 0
        assert value["load.input_tokens_mismatched"] == 0 and value["load.output_tokens_mismatched"] == 0
        assert plan["dataset"]["format"] == "sharegpt" and len(plan["dataset"]["rows_sent"]) == 12
        assert plan["dataset"]["outputs_from_data"] == 12  # each reply's tokens
        records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
        assert {r["family"] for r in records} == {"dataset"}  # not the synthetic workload's
        replies = {i: len(("It is a stone. " * (1 + i % 3)).encode()) for i in range(30)}
        sent = plan["dataset"]["rows_sent"]
        assert sorted(r["output_tokens"] for r in records) == sorted(replies[row] for row in sent)
        code, claims, run = run_scenario(
            sim,
            tmp_path / "b",
            "load",
            "--rate",
            "20",
            "-n",
            "40",
            "--dataset",
            str(parquet),
            "--dataset-columns",
            "prompt=question,output_tokens=n",
            "--dataset-sample",
            "first",
            "--dataset-repeat",
        )
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    assert value["load.requests"] == 40 and value["load.input_tokens_mismatched"] == 0
    assert plan["dataset"]["repeated"] == 10 and plan["dataset"]["rows_sent"][:3] == [0, 1, 2]
    assert value["crosscheck.generation_tokens.client"] == 40 * 3


def test_a_bailian_format_agent_trace_replays_with_its_sessions_hits(tmp_path: Path):
    """Alibaba's Qwen-Bailian format (the to-B API-calling and coder traces' schema: sessions by
    parent_chat_id, 16-token hash ids), written here in its documented form: three sessions of three turns
    on a shared 4-block prefix, each turn extending its session's last; replayed at the default 32 tokens a
    block, the simulator's prefix cache hits what the trace's blocks promise."""
    rows, chat = [], 0
    for turn in range(3):
        for s in range(3):
            own = [1000 * (s + 1) + j for j in range(2 + 3 * turn)]
            ids = [1, 2, 3, 4] + own
            rows.append(
                {
                    "chat_id": chat,
                    "parent_chat_id": -1 if turn == 0 else chat - 3,
                    "timestamp": 0.2 * chat,
                    "input_length": 16 * len(ids),
                    "output_length": 2,
                    "type": "text",
                    "turn": turn + 1,
                    "hash_ids": ids,
                }
            )
            chat += 1
    trace = tmp_path / "bailian.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "replay",
            "--trace",
            str(trace),
            "--format",
            "bailian",
            "--time-scale",
            "2",
            "--max-output-tokens",
            "2",
        )
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    assert value["replay.requests"] == 9 and value["replay.failed_requests"] == 0
    assert value["replay.input_tokens_mismatched"] == 0
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    assert plan["block_tokens"] == 32 and plan["text_tokens"][0] == 32 * 6  # the trace's 16-token blocks doubled
    expected, engine = value["replay.prefix_hit_rate.expected_pct"], value["replay.prefix_hit_rate.engine_pct"]
    assert expected > 40 and abs(expected - engine) < 3, (expected, engine)
    publish_and_verify(run, tmp_path / "bundle")


WEKA = Path(__file__).resolve().parents[1] / "fixtures" / "agent-traces" / "kv-cache-tester-trace_0291.json"


def test_a_published_agentic_coding_trace_replays_with_its_sub_agents_as_sessions(tmp_path: Path):
    """kv-cache-tester's trace_0291 (a real Claude Code session with two sub-agents, tests/fixtures/README.md),
    `--format weka` at half its size (32 tokens a 64-token block) and 200x its pace: every call sent with its
    session (the main agent's, each sub-agent's) in the header, and the simulator's prefix cache hitting what the
    trace's blocks promise (each call extends the conversation before it)."""
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 20.0}) as sim:
        code, claims, run = run_scenario(
            sim, tmp_path, "replay", "--trace", str(WEKA), "--format", "weka", "--block-tokens", "32",
            "--time-scale", "200", "--max-output-tokens", "2", "--session-header", "x-session-id",
        )  # fmt: skip
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    assert value["replay.requests"] == 32 and value["replay.failed_requests"] == 0
    assert value["replay.input_tokens_mismatched"] == 0 and value["replay.sessions"] == 3
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    # its first call's 17,869 tokens at half size (its part block raised to a block's head and pad at least)
    assert 8935 <= plan["text_tokens"][0] < 8935 + 32 and plan["session_header"] == "x-session-id"
    assert sorted(set(plan["sessions"])) == ["trace_0291", "trace_0291/agent_001", "trace_0291/agent_002"]
    expected, engine = value["replay.prefix_hit_rate.expected_pct"], value["replay.prefix_hit_rate.engine_pct"]
    assert expected > 80 and abs(expected - engine) < 3, (expected, engine)
