"""Reasoning-aware timing (docs/scenarios.md, 'Reasoning models'), as pure functions of RequestRecords.

A reasoning model streams its reasoning (`delta.reasoning_content` / `delta.reasoning`) before its answer.
TTFT stays what it is everywhere (the first token of either kind); these claims draw the two apart, per
group of records (a run, or a family and concurrency level), and only where at least one record streamed
reasoning, so a run of a plain model gets none of them:

- `<prefix>.reasoning.requests`: successful requests that streamed reasoning;
- `<prefix>.reasoning.ttfa_s.<stat>` (p50, p90, p99): time to first answer token, t_first_answer - t_send,
  beside `<prefix>.reasoning.ttft_s.<stat>`, TTFT as everywhere (the first token of either kind), over the
  same requests;
- `<prefix>.reasoning.reasoning_tokens` and `..._mean`, `<prefix>.reasoning.answer_tokens` and `..._mean`:
  the completion tokens split in two (the client's per-chunk count of reasoning chunks, else the engine's
  usage.completion_tokens_details.reasoning_tokens; answer = usage.completion_tokens - reasoning);
- `<prefix>.reasoning.answer_tpot_s.<stat>`: the answer's own time per output token after its first chunk,
  (t_last_token - t_first_answer) / (answer_tokens - 1).

Whether a record streamed reasoning is read from what a published bundle keeps (publish drops the
reasoning text): a reasoning token count, or a first answer chunk after the first token. A run that asked
for thinking and got none in any answer is warned of (`thinking_unheeded`), first in its report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from loadproof.metrics.claims import Claim, count, number
from loadproof.metrics.distribution import PERCENTILES, summarize
from loadproof.metrics.figures import BarPlot, Bars, Panel, Table
from loadproof.metrics.uncertainty import mean_interval, ranked, stat_interval
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S

STATS = ("p50", "p90", "p99")
TTFT_FORMULA = "t_first_token - t_send: TTFT, the first token of either kind (reasoning or answer)"
TTFA_FORMULA = (
    "t_first_answer - t_send: send to the first chunk of the answer (content or a tool call), after any reasoning"
)
ANSWER_TPOT_FORMULA = (
    "(t_last_token - t_first_answer) / (answer_tokens - 1), requests with 2 or more answer "
    "tokens: the answer's time per output token after its first chunk"
)
REASONING_COUNT = (
    "reasoning tokens of a request: the client's count of the completion tokens that arrived on "
    "reasoning chunks (per-chunk usage), else the engine's usage.completion_tokens_details."
    "reasoning_tokens"
)
ANSWER_COUNT = "answer tokens of a request: usage.completion_tokens - its reasoning tokens"


def streamed_reasoning(record: RequestRecord) -> bool:
    """Whether the request streamed reasoning: a reasoning count above 0, reasoning text, or an answer
    whose first chunk came after the first token (reasoning came first)."""
    if (record.reasoning_tokens or 0) > 0 or (record.engine_reasoning_tokens or 0) > 0 or record.reasoning_text:
        return True
    return (
        record.first_token_ns is not None
        and record.first_answer_ns is not None
        and record.first_answer_ns > record.first_token_ns
    )


def reasoning_count(record: RequestRecord) -> int | None:
    """The request's reasoning tokens: the client's per-chunk count, else the engine's; 0 for a request
    that streamed none; None when it streamed reasoning that nobody counted."""
    if record.reasoning_tokens is not None:
        return record.reasoning_tokens
    if record.engine_reasoning_tokens is not None:
        return record.engine_reasoning_tokens
    return None if streamed_reasoning(record) else 0


def answer_count(record: RequestRecord) -> int | None:
    """usage.completion_tokens - reasoning tokens; None where either is unknown."""
    reasoning = reasoning_count(record)
    if record.output_tokens is None or reasoning is None:
        return None
    return max(record.output_tokens - reasoning, 0)


def answer_tpot_ns(record: RequestRecord) -> float | None:
    """(t_last_token - t_first_answer) / (answer_tokens - 1); None under 2 answer tokens or with no span."""
    answer = answer_count(record)
    if answer is None or answer < 2 or record.first_answer_ns is None or record.last_token_ns is None:
        return None
    span = record.last_token_ns - record.first_answer_ns
    return span / (answer - 1) if span > 0 else None


def succeeded(record: RequestRecord) -> bool:
    return record.ok and record.first_token_ns is not None


def has_reasoning(records: Iterable[RequestRecord]) -> bool:
    return any(streamed_reasoning(r) for r in records)


def thinking_unheeded(thinking: str | None, effort: str | None, records: Iterable[RequestRecord]) -> str | None:
    """The warning a run that asked a model to think (`--thinking low|on`, or a `--reasoning-effort` without
    `--thinking off`) gets when none of its successful answers streamed reasoning: the model does not
    reason, or its server does not stream reasoning apart, and the run measured a plain model. Known only
    from the answers, so said in the run's report and summary; None otherwise (also with no answer)."""
    if thinking in ("low", "on"):
        asked = f"--thinking {thinking}"
    elif thinking is None and effort is not None:
        asked = f"--reasoning-effort {effort}"
    else:
        return None
    ok = [r for r in records if succeeded(r)]
    if not ok or has_reasoning(ok):
        return None
    return (
        f"{asked} was asked, but none of the {len(ok)} successful answer{'s' if len(ok) != 1 else ''} streamed "
        "reasoning: the model does not reason, or its server does not stream reasoning apart (vLLM: "
        "--reasoning-parser); the figures are those of a model that did not think"
    )


