"""Leave-one-out accuracy of the simulator on every measured capacity run, and the embedded-engine sweep.

Default (offline, seconds): for each capacity run in docs/runs (and in --runs DIR, e.g. the embedded
engine's runs from --embedded), calibrate a sim profile from the *other* runs of the same deployment
(prefill, throughput and capacity runs; a run of the same shape, sessions x tokens, is left out too), then
predict the held-out run on the virtual clock and compare cold TTFT median, max and the window aggregate.
Prints the Markdown table that docs/simulator.md holds between its `loo-table` markers; --check exits 1
when the docs differ. Errors are (predicted - measured) / measured.

--embedded: start the embedded engine and measure prefill at 4 lengths, decode at concurrency 1-8 and two
capacity runs into --out (about 10 minutes on 2 cores); then run the table with them included.

usage: scripts/in-venv python benchmarks/sim_accuracy.py [--runs DIR]... [--check] [--embedded --out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from loadproof.metrics.capacity import evaluate_capacity
from loadproof.predict.capacity import predict_capacity
from loadproof.sim.config import load_sim_config

PREFILL_LENGTHS = (512, 2048, 4096, 8192)
CAPACITY = ((4, 2048), (8, 1024))
WINDOW_S = 20.0
FIGURES = ("cold_ttft_median_s", "cold_ttft_max_s", "window_aggregate_tokens_per_s")


def lp(*args: str) -> None:
    print("+ loadproof " + " ".join(args), file=sys.stderr, flush=True)
    subprocess.run(["loadproof", *args], check=True, stdout=subprocess.DEVNULL)


def newest(out: Path, scenario: str) -> Path:
    return sorted(out.glob(f"{scenario}-*"), key=lambda p: p.stat().st_mtime)[-1]


def start_engine(port: int, log: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        ["loadproof", "serve", "--embedded", "--port", str(port)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"engine exited; see {log}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            time.sleep(15)  # the supervisor's first probe, then quiet
            break
        except OSError:
            time.sleep(2)
    match = re.search(r"KV cache size: ([\d,]+) tokens", log.read_text())
    return proc, int(match.group(1).replace(",", "")) if match else 0


def measure_embedded(argv: list[str]) -> Path:
    parser = argparse.ArgumentParser(prog="sim_accuracy.py --embedded")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--url", default=None, help="an embedded engine already serving (else one is started)")
    parser.add_argument("--kv-tokens", type=int, default=0)
    parser.add_argument("--port", type=int, default=8317)
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="sim-accuracy-"))
    out.mkdir(parents=True, exist_ok=True)
    proc = None
    url, kv_tokens = args.url, args.kv_tokens
    if url is None:
        proc, kv_tokens = start_engine(args.port, out / "engine.log")
        url = f"http://127.0.0.1:{args.port}"
    profile = Path(str(files("loadproof") / "profiles" / "embedded.toml"))
    from loadproof.engines.embedded import paths

    tokenizer = paths().model_dir / "tokenizer.json"
    common = ["--url", url, "--profile", str(profile), "--out", str(out)]
    long_context = [*common, "--tokenizer", str(tokenizer)]
    try:
        prefill_runs = []
        for length in PREFILL_LENGTHS:
            lp("run", "prefill", "-l", str(length), "-r", "2", "--decode-tokens", "64", *long_context)
            prefill_runs.append(newest(out, "prefill"))
        lp(
            "run",
            "throughput",
            "--families",
            "english",
            "--concurrency",
            "1,2,4,8",
            "--max-tokens",
            "128",
            "--ignore-eos",
            *common,
        )
        throughput = newest(out, "throughput")
        sim_profile = out / "sim-embedded.toml"
        lp(
            "sim",
            "calibrate",
            *map(str, prefill_runs),
            str(throughput),
            "-o",
            str(sim_profile),
            *(["--kv-tokens", str(kv_tokens)] if kv_tokens else []),
        )
        cfg = load_sim_config(sim_profile)
        rows = []
        for sessions, length in CAPACITY:
            lp(
                "run",
                "capacity",
                "--sessions",
                str(sessions),
                "--input-tokens",
                str(length),
                "--window-s",
                str(WINDOW_S),
                *long_context,
            )
            measured = {
                c["name"].split(".", 1)[1]: c["value"]
                for c in json.loads((newest(out, "capacity") / "claims.json").read_text())["claims"]
            }
            pred = predict_capacity(cfg, sessions, length, WINDOW_S)
            predicted = {
                c.name.split(".", 1)[1]: c.value
                for c in evaluate_capacity(pred.plan, pred.records, pred.samples, pred.events).claims
            }
            for figure in FIGURES:
                m, p = measured.get(figure), predicted.get(figure)
                err = (
                    f"{(p - m) / m:+.1%}"
                    if isinstance(m, (int, float)) and isinstance(p, (int, float)) and m
                    else "n/a"
                )
                rows.append(
                    f"| {sessions} x {length:,} | {figure} | {m:.2f} | {p:.2f} | {err} |"
                    if isinstance(m, (int, float)) and isinstance(p, (int, float))
                    else f"| {sessions} x {length:,} | {figure} | {m} | {p} | n/a |"
                )
            rows.append(
                f"| {sessions} x {length:,} | verdict | {measured.get('verdict')} | {predicted.get('verdict')} | |"
            )
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=120)
    print(
        f"calibrated on: {len(PREFILL_LENGTHS)} prefill lengths {PREFILL_LENGTHS} x 2 cold repeats, decode at "
        f"concurrency 1, 2, 4, 8 (128 tokens); profile {sim_profile}",
        file=sys.stderr,
    )
    print("| scenario | figure | measured | predicted | error |\n|---|---|---|---|---|", file=sys.stderr)
    print("\n".join(rows), file=sys.stderr)
    print(f"run directories: {out}", file=sys.stderr)
    return out


# -- leave-one-out ----------------------------------------------------------------------------------------
DOCS_RUNS = Path(__file__).resolve().parents[1] / "docs" / "runs"
DOC = Path(__file__).resolve().parents[1] / "docs" / "simulator.md"
MARK_BEGIN, MARK_END = "<!-- loo-table begin -->", "<!-- loo-table end -->"


@dataclass
class MeasuredRun:
    path: Path
    deployment: str
    scenario: str
    shape: tuple[int, int]  # sessions, input tokens (capacity)
    claims: dict


def discover(roots: list[Path]) -> list[MeasuredRun]:
    runs = []
    for root in roots:
        for manifest in sorted(root.rglob("manifest.json")):
            m = json.loads(manifest.read_text())
            if m.get("scenario") not in ("prefill", "throughput", "capacity"):
                continue
            claims_path = manifest.parent / "claims.json"
            claims = (
                {c["name"]: c["value"] for c in json.loads(claims_path.read_text())["claims"]}
                if claims_path.is_file()
                else {}
            )
            profile = m.get("profile") or {}
            # one deployment: same machine set (docs/runs' dated folder, else the folder given) and served model
            machines = manifest.relative_to(root).parts[0] if root == DOCS_RUNS else root.name
            deployment = f"{machines}/{(profile.get('model') or {}).get('served_name')}"
            opts = m.get("options") or {}
            shape = (opts.get("sessions") or (1 if m["scenario"] == "prefill" else 0), opts.get("input_tokens") or 0)
            runs.append(MeasuredRun(manifest.parent, deployment, m["scenario"], shape, claims))
    return runs


def predict_held_out(target: MeasuredRun, others: list[MeasuredRun]) -> dict[str, float | None] | str:
    from loadproof.errors import UsageError
    from loadproof.predict.calibrate import calibrate
    from loadproof.predict.calibration import kv_read_floor
    from loadproof.predict.points import points_from_runs
    from loadproof.sim.config import CostModel, SimConfig, default_capture_sizes

    ttft, decode, facts = points_from_runs([o.path for o in others])
    _, _, own = points_from_runs([target.path])  # the held-out run's settings (not its measurements)
    manifest = json.loads((target.path / "manifest.json").read_text())
    plan = manifest.get("plan") or {}
    sessions, length = target.shape
    if target.scenario == "prefill":  # one prompt: any KV that holds it
        kv = max(facts.get("kv_cache_tokens_inferred") or 0, 2 * length + 1024)
    else:
        kv = plan.get("engine_kv_cache_tokens") or own.get("kv_cache_tokens") or kv_from_metrics(target)
    if not (own.get("max_model_len") or plan.get("max_model_len")):
        return "its manifest states no context length (a run without --profile)"
    cuda = own.get("cuda_graph_max") or 512
    structure = CostModel(pipeline_stages=own.get("pipeline_stages") or 1, cuda_graph_sizes=default_capture_sizes(cuda))
    base = SimConfig(
        max_model_len=own.get("max_model_len") or plan.get("max_model_len"),
        block_size=16,
        num_gpu_blocks=max(1, int(kv) // 16),
        max_num_seqs=own.get("max_num_seqs") or 256,
        max_num_batched_tokens=own.get("max_num_batched_tokens") or 8192,
        cost=structure,
    )
    try:
        cal = calibrate(ttft, decode, base, frontend=facts.get("frontend_points"))
    except UsageError as exc:
        return str(exc)
    _, _, floor = kv_read_floor(cal, facts)  # as `sim calibrate` does: a decode step's KV-read floor
    cal.config = cal.config.model_copy(update={"cost": cal.config.cost.model_copy(update=floor)})
    window = float(target.claims.get("capacity.window_s") or 1.0)
    pred = predict_capacity(
        cal.config, sessions, length, window, max_tokens=plan.get("max_tokens") if target.scenario == "capacity" else 8
    )
    claims = {
        c.name.split(".", 1)[1]: c.value
        for c in evaluate_capacity(pred.plan, pred.records, pred.samples, pred.events).claims
    }
    if target.scenario == "prefill":
        claims["window_aggregate_tokens_per_s"] = None
    return {f: claims.get(f) for f in FIGURES}


def measured(target: MeasuredRun) -> dict[str, float | None]:
    """The held-out run's own figures: a capacity run's claims; a prefill run's median and max cold TTFT."""
    if target.scenario == "prefill":
        repeats = [v for k, v in target.claims.items() if k.startswith("prefill.r") and k.endswith(".ttft_s")]
        return {
            "cold_ttft_median_s": target.claims.get("prefill.cold_ttft_median_s"),
            "cold_ttft_max_s": max(repeats) if repeats else None,
            "window_aggregate_tokens_per_s": None,
        }
    return {f: target.claims.get(f"capacity.{f}") for f in FIGURES}


