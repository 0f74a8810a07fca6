"""The tools a user would pick instead of loadproof, run against the same server: `vllm bench serve`,
GuideLLM 0.8.1 and AIPerf 0.13.0.

Each peer runs as its own command line (printed before it runs), with a synthetic 128-token prompt asking
for 128 tokens, the embedded model's tokenizer, the given concurrency and number of requests. Its own
result file is read back; responses/s is what the tool counts as completed over the duration it reports
(its measured window, without its start-up), chunks/s the output tokens it counted over the same
duration (the static body carries one token per chunk). GuideLLM and AIPerf are installed into their own
virtual environments under loadproof's cache the first time (about a minute each; GuideLLM's torch is held
to the CPU build already on disk), by loadproof.engines.embedded.peers, which the relay's compatibility test
shares; `vllm bench serve` is the one of the embedded engine's environment. Used by run_all.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from loadproof.engines.embedded import ensure_engine, paths
from loadproof.engines.embedded import peers as installed
from loadproof.engines.embedded.peers import OFFLINE, VLLM_CLI
from loadproof.units import NS_PER_S

PEERS_DIR = installed.peers_dir()  # GuideLLM's and AIPerf's environments (run_all.py reads their versions)
TIMEOUT_S = 420


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
    return installed.ensure_peer(tool, lambda message: print("  " + message, flush=True))


def _run(tool: str, argv: list[str], workdir: Path, env: dict[str, str]) -> tuple[float, str | None]:
    """Run one peer command; (wall seconds, None) or (wall seconds, why it failed)."""
    workdir.mkdir(parents=True, exist_ok=True)
    print("  + " + " ".join(shlex.quote(a) for a in argv), flush=True)
    t0 = time.monotonic()
    with (workdir / "output.txt").open("w") as out:
        try:
            rc = subprocess.run(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                env=env,
                timeout=TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            ).returncode
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
    argv = [
        str(python),
        "-c",
        VLLM_CLI,
        "bench",
        "serve",
        "--backend",
        "openai-chat",
        "--base-url",
        url,
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        "static",
        "--tokenizer",
        str(tokenizer_dir()),
        "--dataset-name",
        "random",
        "--random-input-len",
        "128",
        "--random-output-len",
        "128",
        "--num-prompts",
        str(requests),
        "--max-concurrency",
        str(concurrency),
        "--request-rate",
        "inf",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(workdir),
        "--result-filename",
        "result.json",
    ]
    wall, error = _run("vllm", argv, workdir, {**os.environ, **OFFLINE})
    if error:
        return PeerResult("vllm bench serve", wall_s=wall, note=error)
    data = json.loads((workdir / "result.json").read_text())
    chunks = sum(len(itl) + 1 for itl, ttft in zip(data["itls"], data["ttfts"]) if ttft)
    return PeerResult(
        "vllm bench serve",
        data["completed"],
        data["duration"],
        chunks,
        wall,
        f"failed {data['failed']}" if data.get("failed") else "",
    )


def run_guidellm(url: str, concurrency: int, requests: int, workdir: Path) -> PeerResult:
    exe = ensure_peer("guidellm")
    argv = [
        str(exe),
        "run",
        "--backend",
        f"kind=openai_http,target={url},model=static,request_format=/v1/chat/completions,validate_backend=false",
        "--tokenizer",
        f"kind=huggingface_auto,model={tokenizer_dir()}",
        "--data",
        "kind=synthetic_text,prompt_tokens=128,output_tokens=128",
        "--profile",
        f"kind=concurrent,streams={concurrency}",
        "--constraint",
        f"kind=max_requests,count={requests}",
        "--output",
        f"kind=json,path={workdir / 'result.json'}",
        "--disable-console-interactive",
    ]
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
    return PeerResult(
        "GuideLLM 0.8.1", len(ok), bench["duration"], sum(r["output_tokens"] or 0 for r in ok), wall, note
    )


def run_aiperf(url: str, concurrency: int, requests: int, workdir: Path, workers_max: int | None = None) -> PeerResult:
    exe = ensure_peer("aiperf")
    name = "AIPerf 0.13.0" + (f" --workers-max {workers_max}" if workers_max else "")
    argv = [
        str(exe),
        "profile",
        "--model",
        "static",
        "--url",
        url,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--concurrency",
        str(concurrency),
        "--request-count",
        str(requests),
        "--tokenizer",
        str(tokenizer_dir()),
        "--synthetic-input-tokens-mean",
        "128",
        "--output-tokens-mean",
        "128",
        "--artifact-dir",
        str(workdir),
        "--ui-type",
        "none",
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--random-seed",
        "1",
        *(["--workers-max", str(workers_max)] if workers_max else []),
    ]
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
    notes = (
        [f"{avg('effective_concurrency'):.0f} requests in flight on average"] if avg("effective_concurrency") else []
    )
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


# Long prompts (long_prompts.py): the same three tools, each with its synthetic dataset at N prompt tokens
# and 4 output tokens, as many requests as the concurrency. Each command runs in its own process
# group under a time limit; on the limit the whole group is ended (GuideLLM and AIPerf start workers).

LONG_PROMPT_PEERS = ("vllm bench serve", "GuideLLM 0.8.1", "AIPerf 0.13.0")


@dataclass
class LongPromptRun:
    tool: str
    start_ns: int = 0  # time.perf_counter_ns() just before the command started (CLOCK_MONOTONIC, machine-wide)
    end_ns: int = 0  # ... and when it had exited (or had been ended)
    completed: int = 0
    ttft_p50_s: float | None = None  # the peer's own time to first token
    ttft_max_s: float | None = None
    own_prompt_tokens: float | None = None  # prompt tokens per request by the peer's own count, where it has one
    timed_out: bool = False
    note: str = ""

    @property
    def wall_s(self) -> float:
        return (self.end_ns - self.start_ns) / NS_PER_S


def long_prompt_command(
    tool: str, url: str, tokens: int, concurrency: int, requests: int, workdir: Path, timeout_s: float = 300
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one long-prompt run of `tool` (one of LONG_PROMPT_PEERS)."""
    if tool == "vllm bench serve":
        argv = [
            str(ensure_peer("vllm")),
            "-c",
            VLLM_CLI,
            "bench",
            "serve",
            "--backend",
            "openai-chat",
            "--base-url",
            url,
            "--endpoint",
            "/v1/chat/completions",
            "--model",
            "static",
            "--tokenizer",
            str(tokenizer_dir()),
            "--dataset-name",
            "random",
            "--random-input-len",
            str(tokens),
            "--random-output-len",
            "4",
            "--num-prompts",
            str(requests),
            "--max-concurrency",
            str(concurrency),
            "--request-rate",
            "inf",
            "--disable-tqdm",
            "--save-result",
            "--save-detailed",
            "--result-dir",
            str(workdir),
            "--result-filename",
            "result.json",
        ]
        return argv, {**os.environ, **OFFLINE}
    if tool == "GuideLLM 0.8.1":
        argv = [
            str(ensure_peer("guidellm")),
            "run",
            "--backend",
            f"kind=openai_http,target={url},model=static,request_format=/v1/chat/completions,validate_backend=false",
            "--tokenizer",
            f"kind=huggingface_auto,model={tokenizer_dir()}",
            "--data",
            f"kind=synthetic_text,prompt_tokens={tokens},output_tokens=4",
            "--profile",
            f"kind=concurrent,streams={concurrency}",
            "--constraint",
            f"kind=max_requests,count={requests}",
            "--output",
            f"kind=json,path={workdir / 'result.json'}",
            "--disable-console-interactive",
        ]
        return argv, {**os.environ, **OFFLINE}
    if tool == "AIPerf 0.13.0":
        argv = [
            str(ensure_peer("aiperf")),
            "profile",
            "--model",
            "static",
            "--url",
            url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--concurrency",
            str(concurrency),
            "--request-count",
            str(requests),
            "--tokenizer",
            str(tokenizer_dir()),
            "--synthetic-input-tokens-mean",
            str(tokens),
            "--synthetic-input-tokens-stddev",
            "0",
            "--output-tokens-mean",
            "4",
            "--artifact-dir",
            str(workdir),
            "--ui-type",
            "none",
            "--no-server-metrics",
            "--no-gpu-telemetry",
            "--random-seed",
            "1",
        ]
        # as in run_aiperf: without HF_HUB_OFFLINE, which makes AIPerf 0.13.0 refuse a local tokenizer folder
        env = {
            k: v for k, v in {**os.environ, **OFFLINE}.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
        }
        # AIPerf stops itself after 300 s of dataset building (about what 24 x 1M tokens take here): give it
        # the same bound as the other peers, so the harness's timeout is the only one
        env["AIPERF_DATASET_CONFIGURATION_TIMEOUT"] = env["AIPERF_SERVICE_PROFILE_CONFIGURE_TIMEOUT"] = (
            f"{timeout_s:.0f}"
        )
        return argv, env
    raise ValueError(f"no long-prompt command for {tool!r}")


