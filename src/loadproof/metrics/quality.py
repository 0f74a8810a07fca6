"""Quality figures (docs/quality.md), as pure functions of a run's `answers.jsonl` rows alone.

A row is one item asked once in one mode: `suite`, `item_id`, `mode`, the extracted and expected
answers and the verdict, or `skipped` with a reason, plus `error` when its request failed (it then
counts as a wrong answer). GSM8K verdicts are recomputed here from the extracted and expected answers
(lm-eval's normalization) and retrieval verdicts as `extracted == expected`, so a verifier needs nothing
but the rows; authored and image verdicts are the checker's, as recorded (some checkers run code or
accept several words).

`answer_changes` matches two runs item by item for `loadproof compare`.

Under load (`--under-load-rate`): every item is asked idle, then again while an open-loop load runs; the
rows of the second asking carry `under_load`. The suite claims above read the idle rows only;
`under_load_claims` pairs each item's two rows and counts the answers whose whole text changed (their
`answer_sha256` differ) and both accuracies over the same items; the load's own requests (family `load`)
get the load scenario's claims (`metrics.load`), computed from its stored plan.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.constraints import constraint_claims
from loadproof.metrics.figures import Panel, Table
from loadproof.metrics.load import load_claims
from loadproof.metrics.uncertainty import share_interval
from loadproof.plans.quality import QualityPlan
from loadproof.rundir import Answer
from loadproof.store.run_dir import Run
from loadproof.workloads.quality import MODES
from loadproof.workloads.quality.gsm8k import is_correct

Row = Answer
Key = tuple[str, str, str]
LOAD_FAMILY = "load"  # the family of the under-load run's load requests in requests.jsonl


def key(row: Row) -> Key:
    return (str(row.suite), row.item_id, row.mode)


def latest(rows: list[Row]) -> dict[Key, Row]:
    """One row per (suite, item_id, mode), the last written winning, in first-seen order."""
    out: dict[Key, Row] = {}
    for row in rows:
        out[key(row)] = row
    return out


def verdict(row: Row, strict: bool = False) -> tuple[str | None, bool] | None:
    """(extracted answer, correct) of a row; None when the item was skipped."""
    if row.skipped:
        return None
    if row.suite == "gsm8k":
        extracted = row.extracted_strict if strict else row.extracted_flexible
        return extracted, is_correct(extracted, "" if row.expected is None else row.expected)
    if row.suite == "retrieval":
        return row.extracted, row.extracted is not None and row.extracted == row.expected
    return row.extracted, bool(row.correct)


def correct(row: Row, strict: bool = False) -> bool:
    """Whether an asked row's answer is right (a skipped one has no verdict)."""
    seen = verdict(row, strict)
    assert seen is not None, f"item {row.item_id} was skipped: it has no verdict"
    return seen[1]


def _skipped(name: str, reasons: list[str], parts: Mapping[str, object] | None = None) -> Claim:
    return fact(
        name,
        reasons[0] if reasons else "skipped",
        "every item was skipped; the reason recorded in answers.jsonl",
        parts,
    )


def _count(
    prefix: str, rows: list[Row], correct_word: str = "correct", parts: Mapping[str, object] | None = None
) -> list[Claim]:
    """`<prefix>.<correct_word>` and `<prefix>.items`, or `<prefix>.skipped` with the reason; `prefix` may
    hold placeholders filled from `parts`."""
    asked = [r for r in rows if not r.skipped]
    if not asked:
        return [_skipped(f"{prefix}.skipped", [str(r.skipped) for r in rows], parts)]
    good = sum(correct(r) for r in asked)
    return [
        count(
            f"{prefix}.{correct_word}",
            good,
            "items",
            f"count of items judged {correct_word}",
            direction="higher",
            parts=parts,
        ),
        count(
            f"{prefix}.items",
            len(asked),
            "items",
            "count of items asked (not skipped)",
            direction="neither",
            parts=parts,
        ),
    ]


def idle(rows: list[Row]) -> list[Row]:
    """The rows of the idle asking (every row of a run without --under-load-rate)."""
    return [r for r in rows if not r.under_load]


