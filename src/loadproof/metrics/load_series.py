"""A load sweep's points and a rate search's result, as pure functions of their trial run directories.

A sweep (`loadproof run load --sweep`) or a rate search (`--search rate`) is a folder of ordinary load
run directories, one per point or trial, with `sweep.json` or `search.json` naming them in order (typed:
`rundir.series.Sweep` and `RateSearch`, read through `store.series` by the reader of their version; and
`sweep.jsonl` / `search.jsonl`, a line appended as each ended). Every figure of the summary comes from
the trial's own claims, recomputed from its directory (`metrics.compute_claims`), so the summary is
recomputed from the folder alone:

- a point's row: the claims `load.request_throughput_rps`, `load.ttft_s.p50`, ... of its run;
- a search decided on intervals (search.json's `decision` "interval", the default since #41): each rate
  tried is a level of one or more segments (trials at that rate, one after another), their requests pooled;
  the level passes when its attainment's 95% Wilson lower bound meets the target, fails when the upper bound
  misses it, and is UNDECIDED while the interval straddles it and the budget of segments is spent
  (`metrics.search_decision`); `load.search.level.<rate>.*` says each level's decision, attainment and
  interval, `load.search.extra_requests` what its segments after the first cost, `load.search.attainment_pct`
  the attainment (and interval) at the rate found;
- a search decided on the point value (`decision` "point", every search written before): a trial passes
  when its `load.slo_attainment_pct` >= the target (`--attainment` x 100) and the client kept its schedule
  (`load.client_limited` no: a rate the client could not offer proves nothing about the server);
- `load.search.max_rate_rps`: the highest rate (the trial plan's `rate_rps`) of a passing trial, where a
  trial above it failed and the search finished; otherwise that rate is a lower bound, never a result, and
  is claimed as `load.search.rate_lower_bound_rps`: when no trial above it failed (the search reached
  `--search-max`), or when the search was interrupted (search.json's `interrupted`, the one fact taken from
  the summary beside the trial list, the target and the rule; `load.search.interrupted` says so).

Standard library and msgspec only (through `metrics` and `store`): `verify` may reach this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.intervals import Interval
from loadproof.metrics.search_decision import INTERVAL, POINT, Rule, level_states, levels, min_requests_to_pass, rule_of
from loadproof.metrics.uncertainty import CONFIDENCE
from loadproof.plans import load_plan
from loadproof.rundir.series import RateSearch, SearchTrial
from loadproof.store.run_dir import Run, load_run
from loadproof.store.series import SEARCH_JSON, read_rate_search

# the columns of a point or trial: (key, the claim it reads, heading)
POINT_FIGURES = (
    ("requests", "load.requests", "requests"),
    ("good_requests", "load.good_requests", "good"),
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


def level_trials(
    rate: float, segments: Sequence[Mapping[str, Any]], attainment: float, level: int, first_index: int = 0
) -> list[SearchTrial]:
    """A level's trials at `rate` decided on intervals: each segment's figures (`point_figures`) with the
    level's state once it is pooled with the segments before it (`search_decision.level_states`)."""
    states = level_states(segments, attainment)
    rows = []
    for segment, (figures, state) in enumerate(zip(segments, states, strict=True)):
        row = {**figures, "rate_rps": rate, "index": first_index + segment, "level": level, "segment": segment}
        rows.append(msgspec.convert({**row, **state.fields()}, SearchTrial))
    return rows


def finals(trials: Sequence[SearchTrial]) -> list[SearchTrial]:
    """Each level's last trial, which carries the level's decision (every trial, in a search decided on the
    point value)."""
    return [
        t for i, t in enumerate(trials) if t.level is None or i + 1 == len(trials) or trials[i + 1].level != t.level
    ]


