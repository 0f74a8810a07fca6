"""Sanitizing by declared field kind (publish.fields): each kind's rule, undeclared fields, the declarations."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from loadproof import catalog
from loadproof.publish.fields import KINDS, PLAN, PLANTED, RUN_FILES, Node, declarations, tree, values_of_kind
from loadproof.publish.sanitize import Sanitizer
from loadproof.store.files import ZST
from tests import bundles
from tests.unit.publish.synthetic import read_jsonl

ROOT = Path(__file__).resolve().parents[3]
REAL_RUNS = bundles.runs()  # a run of every kind published (tests/bundles.py)


@pytest.fixture
def s():
    return Sanitizer(include_this_machine=False)


def test_each_kind_has_its_rule(s):
    assert s.value("https://gpu7.acme.lab:8000/v1", "url") == "<url>"
    s.learn("https://gpu7.acme.lab:8000/v1", "url")
    assert {"gpu7.acme.lab", "gpu7"} <= s.known_hosts
    assert s.value("dgx-07", "host") == "<host>" and s.value("10.0.0.5", "host") == "<ip>"
    assert s.value("/srv/models/llama", "path") == "<path>" and s.value("~bob/x", "path") == "<path>"
    assert s.value("C:\\Users\\bob", "path") == "<path>"
    assert s.value("data/traces/mooncake.jsonl", "path") == "data/traces/mooncake.jsonl"  # relative: as text
    assert s.value(["1,024", 7, 2.5, True, None], "number") == ["1,024", 7, 2.5, True, None]
    assert s.value("12ab34", "number") == "<redacted>"  # not a number where a number belongs
    assert s.value({"a": ["x y", {"b": 1}]}, "secret") == "<secret>" and "x y" in s.known_secrets()
    assert s.value("Authorization: Token 9f8e7d6c5b4a", "header") == "Authorization: <secret>"
    assert s.value("Accept: */*", "header") == "Accept: */*"
    assert s.value("connect to 10.0.0.5 failed", "text") == "connect to <ip> failed"
    assert s.value("english@gpu7.acme.lab", "name") == "<email>"
    assert s.value(["vllm", "serve", "--api-key", "-000000000000PW"], "argv") == [
        "vllm",
        "serve",
        "--api-key",
        "<secret>",
    ]
    assert s.value({"api_key": "x1", "port": 8000, "host": "dgx"}, "config") == {
        "api_key": "<secret>",
        "port": 8000,
        "host": "<host>",
    }


def test_an_undeclared_field_is_redacted_but_its_numbers_stay(s):
    node = tree({"kind": "name"})
    row = {
        "kind": "cancel",
        "note": "on dgx",
        "t_ns": 17,
        "ok": True,
        "nested": {"why": "x", "n": [1, "y"]},
        "password": 12345678,
        "api_key": "Zx9-local",
        "max_tokens": "12ab",
        "10.0.0.5:8000": 1,
        "Two Words": 2,
    }
    assert s.declared(row, node) == {
        "kind": "cancel",
        "note": "<redacted>",
        "t_ns": 17,
        "ok": True,
        "nested": {"why": "<redacted>", "n": [1, "<redacted>"]},
        "password": "<secret>",
        "api_key": "<secret>",
        "max_tokens": "<secret>",
        "<redacted>": 1,
        "<redacted>~": 2,
    }
    assert {"12345678", "Zx9-local", "12ab"} <= set(s.known_secrets())


def test_declared_keys_stay_and_map_keys_are_sanitized(s):
    node = tree({"values.*": "number", "labels.*": "text"})
    row = {"values": {"vllm:num_requests_running": 1.0, "gpu7.acme.lab:x": 2.0}, "labels": {"instance": "10.0.0.5"}}
    assert s.declared(row, node) == {
        "values": {"vllm:num_requests_running": 1.0, "<host>:x": 2.0},
        "labels": {"instance": "<ip>"},
    }


def test_learning_follows_the_declarations(s):
    node = declarations("capacity")["manifest.json"]
    s.learn_declared(
        {
            "target": {"url": "http://gpu-box-3:8000/v1"},
            "profile": {"serving": {"host": "dgx-a100"}},
            "db": {"password": "hunter2x"},
        },
        node,
    )
    assert {"gpu-box-3", "dgx-a100"} <= s.known_hosts and "hunter2x" in s.known_secrets()


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="'texte' is not a field kind"):
        tree({"a.b": "texte"})


@pytest.mark.parametrize("name", list(catalog.SCENARIOS))
def test_every_scenario_declares_its_plan_fields_with_known_kinds(name):
    assert set(catalog.SCENARIOS[name].text_fields.values()) <= KINDS
    assert set(declarations(name)) == set(RUN_FILES)  # builds: every path and kind checked


def test_planted_values_come_from_the_declarations_only():
    plan = {
        "sessions": [{"expected": "6693470", "key": "session 870"}, {"expected": "6693471"}],
        "other": {"expected": "not declared"},
    }
    node = declarations("capacity")["manifest.json"].child(PLAN)[0]
    assert list(values_of_kind(plan, node, PLANTED)) == ["6693470", "6693471"]
    assert list(values_of_kind(plan, declarations("soak")["manifest.json"].child(PLAN)[0], PLANTED)) == []


def undeclared_strings(value: Any, node: Node | None, path: str = "") -> list[str]:
    """The paths of the strings under `value` that no declaration reaches (they would be published redacted)."""
    if node is not None and node.kind is not None and not node.children:
        return []
    if isinstance(value, dict):
        return [
            f
            for key, child in value.items()
            for f in undeclared_strings(child, node.child(str(key))[0] if node else None, f"{path}.{key}")
        ]
    if isinstance(value, list):
        sub = node.child("*")[0] if node is not None else None
        return [f for child in value for f in undeclared_strings(child, sub, f"{path}.*")]
    return [path] if isinstance(value, str) and (node is None or node.kind is None) else []


@pytest.mark.parametrize("run", REAL_RUNS, ids=[bundles.label(r) for r in REAL_RUNS])
def test_every_string_of_the_real_runs_is_declared(run):
    manifest = json.loads((run / "manifest.json").read_text())
    declared = declarations(manifest.get("scenario"))
    missing = set(
        undeclared_strings({k: v for k, v in manifest.items() if k != "publication"}, declared["manifest.json"])
    )
    for name in RUN_FILES:
        if name != "manifest.json" and any((run / stored).is_file() for stored in (name, name + ZST)):
            for row in read_jsonl(run / name)[:200]:
                missing |= {f"{name}{p}" for p in undeclared_strings(row, declared[name])}
    assert not missing, sorted(missing)


def test_no_scenario_is_named_in_publish():
    names = "|".join(map(re.escape, catalog.SCENARIOS))
    for path in sorted((ROOT / "src/loadproof/publish").glob("*.py")):
        assert not re.search(rf"[\"']({names})[\"']", path.read_text()), path.name
