"""A recorded agent's replay (`run replay --format otel`), as pure functions of its records and its plan
(`plans.agent_replay.AgentReplay`): how many of its calls were replayed, whether each waited for the calls it
depended on, how long past its allowed time it was sent, and its forks and joins (docs/scenarios.md, "replay",
"Recorded agent traces"). The latencies and the prefix-cache claims are the replay's own (`metrics.replay`).

Request i is allowed at max(start + copy_i x copy_interval_s + floor_s_i, max over its dependencies j of
end_j + wait_s_i) (`AgentReplay.allowed_ns`), `start` the schedule's start (its event). Standard library only.
"""

from __future__ import annotations

from loadproof.metrics.claims import Claim, Criterion, acceptance_claims, count, fact, number
from loadproof.metrics.distribution import percentile
from loadproof.metrics.uncertainty import stat_interval
from loadproof.plans.agent_replay import AgentReplay
from loadproof.records import RequestRecord

PREFIX = "replay.agent"


def agent_claims(records: list[RequestRecord], agent: AgentReplay, start_ns: int | None) -> list[Claim]:
    n = len(agent.spans)
    by_index = {r.batch: r for r in records if r.send_ns and 0 <= r.batch < n}
    expected = agent.llm_spans * agent.copies
    claims = [
        fact(
            f"{PREFIX}.trace",
            f"{agent.llm_spans} LLM calls, {agent.tool_spans} tool calls, {agent.agent_spans} agents; "
            f"{agent.copies} copies {agent.copy_interval_s:g} s apart, pace {agent.pace}",
            "the recorded agent: its LLM, tool and agent spans; the copies replayed, their interval, the pace",
        ),
        count(
            f"{PREFIX}.requests_expected",
            expected,
            "requests",
            "LLM spans in the trace x copies",
            direction="neither",
        ),
        count(
            f"{PREFIX}.requests_replayed",
            len(by_index),
            "requests",
            "records of requests sent, one per LLM span of each copy",
            direction="neither",
        ),
        number(
            f"{PREFIX}.tokens_per_char",
            agent.tokens_per_char,
            "tokens/char",
            "the one ratio fitted over the trace: sum over calls of chars x (recorded input tokens x input_scale "
            "- template tokens) / sum of chars^2",
            4,
            direction="neither",
        ),
        number(
            f"{PREFIX}.prompt_fit_error_pct",
            agent.fit_error_pct,
            "%",
            "mean over requests of |prompt tokens - recorded input tokens x input_scale| / (recorded input tokens "
            "x input_scale) x 100",
            2,
            direction="lower",
        ),
    ]
    links = [
        (agent.links[i][k] if k < len(agent.links[i]) else "same")
        for i in by_index
        for k, j in enumerate(agent.deps[i])
        if j in by_index
    ]
    claims += [
        count(
            f"{PREFIX}.{kind}s",
            sum(link == kind for link in links),
            "dependencies",
            f"dependencies between two requests sent whose link is a {kind} ({what})",
            direction="neither",
        )
        for kind, what in (
            ("fork", "a sub-agent's call waiting for its parent's"),
            ("join", "a parent's call waiting for its sub-agent's"),
        )
    ]
    early_order = [i for i, r in by_index.items() if any(_before_end(r, by_index.get(j)) for j in agent.deps[i])]
    claims.append(
        count(
            f"{PREFIX}.order_violations",
            len(early_order),
            "requests",
            "requests sent before one of their dependencies ended (or with a dependency never sent)",
            direction="lower",
        )
    )
    delays = []
    if start_ns is not None:
        for i, r in by_index.items():
            ends = [by_index[j].end_ns for j in agent.deps[i] if j in by_index]
            if len(ends) == len(agent.deps[i]):
                delays.append((r.send_ns - agent.allowed_ns(i, start_ns, ends)) / 1e9)
    if delays:
        ordered = sorted(delays)
        claims += [
            number(
                f"{PREFIX}.send_delay_s.<stat>",
                percentile(ordered, p),
                "s",
                f"{stat} over requests of send - allowed, allowed = max(schedule start + copy x copy_interval_s "
                "+ floor_s, last dependency's end + wait_s): its think time (pace deps: the recorded tool "
                "time; recorded: the recorded gap) kept, and how late",
                4,
                direction="lower",
                parts={"stat": stat},
                interval=stat_interval(delays, stat),
            )
            for stat, p in (("p50", 50.0), ("max", 100.0))
        ]
    early_waits = sum(d < 0 for d in delays)
    claims += acceptance_claims(
        PREFIX,
        [
            Criterion(
                "order_kept",
                "FAIL" if early_order or not by_index else "PASS",
                f"{len(early_order)} of {len(by_index)} requests sent before a dependency ended",
            ),
            Criterion(
                "waits_kept",
                "FAIL" if early_waits else ("PASS" if delays else "SKIPPED"),
                f"{early_waits} of {len(delays)} requests sent before their allowed time",
            ),
        ],
    )
    return claims


def _before_end(record: RequestRecord, dep: RequestRecord | None) -> bool:
    return dep is None or record.send_ns < dep.end_ns
