"""Synthetic run directories for publish/verify tests, with their figures worked out by hand.

`throughput_run` and `capacity_run` are written with RunWriter and RequestRecord as a real run writes
them; every expected figure in HAND_* below is computed from the times here, not by loadproof.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.store.files import ZST, compressed, content_path, read_content
from loadproof.store.run_dir import RunWriter

S = 1_000_000_000

# c1: three english prompts, (send, first token, last token, output tokens), seconds
C1 = [(0.0, 0.25, 13.95, 101), (20.0, 20.2, 32.7, 101), (40.0, 40.3, 56.3, 101)]
# c4: two batches of four; (send, [end of each stream], output tokens per stream)
C4 = [(100.0, [104.0, 105.0, 106.0, 110.0], 50), (200.0, [202.0, 203.0, 204.0, 205.0], 30)]
MEM_BYTES = [8 * 1024**3, 9 * 1024**3 + 512 * 1024**2, 9 * 1024**3]  # host memory over three samples
GPU_TEMPS = [(55, 61), (58, 63), (60, 59)]  # two GPUs, three samples

HAND_THROUGHPUT = {
    # (101 - 1) tokens / span: 100/13.7 = 7.2993, 100/12.5 = 8.0, 100/16.0 = 6.25 -> median 7.2993
    "throughput.english.c1.decode_tokens_per_s": ("7.3", 100 / 13.7),
    # TTFTs 0.25, 0.2, 0.3 s -> median 0.25
    "throughput.english.c1.ttft_median_s": ("0.250", 0.25),
    # batch 1: 4 * 50 tokens / (110 - 100) s = 20; batch 2: 4 * 30 / (205 - 200) = 24; median 22
    "throughput.english.c4.aggregate_tokens_per_s": ("22.0", 22.0),
    "throughput.english.c4.mean_output_tokens": ("40.0", 40.0),
    "telemetry.host_max_mem_used_gib": ("9.50", 9.5),
    "telemetry.max_gpu_temp_c": ("63", 63),
}


def throughput_records() -> list[RequestRecord]:
    records = []
    for i, (send, first, last, out) in enumerate(C1):
        records.append(
            RequestRecord(
                request_id=f"tp-c1-{i}",
                endpoint="completions",
                scenario="throughput",
                family="english",
                prompt_id=f"english-{i:02d}",
                concurrency=1,
                batch=i,
                ok=True,
                http_status=200,
                finish_reason="length",
                send_ns=int(send * S),
                first_token_ns=int(first * S),
                last_token_ns=int(last * S),
                end_ns=int(last * S) + 1000,
                prompt_tokens=22,
                output_tokens=out,
                client_output_tokens=out,
                num_chunks=out,
                output_text="Day 1: arrive in Lisbon. " * 4,
                chunk_ns=[int(first * S), int(last * S)],
                chunk_tokens=[1, out - 1],
            )
        )
    for b, (send, ends, out) in enumerate(C4):
        for k, end in enumerate(ends):
            first, last = send + 0.5, end - 0.01
            records.append(
                RequestRecord(
                    request_id=f"tp-c4-{b}-{k}",
                    endpoint="completions",
                    scenario="throughput",
                    family="english",
                    prompt_id=f"english-{k:02d}",
                    concurrency=4,
                    batch=b,
                    repeat=b,
                    ok=True,
                    http_status=200,
                    finish_reason="length",
                    send_ns=int(send * S),
                    first_token_ns=int(first * S),
                    last_token_ns=int(last * S),
                    end_ns=int(end * S),
                    prompt_tokens=22,
                    output_tokens=out,
                    num_chunks=2,
                    output_text="some model output",
                    chunk_ns=[int(first * S), int(last * S)],
                    chunk_tokens=[1, out - 1],
                )
            )
    return records


def telemetry_rows() -> list[dict[str, Any]]:
    return [
        {
            "t_ns": (i + 1) * 30 * S,
            "wall_time_s": 1796027833.5 + i,
            "host": {
                "cpu_busy_pct": 90.5,
                "cpu_outside_pct": 12.5,
                "mem_used_bytes": mem,
                "mem_total_bytes": 64 * 1024**3,
                "oom_kills": 0,
            },
            "gpus": [
                {
                    "index": g,
                    "temp_c": temps[g],
                    "power_w": 300.25 + g,
                    "util_pct": 95,
                    "pcie_gen": 5,
                    "pcie_width": 16,
                    "pcie_gen_max": 5,
                    "pcie_width_max": 16,
                }
                for g in range(2)
            ],
        }
        for i, (mem, temps) in enumerate(zip(MEM_BYTES, GPU_TEMPS))
    ]


def throughput_manifest(run_id: str) -> dict[str, Any]:
    """A manifest shaped like a real one, with the private things a real one can hold."""
    return {
        "run_id": run_id,
        "scenario": "throughput",
        "options": {"families": ["english"], "concurrency": [1, 4], "max_tokens": 128, "seed": 731},
        "target": {
            "url": "http://127.0.0.1:53407",
            "model": "meta-llama/Llama-3.1-8B",
            "endpoint": "completions",
            "api_key_used": True,
            "extra_body": {},
            "tokenizer": "/home/alice/.cache/llama/tokenizer.json",
        },
        "engine_version": "0.32.0",
        "versions": {"python": "3.11.7", "loadproof": "0.1.0", "torch": "2.8.0"},
        "git": "29ca9dcaf49085392a98eab2c9ac6693110f433e",
        "start_wall_time": "2026-11-30T08:37:13Z",
        "clock_anchor": {"wall_time_ns": 1796027833960557580, "perf_counter_ns": 7668309845982},
        "profile": {
            "name": "llama-8b-h200",
            "engine": "vllm",
            "model": {"path": "/models/llama-3.1-8b", "served_name": "meta-llama/Llama-3.1-8B"},
            "serving": {
                "host": "gpu-node-07.cluster.internal",
                "port": 8000,
                "env": {"HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUv", "VLLM_CPU_OMP_THREADS_BIND": "0-1"},
            },
            "parallel": {"tensor": 4, "pipeline": 2, "head_address": "10.20.30.40"},
        },
        "engine": {
            "kind": "vllm",
            "launch": [
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                "/models/llama-3.1-8b",
                "--host",
                "gpu-node-07",
                "--api-key",
                "sk-live-0123456789abcdef",
                "--port",
                "8000",
            ],
            "startup_report": {
                "kv_cache_tokens": 991390,
                "line": "INFO 11-30 08:37:02 [kv_cache_utils.py:2327] GPU KV cache size: 991,390 tokens",
            },
        },
        "telemetry": {"gpus": 2, "names": ["NVIDIA H200"], "driver": "570.86.15"},
    }


def throughput_run(root: Path, name: str = "throughput-20261130-083713-1022") -> Path:
    with RunWriter(root / name) as writer:
        writer.write_manifest(throughput_manifest(name))
        for record in throughput_records():
            writer.append(record)
        writer.event("warmup_done", t_ns=1 * S, note="warmed up against gpu-node-07 (10.20.30.40)")
        writer.metric_sample(
            EngineSample(
                t_ns=5 * S,
                wall_time_s=1796027838.0,
                values={"num_requests_running": 1.0, "vllm:num_requests_waiting": 0.0},
            )
        )
    write_jsonl(root / name / "telemetry.jsonl", telemetry_rows())
    return root / name


# capacity: N = 2 sessions, window [11 s, 15 s]; tokens and samples as in tests/unit/metrics/test_capacity.py
CAP_N, CAP_L, CAP_W = 2, 1000, 4.0
HAND_CAPACITY = {
    # each stream: chunks every 0.5 s from its first token, 2 tokens each; 9 chunks inside [11, 15] -> 18 / 4 s
    "capacity.window_aggregate_tokens_per_s": ("9.0", 2 * 18 / 4.0),
    "capacity.window_per_stream_min_tokens_per_s": ("4.5", 18 / 4.0),
    "capacity.cold_ttft_median_s": ("10.50", 10.5),
    "capacity.probes_retrieved": ("2", 2),
    "capacity.criteria.running": ("PASS", "PASS"),
    "capacity.verdict": ("PASS", "PASS"),
}


def capacity_run(root: Path, name: str = "capacity-20261130-083825-4a9e") -> Path:
    plan = {
        "sessions": [
            {
                "request_id": f"cap-s{i}",
                "session_id": f"s{i}",
                "salt": f"aebacef3f06a752{i}",
                "key": f"session {870 + i}",
                "expected": f"{6693470 + i}",
            }
            for i in range(CAP_N)
        ],
        "input_tokens": CAP_L,
        "window_s": CAP_W,
        "max_gap_s": 1.5,
        "drain_timeout_s": 5.0,
        "kv_idle_bound": 0.02,
        "check_probes": True,
        "theoretical_full_windows": 30.25,
    }
    idle = {
        "num_requests_running": 0,
        "num_requests_waiting": 0,
        "num_preemptions_total": 3,
        "prefix_cache_hits_total": 50,
        "prefix_cache_queries_total": 900,
        "kv_cache_usage_perc": 0.01,
    }
    busy = dict(idle, num_requests_running=CAP_N, prefix_cache_queries_total=2900, kv_cache_usage_perc=0.4)
    with RunWriter(root / name) as writer:
        writer.write_manifest(
            {
                "run_id": name,
                "scenario": "capacity",
                "plan": plan,
                "target": {"url": "http://10.0.0.5:8000", "model": "tiny", "endpoint": "completions"},
            }
        )
        for i in range(CAP_N):
            first = 10 * S + i * S
            times = [first + k * S // 2 for k in range(14)]
            writer.append(
                RequestRecord(
                    request_id=f"cap-s{i}",
                    endpoint="completions",
                    scenario="capacity",
                    ok=False,
                    error_kind="cancelled",
                    error_message="cancelled by the client",
                    send_ns=0,
                    first_token_ns=first,
                    last_token_ns=times[-1],
                    end_ns=17 * S,
                    prompt_tokens=CAP_L,
                    output_tokens=28,
                    chunk_ns=times,
                    chunk_tokens=[2] * 14,
                    output_text=f" {6693470 + i}.\nAnswer: the secret code of session {870 + i} is {6693470 + i}.",
                )
            )
        writer.metric_sample(EngineSample(t_ns=-1 * S, values=idle))
        for t in (11, 12, 13, 14, 15):
            writer.metric_sample(EngineSample(t_ns=t * S, values=dict(busy)))
        writer.metric_sample(EngineSample(t_ns=18 * S, values=dict(idle, prefix_cache_queries_total=2900)))
        writer.event("cancel", t_ns=17 * S)
    return root / name


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows to `path`; where it is stored compressed (a bundle's `path.zst`), compressed as publish does."""
    text = "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8")
    packed = path.with_name(path.name + ZST)
    if packed.exists() and not path.exists():
        packed.write_bytes(compressed(text))
    else:
        path.write_bytes(text)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of `path`, or of `path.zst` decompressed (a bundle's form)."""
    text = read_content(content_path(path)).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def reseal(bundle: Path) -> None:
    """Rewrite SHA256SUMS over the bundle as a tamperer would (hashlib here, not loadproof's writer)."""
    files = sorted(
        p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file() and p.name != "SHA256SUMS"
    )
    lines = [f"{hashlib.sha256((bundle / f).read_bytes()).hexdigest()}  {f}\n" for f in files]
    (bundle / "SHA256SUMS").write_text("".join(lines), encoding="utf-8")
