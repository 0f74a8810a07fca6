"""`loadproof run load`: every bad input is one line naming the problem, exit 2, before anything is sent;
good options read back from the manifest as they were given."""

from __future__ import annotations

import subprocess
import sys

import pytest

from loadproof.errors import ConfigError
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.slo import parse_slo
from loadproof.scenarios.options import from_cli
from loadproof.workloads.arrivals import ALL_AT_ONCE, Stage
from loadproof.workloads.synthetic import Lengths

# an unreachable server: an option error must come first, or the run would fail with exit 3 instead
BASE = ["run", "load", "--url", "http://127.0.0.1:9", "--tokenizer", "README.md"]


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--rate", "0", "-n", "5"], "--rate 0: must be > 0 requests/s"),
        (["--rate", "-3", "-n", "5"], "--rate -3: must be > 0 requests/s"),
        (["--rate", "2", "-n", "5", "--slo", "ttft=2"], "--slo ttft=2: ttft=2: give a unit, s or ms"),
        (["--rate", "2", "-n", "5", "--slo", "latency=2s"], "unknown SLO 'latency'"),
        (
            ["--rate", "2", "-n", "5", "--input-tokens", "zipf:1:2"],
            "--input-tokens zipf:1:2: unknown distribution 'zipf'",
        ),
        (["--stages", "2-30"], "--stages 2-30: each stage is RATE:SECONDS"),
        (["--rate", "2"], "bound the run with --num-requests N or --duration-s D"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    result = loadproof(*BASE, *args)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"rate": "fast", "num_requests": 5}, "--rate fast: takes a number of requests/s > 0, or inf"),
        ({"rate": "nan", "num_requests": 5}, "--rate nan: must be > 0"),
        ({"rate": "inf"}, "--rate inf sends every request at once: give --num-requests N"),
        ({"rate": "inf", "num_requests": 5, "ramp_up_s": 3.0}, "--ramp-up-s and --duration-s do not apply"),
        ({}, "give --rate R (requests/s, or inf) or --stages"),
        ({"rate": "2", "stages": "1:5", "num_requests": 3}, "give --rate or --stages, not both"),
        ({"stages": "2:0"}, "--stages 2:0: a stage's seconds must be > 0"),
        ({"stages": "0:5"}, "a stage's rate must be a number > 0"),
        ({"rate": "2", "num_requests": 4, "burstiness": 0.5}, "--burstiness applies to --arrival gamma"),
        ({"rate": "2", "num_requests": 4, "arrival": "weibull", "burstiness": 1.0}, "--arrival weibull"),
        ({"rate": "2", "num_requests": 4, "arrival": "gamma", "burstiness": 0.0}, "--burstiness 0: must be > 0"),
        ({"rate": "2", "num_requests": 4, "slo": "ttft"}, "each SLO is NAME=VALUE"),
        ({"rate": "2", "num_requests": 4, "slo": "ttft=1s,ttft=2s"}, "SLO ttft is given twice"),
        ({"rate": "2", "num_requests": 4, "slo": "tpot=0ms"}, "tpot must be a duration > 0"),
        ({"rate": "2", "num_requests": 4, "slo": "e2el=fast s"}, "not a duration"),
        ({"rate": "2", "num_requests": 4, "output_tokens": "lognormal:128"}, "lognormal takes two numbers"),
        ({"rate": "2", "num_requests": 4, "input_tokens": "512", "shared_prefix_tokens": 512}, "leaves nothing"),
        ({"rate": "2", "num_requests": 0}, "--num-requests 0: must be >= 1"),
        ({"rate": "2", "num_requests": 4, "max_concurrency": 0}, "--max-concurrency 0: must be >= 1"),
        ({"rate": "5000", "duration_s": 3600.0}, "would plan about 18,000,000 requests, more than the 10,000,000"),
    ],
)
def test_every_bad_value_names_its_flag(values, message):
    with pytest.raises(ConfigError) as err:
        from_cli(LoadOptions, values, "load options")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_good_options_read_back_as_given():
    options = from_cli(
        LoadOptions,
        {
            "stages": "2:30,4:15",
            "input_tokens": "lognormal:512:0.5",
            "output_tokens": "64",
            "slo": "ttft=2s,tpot=50ms,itl_p99=200ms,e2el=30s",
            "ramp_up_s": 5.0,
            "arrival": "gamma",
            "burstiness": 0.5,
        },
        "load options",
    )
    assert options.stages == (Stage(2.0, 30.0), Stage(4.0, 15.0))
    assert options.input_tokens == Lengths("lognormal", 512, 0.5) and options.output_tokens == Lengths("fixed", 64)
    assert options.slo == {"ttft": 2.0, "tpot": 0.05, "itl_p99": 0.2, "e2el": 30.0}
    dumped = options.model_dump()  # what the manifest holds: as typed, and valid JSON (no Infinity)
    assert dumped["stages"] == "2:30,4:15" and dumped["input_tokens"] == "lognormal:512:0.5"
    assert LoadOptions.model_validate(dumped) == options
    burst = from_cli(LoadOptions, {"rate": "inf", "num_requests": 9}, "load options")
    assert burst.rate is ALL_AT_ONCE and burst.all_at_once and burst.model_dump()["rate"] == "inf"
    assert LoadOptions.model_validate(burst.model_dump()) == burst


def test_slo_units():
    assert parse_slo("ttft=2s, tpot=50ms") == {"ttft": 2.0, "tpot": 0.05}
    assert parse_slo({"e2el": 30}) == {"e2el": 30.0}
