"""`sim calibrate --grid`'s runs, in process: a capacity run's arguments read by that command's own options,
as the command line reads them (`predict.grid.command_values`), each mistake one line before anything runs."""

from __future__ import annotations

import pytest

from loadproof.errors import UsageError
from loadproof.predict.grid import command_values
from loadproof.scenarios.capacity import CapacityScenario
from loadproof.scenarios.lifecycle import TargetOptions, check
from loadproof.scenarios.options import cli_options

OPTIONS = (
    cli_options(TargetOptions) + cli_options(CapacityScenario.Options) + cli_options(CapacityScenario.CommandOptions)
)


def test_every_spelling_of_an_argument_reads_as_the_command_line_reads_it():
    argv = ["--url", "http://127.0.0.1:9", "-n", "2", "--input-tokens=512", "--skip-probe-check"]
    argv += ["--profile=p.toml", "--no-cache-salt", "--window-s", "3", "--window-s", "4"]
    values = command_values(OPTIONS, argv)
    assert values == {
        "url": "http://127.0.0.1:9",
        "sessions": "2",
        "input_tokens": "512",
        "check_probes": True,  # --skip-probe-check: the command line's value, which from_cli inverts
        "profile": "p.toml",
        "use_cache_salt": True,  # --no-cache-salt, the flag of an inverted field: given, as for --skip-probe-check
        "window_s": "4",  # the later one wins
    }
    checked = check(CapacityScenario, {k: v for k, v in values.items() if k != "profile"})
    assert (checked.options.sessions, checked.options.input_tokens, checked.options.window_s) == (2, 512, 4.0)
    assert not checked.options.check_probes and not checked.options.use_cache_salt


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--bogus"], "--grid-arg --bogus: a capacity run has no option --bogus"),
        (["--skip-probe-check=yes"], "--skip-probe-check takes no value"),
        (["--window-s"], "--window-s needs a value"),
    ],
)
def test_a_wrong_argument_is_one_line(argv, said):
    with pytest.raises(UsageError, match=said):
        command_values(OPTIONS, argv)
