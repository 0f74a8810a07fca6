"""`loadproof serve`'s settings and dry run, below the CLI."""

import pytest

from loadproof.config.profile import packaged_profile
from loadproof.errors import UsageError
from loadproof.relay.serve import relay_config
from loadproof.supervisor.serving import ServeOptions, dry_run


@pytest.mark.parametrize("bad", [{"max_restarts": -1}, {"probe_interval_s": 0}, {"probe_timeout_s": -1.0},
                                 {"backoff_s": 0}])
def test_a_bad_setting_is_one_usage_error(bad):
    with pytest.raises(UsageError, match="--max-restarts must be >= 0"):
        ServeOptions(**bad)


def test_the_reference_profile_renders_one_step_per_host_and_the_embedded_one_a_single_command():
    steps, _ = dry_run(packaged_profile("reference-2node"))
    assert len(steps) >= 2 and all(step.node for step in steps)
    steps, notes = dry_run(packaged_profile("embedded"))
    assert [step.node for step in steps] == [None] and "--port" in steps[0].argv and notes == []


@pytest.mark.parametrize(("upstream", "said"), [("127.0.0.1:8000", "--upstream must be an http"),
                                                ("http://127.0.0.1:8000", "must be positive")])
def test_relay_settings_are_checked_once(upstream, said):
    with pytest.raises(UsageError, match=said):
        relay_config(upstream, max_in_flight=0, deadline_s=1, heartbeat_s=1, max_body_mib=1, body_timeout_s=1,
                     keys_file=None)


def test_relay_settings_become_its_config(monkeypatch):
    monkeypatch.setenv("LOADPROOF_UPSTREAM_API_KEY", "k-up")
    config = relay_config("http://127.0.0.1:8000", max_in_flight=8, deadline_s=30, heartbeat_s=2, max_body_mib=1.5,
                          body_timeout_s=10, keys_file=None)
    assert (config.max_in_flight, config.max_body_bytes, config.upstream_api_key) == (8, 1572864, "k-up")
