"""Interference figures (docs/scenarios.md, 'interference'): the M streams' aggregate rate before, during and after a newcomer's prefill.

before: tokens of the M streams in [t0, t0 + W] / W, t0 = the last of their first tokens;
during: tokens of the M streams in [newcomer send, newcomer first token] / that span;
after:  tokens of the M streams in [newcomer first token, + W] / W.
Then each session's follow-up on the same context: prefix-cache hits expected, fact retrieved.
"""

from __future__ import annotations

from loadproof.metrics.capacity import window_tokens
from loadproof.metrics.claims import Claim, Criterion, acceptance_claims, count, number
from loadproof.metrics.prefill import counter_delta
from loadproof.plans.interference import InterferencePlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.units import NS_PER_S
from loadproof.workloads.answer_window import states


def interference_claims(plan: InterferencePlan, records: list[RequestRecord],
                        samples: list[EngineSample]) -> list[Claim]:
    samples = sorted(samples, key=lambda s: s.t_ns)
    by_id = {r.request_id: r for r in records}
    streams = [by_id.get(s.request_id) for s in plan.sessions]
    newcomer = by_id.get(plan.newcomer.request_id)
    window_ns = int(plan.window_s * NS_PER_S)
    claims: list[Claim] = [count("interference.sessions", len(streams), "sessions", "M, streams already generating",
                                 direction="neither")]
    criteria: list[Criterion] = []
    started = [r for r in streams if r is not None and r.first_token_ns is not None]
    if len(started) < len(streams):
        criteria.append(Criterion("streams_started", "FAIL", f"{len(started)}/{len(streams)} sessions produced a first token"))
    else:
        criteria.append(Criterion("streams_started", "PASS", f"{len(streams)}/{len(streams)} sessions produced a first token"))
        t0 = max(r.first_token_ns for r in started)  # type: ignore[type-var]

        def rate(a: int, b: int) -> float:
            return sum(window_tokens(r, a, b) for r in started) * NS_PER_S / (b - a) if b > a else 0.0

        claims.append(number("interference.before_tokens_per_s", rate(t0, t0 + window_ns), "tokens/s",
                             "tokens of the M streams in [t0, t0 + W] / W; aggregate, not one user's rate",
                             direction="higher"))
        if newcomer is not None and newcomer.first_token_ns is not None:
            claims += [
                number("interference.during_tokens_per_s", rate(newcomer.send_ns, newcomer.first_token_ns), "tokens/s",
                       "tokens of the M streams from the newcomer's send to its first token / that span",
                       direction="higher"),
                number("interference.after_tokens_per_s",
                       rate(newcomer.first_token_ns, newcomer.first_token_ns + window_ns), "tokens/s",
                       "tokens of the M streams in [newcomer first token, + W] / W", direction="higher"),
                number("interference.newcomer_ttft_s", newcomer.ttft_ns / NS_PER_S, "s",  # type: ignore[operator]
                       "newcomer t_first_token - t_send, while the M streams generate", 2, direction="lower"),
            ]
            criteria.append(Criterion("newcomer_first_token", "PASS",
                                      f"first token after {newcomer.ttft_ns / NS_PER_S:.2f} s"))  # type: ignore[operator]
        else:
            why = f"{newcomer.error_kind}: {newcomer.error_message}" if newcomer else "never sent"
            criteria.append(Criterion("newcomer_first_token", "FAIL", f"the newcomer produced no token ({why})"))
    # follow-ups: warm, correct
    followups = [by_id.get(s.followup_request_id) for s in plan.sessions]
    retrieved, hits, missing_hits = 0, 0.0, []
    for s, rec in zip(plan.sessions, followups):
        if rec is None or not rec.ok:
            continue
        if states(rec.output_text, s.expected):
            retrieved += 1
        delta = counter_delta(samples, "prefix_cache_hits_total", rec.send_ns, rec.end_ns)
        hits += delta or 0.0
        if not delta:
            missing_hits.append(s.session_id)
    n = len(plan.sessions)
    done = sum(1 for r in followups if r is not None and r.ok)
    claims.append(count("interference.followup_prefix_cache_hits", int(hits), "tokens",
                        "sum over follow-ups of prefix_cache_hits_total growth across the follow-up", direction="higher"))
    criteria.append(Criterion("followup_warm", "FAIL" if missing_hits or done < n else "PASS",
                              f"{done - len(missing_hits)}/{n} follow-ups hit the prefix cache ({hits:g} tokens)"
                              + (f"; cold: {', '.join(missing_hits)}" if missing_hits else "")))
    if plan.check_probes:
        claims.append(count("interference.followup_retrieved", retrieved, "sessions",
                            "follow-ups whose answer states the session's planted value", direction="higher"))
        criteria.append(Criterion("followup_probes", "PASS" if retrieved == n else "FAIL",
                                  f"{retrieved}/{n} follow-ups stated their planted fact"))
    else:
        criteria.append(Criterion("followup_probes", "SKIPPED", "probe check skipped by option (e.g. random weights)"))
    return claims + acceptance_claims("interference", criteria)


def claims_of_run(run, plan: InterferencePlan) -> list[Claim]:
    return interference_claims(plan, run.records, run.samples)
