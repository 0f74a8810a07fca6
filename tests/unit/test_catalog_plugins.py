"""Scenarios plug in through the catalog: the registries are live views of its table, and the generic
parts (report, compare, export, verify, publish) never name a scenario."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loadproof import catalog
from loadproof.catalog import Entry, column
from loadproof.errors import UsageError
from loadproof.metrics import claim_functions
from loadproof.plans import schemas
from loadproof.registry import Registry
from loadproof.scenarios import scenarios
from loadproof.scenarios.demo import DemoSetup, demo_scenarios
from loadproof.telemetry.server_metrics import MetricsSource


def test_the_registries_list_every_catalog_entry_in_order():
    names = list(catalog.SCENARIOS)
    assert scenarios.in_order() == names
    assert schemas.in_order() == names and claim_functions.in_order() == names
    assert list(column("demo")) == [n for n, e in catalog.SCENARIOS.items() if e.demo]


def test_an_entry_added_to_the_catalog_later_is_found_and_gone_once_removed(monkeypatch):
    entry = Entry("json:JSONDecoder", "json:JSONEncoder", "json:dumps")
    with monkeypatch.context() as patch:
        patch.setitem(catalog.SCENARIOS, "json-ish", entry)
        import json

        assert claim_functions.get("json-ish") is json.dumps and schemas.get("json-ish") is json.JSONEncoder
        assert "json-ish" in claim_functions and "json-ish" not in Registry.over("x", column("figures"))
    assert "json-ish" not in claim_functions
    with pytest.raises(UsageError, match="unknown scenario 'json-ish'"):
        claim_functions.get("json-ish")


def test_a_view_takes_no_registration_and_a_column_must_name_a_part():
    with pytest.raises(TypeError, match="view"):
        Registry.over("scenario", column("plan")).register("new", "json:dumps")
    with pytest.raises(ValueError, match="not a module:attr part"):
        column("splits_by_repeat")


def test_the_demo_runs_each_catalog_entry_with_a_demo_factory_scaled_down():
    target = SimpleNamespace(engine="vllm")  # the factories hand it on; metric names come from its engine
    setup = DemoSetup(target=target, max_tokens=64, prompts=2, kv_cache_tokens=12_345, engine_url="http://127.0.0.1:9")
    demo = demo_scenarios(setup)
    assert [s.name for s in demo] == ["throughput", "load", "capacity", "prefill", "interference", "soak", "quality"]
    by_name = {s.name: s for s in demo}
    assert all(s.target is target for s in demo)
    assert (by_name["throughput"].options.max_tokens, by_name["throughput"].options.num_prompts) == (64, 2)
    assert by_name["load"].options.duration_s == 15.0 and by_name["capacity"].options.sessions == 4
    assert by_name["capacity"].startup_kv_tokens == 12_345
    assert by_name["soak"].engine_metrics.describe() == MetricsSource.beside("http://127.0.0.1:9").describe()
    assert by_name["quality"].options.retrieval_lengths == [1024, 2048]
