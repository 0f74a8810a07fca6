"""Speculative decoding as the engine counts it (docs/scenarios.md, "Speculative decoding"): from its own
counters, over a window of /metrics samples, how many draft tokens it proposed and how many it accepted.

vLLM's counters (engines.vllm, present only when drafts are on): `spec_decode_num_drafts_total` (verification
steps that carried a draft, one per sequence and step), `spec_decode_num_draft_tokens_total` (tokens
proposed), `spec_decode_num_accepted_tokens_total` (tokens accepted) and, per draft position k,
`spec_decode_num_accepted_tokens_per_pos_total_<k>`. Over a window (growth from the last sample at or before
its start to the first at or after its end):

- acceptance rate = accepted / draft tokens x 100;
- mean draft length = draft tokens / drafts: the draft length the steps ran with (vLLM's schedule by batch
  size, `num_speculative_tokens_per_batch_size`, picks it per step from the batch's size);
- mean accepted length = 1 + accepted / drafts: the tokens one verification step yields a sequence, the
  target model's own token included (as vLLM's log line counts it);
- tokens per step = (generated - requests) / (generated - requests - accepted), with generation_tokens_total's
  growth: every decode step yields a sequence 1 token plus what it accepted, and a step without a draft
  (n-gram lookup found nothing) yields 1; each request's first token comes from its prefill. This is the
  speed-up drafting gives a step, where the mean accepted length counts only the steps that drafted;
- acceptance at position k = accepted at k / drafts x 100 (a draft shorter than k, as n-gram drafting can
  propose, counts as not accepted there).

The counters are the engine's, so the figures cover whatever it served in the window, ours and anyone
else's. No drafts in the window (drafting off, or nothing decoded): no claims, never a zero.

SGLang keeps no such counters: its /metrics carry two gauges, `sglang:spec_accept_length` (the mean accepted
length, its own token included) and `sglang:spec_accept_rate`, each over the scheduler's last logging
interval. Where a window has no counters, the first sample at or after its end that holds a gauge above 0
gives `engine_accept_length` and `engine_accept_rate_pct`: the engine's word for its last interval, not a
figure of the window (`spec_gauge_claims`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.intervals import Interval
from loadproof.metrics.uncertainty import ratio_interval
from loadproof.rundir import EngineSample

DRAFTS = "spec_decode_num_drafts_total"
DRAFT_TOKENS = "spec_decode_num_draft_tokens_total"
ACCEPTED = "spec_decode_num_accepted_tokens_total"
PER_POS = "spec_decode_num_accepted_tokens_per_pos_total_"  # + the position, 0 first
TOTALS = (DRAFTS, DRAFT_TOKENS, ACCEPTED)
GENERATED = "generation_tokens_total"
WINDOW = "growth from the last /metrics sample at or before the window's start to the first at or after its end"


@dataclass(frozen=True)
class SpecWindow:
    """The counters' growth over a window."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_by_pos: tuple[float, ...]  # position 0, 1, ... (empty where the engine gives none)
    generated: float | None = None  # generation_tokens_total's growth (None where the samples lack it)
    # each pair of consecutive samples' growth that drafted, in time order: (drafts, draft tokens, accepted,
    # accepted at each position), the items of the acceptance figures' intervals
    steps: tuple[tuple[float, ...], ...] = ()


def spec_window(samples: Sequence[EngineSample], start_ns: int, end_ns: int) -> SpecWindow | None:
    """The growth over [start_ns, end_ns]; None without a sample holding the counters on each side, or
    without a draft in between."""
    held = sorted((s for s in samples if all(k in s.values for k in TOTALS)), key=lambda s: s.t_ns)
    before = [s for s in held if s.t_ns <= start_ns]
    after = [s for s in held if s.t_ns >= end_ns]
    if not before or not after:
        return None
    a, b = before[-1].values, after[0].values
    drafts = b[DRAFTS] - a[DRAFTS]
    if drafts <= 0:
        return None
    positions = sorted(int(k[len(PER_POS) :]) for k in b if k.startswith(PER_POS) and k[len(PER_POS) :].isdigit())
    by_pos = (
        tuple(b.get(f"{PER_POS}{p}", 0.0) - a.get(f"{PER_POS}{p}", 0.0) for p in range(max(positions) + 1))
        if positions
        else ()
    )
    generated = b[GENERATED] - a[GENERATED] if GENERATED in a and GENERATED in b else None
    keys = (*TOTALS, *(f"{PER_POS}{p}" for p in range(len(by_pos))))
    between = held[len(before) - 1 : len(held) - len(after) + 1]
    steps = tuple(
        grown
        for x, y in zip(between, between[1:])
        if (grown := tuple(y.values.get(k, 0.0) - x.values.get(k, 0.0) for k in keys))[0] > 0
    )
    return SpecWindow(drafts, b[DRAFT_TOKENS] - a[DRAFT_TOKENS], b[ACCEPTED] - a[ACCEPTED], by_pos, generated, steps)


def step_interval(
    window: SpecWindow, top: int, bottom: int, factor: float = 1.0, ceiling: float | None = None
) -> Interval | None:
    """A ratio of two of the window's counters (indices into `SpecWindow.steps`)' interval: batch means of its
    linearized growth between consecutive /metrics samples, in time order (metrics/uncertainty.py): the
    acceptance varies from one stretch of the run to the next, and a draft's tokens are no independent trials
    (the k-th is tried only if the ones before it were accepted), so no binomial interval."""
    return ratio_interval([s[top] for s in window.steps], [s[bottom] for s in window.steps], factor, ceiling)


ENGINE_LENGTH, ENGINE_RATE = "spec_accept_length", "spec_accept_rate"  # SGLang's gauges


