"""tests/python_source.parse: a parse disturbed by CPython 3.11's shared recursion counter is done again; any
other failure is raised at once."""

from __future__ import annotations

import ast

import pytest

from tests.python_source import ATTEMPTS, parse

REAL = ast.parse
MISMATCH = "AST constructor recursion depth mismatch (before=141, after=34)"


def test_a_disturbed_parse_is_done_again(monkeypatch):
    calls = []

    def flaky(source, filename="<unknown>"):
        calls.append(filename)
        if len(calls) == 1:
            raise SystemError(MISMATCH)
        return REAL(source, filename)

    monkeypatch.setattr(ast, "parse", flaky)
    tree = parse("x = 1\n", "m.py")
    assert isinstance(tree.body[0], ast.Assign) and calls == ["m.py", "m.py"]


def test_another_system_error_and_a_syntax_error_are_raised_at_once(monkeypatch):
    with pytest.raises(SyntaxError):
        parse("def (:\n")
    calls = []

    def broken(source, filename="<unknown>"):
        calls.append(filename)
        raise SystemError("something else")

    monkeypatch.setattr(ast, "parse", broken)
    with pytest.raises(SystemError, match="something else"):
        parse("x = 1\n")
    assert len(calls) == 1


def test_a_parse_disturbed_every_time_fails_after_the_last_attempt(monkeypatch):
    calls = []

    def always(source, filename="<unknown>"):
        calls.append(filename)
        raise SystemError(MISMATCH)

    monkeypatch.setattr(ast, "parse", always)
    with pytest.raises(SystemError, match="recursion depth mismatch"):
        parse("x = 1\n")
    assert len(calls) == ATTEMPTS