def search_claims(
    trials: Sequence[SearchTrial], attainment: float, slo: str, interrupted: bool = False, rule: Rule = POINT
) -> list[Claim]:
    """The search's claims from its trials (their rate and verdict), in the order tried. `interrupted`: the
    search was stopped before it finished, so its highest passing rate is a lower bound. `rule`: what its
    levels were decided on (`interval` adds each level's decision, attainment and interval, and the extra
    requests straddling levels cost)."""
    decided = finals(trials)
    passed = [t.rate_rps for t in decided if t.passed]
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
    if rule == INTERVAL:
        claims += interval_claims(trials, decided)
    if not passed:
        return claims
    best = max(passed)
    failed = [t.rate_rps for t in decided if not t.passed and t.rate_rps > best]
    found = bool(failed) and not interrupted
    at_best = next(t for t in decided if t.passed and t.rate_rps == best)
    if rule == INTERVAL:
        claims.insert(0, _attainment("load.search.attainment_pct", at_best, AT_BEST))
    claims.insert(
        0,
        number(
            "load.search.max_rate_rps" if found else "load.search.rate_lower_bound_rps",
            float(best),
            "requests/s",
            (PASSING_INTERVAL if rule == INTERVAL else PASSING) + ("" if found else LOWER_BOUND),
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
                (
                    "the lowest rate above the highest passing one whose level did not pass (failed, or undecided "
                    "when its budget of segments was spent)"
                    if rule == INTERVAL
                    else "the lowest rate of a failing trial above the highest passing one"
                )
                + ": the rate that meets the SLO lies in between",
                4,
                direction="neither",
            ),
        )
    return claims


def _attainment(name: str, trial: SearchTrial, formula: str, parts: Mapping[str, object] | None = None) -> Claim:
    """A level's pooled SLO attainment (%) with its 95% Wilson interval."""
    value, low, high = trial.level_attainment_pct, trial.level_attainment_low_pct, trial.level_attainment_high_pct
    interval = None if low is None or high is None else Interval(low, high, CONFIDENCE, "Wilson score")
    return number(name, float(value or 0.0), "%", formula, 2, direction="higher", parts=parts, interval=interval)


def interval_claims(trials: Sequence[SearchTrial], decided: Sequence[SearchTrial]) -> list[Claim]:
    """A search decided on intervals: the rule, each level's decision, pooled attainment and requests, the
    levels left undecided and the requests spent past each level's first segment."""
    claims = [fact("load.search.decision", INTERVAL, RULE)]
    for t in decided:
        parts = {"rate": f"{t.rate_rps:g}"}
        claims += [
            fact("load.search.level.<rate>.decision", str(t.decision), LEVEL_DECISION, parts=parts),
            _attainment("load.search.level.<rate>.attainment_pct", t, LEVEL_ATTAINMENT, parts),
            count(
                "load.search.level.<rate>.requests",
                t.level_requests or 0,
                "requests",
                "the level's requests: load.requests summed over its segments",
                direction="neither",
                parts=parts,
            ),
        ]
    claims.append(
        count(
            "load.search.undecided_levels",
            sum(t.decision == "undecided" for t in decided),
            "levels",
            "rates whose interval still straddled the target when their budget of segments was spent: not passing",
            direction="neither",
        )
    )
    extra = sum(int(t.requests) for t in trials if t.segment > 0 and isinstance(t.requests, int))
    claims.append(
        count(
            "load.search.extra_requests",
            extra,
            "requests",
            "load.requests of every segment after a level's first: what straddling levels cost",
            direction="lower",
        )
    )
    return claims


RULE = (
    "interval: a level (a rate, its segments' requests pooled) passes when its SLO attainment's 95% Wilson lower "
    "bound >= the target, fails when the upper bound < it (or a segment was client-limited), and is undecided, "
    "not passing, while the interval straddles the target once its budget of segments is spent"
)
LEVEL_DECISION = "the level's decision on its pooled attainment's 95% interval: pass, fail or undecided"
LEVEL_ATTAINMENT = (
    "load.good_requests / load.requests x 100, each summed over the level's segments; interval: Wilson 95%"
)
AT_BEST = (
    "the pooled SLO attainment at the highest passing rate (its level's good / all requests x 100); interval: "
    "Wilson 95%, whose lower bound met the target"
)
PASSING_INTERVAL = (
    "the highest rate (the trial plan's rate_rps) whose level passed: its pooled SLO attainment's 95% Wilson lower "
    "bound >= the target and no segment client-limited"
)
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
    sure = _how_sure(by, trials)
    if best is not None and failing is not None:
        return f"highest rate meeting the SLO: {best.printed} requests/s{sure}"
    if bound is not None:
        what = "a level did not pass there" if "load.search.decision" in by else "a trial failed there"
        below = f", below {failing.printed} ({what})" if failing is not None else ""
        why = (
            "the search did not finish"
            if head
            else "every rate tried passed, up to --search-max; raise it to find where the SLO breaks"
        )
        return (
            f"{head}a lower bound, not a result: the rate meeting the SLO is at least {bound.printed} "
            f"requests/s{below} ({why}){_how_sure(by, trials, failing=False)}"
        )
    lowest = min((t.rate_rps for t in trials), default=None)
    if lowest is None:
        return f"{head}no rate was tried"
    undecided = by.get("load.search.undecided_levels")
    left = (
        f"; {undecided.printed} undecided (the interval straddled the target)" if undecided and undecided.value else ""
    )
    return f"{head}no rate met the SLO (lowest tried: {lowest:g} requests/s){left}{_too_few(by, trials)}"


