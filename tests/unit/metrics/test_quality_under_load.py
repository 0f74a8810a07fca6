"""Quality under load: the idle and under-load rows of each item paired, the changed answers counted from
their digests, both accuracies over the same items, and the load's own claims from its requests."""

from __future__ import annotations

from pathlib import Path

import msgspec

from loadproof.metrics import compute_claims
from loadproof.metrics.quality import LOAD_FAMILY, answer_changes, figures, quality_claims, under_load_claims
from loadproof.plans.quality import QualityPlan, UnderLoadPlan
from loadproof.store.run_dir import Run
from loadproof.workloads.quality.changes import change, digest
from tests import rundir_values as rv
from tests.unit.metrics import test_load


def row(
    item: str,
    text: str,
    correct: bool,
    under_load: bool = False,
    error: str | None = None,
    mode: str = "plain",
    **extra,
) -> dict:
    out = {
        "suite": "authored",
        "item_id": item,
        "lang": "en",
        "mode": mode,
        "extracted": text[:8],
        "expected": "x",
        "correct": correct,
        "answer_sha256": digest(text),
        **extra,
    }
    if under_load:
        out["under_load"] = True
    if error:
        out["error"] = error
    return out


def loaded(item: str, idle_text: str, text: str, correct: bool, **extra) -> dict:
    """An under-load row as the scenario writes it: a changed answer keeps both windows."""
    found = change(idle_text, text)
    windows = (
        {}
        if found is None
        else {"answer_diff_at": found.at, "answer_text": found.under_load, "idle_answer_text": found.idle}
    )
    return row(item, text, correct, under_load=True, **windows, **extra)


ROWS = [
    row("en-a", " 42", True),
    row("en-b", " Paris.", True),
    row("en-c", " 7", False),
    row("en-d", " cat", True),
    row("en-e", " dog", True),
    row("en-f", "", False, error="http_status"),
    row("en-s", "", False, skipped="no thinking mode", mode="low-thinking"),
    loaded("en-a", " 42", " 42", True),  # same
    loaded("en-b", " Paris.", " Paris, France.", True),  # changed, still right
    loaded("en-c", " 7", " 42", True),  # changed, fixed
    loaded("en-d", " cat", " a cat", False),  # changed, broken
    loaded("en-e", " dog", "", False, error="timeout"),  # failed under load: not compared
    loaded("en-f", "", " x", True),  # failed idle: not compared
]


def claims(rows):
    return {c.name: c for c in under_load_claims(rv.answers(rows))}


def test_changed_share_and_both_accuracies_over_the_same_items():
    c = claims(ROWS)
    assert c["quality.under_load.items"].value == 4  # a, b, c, d: both asked, neither failed
    assert c["quality.under_load.request_errors"].value == 1
    assert c["quality.under_load.changed"].value == 3
    assert c["quality.under_load.changed_share"].printed == "0.750"
    assert (c["quality.under_load.correct_idle"].value, c["quality.under_load.correct"].value) == (3, 3)
    assert c["quality.under_load.accuracy_idle"].printed == c["quality.under_load.accuracy"].printed == "0.750"


def test_the_suite_claims_and_compare_read_the_idle_rows_only():
    c = {x.name: x for x in quality_claims(rv.answers(ROWS))}
    assert (c["quality.authored.plain.correct"].value, c["quality.authored.plain.items"].value) == (4, 6)
    assert c["quality.request_errors"].value == 1  # en-f idle; en-e's under-load error is its own claim
    run = rv.run_of(Path("."), {"run_id": "x", "scenario": "quality"}, answers=ROWS)
    assert [e["item_id"] for e in answer_changes(run, run)["same_answer"]] == ["en-a", "en-b", "en-d", "en-e"]


def test_no_under_load_rows_no_claims():
    assert claims(ROWS[:7]) == {}


def test_a_change_is_where_the_answers_first_differ_with_a_window_of_each():
    assert change("same", "same") is None
    found = change("The answer is 42 because six times seven.", "The answer is 41 because")
    assert (
        found.at == 15 and found.idle.startswith("The answer is 42") and found.under_load == "The answer is 41 because"
    )
    late = change("x" * 100 + "A" + "y" * 100, "x" * 100 + "B")
    assert late.at == 100 and late.idle == "x" * 16 + "A" + "y" * 47 and late.under_load == "x" * 16 + "B"
    assert change("", "text").at == 0 and change("text", "text more").under_load == "text more"
    assert digest("a") != digest("a ") and len(digest("")) == 64


def quality_plan(sent: int) -> QualityPlan:
    load = test_load.plan(planned_requests=sent, slo={})
    return QualityPlan(
        suites=["authored"],
        endpoint="chat",
        max_model_len=2048,
        num_items=6,
        num_skipped=0,
        under_load=UnderLoadPlan(rate_rps=1.0, max_s=60.0, drawn_requests=60, load=load),
    )


def under_load_run() -> Run:
    records = [msgspec.structs.replace(r, scenario="quality", family=LOAD_FAMILY) for r in test_load.RECORDS]
    manifest = {
        "run_id": "quality-under-load",
        "scenario": "quality",
        "plan": msgspec.to_builtins(quality_plan(len(records))),
    }
    return rv.run_of(Path("quality-under-load"), manifest, records, events=test_load.EVENTS, answers=ROWS)


def docs_runs(tmp_path: Path) -> list[Run]:
    """For test_docs_formulas: a quality run under load (the under-load claims and the load's own)."""
    return [under_load_run()]


def test_the_load_gets_the_load_scenarios_claims_and_the_report_shows_each_change():
    run = under_load_run()
    all_claims = compute_claims(run)
    by_name = {c.name: c for c in all_claims}
    assert by_name["load.requests"].value == len(test_load.RECORDS)
    assert by_name["load.schedule_completed"].value is True
    assert by_name["quality.under_load.changed"].value == 3
    panels = figures(run, quality_plan(len(test_load.RECORDS)), all_claims)
    changed = next(p for p in panels if p.title == "Answers changed under load")
    assert [r[0] for r in changed.rows] == ["en-b", "en-c", "en-d"]
    assert changed.rows[0][3:5] == ['" Paris."', '" Paris, France."']
    summary = next(p for p in panels if p.title == "Quality under load")
    assert ["answers changed", "3"] in summary.rows and any(r[0] == "load requests" for r in summary.rows)
