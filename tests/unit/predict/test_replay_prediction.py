"""A trace replayed on the virtual clock (`sim predict-replay`, `plan --simulate replay`): the trace's shared
blocks become shared KV blocks of the modeled engine, so its prefix-cache hits are what the trace promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from loadproof.metrics.replay import expected_hits
from loadproof.predict.load import predict_load
from loadproof.predict.replay_requests import trace_block_hashes
from loadproof.sim.config import CostModel, SimConfig, dump_sim_config

# tests/integration/test_replay_engine.py's tiny trace: hash ids per request, 128-token blocks; expected hits
# 0, 2, 3, 0, 2, 1, 3, 0, 3, 4 blocks -> 2,304 of 4,096 text tokens
BLOCKS = [
    [0, 1, 2],
    [0, 1, 3],
    [0, 1, 2, 4],
    [5, 6],
    [5, 6, 7],
    [0, 8],
    [5, 6, 7, 9],
    [10, 11, 12],
    [10, 11, 12],
    [0, 1, 2, 4, 13],
]


def test_kv_blocks_are_shared_exactly_as_far_as_the_trace_blocks_are():
    a = trace_block_hashes([7, 8, 9], 3 * 128, 5, 128, 16)
    b = trace_block_hashes([7, 8, 1], 3 * 128, 5, 128, 16)
    assert len(a) == len(b) == (3 * 128 + 5) // 16
    same = sum(1 for x, y in zip(a, b) if x == y)
    assert same == (5 + 2 * 128) // 16  # the KV blocks that end within the overhead and the two shared blocks
    assert a[same:] != b[same:] and all(x != y for x, y in zip(a[same:], b[same:]))  # chained: never again
    # a cut last block shares the full one's leading tokens
    cut = trace_block_hashes([7, 8, 9], 2 * 128 + 40, 5, 128, 16)
    assert cut == a[: len(cut)]
    # another overhead shifts every block: nothing shared with a prompt of a different template
    assert not set(trace_block_hashes([7, 8, 9], 3 * 128, 6, 128, 16)) & set(a)


def test_the_modeled_engine_hits_what_the_trace_shares_when_nothing_is_evicted():
    cfg = SimConfig(
        block_size=128,
        num_gpu_blocks=1000,
        max_model_len=4096,
        cost=CostModel(step_overhead_s=0.01, prefill_s_per_token=1e-5, decode_s_per_seq=1e-3),
    )
    text = [128 * len(ids) for ids in BLOCKS]
    hashes = [trace_block_hashes(ids, n, 1, 128, 128) for ids, n in zip(BLOCKS, text)]
    pred = predict_load(
        cfg, [10.0 * i for i in range(len(BLOCKS))], [n + 1 for n in text], [2] * len(BLOCKS), hashes=hashes
    )
    assert all(r.ok for r in pred.records)
    assert sum(expected_hits(text, BLOCKS, 128)) == 2304
    assert pred.prefix_cache_hits == 2304 and pred.prefix_cache_queries == sum(text) + len(BLOCKS)
    # without the trace's hashes every prompt is its own: nothing hits
    alone = predict_load(cfg, [10.0 * i for i in range(len(BLOCKS))], [n + 1 for n in text], [2] * len(BLOCKS))
    assert alone.prefix_cache_hits == 0


def test_plan_simulate_replay_and_load_through_the_cli(tmp_path: Path):
    import json

    trace = tmp_path / "tiny.jsonl"
    trace.write_text(
        "".join(
            json.dumps({"timestamp": 10_000 * i, "input_length": 512 * len(ids), "output_length": 2, "hash_ids": ids})
            + "\n"
            for i, ids in enumerate(BLOCKS)
        )
    )
    profile = tmp_path / "sim.toml"
    profile.write_text(dump_sim_config(SimConfig(block_size=128, num_gpu_blocks=1000, max_model_len=4096)))
    replay = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadproof",
            "plan",
            str(profile),
            "--simulate",
            "replay",
            "--trace",
            str(trace),
            "--block-tokens",
            "128",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert replay.returncode == 0, replay.stderr[-2000:]
    assert "expected from the trace 56.11%, the modeled engine 56.11%" in replay.stdout, replay.stdout[-2000:]
    load = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadproof",
            "plan",
            str(profile),
            "--simulate",
            "load",
            "--rate",
            "1,2",
            "-n",
            "20",
            "--input-tokens",
            "256",
            "--output-tokens",
            "8",
            "--slo",
            "ttft=5s",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert load.returncode == 0 and "input 256, output 8" in load.stdout, load.stdout[-2000:] + load.stderr[-2000:]
    assert "highest rate meeting the SLO" in load.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "loadproof", "plan", str(profile), "--simulate", "load", "--rate", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        bad.returncode == 2
        and bad.stderr.strip().splitlines()[-1] == "error: --rate 0: must be > 0 requests/s (or inf: all at once)"
    )