def quality_claims(all_rows: list[Row]) -> list[Claim]:
    rows = list(latest(idle(all_rows)).values())
    by_suite: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_suite[str(row.suite)].append(row)
    claims: list[Claim] = []
    gsm8k = by_suite.get("gsm8k", [])
    asked = [r for r in gsm8k if not r.skipped]
    if asked:
        flexible = sum(correct(r) for r in asked)
        strict = sum(correct(r, strict=True) for r in asked)
        claims += [
            count(
                "quality.gsm8k.correct",
                flexible,
                "items",
                "count of items whose flexible extraction (last number) equals the reference after "
                "removing commas, '$' and a trailing period",
                direction="higher",
            ),
            count(
                "quality.gsm8k.correct_strict",
                strict,
                "items",
                "count of items whose '#### <number>' equals the reference after the same normalization",
                direction="higher",
            ),
            count("quality.gsm8k.items", len(asked), "items", "count of GSM8K items asked", direction="neither"),
            number(
                "quality.gsm8k.accuracy",
                flexible / len(asked),
                "fraction",
                "quality.gsm8k.correct / quality.gsm8k.items (flexible extraction)",
                3,
                direction="higher",
                interval=share_interval(flexible, len(asked), scale=1.0),  # Wilson over items
            ),
            number(
                "quality.gsm8k.accuracy_strict",
                strict / len(asked),
                "fraction",
                "quality.gsm8k.correct_strict / quality.gsm8k.items",
                3,
                direction="higher",
                interval=share_interval(strict, len(asked), scale=1.0),  # Wilson over items
            ),
        ]
    elif gsm8k:
        claims.append(_skipped("quality.gsm8k.skipped", [str(r.skipped) for r in gsm8k]))
    by_mode: dict[str, list[Row]] = defaultdict(list)
    for row in by_suite.get("authored", []):
        by_mode[row.mode].append(row)
    order = {m: i for i, m in enumerate(MODES)}
    for mode, mode_rows in sorted(by_mode.items(), key=lambda kv: order.get(kv[0], len(order))):
        claims += _count("quality.authored.<mode>", mode_rows, parts={"mode": mode})
        if any(not r.skipped for r in mode_rows):
            by_lang: dict[str, list[Row]] = defaultdict(list)
            for row in mode_rows:
                by_lang[str(row.lang)].append(row)
            for lang, lang_rows in by_lang.items():
                claims += _count("quality.authored.<mode>.<lang>", lang_rows, parts={"mode": mode, "lang": lang})
    by_length: dict[int, list[Row]] = defaultdict(list)
    for row in by_suite.get("retrieval", []):
        by_length[row.length_tokens or 0].append(row)
    for length in sorted(by_length):
        claims += _count("quality.retrieval.<L>", by_length[length], correct_word="retrieved", parts={"L": length})
    if "image" in by_suite:
        claims += _count("quality.image", by_suite["image"])
    errors = sum(1 for r in rows if r.error)
    claims.append(
        count(
            "quality.request_errors",
            errors,
            "items",
            "count of items whose request failed (scored as wrong)",
            direction="lower",
        )
    )
    return claims


def pairs(all_rows: list[Row]) -> list[tuple[Row, Row]]:
    """(idle row, under-load row) of every item asked both ways, in the under-load rows' order."""
    first = latest(idle(all_rows))
    return [(first[k], row) for k, row in latest([r for r in all_rows if r.under_load]).items() if k in first]


def compared(all_rows: list[Row]) -> list[tuple[Row, Row]]:
    """The pairs whose two answers can be compared: both asked, neither request failed."""
    return [(i, u) for i, u in pairs(all_rows) if not (i.skipped or u.skipped or i.error or u.error)]


def changed(idle_row: Row, loaded: Row) -> bool:
    """The whole answer text differs between the idle and the under-load asking."""
    return idle_row.answer_sha256 != loaded.answer_sha256


