"""The CI job templates under ci-templates/ (GitHub Actions and GitLab CI; docs/ci-gate.md) cannot rot: both parse
as YAML of their CI's shape, each runs the scenario, gates it and adds it to the store, every `loadproof ...` line
they hold parses with the real command line (its options and their types, as click reads them; nothing is run),
and their default budget is the gate's own default."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml  # PyYAML, which tokenizers' huggingface_hub brings (a dependency of loadproof)
from typer.main import get_command

from loadproof.cli import app
from loadproof.metrics.gate import DEFAULT_BUDGETS, parse_budgets

ROOT = Path(__file__).resolve().parents[3]
GITHUB = ROOT / "ci-templates" / "github" / "loadproof-gate.yml"
GITLAB = ROOT / "ci-templates" / "gitlab" / ".gitlab-ci.yml"
# what a shell variable stands for when a command line is parsed (the run directory a run wrote, the server)
STANDS_FOR = {"RUN": "runs/load-20261206-000000-abcd", "LOADPROOF_URL": "http://127.0.0.1:8000"}
SHELL_OPERATORS = {"&", "&&", "|", "||", ";", ">", ">>", "<", "2>&1", "2>", ")", "("}


def github() -> dict[Any, Any]:
    return yaml.safe_load(GITHUB.read_text(encoding="utf-8"))


def gitlab() -> dict[Any, Any]:
    return yaml.safe_load(GITLAB.read_text(encoding="utf-8"))


def github_scripts() -> tuple[list[str], dict[str, str]]:
    """Every step's `run:` and the workflow's env, each `${{ a || 'default' }}` read as its default."""
    workflow = github()
    steps = workflow["jobs"]["gate"]["steps"]
    env = {}
    for key, value in workflow["env"].items():
        default = re.search(r"\|\| '([^']*)' \}\}$", value)
        env[key] = default.group(1) if default else value
    return [s["run"] for s in steps if "run" in s], env


def gitlab_scripts() -> tuple[list[str], dict[str, str]]:
    pipeline = gitlab()
    job = pipeline["loadproof-gate"]
    return [*job["script"], *job.get("after_script", [])], dict(pipeline["variables"])


def loadproof_lines(scripts: list[str]) -> list[str]:
    """Each shell line that runs loadproof (continuations joined), as written."""
    lines = []
    for script in scripts:
        for line in script.replace("\\\n", " ").splitlines():
            words = line.strip().split()
            if "loadproof" in words:
                lines.append(line.strip())
    return lines


def argv_of(line: str, env: dict[str, str]) -> list[str]:
    """The arguments loadproof gets from `line`: from `loadproof` to the first shell operator, each variable
    replaced by what it stands for (the template's own default, else STANDS_FOR, else a word)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    start = words.index("loadproof") + 1
    args = []
    for word in words[start:]:
        if word in SHELL_OPERATORS or set(word) <= set("&|;<>()"):
            break
        args.append(re.sub(r"\$\{?([A-Za-z_]\w*)\}?", lambda m: env.get(m[1]) or STANDS_FOR.get(m[1], "x"), word))
    return args


def parse(args: list[str]) -> list[str]:
    """Parse `loadproof ARGS` as the real command line would (typer's own click), down to its leaf command; return
    the command path. Raises on an unknown command or option, a missing one, or a value of the wrong type."""
    command: Any = get_command(app)
    ctx: Any = None
    path: list[str] = []
    name = "loadproof"
    while True:
        ctx = command.make_context(name, list(args), parent=ctx, resilient_parsing=False)
        if not isinstance(command, typer.core.TyperGroup):
            return path
        rest = [*ctx._protected_args, *ctx.args]
        sub_name, sub, args = command.resolve_command(ctx, rest)
        assert sub is not None and sub_name is not None, rest
        path.append(sub_name)
        command, name = sub, sub_name


@pytest.mark.parametrize("template", ["github", "gitlab"])
def test_every_loadproof_line_of_a_template_parses_with_the_real_cli(template: str):
    scripts, env = github_scripts() if template == "github" else gitlab_scripts()
    lines = loadproof_lines(scripts)
    commands = [" ".join(parse(argv_of(line, env))) for line in lines]
    # it serves the embedded engine, runs the scenario, gates it and adds it to the store, in that order
    assert commands == ["serve", "run load", "gate", "store add"], lines
    gate = argv_of(lines[commands.index("gate")], env)
    assert gate[gate.index("--budget") + 1] == DEFAULT_BUDGETS  # the gate's own default, written out
    assert "--no-baseline" in gate and "--json" in gate


def test_a_line_the_cli_would_refuse_is_caught():
    env = {"LOADPROOF_BASELINE": "last"}
    with pytest.raises(Exception, match="No such option: --budgett"):
        parse(argv_of('loadproof gate "$RUN" --baseline "$LOADPROOF_BASELINE" --budgett x', env))
    with pytest.raises(Exception, match="Missing parameter: baseline"):
        parse(argv_of('loadproof gate "$RUN" > gate.log', env))
    with pytest.raises(Exception, match="valid number"):
        parse(argv_of("loadproof run load --url http://127.0.0.1:8000 --rate 2 --duration-s soon", env))
    with pytest.raises(Exception, match="No such command 'gates'"):
        parse(argv_of("nohup loadproof gates x &", env))


def test_the_templates_have_their_cis_shape():
    workflow = github()
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert {"push", "pull_request", "workflow_dispatch"} <= set(triggers)
    assert "url" in triggers["workflow_dispatch"]["inputs"]
    steps = workflow["jobs"]["gate"]["steps"]
    assert all(("uses" in s) != ("run" in s) for s in steps)  # each step runs a script or an action, not both
    assert workflow["env"]["LOADPROOF_URL"] == "${{ inputs.url || vars.LOADPROOF_URL }}"
    pipeline = gitlab()
    job = pipeline["loadproof-gate"]
    assert isinstance(job["script"], list) and job["artifacts"]["when"] == "always"
    assert {"LOADPROOF_URL", "LOADPROOF_INSTALL", "LOADPROOF_BASELINE", "LOADPROOF_BUDGET"} <= set(
        pipeline["variables"]
    )
    for budgets in (github_scripts()[1]["LOADPROOF_BUDGET"], pipeline["variables"]["LOADPROOF_BUDGET"]):
        assert budgets == DEFAULT_BUDGETS and parse_budgets(budgets)
