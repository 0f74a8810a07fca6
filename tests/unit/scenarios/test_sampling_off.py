"""`--sample-interval-s 0` switches sampling off where a run can do without it (load, replay, sessions: the
engine's /metrics only before and after the run, no GPU or host telemetry), and is refused, in one line that
says why, where the verdict reads the samples (capacity, interference, soak)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loadproof.errors import ConfigError
from loadproof.scenarios import scenarios
from loadproof.scenarios.options import cli_options, from_cli


@pytest.mark.parametrize("name", ["load", "replay", "sessions", "capacity", "interference", "soak"])
def test_every_scenario_with_the_option_shows_it(name):
    flags = {o.flag: o for o in cli_options(scenarios.get(name).Options)}
    assert "--sample-interval-s" in flags and flags["--sample-interval-s"].help


@pytest.mark.parametrize(
    "name, why",
    [
        ("capacity", "the verdict reads the engine's running, waiting and KV gauges through the window"),
        ("interference", "the verdict reads the engine's prefix-cache hits across each follow-up"),
        ("soak", "the verdict reads the resident memory of the engine and the relay sampled through the run"),
    ],
)
def test_where_the_verdict_needs_samples_0_is_refused_saying_why(name, why):
    with pytest.raises(ConfigError) as refused:
        from_cli(scenarios.get(name).Options, {"sample_interval_s": 0.0}, f"run {name}")
    assert str(refused.value) == f"--sample-interval-s 0: sampling cannot be switched off here: {why}"
    assert from_cli(scenarios.get(name).Options, {"sample_interval_s": 0.25}, name).sample_interval_s == 0.25


@pytest.mark.parametrize("name", ["load", "replay", "sessions"])
def test_where_the_run_does_without_samples_0_is_taken(name):
    options = scenarios.get(name).Options
    required = {o.field for o in cli_options(options) if o.required}
    values = {
        "sample_interval_s": 0.0,
        **({"trace": __file__} if "trace" in required else {}),
        **({"rate": "5", "num_requests": 10} if name == "load" else {}),
    }
    assert from_cli(options, values, name).sample_interval_s == 0


def test_the_refusal_is_one_line_and_exit_2_before_anything_is_sent():
    # port 9 (discard) refuses connections: were the server asked first, the error would be "cannot reach"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "capacity",
            "--url",
            "http://127.0.0.1:9",
            "--sample-interval-s",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "error: --sample-interval-s 0: sampling cannot be switched off here: the verdict reads "
        "the engine's running, waiting and KV gauges through the window\n"
    )
