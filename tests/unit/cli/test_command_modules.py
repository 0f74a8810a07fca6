"""`loadproof COMMAND` imports only COMMAND's modules (cli/commands.py): each command, registered by those modules
alone in a fresh interpreter, is the same command (its options, arguments, help and subcommands) as when every
command module is imported; every command has its modules; a line without a known command imports them all."""

from __future__ import annotations

import json
import subprocess
import sys

import typer

from loadproof.cli import app, commands

TREE = """
import json, sys
import typer
from loadproof.cli import apps, commands

def tree(command):
    params = [
        [p.name, list(p.opts), p.param_type_name, str(getattr(p, "type", None)), p.required, p.multiple, getattr(p, "help", None)]
        for p in command.params
    ]
    subs = getattr(command, "commands", {})  # a group's (typer's groups are not click's)
    return {"help": command.help, "hidden": command.hidden, "params": params,
            "commands": {name: tree(sub) for name, sub in sorted(subs.items())}}

name = sys.argv[1]
commands.load(commands.MODULES[name] if name != "*" else commands.ORDER)
group = typer.main.get_command(apps.app)
print(json.dumps({c: tree(group.commands[c]) for c in (sorted(commands.MODULES) if name == "*" else [name])}))
"""


def _trees(name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", TREE, name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_each_command_registered_by_its_modules_alone_is_the_whole_command():
    running = {name: _trees(name) for name in [*commands.MODULES, "*"]}  # at once: each is an interpreter's start
    found = {}
    for name, proc in running.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{name}: {err[-2000:]}"
        found[name] = json.loads(out)
    whole = found.pop("*")
    for name, one in found.items():
        assert one == {name: whole[name]}, f"`loadproof {name}` differs when only {commands.MODULES[name]} load"


def test_every_command_has_its_modules_and_the_order_is_every_module():
    group = typer.main.get_command(app)
    assert set(commands.MODULES) == set(getattr(group, "commands", {}))
    assert sorted(commands.ORDER) == sorted({m for ms in commands.MODULES.values() for m in ms})


def test_a_line_without_a_known_command_needs_every_module():
    assert commands.needed(["run", "load", "--rate", "2"]) == ("run",)
    assert commands.needed(["--help"]) == commands.needed([]) == commands.ORDER
    assert commands.needed(["rnu", "load"]) == commands.ORDER  # a misspelling: every command for the suggestions
    assert commands.needed(["-q", "history", "load.ttft_s.p50"]) == ("results",)
