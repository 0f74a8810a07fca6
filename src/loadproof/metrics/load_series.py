"""A load sweep's points and a rate search's result, as pure functions of their trial run directories.

A sweep (`loadproof run load --sweep`) or a rate search (`--search rate`) is a folder of ordinary load
run directories, one per point or trial, with `sweep.json` or `search.json` naming them in order (typed:
`rundir.series.Sweep` and `RateSearch`, read through `store.series` by the reader of their version; and
`sweep.jsonl` / `search.jsonl`, a line appended as each ended). Every figure of the summary comes from
the trial's own claims, recomputed from its directory (`metrics.compute_claims`), so the summary is
recomputed from the folder alone:

- a point's row: the claims `load.request_throughput_rps`, `load.ttft_s.p50`, ... of its run;
- a trial passes when its `load.slo_attainment_pct` >= the target (`--attainment` x 100) and the client
  kept its schedule (`load.client_limited` no: a rate the client could not offer proves nothing about
  the server);
- `load.search.max_rate_rps`: the highest rate (the trial plan's `rate_rps`) of a passing trial, where a
  trial above it failed and the search finished; otherwise that rate is a lower bound, never a result, and
  is claimed as `load.search.rate_lower_bound_rps`: when no trial above it failed (the search reached
  `--search-max`), or when the search was interrupted (search.json's `interrupted`, the one fact taken from
  the summary beside the trial list and the target; `load.search.interrupted` says so).

Standard library and msgspec only (through `metrics` and `store`): `verify` may reach this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.plans import load_plan
from loadproof.rundir.series import RateSearch, SearchTrial
from loadproof.store.run_dir import Run, load_run
from loadproof.store.series import SEARCH_JSON, read_rate_search

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


def trial_verdict(figures: Mapping[str, Any], attainment: float) -> tuple[bool, str]:
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


def search_trial(rate: float, figures: Mapping[str, Any], attainment: float, **fields: Any) -> SearchTrial:
    """A trial at `rate` with its run's figures (`point_figures`), judged against `attainment`
    (`trial_verdict`); `fields`: the rest of its row (index, run_dir; a reason of its own)."""
    passed, why = trial_verdict(figures, attainment)
    row = {**figures, "rate_rps": rate, "passed": passed, "reason": why, **fields}
    trial: SearchTrial = msgspec.convert(row, SearchTrial)
    return trial


def search_claims(trials: Sequence[SearchTrial], attainment: float, slo: str, interrupted: bool = False) -> list[Claim]:
    """The search's claims from its trials (their rate and verdict), in the order tried. `interrupted`: the
    search was stopped before it finished, so its highest passing rate is a lower bound."""
    passed = [t.rate_rps for t in trials if t.passed]
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
    if interrupted:
        claims.insert(0, fact("load.search.interrupted", True, INTERRUPTED))
    if not passed:
        return claims
    best = max(passed)
    failed = [t.rate_rps for t in trials if not t.passed and t.rate_rps > best]
    found = bool(failed) and not interrupted
    claims.insert(
        0,
        number(
            "load.search.max_rate_rps" if found else "load.search.rate_lower_bound_rps",
            float(best),
            "requests/s",
            PASSING + ("" if found else LOWER_BOUND),
            4,
            direction="higher" if found else "neither",
        ),
    )
    if failed:
        claims.insert(
            1,
            number(
                "load.search.min_failing_rate_rps",
                float(min(failed)),
                "requests/s",
                "the lowest rate of a failing trial above the highest passing one: the rate that meets the SLO "
                "lies in between",
                4,
                direction="neither",
            ),
        )
    return claims


PASSING = (
    "the highest rate (the trial plan's rate_rps) of a trial whose load.slo_attainment_pct >= the target and "
    "whose load.client_limited is no"
)
LOWER_BOUND = (
    ", where no trial above it failed or the search was interrupted: the rate that meets the SLO is at least "
    "this, a lower bound, not a result"
)
INTERRUPTED = "the search was interrupted (Ctrl-C) before it finished: its rates bound the result, they do not give it"


def search_result(claims: list[Claim], trials: Sequence[SearchTrial]) -> str:
    """The search's result in one line, from its claims: a lower bound and an interruption said first, never
    printed as a result."""
    by = {c.name: c for c in claims}
    best, bound = by.get("load.search.max_rate_rps"), by.get("load.search.rate_lower_bound_rps")
    failing = by.get("load.search.min_failing_rate_rps")
    head = f"search interrupted after {len(trials)} finished trial(s): " if "load.search.interrupted" in by else ""
    if best is not None and failing is not None:
        return f"highest rate meeting the SLO: {best.printed} requests/s; {failing.printed} requests/s fails"
    if bound is not None:
        below = f", below {failing.printed} (a trial failed there)" if failing is not None else ""
        why = (
            "the search did not finish"
            if head
            else "every rate tried passed, up to --search-max; raise it to find where the SLO breaks"
        )
        return (
            f"{head}a lower bound, not a result: the rate meeting the SLO is at least {bound.printed} "
            f"requests/s{below} ({why})"
        )
    lowest = min((t.rate_rps for t in trials), default=None)
    if lowest is None:
        return f"{head}no rate was tried"
    return f"{head}no rate met the SLO (lowest tried: {lowest:g} requests/s)"


def lower_bound(claims: list[Claim], trials: Sequence[SearchTrial]) -> str | None:
    """The result line of a search whose rate is a lower bound, not a result (`search_result`); None where its
    rate is a result, or no rate passed."""
    if not any(c.name == "load.search.rate_lower_bound_rps" for c in claims):
        return None
    return search_result(claims, trials)


def judge_trials(
    trials: list[tuple[float | None, list[Claim]]], attainment: float, interrupted: bool = False
) -> tuple[list[SearchTrial], list[Claim]]:
    """(each trial's row, the search's claims) from each trial's (plan rate_rps, recomputed claims), in the
    order tried, and whether the search was interrupted: what `loadproof report` recomputes from a search
    folder and `verify` from a bundle."""
    rows = []
    slo = ""
    for index, (rate, claims) in enumerate(trials):
        if rate is None:
            raise ValueError("a search trial has no constant rate in its plan (rate_rps)")
        slo = next((str(c.value) for c in claims if c.name == "load.slo"), slo)
        rows.append(search_trial(rate, point_figures(claims), attainment, index=index))
    return rows, search_claims(rows, attainment, slo, interrupted)


def trial_of(run: Run) -> tuple[float | None, list[Claim]]:
    """A search trial's (plan rate_rps, recomputed claims), from its run directory alone."""
    rate = getattr(load_plan(run), "rate_rps", None)
    rate = float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None
    return rate, compute_claims(run)


def recompute_search(folder: Path) -> tuple[RateSearch, list[SearchTrial], list[Claim]]:
    """(search.json, the trials recomputed from their run directories, the search's claims): nothing but
    the list of trial directories, the attainment target and whether it was interrupted (a search written
    before the field was: not) is taken from search.json, read through its version's reader."""
    summary = read_rate_search(folder / SEARCH_JSON)
    trials = [trial_of(load_run(folder / entry.run_dir)) for entry in summary.trials]
    rows, claims = judge_trials(trials, summary.attainment, summary.interrupted)
    for row, entry in zip(rows, summary.trials):
        row.run_dir = entry.run_dir
    return summary, rows, claims


def was_interrupted(entry: Mapping[str, Any]) -> bool:
    """Whether a bundle's series entry (bundle.json) says its search was interrupted; an entry without the
    field (published before it was) was not. A search.json says it in `RateSearch.interrupted`."""
    return entry.get("interrupted") is True