def run_long_prompt(
    tool: str, url: str, tokens: int, concurrency: int, requests: int, workdir: Path, timeout_s: float
) -> LongPromptRun:
    """Run one long-prompt command within timeout_s and read its own report back; failures become the note."""
    workdir.mkdir(parents=True, exist_ok=True)
    argv, env = long_prompt_command(tool, url, tokens, concurrency, requests, workdir, timeout_s)
    print("  + " + " ".join(shlex.quote(a) for a in argv), flush=True)
    run = LongPromptRun(tool)
    with (workdir / "output.txt").open("w") as out:
        run.start_ns = time.perf_counter_ns()
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            run.timed_out = True
            rc = None
        except BaseException:
            _end_group(proc)
            raise
        run.end_ns = time.perf_counter_ns()
        _end_group(proc)  # on the limit, and any worker a finished command left behind
    if run.timed_out:
        run.note = f"did not finish in {timeout_s:.0f} s"
        return run
    if rc != 0:
        text = (workdir / "output.txt").read_text(errors="replace")
        lines = [ln.strip(" \u2502\u256d\u256e\u2570\u256f\u2500") for ln in text.splitlines()]  # less box drawing
        lines = [ln for ln in lines if ln and "://" not in ln]
        # the first logged ERROR is the cause (AIPerf logs one, then a box of its consequences); else the
        # last line that names an error, as a traceback ends
        logged = [ln for ln in lines if " ERROR " in ln]
        errors = [ln for ln in lines if "Error" in ln or "error" in ln] or lines
        why = logged[0].split(" ERROR ", 1)[1].strip() if logged else (errors[-1] if errors else "")
        why = re.sub(r"\s*\([\w./-]+\.py:\d+\)$", "", why)  # AIPerf's "(module.py:123)" at the end
        run.note = f"exit {rc}: {why[:200]}"
        return run
    try:
        _read_long_prompt(run, workdir)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        run.note = f"its report could not be read: {type(exc).__name__}: {exc}"[:200]
    return run


