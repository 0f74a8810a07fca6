"""`loadproof run load --sweep` / `--search rate`: bad input is one line and exit 2 before anything is sent;
a trial's verdict and the search's claims follow from the trials' figures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loadproof.metrics.load_series import search_claims, search_result, trial_verdict
from loadproof.rundir.series import SearchTrial
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.options import from_cli
from loadproof.workloads.arrivals import ALL_AT_ONCE

BASE = ["run", "load", "--url", "http://127.0.0.1:9", "--tokenizer", "README.md"]  # unreachable: options first


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--search", "rate", "--duration-s", "5"],
            "--search rate finds the highest rate that meets an SLO: give --slo",
        ),
        (
            ["--sweep", "1,2", "--rate", "3", "-n", "5"],
            "--sweep sets each run's rate: give --sweep or --rate, not both",
        ),
        (["--sweep", "1,2", "--stages", "1:5"], "--sweep sets each run's rate: --stages do not apply"),
        (["--sweep", "1,0", "-n", "5"], "--sweep 1,0: every rate must be a number of requests/s > 0 (got 0)"),
        (["--sweep", "1,-2", "-n", "5"], "--sweep 1,-2: every rate must be a number of requests/s > 0 (got -2)"),
        (["--sweep", "1,,2", "-n", "5"], "--sweep 1,,2: takes auto, or rates in requests/s separated by commas"),
        (["--sweep", "1,fast", "-n", "5"], "--sweep 1,fast: 'fast' is not a rate"),
        (["--sweep", "2,2", "-n", "5"], "--sweep 2,2: the rate 2 is given twice"),
        (["--sweep", "auto"], "--sweep auto sends --num-requests N"),
        (["--sweep", "1,2"], "bound each run with --num-requests N or --duration-s D"),
        (
            ["--sweep", "1,2", "-n", "5", "--search", "rate", "--slo", "ttft=1s"],
            "give --sweep or --search rate, not both",
        ),
        (["--search", "rate", "--slo", "ttft=1s", "-n", "5", "--rate", "inf"], "--search rate starts at --rate R"),
        (
            ["--search", "rate", "--slo", "ttft=1s", "-n", "5", "--search-resolution", "fine"],
            "--search-resolution fine: takes requests/s (e.g. 0.5) or a share of the rate (e.g. 10%)",
        ),
        (
            ["--search", "rate", "--slo", "ttft=1s", "-n", "5", "--idle-timeout-s", "0"],
            "--search rate starts every run on an idle engine",
        ),
        (
            ["--search", "rate", "--slo", "ttft=1s", "-n", "5", "--rate", "50", "--search-max", "20"],
            "--rate 50, where the search starts, is above --search-max 20",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    result = loadproof(*BASE, *args)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_good_series_options_read_back():
    opts = from_cli(LoadOptions, {"sweep": "8, 1,2.5", "duration_s": 5}, "load")
    assert opts.sweep == "8,1,2.5" and opts.sweep_rates() == [8.0, 1.0, 2.5]
    again = LoadOptions.model_validate(opts.model_dump())
    assert again == opts
    search = from_cli(
        LoadOptions, {"search": "rate", "slo": "ttft=1s", "num_requests": 10, "search_resolution": "0.25"}, "load"
    )
    assert not search.search_resolution.relative and search.search_resolution.value == 0.25
    assert LoadOptions.model_validate(search.model_dump()).search_resolution == search.search_resolution


@pytest.mark.parametrize(
    ("figures", "passed", "why"),
    [
        ({"slo_attainment_pct": 99.0, "client_limited": False}, True, "SLO met 99.00% >= 99%"),
        ({"slo_attainment_pct": 98.99, "client_limited": False}, False, "SLO met 98.99% < 99%"),
        ({"slo_attainment_pct": 100.0, "client_limited": True}, False, "client-limited"),
        ({"slo_attainment_pct": None}, False, "no request recorded"),
    ],
)
def test_a_trial_passes_on_attainment_and_a_kept_schedule(figures, passed, why):
    ok, reason = trial_verdict(figures, 0.99)
    assert ok is passed and why in reason


def test_the_search_claims_follow_from_the_trials():
    trials = [SearchTrial(rate_rps=r, passed=p) for r, p in ((1, True), (2, True), (4, False), (3, True), (3.5, False))]
    claims = {c.name: c for c in search_claims(trials, 0.95, "ttft <= 1 s")}
    assert claims["load.search.max_rate_rps"].value == 3 and claims["load.search.max_rate_rps"].direction == "higher"
    assert claims["load.search.min_failing_rate_rps"].value == 3.5
    assert claims["load.search.trials"].value == 5 and claims["load.search.attainment_target_pct"].value == 95
    none = {c.name for c in search_claims([SearchTrial(rate_rps=1, passed=False)], 0.99, "")}
    assert "load.search.max_rate_rps" not in none and "load.search.min_failing_rate_rps" not in none


def test_a_rate_no_failure_bounds_or_an_interrupted_search_gives_is_a_lower_bound_never_a_result():
    passing = [SearchTrial(rate_rps=r, passed=True) for r in (1, 2, 4)]
    for trials, interrupted in ((passing, False), (passing, True)):
        claims = search_claims(trials, 0.9, "ttft <= 1 s", interrupted)
        by = {c.name: c for c in claims}
        assert "load.search.max_rate_rps" not in by
        bound = by["load.search.rate_lower_bound_rps"]
        assert bound.value == 4 and bound.direction == "neither" and "a lower bound, not a result" in bound.formula
        assert ("load.search.interrupted" in by) is interrupted
        said = search_result(claims, trials)
        assert said.startswith(
            "search interrupted after 3 finished trial(s): a lower bound" if interrupted else "a lower bound"
        )
        assert "at least 4.0000 requests/s" in said and "highest rate meeting the SLO" not in said
    bisecting = passing + [SearchTrial(rate_rps=8, passed=False)]
    claims = search_claims(bisecting, 0.9, "", interrupted=True)  # stopped before the resolution was met
    by = {c.name: c.value for c in claims}
    assert by["load.search.rate_lower_bound_rps"] == 4 and by["load.search.min_failing_rate_rps"] == 8
    assert by["load.search.interrupted"] is True and "load.search.max_rate_rps" not in by
    assert search_result(claims, bisecting).startswith("search interrupted after 4 finished trial(s): a lower bound")
    found = search_claims(bisecting, 0.9, "")
    assert search_result(found, bisecting) == "highest rate meeting the SLO: 4.0000 requests/s; 8.0000 requests/s fails"


class FakeConsole:
    def __init__(self):
        self.lines: list[str] = []

    def say(self, text):
        self.lines.append(text)

    result = say

    def table(self, title, header, rows):
        self.lines.append(title)


def fake_runs(tmp_path, interrupt_at: int, attainment_of=lambda rate: 100.0, failures=None, requests=400):
    """A stand-in for `run_load`: each call records the options it was given, makes an empty run directory and
    returns claims; the call numbered `interrupt_at` raises KeyboardInterrupt, as Ctrl-C during that run would.
    `failures`: what its requests' failures were (none failed unless given). `requests` a run: 400, enough for
    100% to pass 99% on its interval (381)."""
    from types import SimpleNamespace

    from loadproof.metrics.claims import count, fact, number
    from loadproof.report.failures import Failures

    calls: list[LoadOptions] = []

    def run_trial(target, options, out, console, manifest_extra):
        calls.append(options)
        if len(calls) == interrupt_at:
            raise KeyboardInterrupt
        path = out / f"load-{len(calls)}"
        path.mkdir()
        rps = 5.0 * len(calls)
        share = attainment_of(options.rate)
        claims = [
            count("load.requests", requests, "requests", "x", direction="neither"),
            count("load.good_requests", round(share * requests / 100), "requests", "x", direction="higher"),
            number("load.request_throughput_rps", rps, "requests/s", "x", 3, direction="higher"),
            number("load.slo_attainment_pct", share, "%", "x", 2, direction="higher"),
            fact("load.client_limited", False, "x"),
        ]
        return SimpleNamespace(
            run_path=path, report=SimpleNamespace(claims=claims, failures=failures or Failures(requests, 0, 0))
        )

    return run_trial, calls


def series_setup(tmp_path, **values):
    from loadproof.scenarios.base import Setup
    from loadproof.scenarios.target import Target

    opts = from_cli(LoadOptions, values, "load")
    return Setup(
        profile=None,
        options=opts,
        command=None,
        out=tmp_path,
        target_options=None,  # type: ignore[arg-type]  # the series never reads them: the target is resolved already
        resolved=Target(url="http://127.0.0.1:9", model="m", endpoint="completions"),
    )


def test_an_interrupted_sweep_keeps_every_finished_point_and_says_how_far_it_got(tmp_path):
    import json

    from loadproof.scenarios.load.series import sweep_command

    run_trial, calls = fake_runs(tmp_path, interrupt_at=4)
    console = FakeConsole()
    with pytest.raises(KeyboardInterrupt):
        sweep_command(
            series_setup(
                tmp_path,
                sweep="auto",
                sweep_points=3,
                num_requests=10,
                max_concurrency=6,
                ramp_up_s=2.0,
                arrival="gamma",
                burstiness=0.5,
            ),
            console,
            run_trial,
        )
    synchronous, throughput, first = calls[0], calls[1], calls[2]
    assert synchronous.rate is ALL_AT_ONCE and synchronous.max_concurrency == 1  # one at a time
    assert (synchronous.ramp_up_s, synchronous.duration_s, synchronous.arrival, synchronous.burstiness) == (
        0.0,
        None,
        "poisson",
        1.0,
    )  # all at once: no ramp, no gaps drawn
    assert throughput.rate is ALL_AT_ONCE and throughput.max_concurrency == 6  # all at once, the cap as given
    assert first.rate == pytest.approx(5 + (10 - 5) / 3, rel=1e-3)  # r_sync + (r_max - r_sync) / K
    assert (first.ramp_up_s, first.arrival, first.burstiness, first.max_concurrency) == (2.0, "gamma", 0.5, 6)
    for options in calls:  # a plain run, typed as a fresh validation of its dump would make it
        assert options.sweep is None and options.search is None
        assert LoadOptions.model_validate(options.model_dump()) == options
    (folder,) = tmp_path.glob("load-sweep-*")
    summary = json.loads((folder / "sweep.json").read_text())
    assert summary["interrupted"] is True and not summary["completed"] and len(summary["points"]) == 3
    assert len((folder / "sweep.jsonl").read_text().splitlines()) == 3
    assert any("sweep interrupted: 3 of 5 points finished" in line for line in console.lines)
    assert (folder / "report.md").is_file()


def test_an_interrupted_search_keeps_every_finished_trial(tmp_path):
    import json

    from loadproof.scenarios.load.series import rate_search_command

    run_trial, calls = fake_runs(tmp_path, interrupt_at=3)
    console = FakeConsole()
    with pytest.raises(KeyboardInterrupt):
        rate_search_command(
            series_setup(tmp_path, search="rate", slo="ttft=1s", duration_s=5, rate=2), console, run_trial
        )
    assert [(o.rate, o.duration_s, o.search) for o in calls] == [(2, 5, None), (4, 5, None), (8, 5, None)]
    (folder,) = tmp_path.glob("load-search-*")
    summary = json.loads((folder / "search.json").read_text())
    assert [t["rate_rps"] for t in summary["trials"]] == [2, 4] and summary["interrupted"] is True
    assert summary["max_rate_rps"] == 4 and summary["lower_bound"] is True  # both passed: the best so far, a bound
    claims = {c["name"]: c["value"] for c in json.loads((folder / "claims.json").read_text())["claims"]}
    assert "load.search.max_rate_rps" not in claims  # a bound is never a result
    assert claims["load.search.rate_lower_bound_rps"] == 4 and claims["load.search.trials"] == 2
    assert claims["load.search.interrupted"] is True
    result = next(line for line in console.lines if "4.0000" in line)
    assert result.startswith("search interrupted after 2 finished trial(s): a lower bound, not a result: ")
    assert summary["result"] == result
    report = (folder / "report.md").read_text()
    assert report.index("search interrupted after 2 finished trial(s): a lower bound") < report.index("SLO:")


def test_a_search_that_passes_up_to_its_maximum_says_its_rate_is_a_lower_bound(tmp_path):
    import json

    from loadproof.scenarios.load.series import rate_search_command

    run_trial, calls = fake_runs(tmp_path, interrupt_at=0)
    console = FakeConsole()
    rate_search_command(
        series_setup(tmp_path, search="rate", slo="ttft=1s", duration_s=5, rate=2, search_max=8), console, run_trial
    )
    assert [o.rate for o in calls] == [2, 4, 8]
    (folder,) = tmp_path.glob("load-search-*")
    summary = json.loads((folder / "search.json").read_text())
    assert summary["lower_bound"] is True and summary["stopped"] == "maximum" and summary["interrupted"] is False
    assert summary["result"].startswith("a lower bound, not a result: the rate meeting the SLO is at least 8.0000")
    assert not any("highest rate meeting the SLO" in line for line in console.lines)


def test_a_search_none_of_whose_trials_measured_anything_is_nothing_measured(tmp_path):
    from loadproof.errors import NothingMeasured
    from loadproof.report.failures import Failures
    from loadproof.scenarios.load.series import rate_search_command

    refused = Failures(10, 10, 0, "HTTP 400: requires --tool-call-parser", 10)
    run_trial, calls = fake_runs(tmp_path, interrupt_at=0, attainment_of=lambda rate: 0.0, failures=refused)
    console = FakeConsole()
    with pytest.raises(NothingMeasured, match=r"10 of 10 requests failed; most frequent \(10x\): HTTP 400: requires"):
        rate_search_command(
            series_setup(tmp_path, search="rate", slo="ttft=1s", duration_s=10, rate=1), console, run_trial
        )
    assert len(calls) == 3 and any("FAIL: the run measured nothing" in line for line in console.lines)


def test_a_search_where_no_rate_passes_fails_with_exit_1(tmp_path):
    from loadproof.errors import AcceptanceFailed
    from loadproof.scenarios.load.series import rate_search_command

    run_trial, calls = fake_runs(tmp_path, interrupt_at=0, attainment_of=lambda rate: 50.0)
    with pytest.raises(AcceptanceFailed, match="no rate met the SLO"):
        rate_search_command(
            series_setup(tmp_path, search="rate", slo="ttft=1s", duration_s=10, rate=1), FakeConsole(), run_trial
        )
    assert [o.rate for o in calls] == [1, 0.5, 0.25]  # halving down to 2 requests in 10 s


def test_a_straddling_rate_gets_more_segments_up_to_its_budget_then_is_undecided_not_a_pass(tmp_path):
    import json

    from loadproof.scenarios.load.series import rate_search_command

    # 100% of 400 passes 99% on its interval; 99% of 400 (and of 800, pooled) straddles it
    run_trial, calls = fake_runs(tmp_path, interrupt_at=0, attainment_of=lambda rate: 100.0 if rate <= 2 else 99.0)
    console = FakeConsole()
    setup = series_setup(
        tmp_path, search="rate", slo="ttft=1s", duration_s=5, rate=2, search_resolution="1", search_segments=2
    )
    summary = rate_search_command(setup, console, run_trial)
    assert [o.rate for o in calls] == [2, 4, 4, 3, 3]  # each straddling rate run twice (the budget), no more
    assert [(t.level, t.segment, t.decision) for t in summary.trials] == [
        (0, 0, "pass"),
        (1, 0, "undecided"),
        (1, 1, "undecided"),
        (2, 0, "undecided"),
        (2, 1, "undecided"),
    ]
    assert summary.decision == "interval" and summary.segments == 2 and summary.max_rate_rps == 2
    (folder,) = tmp_path.glob("load-search-*")
    claims = {c["name"]: c for c in json.loads((folder / "claims.json").read_text())["claims"]}
    assert claims["load.search.max_rate_rps"]["value"] == 2 and claims["load.search.min_failing_rate_rps"]["value"] == 3
    assert claims["load.search.extra_requests"]["value"] == 800 and claims["load.search.undecided_levels"]["value"] == 2
    assert claims["load.search.level.4.decision"]["value"] == "undecided"
    assert claims["load.search.attainment_pct"]["interval"]["low"] >= 99
    assert sum(line.startswith("  STRADDLES, more: ") for line in console.lines) == 2
    assert sum(line.startswith("  UNDECIDED: ") for line in console.lines) == 2
    assert "3.0000 requests/s is UNDECIDED" in summary.result
    assert any("a pass takes at least 381 requests at a rate" in line for line in console.lines)
    # the point value, as before: 99% >= 99% passes at once
    point_calls = fake_runs(tmp_path / "point", interrupt_at=0, attainment_of=lambda rate: 99.0)
    (tmp_path / "point").mkdir()
    point = series_setup(
        tmp_path / "point", search="rate", slo="ttft=1s", duration_s=5, rate=2, search_max=4, search_decision="point"
    )
    assert rate_search_command(point, FakeConsole(), point_calls[0]).lower_bound is True
    assert [o.rate for o in point_calls[1]] == [2, 4]
