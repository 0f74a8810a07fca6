"""Issue #37 end to end: the supervisor's liveness probes reach the engine while a run waits between turns, and
its TTFT histogram counts them beside the run's requests. The crosscheck says the means are not comparable
(how many requests the run did not send) instead of a difference between means over different requests."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.integration.test_scenarios_sim import run_scenario
from tests.integration.test_supervisor_sim import POLICY, supervise  # noqa: F401 (the fixture)

pytestmark = pytest.mark.timeout(120)


def test_probes_between_turns_make_the_mean_ttfts_not_comparable(supervise, tmp_path: Path):  # noqa: F811 (the fixture)
    engine = supervise(policy=dataclasses.replace(POLICY, probe_interval_s=0.3))
    engine.wait_for(lambda kinds: "ready" in kinds, within_s=40)
    code, claims, _ = run_scenario(
        engine,  # type: ignore[arg-type]  (a url is all run_scenario reads of it)
        tmp_path,
        "sessions",
        *("--users", "1", "--turns", "2", "--first-tokens", "64", "--turn-tokens", "32", "--output-tokens", "4"),
        *("--think-time-s", "2", "--sample-interval-s", "0.2"),
    )
    assert code == 0, claims
    client, engine_count = claims["crosscheck.ttft_count.client"]["value"], claims["crosscheck.ttft_count.engine"]
    assert client == 2 and engine_count["value"] > client  # the probes sent while the user thought
    why = claims["crosscheck.ttft_mean_s.not_comparable"]["value"]
    assert why.startswith(f"not comparable: {engine_count['value'] - client} engine request(s) not sent by this run")
    assert "crosscheck.ttft_mean_s.diff_pct" not in claims and "crosscheck.ttft_mean_s.engine" not in claims
    assert "crosscheck.ttft_mean_s.client" in claims
