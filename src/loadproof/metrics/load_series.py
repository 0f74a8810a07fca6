"""A load sweep's points and a rate search's result, as pure functions of their trial run directories.

A sweep (`loadproof run load --sweep`) or a rate search (`--search rate`) is a folder of ordinary load
run directories, one per point or trial, with `sweep.json` or `search.json` naming them in order (and
`sweep.jsonl` / `search.jsonl`, a line appended as each ended). Every figure of the summary comes from
the trial's own claims, recomputed from its directory (`metrics.compute_claims`), so the summary is
recomputed from the folder alone:

- a point's row: the claims `load.request_throughput_rps`, `load.ttft_s.p50`, ... of its run;
- a trial passes when its `load.slo_attainment_pct` >= the target (`--attainment` x 100) and the client
  kept its schedule (`load.client_limited` no: a rate the client could not offer proves nothing about
  the server);
- `load.search.max_rate_rps`: the highest rate (the trial plan's `rate_rps`) of a passing trial.

Standard library and msgspec only (through `metrics` and `store`): `verify` may reach this module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.plans import load_plan
from loadproof.store.run_dir import Run, load_run

SWEEP_JSON = "sweep.json"
SEARCH_JSON = "search.json"

# the columns of a point or trial: (key, the claim it reads, heading)
POINT_FIGURES = (
    ("requests", "load.requests", "requests"),
    ("failed", "load.failed_requests", "failed"),
    ("achieved_rate_rps", "load.achieved_rate_rps", "sent/s"),
    ("request_throughput_rps", "load.request_throughput_rps", "done/s"),
    ("output_tokens_per_s", "load.output_tokens_per_s", "out tok/s"),
    ("ttft_p50_s", "load.ttft_s.p50", "TTFT p50 s"),
    ("ttft_p99_s", "load.ttft_s.p99", "TTFT p99 s"),
    ("itl_p99_s", "load.itl_s.p99", "ITL p99 s"),
    ("e2el_p50_s", "load.e2el_s.p50", "E2EL p50 s"),
    ("goodput_rps", "load.goodput_rps", "goodput/s"),
    ("slo_attainment_pct", "load.slo_attainment_pct", "SLO met %"),
    ("send_lag_p99_s", "load.send_lag_s.p99", "send lag p99 s"),
    ("engine_running_max", "load.engine_running_max", "engine running max"),
    ("engine_waiting_max", "load.engine_waiting_max", "engine waiting max"),
    ("engine_preemptions", "load.engine_preemptions", "engine preemptions"),
    ("client_limited", "load.client_limited", "client limited"),
)


def point_figures(claims: list[Claim]) -> dict[str, Any]:
    """A run's figures for a sweep point or search trial: {key: value}, and {key + '_printed': printed}."""
    by_name = {c.name: c for c in claims}
    out: dict[str, Any] = {}
    for key, name, _ in POINT_FIGURES:
        claim = by_name.get(name)
        out[key] = claim.value if claim is not None else None
        out[key + "_printed"] = claim.printed if claim is not None else "n/a"
    return out


def trial_verdict(figures: dict[str, Any], attainment: float) -> tuple[bool, str]:
    """(passed, why) of a search trial: its SLO attainment against the target, and the client's schedule."""
    met = figures.get("slo_attainment_pct")
    target = attainment * 100
    if met is None:
        return False, "no request recorded"
    if figures.get("client_limited") is True:
        return False, f"client-limited (the client could not keep the schedule); SLO met {met:.2f}%"
    if met >= target:
        return True, f"SLO met {met:.2f}% >= {target:g}%"
    return False, f"SLO met {met:.2f}% < {target:g}%"


def search_claims(trials: list[dict[str, Any]], attainment: float, slo: str) -> list[Claim]:
    """The search's claims from its trials: each {rate_rps, passed}, in the order tried."""
    passed = [t["rate_rps"] for t in trials if t["passed"]]
    claims = [
        fact("load.search.slo", slo, "the per-request SLOs every trial was judged on (--slo)"),
        number(
            "load.search.attainment_target_pct",
            attainment * 100,
            "%",
            "the SLO attainment a trial must reach (--attainment x 100)",
            2,
            direction="neither",
        ),
        count(
            "load.search.trials",
            len(trials),
            "runs",
            "trials run (each a run directory of the search)",
            direction="neither",
        ),
    ]
    if passed:
        best = max(passed)
        claims.insert(
            0,
            number(
                "load.search.max_rate_rps",
                float(best),
                "requests/s",
                "the highest rate (the trial "
                "plan's rate_rps) of a trial whose load.slo_attainment_pct >= the target and whose "
                "load.client_limited is no",
                4,
                direction="higher",
            ),
        )
        failed = [t["rate_rps"] for t in trials if not t["passed"] and t["rate_rps"] > best]
        if failed:
            claims.insert(
                1,
                number(
                    "load.search.min_failing_rate_rps",
                    float(min(failed)),
                    "requests/s",
                    "the "
                    "lowest rate of a failing trial above load.search.max_rate_rps: the rate that "
                    "meets the SLO lies in between",
                    4,
                    direction="neither",
                ),
            )
    return claims


def judge_trials(
    trials: list[tuple[float | None, list[Claim]]], attainment: float
) -> tuple[list[dict[str, Any]], list[Claim]]:
    """(each trial's row, the search's claims) from each trial's (plan rate_rps, recomputed claims), in the
    order tried: what `loadproof report` recomputes from a search folder and `verify` from a bundle."""
    rows = []
    slo = ""
    for rate, claims in trials:
        if rate is None:
            raise ValueError("a search trial has no constant rate in its plan (rate_rps)")
        figures = point_figures(claims)
        passed, why = trial_verdict(figures, attainment)
        slo = next((str(c.value) for c in claims if c.name == "load.slo"), slo)
        rows.append({"rate_rps": rate, "passed": passed, "reason": why, **figures})
    return rows, search_claims(rows, attainment, slo)


def trial_of(run: Run) -> tuple[float | None, list[Claim]]:
    """A search trial's (plan rate_rps, recomputed claims), from its run directory alone."""
    rate = getattr(load_plan(run), "rate_rps", None)
    rate = float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None
    return rate, compute_claims(run)


def recompute_search(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[Claim]]:
    """(search.json, the trials recomputed from their run directories, the search's claims): nothing but
    the list of trial directories and the attainment target is taken from search.json."""
    summary = json.loads((folder / SEARCH_JSON).read_text(encoding="utf-8"))
    attainment = float(summary["attainment"])
    trials = [trial_of(load_run(folder / entry["run_dir"])) for entry in summary["trials"]]
    rows, claims = judge_trials(trials, attainment)
    for row, entry in zip(rows, summary["trials"]):
        row["run_dir"] = entry["run_dir"]
    return summary, rows, claims
