"""A run's failed requests in their own words: grouped by kind, status and message (digits masked), the most
frequent named with its count, and a run that measured nothing (every request failed, or none recorded)
saying so first in report.md and report.html."""

from __future__ import annotations

from pathlib import Path

from loadproof.records import RequestRecord
from loadproof.report.build import build_report
from loadproof.report.failures import failures_of, hint_for
from loadproof.store.run_dir import RunWriter
from tests import rundir_values as rv
from tests.unit.publish.synthetic import throughput_manifest

S = 1_000_000_000
PARSER = 'HTTP 400: "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'  # vLLM's answer to tool_choice without a parser


def failed(i: int, message: str, status: int | None = 400, kind: str = "http_status") -> RequestRecord:
    return RequestRecord(
        request_id=f"r{i}",
        endpoint="completions",
        ok=False,
        error_kind=kind,
        error_message=message,
        http_status=status,
        send_ns=i * S,
        end_ns=i * S + S // 10,
    )


def succeeded(i: int) -> RequestRecord:
    return RequestRecord(
        request_id=f"ok{i}",
        endpoint="completions",
        ok=True,
        send_ns=i * S,
        first_token_ns=i * S + S // 4,
        last_token_ns=i * S + S // 2,
        end_ns=i * S + S // 2,
        output_tokens=8,
    )


def run_dir(root: Path, records: list[RequestRecord], name: str = "throughput-20261205-000000-0001") -> Path:
    with RunWriter(root / name) as writer:
        writer.write_manifest(throughput_manifest(name))
        for record in records:
            writer.append(record)
    return root / name


def test_a_run_whose_every_request_failed_says_so_first_with_the_engines_words(tmp_path):
    path = run_dir(tmp_path, [failed(i, PARSER) for i in range(3)])
    report = build_report(path)
    lines = (path / "report.md").read_text().splitlines()
    hint = hint_for(PARSER)
    said = f"The run measured nothing: 3 of 3 requests failed; most frequent (3x): {PARSER}; {hint}"
    assert lines[:5] == [f"# loadproof run {path.name}", "", "## Measured nothing", "", said], lines[:6]
    html = (path / "report.html").read_text()
    heading = html.index("<h2>Measured nothing</h2>")
    assert heading < html.index("<ul>") and "--tool-call-parser to be set" in html[heading : html.index("<ul>")]
    assert report.failures.measured_nothing and report.failures.headline() == said[0].lower() + said[1:]


def test_a_run_that_partly_failed_names_the_most_frequent_error_not_just_a_count(tmp_path):
    records = [succeeded(0), failed(1, "HTTP 500: simulated internal error", 500), succeeded(2)]
    path = run_dir(tmp_path, records)
    build_report(path)
    text = (path / "report.md").read_text()
    assert "Measured nothing" not in text
    assert "3 requests recorded, 1 failed; most frequent (1x): HTTP 500: simulated internal error" in text


def test_failures_group_by_kind_status_and_message_with_its_digits_masked():
    long = "HTTP 400: This model's maximum context length is 32768 tokens. However, you requested {} tokens."
    records = [
        failed(0, "HTTP 500: simulated internal error", 500),
        failed(1, long.format(40123)),
        failed(2, long.format(40456)),
        failed(3, "HTTP 500: simulated internal error", 503),  # another status: another error
        succeeded(4),
    ]
    failures = failures_of(rv.run_of(Path("x"), {"scenario": "load"}, records))
    assert not failures.measured_nothing and failures.headline() is None
    assert failures.line() == (
        "5 requests recorded, 4 failed; most frequent (2x): "
        + long.format(40123)
        + "; 2 other failures in requests.jsonl (error_kind, error_message)"
    )
    timeouts = failures_of(rv.run_of(Path("x"), {"scenario": "load"}, [failed(0, "", None, "timeout")]))
    assert timeouts.headline() == "the run measured nothing: 1 of 1 requests failed; most frequent (1x): timeout"
    empty = failures_of(rv.run_of(Path("x"), {"scenario": "load"}, []))
    assert empty.headline() == "the run measured nothing: no request was recorded"


def test_an_error_is_one_line_of_at_most_300_characters():
    text = "HTTP 400: first line\n  second line " + "x" * 400
    failures = failures_of(rv.run_of(Path("x"), {"scenario": "load"}, [failed(0, text)]))
    assert failures.most_frequent is not None and "\n" not in failures.most_frequent
    assert failures.most_frequent.startswith("HTTP 400: first line second line x")
    assert len(failures.most_frequent) == 300 and failures.most_frequent.endswith("...")


REQUIRED = 'HTTP 400: tool_choice="required" requires --tool-call-parser to be set'  # vLLM, tool_choice required


def test_an_error_a_profile_fixes_names_the_fix_after_the_engines_words(tmp_path):
    for said in (PARSER, REQUIRED):
        hint = hint_for(said)
        assert hint is not None and "loadproof serve embedded-tools" in hint and "\n" not in hint
        failures = failures_of(rv.run_of(Path("x"), {"scenario": "load"}, [failed(0, said), failed(1, said)]))
        assert failures.hint == hint
        assert (
            failures.headline()
            == f"the run measured nothing: 2 of 2 requests failed; most frequent (2x): {said}; {hint}"
        )
    partly = [succeeded(0), failed(1, REQUIRED), failed(2, "HTTP 500: simulated internal error", 500)]
    path = run_dir(tmp_path, partly)
    build_report(path)
    assert (
        f"3 requests recorded, 2 failed; most frequent (1x): {REQUIRED}; {hint_for(REQUIRED)}; "
        "1 other failure in requests.jsonl"
    ) in (path / "report.md").read_text()


def test_an_error_no_profile_fixes_has_no_hint():
    for said in (
        "HTTP 500: simulated internal error",
        "timeout",
        "HTTP 400: This model's maximum context length is 8192",
    ):
        assert hint_for(said) is None
        failures = failures_of(rv.run_of(Path("x"), {"scenario": "load"}, [failed(0, said)]))
        assert failures.hint is None and "hint" not in failures.line()
    assert failures_of(rv.run_of(Path("x"), {"scenario": "load"}, [succeeded(0)])).hint is None