def _end_group(proc: subprocess.Popen) -> None:
    """End the command's own process group (started with start_new_session): TERM, then KILL after 10 s."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while _group_alive(proc) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not _group_alive(proc):
            break
    proc.wait()


def _group_alive(proc: subprocess.Popen) -> bool:
    proc.poll()  # reaps the leader once it has exited, so that only live members keep the group
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    return True


def _read_long_prompt(run: LongPromptRun, workdir: Path) -> None:
    notes: list[str] = []
    if run.tool == "vllm bench serve":
        data = json.loads((workdir / "result.json").read_text())
        errors = data.get("errors") or [""] * len(data["ttfts"])
        ok = [i for i, e in enumerate(errors) if not e]
        ttfts = sorted(data["ttfts"][i] for i in ok)
        run.completed = data["completed"]
        if ttfts:
            run.ttft_p50_s, run.ttft_max_s = _median(ttfts), ttfts[-1]
        # its input_lens are the server's usage.prompt_tokens, not a count of its own: left out
        if data.get("failed"):
            notes.append(f"failed {data['failed']}: {next((e for e in errors if e), '')[:120]}")
    elif run.tool == "GuideLLM 0.8.1":
        bench = json.loads((workdir / "result.json").read_text())["benchmarks"][0]
        run.completed = len(bench["requests"]["successful"])
        ttft = ((bench.get("metrics") or {}).get("time_to_first_token_ms") or {}).get("successful") or {}
        if ttft.get("count"):
            run.ttft_p50_s, run.ttft_max_s = ttft["median"] / 1e3, ttft["max"] / 1e3
        errored = bench["requests"].get("errored") or []
        if errored:
            first = (errored[0].get("info") or {}).get("error") or ""
            notes.append(f"errored {len(errored)}: {str(first)[:120]}")
        notes += [
            f"GuideLLM warns: {w['message'].rstrip('.')}" for w in bench.get("warnings") or [] if w.get("message")
        ]
    else:
        data = json.loads((workdir / "profile_export_aiperf.json").read_text())

        def stat(key: str, field: str = "avg") -> float | None:
            value = data.get(key)
            return float(value[field]) if isinstance(value, dict) and value.get(field) is not None else None

        run.completed = int(stat("completed_request_count") or stat("request_count") or 0)
        p50, top = stat("time_to_first_token", "p50"), stat("time_to_first_token", "max")
        if p50 is not None and top is not None:
            run.ttft_p50_s, run.ttft_max_s = p50 / 1e3, top / 1e3
        run.own_prompt_tokens = stat("input_sequence_length")
        sending = data.get("http_req_sending")
        if isinstance(sending, dict) and sending.get("p50") is not None:
            scale = 1e3 if sending.get("unit") == "ms" else NS_PER_S if sending.get("unit") == "ns" else 1.0
            notes.append(f"AIPerf's own http_req_sending p50 {float(sending['p50']) / scale:.3f} s")
        if data.get("error_summary"):
            notes.append(f"errors {data['error_summary']}"[:160])
    run.note = "; ".join(notes)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


if __name__ == "__main__":  # one peer by hand: python peers.py TOOL URL CONCURRENCY REQUESTS DIR
    tool, url, c, n, d = sys.argv[1:6]
    r = PEERS[tool](url, int(c), int(n), Path(d))
    print(r, r.responses_per_s, r.chunks_per_s)
