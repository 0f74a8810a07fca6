"""What a run prints: tables that keep names whole in a narrow terminal, cancellations by design said apart
from failures, a failure's own words, and a run that measured nothing saying so first."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from loadproof.cli import common, ui
from loadproof.metrics.claims import Claim
from loadproof.records import RequestRecord
from loadproof.report.build import Report
from loadproof.report.failures import failures_of, hint_for
from tests import rundir_values as rv

NAMES = ["capacity.window_per_stream_min_tokens_per_s", "crosscheck.generation_tokens.diff_pct"]
EVIDENCE = (
    "no stream ended before the window closed; longest silence 0.3 s (s002) inside the window of "
    "4.0 s; running 4, waiting 0 in all 12 samples"
)


def narrow(width: int = 60) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=width, color_system=None, soft_wrap=True), buffer


def test_a_narrow_table_folds_the_evidence_and_keeps_names_whole():
    console, buffer = narrow()
    ui.table(
        "capacity acceptance: PASS",
        ["criterion", "status", "evidence"],
        [["streams_progress", "PASS", EVIDENCE], ["all_streams_started", "PASS", "4/4 sessions"]],
        console,
    )
    lines = buffer.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 60
    assert any("all_streams_started" in line for line in lines)
    assert any("streams_progress" in line for line in lines)
    assert len([line for line in lines if "│" in line]) > 3  # still a table: the evidence wrapped


def test_names_wider_than_the_terminal_allows_stay_whole():
    console, buffer = narrow()
    ui.table(
        "Figures", ["claim", "value", "unit"], [[NAMES[0], "434.0", "tokens/s"], [NAMES[1], "-0.46", "%"]], console
    )
    text = buffer.getvalue()
    assert all(len(line) <= 60 for line in text.splitlines())
    for name in NAMES:
        assert name in text.splitlines()
    assert "value: 434.0" in text and "unit: tokens/s" in text


def test_a_wide_table_is_one_table():
    console, buffer = narrow(120)
    ui.table("Figures", ["claim", "value", "unit"], [[NAMES[0], "434.0", "tokens/s"]], console)
    assert any(NAMES[0] in line and "434.0" in line and "tokens/s" in line for line in buffer.getvalue().splitlines())


def test_a_cell_is_data_never_markup():
    console, buffer = narrow(120)
    ui.table(
        "Figures", ["claim", "value"], [["energy.unavailable", "no counter (pip install 'loadproof[gpu]')"]], console
    )
    assert "'loadproof[gpu]'" in buffer.getvalue()


def test_a_first_column_of_prose_is_never_squeezed_away_by_whole_headers():
    """The sessions turn table ("0 call" in its first column, headers with spaces over numbers): at 80
    columns every turn and every header stays whole, as a table or as blocks (the turn column once
    rendered empty and a header cut to "bounded…")."""
    header = ["turn", "context", "TTFT p50 s", "answer p50 s", "engine hit %", "unbounded %", "bounded %"]
    rows = [
        ["0 call", "15968.0", "55.9298", "55.9298", "98.60", "98.60", "98.60"],
        ["5", "16638.0", "25.7026", "25.7026", "98.47", "98.47", "98.47"],
    ]
    for width in (80, 110):
        console, buffer = narrow(width)
        ui.table("Prefix reuse by turn", header, rows, console)
        text = buffer.getvalue()
        assert "…" not in text and all(name in text for name in header), text
        assert any("0 call" in line for line in text.splitlines()), text


def record(i: int, ok: bool, kind: str | None, end_ns: int) -> RequestRecord:
    return RequestRecord(request_id=f"r{i}", endpoint="chat", ok=ok, error_kind=kind, end_ns=end_ns)


def test_streams_cancelled_after_the_window_are_planned_not_failed():
    records = [record(i, False, "cancelled", 2_000) for i in range(4)]
    run = rv.run_of(Path("x"), {"scenario": "capacity"}, records, events=[{"kind": "cancel", "t_ns": 1_000}])
    assert failures_of(run).counts() == "4 requests recorded, 0 failed (4 cancelled after the window, as planned)"


def test_real_failures_and_unplanned_cancellations_still_count_as_failed():
    records = [
        record(0, False, "cancelled", 2_000),
        record(1, False, "timeout", 900),
        record(2, False, "cancelled", 500),
        record(3, True, None, 800),
    ]
    run = rv.run_of(Path("x"), {"scenario": "capacity"}, records, events=[{"kind": "cancel", "t_ns": 1_000}])
    assert failures_of(run).counts() == "4 requests recorded, 2 failed (1 cancelled after the window, as planned)"
    soak = rv.run_of(
        Path("x"), {"scenario": "soak"}, [record(0, False, "cancelled", 2_000)]
    )  # no window: none to cancel
    assert failures_of(soak).counts() == "1 request recorded, 1 failed"


def test_the_console_says_it_too(monkeypatch):
    out, out_buffer = narrow(120)
    err, err_buffer = narrow(120)
    monkeypatch.setattr(ui, "out", out)
    monkeypatch.setattr(ui, "err", err)
    records = [record(i, False, "cancelled", 2_000) for i in range(4)]
    run = rv.run_of(Path("run"), {"scenario": "capacity"}, records, events=[{"kind": "cancel", "t_ns": 1_000}])
    verdict = Claim("capacity.verdict", "PASS", "", "PASS", "PASS only if every criterion passed", "verdict", "neither")
    common.show(Report(run=run, claims=[verdict], markdown=""))
    assert "4 requests recorded, 0 failed (4 cancelled after the window, as planned)" in out_buffer.getvalue()
    assert "failed;" not in out_buffer.getvalue()


def test_a_run_whose_every_request_failed_says_so_in_its_first_line_with_the_engines_words(monkeypatch):
    out, out_buffer = narrow(200)
    err, err_buffer = narrow(200)
    monkeypatch.setattr(ui, "out", out)
    monkeypatch.setattr(ui, "err", err)
    said = "HTTP 400: tool_choice 'required' requires --tool-call-parser"
    records = [
        RequestRecord(
            request_id=f"r{i}", endpoint="chat", ok=False, error_kind="http_status", http_status=400, error_message=said
        )
        for i in range(3)
    ]
    run = rv.run_of(Path("run"), {"scenario": "load"}, records)
    failed = Claim("load.failed_requests", 3, "requests", "3", "records that failed", "count", "lower")
    common.show(Report(run=run, claims=[failed], markdown=""))
    first = out_buffer.getvalue().splitlines()[0]
    hint = hint_for(said)  # a tool-call parser's absence: the fix named after the engine's words
    assert first == f"The run measured nothing: 3 of 3 requests failed; most frequent (3x): {said}; {hint}"
    common.show(Report(run=run, claims=[failed], markdown=""), verbose=True)  # -v: every table, and the count
    assert f"3 requests recorded, 3 failed; most frequent (3x): {said}" in err_buffer.getvalue()


def test_a_partial_failure_names_its_most_frequent_error(monkeypatch):
    out, out_buffer = narrow(200)
    err, err_buffer = narrow(200)
    monkeypatch.setattr(ui, "out", out)
    monkeypatch.setattr(ui, "err", err)
    records = [record(0, True, None, 900), record(1, False, "timeout", 900)]
    common.show(Report(run=rv.run_of(Path("run"), {"scenario": "soak"}, records), claims=[], markdown=""))
    assert "measured nothing" not in out_buffer.getvalue()
    assert out_buffer.getvalue().splitlines()[0] == "soak: 2 requests recorded, 1 failed; most frequent (1x): timeout"
