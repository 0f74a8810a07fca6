"""The restart policy on virtual time: backoff, jitter, the restart window, the stable period, giving up.

Each test runs the real supervision loop (or the pure RestartBudget) on a ScriptedClock with fake
engines: hours of restarts in milliseconds.
"""

from __future__ import annotations

import random

import pytest

from loadproof.supervisor import FAILED, RestartBudget, SupervisorPolicy
from tests.unit.supervisor.fakes import Script, rig

NO_JITTER = SupervisorPolicy(
    probe_interval_s=10,
    backoff_initial_s=5,
    backoff_max_s=40,
    jitter=0.0,
    max_restarts=6,
    restart_window_s=10_000,
    stable_after_s=10_000,
)


class Extreme(random.Random):
    """An rng whose uniform(a, b) returns a, then b, then a...: the jitter's very bounds."""

    def __init__(self) -> None:
        super().__init__(0)
        self.calls = 0

    def uniform(self, a: float, b: float) -> float:
        self.calls += 1
        return a if self.calls % 2 else b


def test_backoff_starts_at_the_initial_delay_doubles_and_is_capped():
    budget = RestartBudget(NO_JITTER)
    assert [budget.backoff_s(n) for n in range(1, 8)] == [5, 10, 20, 40, 40, 40, 40]


def test_the_loop_waits_exactly_the_backoff_between_failed_starts(tmp_path):
    r = rig(tmp_path, [Script(ready_after_s=2.0, start_error="engine exited with code 1")], NO_JITTER)
    assert r.run() == FAILED
    assert [e["delay_s"] for e in r.events() if e["kind"] == "restart"] == [5, 10, 20, 40, 40, 40]
    starts = r.at("start")
    # each start comes after the previous failure (2 s into it) plus that restart's backoff
    assert [round(b - a, 3) for a, b in zip(starts, starts[1:])] == [7, 12, 22, 42, 42, 42]
    assert len(r.launched) == 7 and all(e.stops for e in r.launched)


def test_jitter_stays_within_its_bounds_and_does_spread_the_delays():
    policy = SupervisorPolicy(backoff_initial_s=10, backoff_max_s=40, jitter=0.2)
    extreme = RestartBudget(policy, Extreme())
    assert [extreme.backoff_s(1), extreme.backoff_s(1)] == pytest.approx([8.0, 12.0])
    assert [extreme.backoff_s(5), extreme.backoff_s(5)] == pytest.approx([32.0, 48.0])  # jitter on the cap
    seeded = RestartBudget(policy, random.Random(731))
    delays = [seeded.backoff_s(1) for _ in range(500)]
    assert all(8.0 <= d <= 12.0 for d in delays)
    assert min(delays) < 8.4 and max(delays) > 11.6  # spread over the whole band, not a constant


def test_give_up_after_max_restarts(tmp_path):
    policy = SupervisorPolicy(max_restarts=3, backoff_initial_s=5, jitter=0.0)
    r = rig(tmp_path, [Script(ready_after_s=1.0, start_error="engine exited with code 1")], policy)
    assert r.run() == FAILED
    assert r.kinds() == ["start", "start_failed", "restart"] * 3 + ["start", "start_failed", "give_up"]
    failure = r.supervisor.failure
    assert failure is not None and "3 restart(s) within 900 s already: giving up" in failure
    assert r.supervisor.state == FAILED and r.supervisor.engine is None


def test_no_restart_allowed_at_all_with_max_restarts_zero(tmp_path):
    r = rig(tmp_path, [Script(start_error="boom")], SupervisorPolicy(max_restarts=0))
    assert r.run() == FAILED
    assert r.kinds() == ["start", "start_failed", "give_up"]


def test_restarts_older_than_the_window_stop_counting():
    budget = RestartBudget(SupervisorPolicy(max_restarts=2, restart_window_s=900, stable_after_s=10_000, jitter=0))
    assert budget.decide(0.0, 0.0).attempt == 1
    assert budget.decide(100.0, 0.0).attempt == 2
    assert budget.decide(899.0, 0.0).give_up  # both still within 900 s
    later = budget.decide(901.0, 0.0)  # the one at 0 s expired: one counted, this is the second again
    assert not later.give_up and later.counted == 1 and later.attempt == 2
    assert budget.decide(950.0, 0.0).give_up  # 100 s and 901 s are both within the window of 950 s


def test_the_window_expires_in_the_loop(tmp_path):
    # two quick crashes, then an engine that lives 1,000 s (past the 900 s window, short of the stable
    # period): its crash is restarted as a first attempt because the first two restarts expired; two more
    # quick crashes spend the budget again
    policy = SupervisorPolicy(
        max_restarts=2,
        restart_window_s=900,
        stable_after_s=5_000,
        backoff_initial_s=5,
        jitter=0.0,
        probe_interval_s=3_600,
    )
    quick, long_lived = Script(lives_s=10.0), Script(lives_s=1_000.0)
    r = rig(tmp_path, [quick, quick, long_lived, quick], policy)
    assert r.run() == FAILED
    assert [e["attempt"] for e in r.events() if e["kind"] == "restart"] == [1, 2, 1, 2]
    assert r.kinds()[-3:] == ["ready", "exit", "give_up"]
    assert "2 restart(s) within 900 s already" in (r.supervisor.failure or "")
    assert len(r.launched) == 5


def test_within_the_window_the_same_crashes_give_up(tmp_path):
    policy = SupervisorPolicy(
        max_restarts=2,
        restart_window_s=900,
        stable_after_s=5_000,
        backoff_initial_s=5,
        jitter=0.0,
        probe_interval_s=3_600,
    )
    quick, medium = Script(lives_s=10.0), Script(lives_s=500.0)  # 500 s: the first restarts still count
    r = rig(tmp_path, [quick, quick, medium], policy)
    assert r.run() == FAILED
    assert len(r.launched) == 3 and r.kinds()[-1] == "give_up"


@pytest.mark.parametrize("healthy_s, restarted", [(700.0, True), (500.0, False)])
def test_a_stable_period_clears_the_count(tmp_path, healthy_s, restarted):
    # max 1 restart, a window longer than the test: only the stable period (600 s of health) can clear it
    policy = SupervisorPolicy(
        max_restarts=1,
        restart_window_s=100_000,
        stable_after_s=600,
        backoff_initial_s=5,
        jitter=0.0,
        probe_interval_s=3_600,
    )
    r = rig(tmp_path, [Script(lives_s=10.0), Script(lives_s=healthy_s), Script(lives_s=10.0)], policy)
    assert r.run() == FAILED
    restarts = [e for e in r.events() if e["kind"] == "restart"]
    if restarted:  # the second engine ran 700 s: a clean slate, restarted as a first attempt, then given up
        assert [e["attempt"] for e in restarts] == [1, 1] and len(r.launched) == 3
    else:
        assert [e["attempt"] for e in restarts] == [1] and len(r.launched) == 2


def test_the_policy_refuses_nonsense():
    with pytest.raises(ValueError, match="probe_interval_s must be > 0"):
        SupervisorPolicy(probe_interval_s=0)
    with pytest.raises(ValueError, match="jitter must be in"):
        SupervisorPolicy(jitter=1.5)
    with pytest.raises(ValueError, match="max_restarts must be >= 0"):
        SupervisorPolicy(max_restarts=-1)