def spec_gauge_claims(level: str, parts: dict[str, Any], samples: Sequence[EngineSample], end_ns: int) -> list[Claim]:
    """`<level>.spec_decode.engine_accept_length` and `engine_accept_rate_pct` from an engine that reports gauges
    instead of counters (SGLang), read at the first sample at or after `end_ns`; none where they are 0 or absent."""
    after = sorted(
        (s for s in samples if s.t_ns >= end_ns and s.values.get(ENGINE_LENGTH, 0.0) > 0), key=lambda s: s.t_ns
    )
    if not after:
        return []
    values, base = after[0].values, f"{level}.spec_decode"
    how = (
        "at the first /metrics sample at or after the window's end: the engine's mean over its last logging "
        "interval (SGLang keeps no draft counters), not a figure of this window alone"
    )
    claims = [
        number(
            f"{base}.engine_accept_length",
            values[ENGINE_LENGTH],
            "tokens",
            f"sglang:spec_accept_length {how}",
            3,
            direction="higher",
            parts=parts,
        )
    ]
    if values.get(ENGINE_RATE, 0.0) > 0:
        claims.append(
            number(
                f"{base}.engine_accept_rate_pct",
                100 * values[ENGINE_RATE],
                "%",
                f"sglang:spec_accept_rate x 100 {how}",
                2,
                direction="higher",
                parts=parts,
            )
        )
    return claims


def unavailable_claims(run: Any, claims: Sequence[Claim]) -> list[Claim]:
    """`spec_decode.unavailable` where the run's profile asks for drafts and `claims`, a scenario's draft figures
    (throughput's, load's), are none: the engine's /metrics showed neither vLLM's counters nor SGLang's gauges.
    Why, never a zero."""
    profile = run.manifest.profile or {}
    method = (profile.get("speculative") or {}).get("method") if isinstance(profile, dict) else None
    if method is None or any(".spec_decode." in c.name for c in claims) or not run.records:
        return []
    seen = (
        "no /metrics samples around the run"
        if not run.samples
        else (
            "the engine's /metrics show no draft counters (vLLM's spec_decode_num_drafts_total and the rest) and no "
            "acceptance gauge above 0 (SGLang's spec_accept_length) around the run"
        )
    )
    return [
        fact(
            "spec_decode.unavailable",
            f"the profile asks for {method} drafts, but {seen}",
            "why this run has no speculative-decoding figures though its profile drafts",
        )
    ]


def spec_claims(
    level: str, parts: dict[str, Any], window: SpecWindow | None, what: str, requests: int | None = None
) -> list[Claim]:
    """`<level>.spec_decode.*` for one window (`what` says which, for the formulas; `requests`: how many
    started in it, for the tokens per step); none without one."""
    if window is None:
        return []
    base = f"{level}.spec_decode"
    claims = [
        count(
            f"{base}.drafts",
            round(window.drafts),
            "steps",
            f"{DRAFTS} {WINDOW} ({what}): verification steps that carried a draft, one per sequence",
            direction="neither",
            parts=parts,
        ),
        count(
            f"{base}.draft_tokens",
            round(window.draft_tokens),
            "tokens",
            f"{DRAFT_TOKENS} {WINDOW} ({what})",
            direction="neither",
            parts=parts,
        ),
        count(
            f"{base}.accepted_tokens",
            round(window.accepted),
            "tokens",
            f"{ACCEPTED} {WINDOW} ({what})",
            direction="higher",
            parts=parts,
        ),
        number(
            f"{base}.mean_accepted_length",
            1 + window.accepted / window.drafts,
            "tokens",
            "1 + accepted tokens / "
            f"drafts, the counters' {WINDOW} ({what}): tokens a verification step yields a sequence, the target "
            "model's own included",
            3,
            direction="higher",
            parts=parts,
            interval=ratio_interval([s[0] + s[2] for s in window.steps], [s[0] for s in window.steps]),
        ),
    ]
    claims.insert(
        3,
        number(
            f"{base}.mean_draft_length",
            window.draft_tokens / window.drafts,
            "tokens",
            f"draft tokens / drafts, the counters' {WINDOW} ({what}): the draft length the steps ran "
            "with (a schedule by batch size sets it; n-gram lookup can propose fewer)",
            3,
            direction="neither",
            parts=parts,
        ),
    )
    if window.draft_tokens > 0:
        claims.insert(
            3,
            number(
                f"{base}.acceptance_pct",
                100 * window.accepted / window.draft_tokens,
                "%",
                f"accepted tokens / draft tokens x 100, the counters' {WINDOW} ({what})",
                2,
                direction="higher",
                parts=parts,
                interval=step_interval(window, 2, 1, 100.0, 100.0),
            ),
        )
    generated = window.generated  # None where the samples lack generation_tokens_total
    if generated is not None and requests and (steps := generated - requests - window.accepted) > 0:
        claims.append(
            number(
                f"{base}.tokens_per_step",
                (generated - requests) / steps,
                "tokens",
                f"(generated - requests) / (generated - requests - accepted), generation_tokens_total's "
                f"and the accepted counter's {WINDOW} ({what}): the tokens a decode step yields a "
                "sequence over every step, drafted or not (each request's first token comes from its "
                "prefill)",
                3,
                direction="higher",
                parts=parts,
            )
        )
    for k, accepted in enumerate(window.accepted_by_pos):
        claims.append(
            number(
                f"{base}.pos<k>.acceptance_pct",
                100 * accepted / window.drafts,
                "%",
                f"accepted tokens at draft position k / drafts x 100, the counters' {WINDOW} ({what}); "
                "k = 0 is the first drafted token",
                2,
                direction="higher",
                parts={**parts, "k": k},
                interval=step_interval(window, 3 + k, 0, 100.0, 100.0),
            )
        )
    return claims
