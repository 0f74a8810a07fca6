"""`loadproof run NAME --help` (and `tune --help`, which takes run load's options) lists every option in one of
one set of panels (`scenarios.options.Panel`), in that order, names the values each option takes, and ends with
examples that the command's own parser accepts (issue #38)."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from loadproof.cli import app
from loadproof.cli.run import command_options
from loadproof.protocol.routes import route_names
from loadproof.scenarios import scenarios
from loadproof.scenarios.options import Panel
from tests.unit.cli.test_generated_commands import run_commands

PANELS = [p.value for p in Panel]
NAMES = scenarios.in_order()


def help_of(*args: str) -> str:
    """`loadproof ARGS --help`, wide enough that each option's row is one line (its default on the next)."""
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return result.output


def panels_of(text: str) -> dict[str, list[str]]:
    """Each panel's title in `--help` and the long flags listed in it, in order."""
    panels: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        title = re.match(r"\s*╭─ (.+?) ─", line)
        if title:
            current = panels.setdefault(title.group(1), [])
            continue
        flag = re.match(r"│\s*\*?\s*(--[a-z0-9-]+)", line)
        if flag:
            current.append(flag.group(1))
    return panels


def row(text: str, flag: str) -> str:
    """The line of `--help` that lists `flag`."""
    rows = [line for line in text.splitlines() if re.match(rf"│\s*\*?\s*{re.escape(flag)}\s", line)]
    assert len(rows) == 1, (flag, rows)
    return rows[0]


def parameters(command: Any) -> list[Any]:
    return [p for p in command.params if p.name != "help"]


@pytest.mark.parametrize("name", NAMES)
def test_every_option_of_every_run_command_is_in_a_panel_of_the_shared_set(name):
    command = run_commands()[name]
    outside = [p.opts[0] for p in parameters(command) if getattr(p, "rich_help_panel", None) not in PANELS]
    assert not outside, f"run {name}: options in no panel of scenarios.options.Panel: {outside}"
    # and the model says so too: no option of the command without a declared panel
    assert all(o.panel in Panel for o in command_options(scenarios.get(name)))


@pytest.mark.parametrize("name", NAMES)
def test_help_lists_the_panels_in_the_shared_order_and_each_option_in_its_own(name):
    shown = panels_of(help_of("run", name))
    assert shown.pop("Options") == ["--help"]  # typer's own, first
    assert list(shown) == [p for p in PANELS if p in shown], f"run {name}: panels out of order: {list(shown)}"
    declared = {o.flag: o.panel.value for o in command_options(scenarios.get(name)) if o.panel is not None}
    listed = {flag: panel for panel, flags in shown.items() for flag in flags}
    assert listed == declared


def test_run_load_help_is_grouped_into_the_issues_panels():
    shown = panels_of(help_of("run", "load"))
    for panel in ("Target", "Arrivals", "Workload", "SLO and search", "Scale-out", "Output", "Engine metrics"):
        assert panel in shown, panel
    assert {"--rate", "--arrival", "--stages", "--num-requests", "--duration-s"} <= set(shown["Arrivals"])
    assert {"--slo", "--search", "--attainment", "--sweep"} <= set(shown["SLO and search"])
    assert shown["Scale-out"] == ["--workers", "--ray-address"]
    assert shown["Target"][0] == "--url"


def test_search_says_it_takes_rate():
    text = help_of("run", "load")
    line = row(text, "--search")
    assert re.match(r"│\s*--search\s+rate\s+rate: ", line), line
    assert "--search" in panels_of(text)["SLO and search"]


@pytest.mark.parametrize("name", NAMES)
def test_every_choice_option_names_its_values_in_its_help(name):
    text = help_of("run", name)
    for option in command_options(scenarios.get(name)):
        if not option.choices:
            continue
        line = row(text, option.flag)
        missing = [c for c in option.choices if not re.search(rf"(?<![\w-]){re.escape(c)}(?![\w-])", line)]
        assert not missing, f"run {name} {option.flag}: its help does not name {missing}: {line}"