def reasoning_claims(
    prefix: str, records: Iterable[RequestRecord], parts: Mapping[str, object] | None = None
) -> list[Claim]:
    """Claims `<prefix>.reasoning.*` over the successful records, none when no record streamed reasoning.
    `prefix` may hold `<part>` placeholders (`throughput.<family>.c<N>`), filled from `parts`."""
    records = list(records)
    if not has_reasoning(records):
        return []
    ok = [r for r in records if succeeded(r)]
    name = f"{prefix}.reasoning"
    parts = dict(parts or {})
    claims = [
        count(
            f"{name}.requests",
            sum(streamed_reasoning(r) for r in ok),
            "requests",
            "successful requests that streamed reasoning (a reasoning token count, or the first answer "
            "chunk after the first token)",
            direction="neither",
            parts=parts,
        )
    ]
    claims += _percentiles(f"{name}.ttft_s", [r.ttft_ns for r in ok if r.ttft_ns is not None], TTFT_FORMULA, 3, parts)
    claims += _percentiles(f"{name}.ttfa_s", [r.ttfa_ns for r in ok if r.ttfa_ns is not None], TTFA_FORMULA, 3, parts)
    counted = [(reasoning_count(r), answer_count(r)) for r in ok]
    known = [(rc, ac) for rc, ac in counted if rc is not None and ac is not None]
    if known:
        over = f"over the {len(known)} successful requests with a known count"
        reasoning_total = sum(rc for rc, _ in known)
        answer_total = sum(ac for _, ac in known)
        claims += [
            count(
                f"{name}.reasoning_tokens",
                reasoning_total,
                "tokens",
                f"sum {over} of the {REASONING_COUNT}",
                direction="neither",
                parts=parts,
            ),
            number(
                f"{name}.reasoning_tokens_mean",
                reasoning_total / len(known),
                "tokens",
                f"mean {over} of the {REASONING_COUNT}",
                direction="neither",
                parts=parts,
                interval=mean_interval([float(rc) for rc, _ in known]),
            ),
            count(
                f"{name}.answer_tokens",
                answer_total,
                "tokens",
                f"sum {over} of the {ANSWER_COUNT}",
                direction="neither",
                parts=parts,
            ),
            number(
                f"{name}.answer_tokens_mean",
                answer_total / len(known),
                "tokens",
                f"mean {over} of the {ANSWER_COUNT}",
                direction="neither",
                parts=parts,
                interval=mean_interval([float(ac) for _, ac in known]),
            ),
        ]
    claims += _percentiles(
        f"{name}.answer_tpot_s", [t for t in map(answer_tpot_ns, ok) if t is not None], ANSWER_TPOT_FORMULA, 4, parts
    )
    return claims


def _percentiles(
    name: str, values_ns: list[float], formula: str, decimals: int, parts: Mapping[str, object]
) -> list[Claim]:
    summary = summarize(values_ns)
    if summary is None:
        return []
    ordered = ranked(values_ns)
    return [
        number(
            f"{name}.<stat>",
            summary.stat(stat) / NS_PER_S,
            "s",
            f"{PERCENTILES[stat]:g}th percentile of {formula} ({summary.method})",
            decimals,
            direction="lower",
            parts={**parts, "stat": stat},
            interval=stat_interval(values_ns, stat, 1 / NS_PER_S, ordered),
        )
        for stat in STATS
    ]


# --- report panels (every scenario whose runs can reason: `reasoning_panels`) -------------------------------

SUFFIX = ".reasoning.requests"
COLUMNS = (
    ("TTFT p50 s", "ttft_s.p50"),
    ("first answer p50 s", "ttfa_s.p50"),
    ("TTFT p90 s", "ttft_s.p90"),
    ("first answer p90 s", "ttfa_s.p90"),
    ("reasoning tokens (mean)", "reasoning_tokens_mean"),
    ("answer tokens (mean)", "answer_tokens_mean"),
    ("answer TPOT p50 s", "answer_tpot_s.p50"),
)


def reasoning_panels(claims: list[Claim]) -> list[Panel]:
    """Reasoning and answer drawn apart, one row per group that streamed reasoning (none elsewhere): the
    table (report.md, the console) and TTFT beside time to first answer token (report.html)."""
    by_name = {c.name: c for c in claims}
    groups = [c.name[: -len(SUFFIX)] for c in claims if c.name.endswith(SUFFIX)]
    if not groups:
        return []

    def cell(group: str, key: str) -> Claim | None:
        return by_name.get(f"{group}.reasoning.{key}")

    rows = [
        [group, by_name[group + SUFFIX].printed]
        + [(c.printed if (c := cell(group, key)) else "n/a") for _, key in COLUMNS]
        for group in groups
    ]
    table = Table(
        title="Reasoning and answer",
        header=["group", "requests that reasoned"] + [h for h, _ in COLUMNS],
        rows=rows,
        intro=[
            "TTFT is the first token of either kind; the first answer token comes after the "
            "reasoning. Tokens split usage.completion_tokens into reasoning and answer."
        ],
        console="Reasoning and answer (TTFT beside time to first answer token)",
        claims=[c.name for c in claims if ".reasoning." in c.name],
    )

    def values(key: str) -> list[float | None]:
        return [float(c.value) if (c := cell(g, key)) else None for g in groups]

    bars = BarPlot(
        title="TTFT beside time to first answer token",
        groups=groups,
        series=[
            Bars("TTFT p50", values("ttft_s.p50")),
            Bars("first answer token p50", values("ttfa_s.p50")),
            Bars("TTFT p90", values("ttft_s.p90")),
            Bars("first answer token p90", values("ttfa_s.p90")),
        ],
        y_label="s",
        caption="Send to the first token of either kind (TTFT) and to the first token of the "
        "answer, after the reasoning: the wait a reader of the answer sees.",
    )
    return [table, bars]