def under_load_claims(all_rows: list[Row]) -> list[Claim]:
    matched = pairs(all_rows)
    if not matched:
        return []
    both = compared(all_rows)
    claims = [
        count(
            "quality.under_load.items",
            len(both),
            "items",
            "count of items asked idle and under load, neither request failed",
            direction="neither",
        ),
        count(
            "quality.under_load.request_errors",
            sum(1 for _, u in matched if u.error),
            "items",
            "count of items whose under-load request failed",
            direction="lower",
        ),
    ]
    if not both:
        return claims
    n = len(both)
    moved = sum(changed(i, u) for i, u in both)
    good_idle = sum(correct(i) for i, _ in both)
    good_load = sum(correct(u) for _, u in both)
    return claims + [
        count(
            "quality.under_load.changed",
            moved,
            "items",
            "count of quality.under_load.items whose whole answer "
            "text under load differs from the idle one (answer_sha256 differ)",
            direction="lower",
        ),
        number(
            "quality.under_load.changed_share",
            moved / n,
            "fraction",
            "quality.under_load.changed / quality.under_load.items",
            3,
            direction="lower",
            interval=share_interval(moved, n, scale=1.0),  # Wilson over items
        ),
        count(
            "quality.under_load.correct_idle",
            good_idle,
            "items",
            "count of quality.under_load.items judged correct when asked idle",
            direction="higher",
        ),
        count(
            "quality.under_load.correct",
            good_load,
            "items",
            "count of quality.under_load.items judged correct when asked under load",
            direction="higher",
        ),
        number(
            "quality.under_load.accuracy_idle",
            good_idle / n,
            "fraction",
            "quality.under_load.correct_idle / quality.under_load.items",
            3,
            direction="higher",
            interval=share_interval(good_idle, n, scale=1.0),  # Wilson over items
        ),
        number(
            "quality.under_load.accuracy",
            good_load / n,
            "fraction",
            "quality.under_load.correct / quality.under_load.items",
            3,
            direction="higher",
            interval=share_interval(good_load, n, scale=1.0),  # Wilson over items
        ),
    ]


def claims_of_run(run: Run, plan: QualityPlan | None) -> list[Claim]:
    """From answers.jsonl alone; the plan names the data files and budgets, which no figure reads. Under
    load, the load's requests also get the load scenario's claims, from the load's stored plan."""
    claims = quality_claims(run.answers) + under_load_claims(run.answers)
    claims += constraint_claims("quality", [r for r in run.records if r.family != LOAD_FAMILY], run.manifest.options)
    if plan is not None and plan.under_load is not None:
        claims += load_claims(
            [r for r in run.records if r.family == LOAD_FAMILY], plan.under_load.load, run.events, run.samples
        )
    return claims


CHANGE_KINDS = (
    "same_answer",
    "changed_answer_both_correct",
    "same_errors",
    "new_errors",
    "fixed_errors",
    "only_in_base",
    "only_in_candidate",
    "skipped",
)


def answer_changes(base: Run, cand: Run) -> dict[str, list[dict[str, Any]]]:
    """Item-by-item change between two runs' answers, matched on (suite, item_id, mode).

    - same_answer: same extracted answer, both correct;
    - changed_answer_both_correct: both correct, extracted answers differ (e.g. `18` and `18.`);
    - same_errors: wrong in both (the two wrong answers may differ; both are listed);
    - new_errors: correct in base, wrong in candidate;
    - fixed_errors: wrong in base, correct in candidate;
    - only_in_base / only_in_candidate: asked in one run only;
    - skipped: skipped in either run.
    Each entry: suite, item_id, mode, expected, base and candidate extracted answers (GSM8K: flexible).
    """
    return compare_answers(idle(base.answers), idle(cand.answers))


def compare_answers(base_rows: list[Row], cand_rows: list[Row]) -> dict[str, list[dict[str, Any]]]:
    base, cand = latest(base_rows), latest(cand_rows)
    out: dict[str, list[dict[str, Any]]] = {kind: [] for kind in CHANGE_KINDS}
    for k in list(base) + [k for k in cand if k not in base]:
        b, c = base.get(k), cand.get(k)
        entry: dict[str, Any] = {
            "suite": k[0],
            "item_id": k[1],
            "mode": k[2],
            "expected": next(r.expected for r in (b, c) if r is not None),
        }
        if b is None or c is None:
            row = b if c is None else c
            assert row is not None
            seen = verdict(row)
            entry["base" if c is None else "candidate"] = f"skipped: {row.skipped}" if seen is None else seen[0]
            out["only_in_base" if c is None else "only_in_candidate"].append(entry)
            continue
        vb, vc = verdict(b), verdict(c)
        if vb is None or vc is None:
            entry.update(
                base=f"skipped: {b.skipped}" if vb is None else vb[0],
                candidate=f"skipped: {c.skipped}" if vc is None else vc[0],
            )
            out["skipped"].append(entry)
            continue
        entry.update(base=vb[0], candidate=vc[0])
        if vb[1] and vc[1]:
            out["same_answer" if vb[0] == vc[0] else "changed_answer_both_correct"].append(entry)
        elif vb[1]:
            out["new_errors"].append(entry)
        elif vc[1]:
            out["fixed_errors"].append(entry)
        else:
            out["same_errors"].append(entry)
    return out


