"""The supervision loop on a scripted clock: stop at any moment, typed probe results, exits, GPU refusal."""

from __future__ import annotations

import threading
import time

from loadproof.supervisor import FAILED, STOPPED, ProbeOutcome, ProbeResult, ScriptedClock, SupervisorPolicy
from loadproof.supervisor.probe import OK
from tests.unit.supervisor.fakes import Script, rig

POLICY = SupervisorPolicy(
    probe_interval_s=10, probe_timeout_s=60, max_probe_failures=2, max_restarts=3, backoff_initial_s=100, jitter=0.0
)
TIMEOUT = ProbeResult(ProbeOutcome.TIMEOUT, "no answer within 60 s")


def test_stop_during_the_backoff_ends_it_at_once(tmp_path):
    r = rig(tmp_path, [Script(ready_after_s=1.0, start_error="engine exited with code 1")], POLICY)
    r.clock.after(31.0, r.supervisor.stop)  # 30 s into a 100 s backoff
    began = r.clock.monotonic()
    assert r.run() == STOPPED
    assert r.kinds() == ["start", "start_failed", "restart", "stopped"]
    assert r.clock.monotonic() - began == 31.0  # not 101: the backoff was cut short
    assert len(r.launched) == 1


def test_stop_during_the_readiness_wait_stops_the_engine_and_records_no_failure(tmp_path):
    r = rig(tmp_path, [Script(ready_after_s=800.0)], POLICY, ready_timeout_s=900)
    r.clock.after(10.0, r.supervisor.stop)
    began = r.clock.monotonic()
    assert r.run() == STOPPED
    assert r.clock.monotonic() - began == 10.0  # not 800: the wait was interrupted
    assert r.kinds() == ["start", "stopped"]
    (engine,) = r.launched
    assert engine.stops and not engine.alive()
    assert r.supervisor.engine is None


def test_stop_while_serving_stops_the_engine_with_the_policy_grace(tmp_path):
    r = rig(tmp_path, [Script()], SupervisorPolicy(stop_grace_s=7.0))
    r.clock.after(3_600.0, r.supervisor.stop)
    assert r.run() == STOPPED
    assert r.kinds() == ["start", "ready", "stopped"]
    assert r.launched[0].stops == [7.0]


def test_a_start_timeout_counts_as_a_failed_start(tmp_path):
    r = rig(tmp_path, [Script(ready_after_s=1_000.0)], SupervisorPolicy(max_restarts=0), ready_timeout_s=300)
    assert r.run() == FAILED
    assert r.kinds() == ["start", "start_failed", "give_up"]
    assert "not ready after 300 s" in r.events()[1]["reason"]
    assert r.at("start_failed")[0] - r.at("start")[0] == 300.0


def test_an_exit_is_seen_within_a_second_whatever_the_probe_interval(tmp_path):
    policy = SupervisorPolicy(probe_interval_s=3_600, max_restarts=0)
    r = rig(tmp_path, [Script(lives_s=42.5, exit_code=13)], policy)
    assert r.run() == FAILED
    assert r.kinds() == ["start", "ready", "exit", "give_up"]
    assert [e["code"] for e in r.events() if e["kind"] == "exit"] == [13]
    assert 42.5 <= r.at("exit")[0] - r.at("ready")[0] <= 43.5
    assert r.probes == []  # an hour apart: none was due


def test_an_engine_whose_counters_move_is_not_sent_a_probe(tmp_path):
    # a capacity run keeps it busy for 60 s: its progress is the evidence of life, and a probe request
    # would take a slot or a queue place the run counts; once it is idle again, probes resume
    busy_until: list[float] = []
    r = rig(tmp_path, [Script()], POLICY, work=lambda engine, now: (min(now, busy_until[0]), 0.0, 0.5))
    busy_until.append(r.clock.monotonic() + 60.0)
    r.clock.after(100.0, r.supervisor.stop)
    assert r.run() == STOPPED
    assert r.probes and all(t > busy_until[0] for t in r.probes), r.probes
    assert "probe_failed" not in r.kinds()


def _moves_only_while_probed(answer):
    """Counters that stand still between probes and move while a probe waits: an engine that took on a
    long prefill just as the probe came."""
    state = {"n": 0}

    def probe(engine, now):
        state["n"] += 1
        return answer

    return probe, lambda engine, now: (float(state["n"]),)


def test_a_timeout_while_the_engine_works_is_slow_not_hung(tmp_path):
    probe, work = _moves_only_while_probed(TIMEOUT)
    r = rig(tmp_path, [Script()], POLICY, probe=probe, work=work)
    r.clock.after(100.0, r.supervisor.stop)
    assert r.run() == STOPPED
    kinds = r.kinds()
    assert "probe_failed" not in kinds and "restart" not in kinds
    slow = [e for e in r.events() if e["kind"] == "probe_slow"]
    assert len(slow) == len(r.probes) >= 9 and all(e["outcome"] == "timeout" for e in slow)


