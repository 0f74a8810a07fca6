"""What the run lifecycle says at the end of a run: a FAIL verdict is exit code 1 naming the scenario."""

from pathlib import Path

import pytest

from loadproof.errors import AcceptanceFailed
from loadproof.report.build import Report
from loadproof.rundir import Manifest
from loadproof.scenarios.recording import Outcome, conclude
from loadproof.store.run_dir import Run


def outcome(verdict: str | None) -> Outcome:
    run = Run(path=Path("capacity-x"), manifest=Manifest(run_id="capacity-x", scenario="capacity"), records=[])
    return Outcome(run_path=run.path, report=Report(run=run, claims=[], markdown=""), verdict=verdict)


def test_a_fail_verdict_is_an_acceptance_failure_naming_the_scenario():
    with pytest.raises(AcceptanceFailed, match=r"^capacity: "):
        conclude(outcome("FAIL"), "the sessions did not fit")


@pytest.mark.parametrize("verdict", ["PASS", None])
def test_a_pass_or_no_verdict_concludes_quietly(verdict):
    conclude(outcome(verdict))
