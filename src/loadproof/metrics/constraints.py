"""Claims of constrained answers (`--tools`, `--response-format`; docs/scenarios.md, "Tool calls and
structured output"): how many answers were checked, how many kept their schema, and how many tool calls an
answer made. Computed from each record's stored verdict (`output_valid`, set while the run ran, against the
schemas the options named) and its tool calls' count, so `verify` recomputes them from the run directory
alone (a published bundle keeps the verdicts and the calls' names, not their arguments).

Every scenario that takes the options adds `constraint_claims(scenario, records, options)` to its own; a run
without a constraint gets none of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.uncertainty import mean_interval, share_interval
from loadproof.records import RequestRecord


def constrained(options: Mapping[str, Any]) -> bool:
    """The run's options asked for a constraint (the manifest's `options`)."""
    return options.get("tools") is not None or options.get("response_format") is not None


def constraint_claims(scenario: str, records: Iterable[RequestRecord], options: Mapping[str, Any]) -> list[Claim]:
    """`<scenario>.output_checked`, `.output_invalid`, `.output_valid_pct`, the commonest reason, and with
    `--tools` `.tool_calls_per_request`; none when the options asked for no constraint."""
    if not constrained(options):
        return []
    checked = [r for r in records if r.ok and r.output_valid is not None]
    invalid = [r for r in checked if not r.output_valid]
    parts = {"scenario": scenario}
    claims = [
        count(
            "<scenario>.output_checked",
            len(checked),
            "requests",
            "successful requests whose answer was checked against the constraint (output_valid set)",
            direction="neither",
            parts=parts,
        ),
        count(
            "<scenario>.output_invalid",
            len(invalid),
            "requests",
            "checked requests with output_valid == false",
            direction="lower",
            parts=parts,
        ),
    ]
    if checked:
        claims.append(
            number(
                "<scenario>.output_valid_pct",
                100.0 * (len(checked) - len(invalid)) / len(checked),
                "%",
                "checked requests with output_valid == true / checked requests x 100",
                1,
                direction="higher",
                parts=parts,
                interval=share_interval(len(checked) - len(invalid), len(checked)),
            )
        )
    if invalid:
        reason, times = Counter(r.output_invalid_reason or "" for r in invalid).most_common(1)[0]
        claims.append(
            fact(
                "<scenario>.output_invalid_reason",
                f"{reason} ({times} of {len(invalid)})",
                "the commonest output_invalid_reason among the invalid answers, and how many gave it",
                parts=parts,
            )
        )
    if options.get("tools") is not None and checked:
        calls = sum(len(r.tool_calls) for r in checked)
        claims.append(
            number(
                "<scenario>.tool_calls_per_request",
                calls / len(checked),
                "calls",
                "sum over checked requests of len(tool_calls) / checked requests",
                2,
                direction="neither",
                parts=parts,
                interval=mean_interval([float(len(r.tool_calls)) for r in checked]),
            )
        )
    return claims
