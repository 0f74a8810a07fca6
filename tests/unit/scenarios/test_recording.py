"""What the run lifecycle says at the end of a run: a FAIL verdict is exit code 1 naming the scenario; a run
that measured nothing (every request failed, or none recorded) is exit code 4 with the engine's own words."""

from pathlib import Path

import pytest

from loadproof.errors import AcceptanceFailed, NothingMeasured
from loadproof.records import RequestRecord
from loadproof.report.build import Report
from loadproof.rundir import Manifest
from loadproof.scenarios.recording import Outcome, conclude
from loadproof.store.run_dir import Run


def outcome(verdict: str | None, records: list[RequestRecord] | None = None) -> Outcome:
    records = [RequestRecord(request_id="s0", endpoint="completions", ok=True)] if records is None else records
    run = Run(path=Path("capacity-x"), manifest=Manifest(run_id="capacity-x", scenario="capacity"), records=records)
    return Outcome(run_path=run.path, report=Report(run=run, claims=[], markdown=""), verdict=verdict)


def refused(i: int) -> RequestRecord:
    return RequestRecord(
        request_id=f"s{i}",
        endpoint="completions",
        ok=False,
        error_kind="http_status",
        http_status=400,
        error_message="HTTP 400: the prompt is longer than the model's context",
    )


def test_a_fail_verdict_is_an_acceptance_failure_naming_the_scenario():
    with pytest.raises(AcceptanceFailed, match=r"^capacity: "):
        conclude(outcome("FAIL"), "the sessions did not fit")


@pytest.mark.parametrize("verdict", ["PASS", None])
def test_a_pass_or_no_verdict_concludes_quietly(verdict):
    conclude(outcome(verdict))


@pytest.mark.parametrize("verdict", ["FAIL", "PASS", None])
def test_a_run_whose_every_request_failed_measured_nothing_whatever_its_verdict(verdict):
    with pytest.raises(NothingMeasured) as raised:
        conclude(outcome(verdict, [refused(0), refused(1)]), "the sessions did not fit")
    assert str(raised.value) == (
        "capacity: the run measured nothing: 2 of 2 requests failed; most frequent (2x): "
        "HTTP 400: the prompt is longer than the model's context"
    )
    assert raised.value.exit_code == 4


def test_a_run_that_recorded_no_request_measured_nothing():
    with pytest.raises(NothingMeasured, match="no request was recorded"):
        conclude(outcome(None, []))


def test_one_request_that_succeeded_is_a_measurement():
    with pytest.raises(AcceptanceFailed):
        conclude(outcome("FAIL", [refused(0), RequestRecord(request_id="s1", endpoint="completions", ok=True)]))
