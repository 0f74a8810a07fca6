"""`loadproof serve`'s settings, dry run and supervision of several engines, below the CLI."""

import threading

import pytest

from loadproof.config.profile import packaged_profile
from loadproof.errors import UsageError
from loadproof.relay.serve import relay_config
from loadproof.supervisor.loop import FAILED
from loadproof.supervisor.serving import ServeOptions, dry_run
from loadproof.supervisor.session import supervise_all


@pytest.mark.parametrize(
    "bad", [{"max_restarts": -1}, {"probe_interval_s": 0}, {"probe_timeout_s": -1.0}, {"backoff_s": 0}]
)
def test_a_bad_setting_is_one_usage_error(bad):
    with pytest.raises(UsageError, match="--max-restarts must be >= 0"):
        ServeOptions(**bad)


def test_the_reference_profile_renders_one_step_per_host_and_the_embedded_one_a_single_command():
    steps, _ = dry_run(packaged_profile("reference-2node"))
    assert len(steps) >= 2 and all(step.node for step in steps)
    steps, notes = dry_run(packaged_profile("embedded"))
    assert [step.node for step in steps] == [None] and "--port" in steps[0].argv and notes == []


@pytest.mark.parametrize(
    ("upstream", "said"),
    [("127.0.0.1:8000", "--upstream must be an http"), ("http://127.0.0.1:8000", "must be positive")],
)
def test_relay_settings_are_checked_once(upstream, said):
    with pytest.raises(UsageError, match=said):
        relay_config(
            upstream, max_in_flight=0, deadline_s=1, heartbeat_s=1, max_body_mib=1, body_timeout_s=1, keys_file=None
        )


def test_relay_settings_become_its_config(monkeypatch):
    monkeypatch.setenv("LOADPROOF_UPSTREAM_API_KEY", "k-up")
    config = relay_config(
        "http://127.0.0.1:8000",
        max_in_flight=8,
        deadline_s=30,
        heartbeat_s=2,
        max_body_mib=1.5,
        body_timeout_s=10,
        keys_file=None,
    )
    assert (config.max_in_flight, config.max_body_bytes, config.upstream_api_key) == (8, 1572864, "k-up")


class FakeSupervisor:
    """Runs until stopped, or gives up at once (`fails`); `stop_within_s` as the real one's bound."""

    stop_within_s = 5.0

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.stopped = threading.Event()
        self.killed = False
        self.ended_by_stop = False

    def run(self) -> str:
        if self.fails:
            return FAILED
        self.ended_by_stop = self.stopped.wait(10)  # False: nobody stopped it, it ran out its 10 s
        return "stopped"

    def stop(self) -> None:
        self.stopped.set()

    def kill_engine(self) -> None:
        self.killed = True


def test_one_engine_of_a_pair_giving_up_stops_the_other():
    prefill, decode = FakeSupervisor(), FakeSupervisor(fails=True)
    ended = []
    state = supervise_all([prefill, decode], lambda text: None, on_end=lambda: ended.append(True))
    assert state == FAILED
    assert prefill.ended_by_stop and not prefill.killed  # stopped because the other gave up, within its bound
    assert ended == [True]  # the relay is told once