def test_the_choices_are_read_from_literals_and_checks_alike():
    load = {o.flag: o for o in command_options(scenarios.get("load"))}
    assert load["--search"].choices == ("rate",) and load["--search"].metavar == "rate"
    assert load["--arrival"].choices == ("poisson", "constant", "gamma")
    assert load["--arrival"].metavar == "poisson|constant|gamma"
    assert load["--endpoint"].choices == tuple(route_names())  # one_of, from the route registry
    assert load["--dataset-format"].metavar == "FORMAT"  # too long to show: the help names them
    throughput = {o.flag: o for o in command_options(scenarios.get("throughput"))}
    assert throughput["--families"].choices == ("english", "chinese", "code", "edit")  # among
    ab = {o.flag: o for o in command_options(scenarios.get("ab"))}
    assert ab["--family"].choices == throughput["--families"].choices
    assert ab["--b-endpoint"].choices == ("completions", "chat", "responses", "messages")


@pytest.mark.parametrize("name", NAMES)
def test_every_value_shown_is_named_not_a_bare_type(name):
    """The value column says what to type (`SECONDS`, `N|DIST:A:B`, `R|inf`), never typer's `<str>` or a
    bare TEXT; a flag shows none."""
    for option in command_options(scenarios.get(name)):
        if option.shape == "flag":
            assert option.metavar == "", option.flag
        else:
            assert option.metavar and option.metavar != "TEXT", (name, option.flag, option.metavar)
            if option.field.endswith("_s") and not option.choices:
                assert option.metavar.startswith(("SECONDS", "X|")), (name, option.flag, option.metavar)
    text = help_of("run", name)
    assert "<str>" not in text and "<float>" not in text and "<int>" not in text


def test_load_names_its_distributions_units_and_syntaxes():
    text = help_of("run", "load")
    assert "uniform:LOW:HIGH" in row(text, "--input-tokens") and "N|DIST:A:B" in row(text, "--input-tokens")
    assert "R|inf" in row(text, "--rate") and "requests/s" in row(text, "--rate")
    assert "SECONDS" in row(text, "--duration-s") and "SECONDS" in row(text, "--ramp-up-s")
    assert "auto|HOST:PORT" in row(text, "--ray-address")
    assert "loadproof[ray]" in row(text, "--ray-address")  # help is plain text: brackets are not rich markup


@pytest.mark.parametrize("name", NAMES)
def test_every_run_command_ends_with_examples_its_own_parser_takes(name):
    scenario = scenarios.get(name)
    assert 2 <= len(scenario.examples) <= 4, name
    command = run_commands()[name]
    text = help_of("run", name)
    assert "Examples:" in text
    for example in scenario.examples:
        args = shlex.split(example.args)
        command.make_context(name, args)  # an unknown flag or a value of the wrong type raises here
        assert example.what in " ".join(text.split())


def test_an_example_with_a_flag_the_command_lacks_fails_the_parse():
    with pytest.raises(Exception, match="No such option: --rate-rps"):  # typer's own click
        run_commands()["load"].make_context("load", ["--url", "http://h:1", "--rate-rps", "2"])


def test_tune_lists_run_loads_options_in_their_panels():
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    tune = root.commands["tune"]
    by_flag = {p.opts[0]: getattr(p, "rich_help_panel", None) for p in parameters(tune)}
    assert by_flag["--rate"] == "Arrivals" and by_flag["--input-tokens"] == "Workload"
    assert by_flag["--slo"] == by_flag["--attainment"] == "SLO and search" and by_flag["--tokenizer"] == "Target"
    shown = panels_of(help_of("tune"))
    assert list(shown)[:2] == ["Arguments", "Options"] and "--grid" in shown["Options"]  # tune's own, first
    assert "--search-max" in shown["SLO and search"]