def kv_from_metrics(target: MeasuredRun) -> int:
    """The deployment's KV size when the bundle does not state it (see `points.kv_from_metrics`)."""
    from loadproof.predict.capacity import kv_from_metrics as infer
    from loadproof.store.run_dir import load_run

    tokens = infer(load_run(target.path))
    if not tokens:
        raise SystemExit(f"{target.path}: no KV size in the bundle and none to infer from /metrics")
    return tokens


def loo_rows(runs: list[MeasuredRun]) -> list[list[str]]:
    rows = []
    for target in runs:
        if not (
            (target.scenario == "capacity" and "capacity.cold_ttft_median_s" in target.claims)
            or (target.scenario == "prefill" and "prefill.cold_ttft_median_s" in target.claims)
        ):
            continue
        others = [
            o
            for o in runs
            if o.deployment == target.deployment
            and o.path != target.path
            and not (o.scenario == target.scenario == "capacity" and o.shape == target.shape)
        ]
        got = predict_held_out(target, others)
        bundle = target.path.parent.parent.name if target.path.parent.name == "runs" else target.path.name
        name = f"{target.deployment.split('/')[0]} {bundle}"
        cells = [name, f"{target.shape[0]} x {target.shape[1]:,}", str(len(others))]
        for figure in FIGURES:
            m = measured(target).get(figure)
            p = got.get(figure) if isinstance(got, dict) else None
            if isinstance(m, (int, float)) and isinstance(p, (int, float)) and m:
                err = (p - m) / m
                cells.append(
                    f"{m:,.2f} / {p:,.2f} / {'**' if abs(err) > 0.10 else ''}{err:+.1%}"
                    f"{'**' if abs(err) > 0.10 else ''}"
                )
            else:
                cells.append(
                    "n/a"
                    if m is None and p is None
                    else f"{'n/a' if m is None else f'{m:,.2f}'} / {'n/a' if p is None else f'{p:,.2f}'} / n/a"
                )
        if isinstance(got, str):
            cells[-1] += f" (not predicted: {got})"
        rows.append(cells)
    return rows


def loo_table(roots: list[Path]) -> str:
    head = [
        "run (held out)",
        "shape",
        "runs calibrated on",
        "cold TTFT median (s): measured / predicted / error",
        "cold TTFT max (s)",
        "window aggregate (tokens/s)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in loo_rows(discover(roots))]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--runs", type=Path, action="append", default=[], help="more run directories (a folder of them)"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/simulator.md holds another table")
    parser.add_argument("--embedded", action="store_true", help="measure the embedded engine first (minutes)")
    args, rest = parser.parse_known_args()
    roots = [DOCS_RUNS, *args.runs]
    if args.embedded:
        roots.append(measure_embedded(rest))
    table = loo_table(roots)
    print(table)
    if args.check:
        doc = DOC.read_text()
        held = doc[doc.index(MARK_BEGIN) + len(MARK_BEGIN) : doc.index(MARK_END)].strip()
        if held != table.strip():
            print("docs/simulator.md's leave-one-out table differs from this computation", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