# --- report panels (catalog entry `figures`) ---------------------------------------------------------


def figures(run: Run, plan: QualityPlan, claims: list[Claim]) -> list[Panel]:
    """The table of checks (report.md): correct, items and share per suite, mode, language and length."""
    rows = quality_rows(claims)
    panels: list[Panel] = (
        [
            Table(
                title="Quality",
                header=["check", "correct", "items", "share"],
                rows=rows,
                intro=["Scored item by item (answers.jsonl); GSM8K by lm-eval's strict and flexible extraction."],
            )
        ]
        if rows
        else []
    )
    return panels + under_load_panels(run, claims)


def _cell(text: str | None) -> str:
    """A model's text in one table cell: quoted, escaped, on one line."""
    return "" if text is None else json.dumps(text, ensure_ascii=False).replace("|", "\\|")


UNDER_LOAD_FIGURES = (
    ("items compared", "quality.under_load.items"),
    ("answers changed", "quality.under_load.changed"),
    ("changed share", "quality.under_load.changed_share"),
    ("accuracy idle", "quality.under_load.accuracy_idle"),
    ("accuracy under load", "quality.under_load.accuracy"),
    ("under-load request errors", "quality.under_load.request_errors"),
    ("load requests", "load.requests"),
    ("load rate achieved (requests/s)", "load.achieved_rate_rps"),
    ("load TTFT p50 (s)", "load.ttft_s.p50"),
    ("load E2EL p50 (s)", "load.e2el_s.p50"),
    ("load failed requests", "load.failed_requests"),
)


def under_load_panels(run: Run, claims: list[Claim]) -> list[Panel]:
    """Idle against under load (the same items), and every answer that changed, both windows side by side."""
    by_name = {c.name: c for c in claims}
    items = by_name.get("quality.under_load.items")
    if items is None:
        return []
    shown = [(what, name) for what, name in UNDER_LOAD_FIGURES if name in by_name]
    panels: list[Panel] = [
        Table(
            title="Quality under load",
            header=["figure", "value"],
            rows=[[what, by_name[name].printed] for what, name in shown],
            intro=[
                "Every item asked idle, then again while an open-loop load ran on the same target; greedy decoding, "
                "so an answer that changed shows the engine's output depends on what else it batches."
            ],
            console="Quality under load",
            claims=[name for _, name in shown],
        )
    ]
    moved = [(i, u) for i, u in compared(run.answers) if changed(i, u)]
    if moved:
        panels.append(
            Table(
                title="Answers changed under load",
                header=[
                    "item",
                    "mode",
                    "from char",
                    "idle answer",
                    "under-load answer",
                    "correct idle",
                    "correct under load",
                ],
                rows=[
                    [
                        u.item_id,
                        u.mode,
                        str(u.answer_diff_at),
                        _cell(u.idle_answer_text),
                        _cell(u.answer_text),
                        str(correct(i)).lower(),
                        str(correct(u)).lower(),
                    ]
                    for i, u in moved
                ],
                intro=[
                    f"Each answer is cut to 64 characters from a little before the first character that differs "
                    f"({len(moved)} of {int(items.value)} items)."
                ],
                console="Answers changed under load",
            )
        )
    return panels


def quality_rows(claims: list[Claim]) -> list[list[str]]:
    """(check, correct, items, share) per quality suite, mode, language and length; skipped ones say why."""
    by_name = {c.name: c for c in claims}
    rows = []
    for c in claims:
        if not c.name.startswith("quality.") or c.name.startswith("quality.under_load."):  # its own panel
            continue
        stem, _, leaf = c.name.rpartition(".")
        label = stem.removeprefix("quality.").replace(".", " ")
        if leaf == "skipped":
            rows.append([label, "skipped", "", str(c.value)])
            continue
        if leaf != "items":
            continue
        items = int(c.value)
        pairs = [("", by_name.get(f"{stem}.correct") or by_name.get(f"{stem}.retrieved"))]
        if f"{stem}.correct_strict" in by_name:
            pairs = [(" (flexible)", pairs[0][1]), (" (strict)", by_name[f"{stem}.correct_strict"])]
        for suffix, good in pairs:
            if good is not None:
                share = f"{int(good.value) / items:.3f}" if items else "n/a"
                rows.append([label + suffix, good.printed, c.printed, share])
    return rows