def _too_few(by: Mapping[str, Claim], trials: Sequence[SearchTrial]) -> str:
    """Where undecided levels had fewer requests than any pass takes: how many, and what to raise."""
    target = by.get("load.search.attainment_target_pct")
    fewest = min_requests_to_pass(round(float(target.value), 6) / 100) if target is not None else None
    if fewest is None:
        return ""
    short = [t for t in finals(trials) if t.decision == "undecided" and (t.level_requests or 0) < fewest]
    if not short:
        return ""
    return (
        f"; {len(short)} of them had fewer requests than the {fewest} a pass takes, even all good: raise -n or "
        "--duration-s, or --search-segments"
    )


def _how_sure(by: Mapping[str, Claim], trials: Sequence[SearchTrial], failing: bool = True) -> str:
    """`; attainment 98.1% [93.4%, 99.5%]; 2 requests/s fails` (or `is UNDECIDED ...`): the rate found's
    pooled attainment and interval, and the decision above it (a search decided on the point value: `; R fails`)."""
    at = by.get("load.search.attainment_pct")
    above = by.get("load.search.min_failing_rate_rps") if failing else None
    out = ""
    if at is not None and at.interval is not None:
        out = f" (attainment {at.printed}% [{at.interval.low:.2f}%, {at.interval.high:.2f}%])"
    if above is not None:
        level = next((t for t in reversed(trials) if t.rate_rps == above.value), None)
        if level is not None and level.decision == "undecided":
            segments = level.segment + 1
            out += (
                f"; {above.printed} requests/s is UNDECIDED (its interval straddles the target after {segments} "
                "segment(s)), not a pass"
            )
        else:
            out += f"; {above.printed} requests/s fails"
    extra = by.get("load.search.extra_requests")
    if extra is not None and extra.value:
        out += f"; {extra.printed} extra requests at straddling rates"
    return out


def lower_bound(claims: list[Claim], trials: Sequence[SearchTrial]) -> str | None:
    """The result line of a search whose rate is a lower bound, not a result (`search_result`); None where its
    rate is a result, or no rate passed."""
    if not any(c.name == "load.search.rate_lower_bound_rps" for c in claims):
        return None
    return search_result(claims, trials)


def judge_trials(
    trials: list[tuple[float | None, list[Claim]]], attainment: float, interrupted: bool = False, rule: object = None
) -> tuple[list[SearchTrial], list[Claim]]:
    """(each trial's row, the search's claims) from each trial's (plan rate_rps, recomputed claims), in the
    order tried, whether the search was interrupted and the rule it decided on (`interval`; anything else:
    the point value, as every search before #41): what `loadproof report` recomputes from a search folder and
    `verify` from a bundle. On intervals, consecutive trials at one rate are one level's segments."""
    decided_on = rule_of(rule)
    rates: list[float] = []
    slo = ""
    for rate, claims in trials:
        if rate is None:
            raise ValueError("a search trial has no constant rate in its plan (rate_rps)")
        rates.append(rate)
        slo = next((str(c.value) for c in claims if c.name == "load.slo"), slo)
    figures = [point_figures(claims) for _, claims in trials]
    rows: list[SearchTrial] = []
    if decided_on == INTERVAL:
        of = levels(rates)
        for level in range(of[-1] + 1 if of else 0):
            members = [i for i, lv in enumerate(of) if lv == level]
            rows += level_trials(rates[members[0]], [figures[i] for i in members], attainment, level, members[0])
    else:
        rows = [search_trial(rate, f, attainment, index=i) for i, (rate, f) in enumerate(zip(rates, figures))]
    return rows, search_claims(rows, attainment, slo, interrupted, decided_on)


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
    rows, claims = judge_trials(trials, summary.attainment, summary.interrupted, summary.decision)
    for row, entry in zip(rows, summary.trials):
        row.run_dir = entry.run_dir
    return summary, rows, claims


def was_interrupted(entry: Mapping[str, Any]) -> bool:
    """Whether a bundle's series entry (bundle.json) says its search was interrupted; an entry without the
    field (published before it was) was not. A search.json says it in `RateSearch.interrupted`."""
    return entry.get("interrupted") is True
