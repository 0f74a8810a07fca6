"""The route adapters are the only code that knows a route by its name: nothing else in `src/` compares a
value with a route's name (or a tuple of names), and every registered route round-trips its own body."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import msgspec
import pytest

from loadproof.errors import UsageError
from loadproof.protocol.request import Message, Text
from loadproof.protocol.routes import ROUTES, request_of, route_names, route_of
from tests.python_source import parse

SRC = Path(__file__).resolve().parents[3] / "src" / "loadproof"
ROUTES_DIR = SRC / "protocol" / "routes"
NAMES = set(route_names())


def _names_in(node: ast.expr) -> set[str]:
    """The route names a comparison's operand spells out: a string, or a tuple, list or set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names_in(e) for e in node.elts)) if node.elts else set()
    return set()


def _about_a_route(node: ast.expr) -> bool:
    """An operand that holds a route: its text names an endpoint or a route (`target.endpoint`, `route_name`)."""
    return bool(re.search(r"endpoint|route", ast.unparse(node)))


def branches(code: str) -> list[int]:
    """The lines that compare something about a route with a route's name (or look one up by it)."""
    found = []
    for node in ast.walk(parse(code)):
        named: list[ast.expr] = []
        other: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = [o for o in operands if _names_in(o)]
            other = [o for o in operands if not _names_in(o)]
        elif isinstance(node, ast.Match) and _about_a_route(node.subject):
            named = [c.pattern.value for c in node.cases if isinstance(c.pattern, ast.MatchValue)]
            named = [v for v in named if _names_in(v)]
            other = [node.subject]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):  # {"chat": ...}[endpoint]
            named = [k for k in node.value.keys if k is not None and _names_in(k)]
            other = [node.slice]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Dict)
        ):
            named = [k for k in node.func.value.keys if k is not None and _names_in(k)]  # {"rerank": 2}.get(endpoint)
            other = list(node.args)
        if named and any(_about_a_route(o) for o in other):
            found.append(node.lineno)
    return found


def test_nothing_outside_the_adapters_branches_on_a_routes_name():
    files = [p for p in SRC.rglob("*.py") if ROUTES_DIR not in p.parents]
    assert len(files) > 200  # the scan saw the source tree
    found = [f"{p.relative_to(SRC)}:{line}" for p in files for line in branches(p.read_text(encoding="utf-8"))]
    assert found == [], "ask the route adapter (protocol/routes/) instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "code",
    [
        'if target.endpoint == "chat":\n    pass\n',
        'ok = endpoint in ("embeddings", "rerank")\n',
        'per = {"rerank": 2}.get(target.endpoint, 1)\n',
        'path = {"chat": "/v1/chat"}[route_name]\n',
        'match spec.endpoint:\n    case "messages":\n        pass\n',
    ],
)
def test_the_scan_finds_each_kind_of_branch(code):
    assert branches(code) == [1]


def test_the_scan_leaves_a_name_that_is_not_a_route():
    assert branches('if style == "chat":\n    pass\nok = "messages" in body\n') == []


def test_every_route_is_registered_with_its_own_name_and_path():
    paths = set()
    for name in route_names():
        route = route_of(name)
        assert route.name == name and route.path.startswith("/v1/") and route.path not in paths
        paths.add(route.path)
    assert {"completions", "chat", "responses", "messages", "embeddings", "rerank", "transcriptions"} <= set(
        ROUTES.names()
    )


def test_an_unknown_route_is_one_line_naming_the_known_ones():
    with pytest.raises(UsageError, match="unknown route 'chats'; did you mean 'chat'"):
        route_of("chats")


@pytest.mark.parametrize("name", ["chat", "responses", "messages"])
def test_a_conversation_is_written_in_each_apis_own_shape(name):
    convo = [Message.text("system", "Be brief."), Message.text("user", "Hi"), Message("assistant", (Text("Hello"),))]
    body = msgspec.json.decode(route_of(name).encode(request_of(name, "m", messages=convo, max_tokens=7)))
    if name == "messages":  # the system prompt is a top-level field; the rest alternate
        assert body["system"] == "Be brief." and [m["role"] for m in body["messages"]] == ["user", "assistant"]
        assert body["max_tokens"] == 7 and body["stream"] is True
    elif name == "responses":
        assert [i["role"] for i in body["input"]] == ["system", "user", "assistant"]
        # text alone as a string: vLLM refuses an earlier assistant turn given as output_text parts
        assert [i["content"] for i in body["input"]] == ["Be brief.", "Hi", "Hello"] and body["max_output_tokens"] == 7
        assert body["store"] is False
    else:
        assert [m["content"] for m in body["messages"]] == ["Be brief.", "Hi", "Hello"]
        assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