def test_a_timeout_while_the_counters_stand_still_is_a_hang(tmp_path):
    r = rig(
        tmp_path,
        [Script(), Script()],
        POLICY,
        probe=lambda engine, now: TIMEOUT if engine.pid == 1000 else OK,
        work=lambda engine, now: (5.0, 7.0, 0.1),
    )
    r.clock.after(500.0, r.supervisor.stop)
    assert r.run() == STOPPED
    assert r.kinds()[:6] == ["start", "ready", "probe_failed", "probe_failed", "restart", "start"]
    failed = [e for e in r.events() if e["kind"] == "probe_failed"]
    assert [e["outcome"] for e in failed] == ["timeout", "timeout"] and [e["consecutive"] for e in failed] == [1, 2]
    assert r.launched[0].stops == [POLICY.hung_stop_grace_s]  # a hung engine gets the short grace
    restart = next(e for e in r.events() if e["kind"] == "restart")
    assert restart["reason"].startswith("liveness probe failed 2 times in a row (timeout")


def test_only_a_timeout_can_be_slow_whatever_its_text_says(tmp_path):
    # an HTTP 503 whose text reads like a hang, while the counters move: a failure all the same (the old
    # supervisor matched "hung?" in the message; the outcome is what counts now)
    looks_hung = ProbeResult(ProbeOutcome.HTTP_ERROR, "no answer within 60 s (hung?)", status=503)
    probe, work = _moves_only_while_probed(looks_hung)
    r = rig(tmp_path, [Script()], POLICY, probe=probe, work=work)
    r.clock.after(25.0, r.supervisor.stop)
    r.run()
    assert [e["outcome"] for e in r.events() if e["kind"] == "probe_failed"] == ["http_error", "http_error"]
    assert "probe_slow" not in r.kinds()


def test_one_good_probe_resets_the_consecutive_count(tmp_path):
    answers = iter([TIMEOUT, OK, TIMEOUT, OK, TIMEOUT])
    r = rig(tmp_path, [Script()], POLICY, probe=lambda engine, now: next(answers, OK))
    r.clock.after(80.0, r.supervisor.stop)
    assert r.run() == STOPPED
    assert [e["consecutive"] for e in r.events() if e["kind"] == "probe_failed"] == [1, 1, 1]
    assert "restart" not in r.kinds()


def test_a_host_with_too_few_gpus_is_refused_before_any_start(tmp_path):
    r = rig(tmp_path, [Script()], POLICY, gpus=1, gpus_needed=8)
    assert r.run() == FAILED
    assert r.kinds() == ["give_up"] and r.launched == []
    assert "needs 8 GPU(s), this host shows 1" in (r.supervisor.failure or "")


def test_a_launch_that_cannot_run_is_a_failed_start(tmp_path):
    r = rig(tmp_path, [Script()], SupervisorPolicy(max_restarts=0))

    def launch():
        raise FileNotFoundError(2, "No such file or directory", "python9")

    r.supervisor._launch = launch
    assert r.run() == FAILED
    assert r.kinds() == ["start_failed", "give_up"]
    assert "cannot run the engine command" in r.events()[0]["reason"]


def test_events_are_stamped_by_the_injected_clock(tmp_path):
    r = rig(tmp_path, [Script(ready_after_s=12.0)], POLICY)
    r.clock.after(100.0, r.supervisor.stop)
    r.run()
    assert r.at("ready")[0] - r.at("start")[0] == 12.0
    assert r.at("stopped")[0] - r.at("start")[0] == 100.0


def test_the_whole_policy_runs_in_milliseconds(tmp_path):
    # a day of a flapping engine, one probe every 10 s: the scripted clock never sleeps
    r = rig(
        tmp_path,
        [Script(lives_s=3_000.0)],
        SupervisorPolicy(max_restarts=100, restart_window_s=900, stable_after_s=10_000, jitter=0.0),
    )
    r.clock.after(86_400.0, r.supervisor.stop)
    began = time.perf_counter()
    assert r.run() == STOPPED
    assert time.perf_counter() - began < 5.0
    assert len(r.launched) > 25 and len(r.probes) > 8_000


def test_the_scripted_clock_runs_actions_in_time_order_and_ends_a_wait_on_the_event():
    clock = ScriptedClock(start_s=0.0)
    seen: list[tuple[str, float]] = []
    event = threading.Event()
    clock.at(5.0, lambda: seen.append(("b", clock.monotonic())))
    clock.at(2.0, lambda: seen.append(("a", clock.monotonic())))
    clock.at(7.0, event.set)
    clock.at(9.0, lambda: seen.append(("c", clock.monotonic())))
    assert clock.wait(event, 100.0) is True
    assert seen == [("a", 2.0), ("b", 5.0)] and clock.monotonic() == 7.0
    event.clear()
    assert clock.wait(event, 1.0) is False and clock.monotonic() == 8.0
    clock.advance(1.5)
    assert seen[-1] == ("c", 9.0) and clock.monotonic() == 9.5
