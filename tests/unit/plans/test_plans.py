"""Typed scenario plans: every scenario has one, old manifests still load, bad ones fail in one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from loadproof.errors import RunDirError
from loadproof.metrics import claim_functions
from loadproof.plans import Plan, attach_plan, load_plan, schemas, workload_difference
from loadproof.plans.capacity import CapacityPlan, CapacitySession
from loadproof.plans.throughput import ThroughputPlan
from loadproof.rundir import Manifest
from loadproof.store.run_dir import Run, load_run
from loadproof.store.schema import manifest_json, read_manifest
from tests import bundles

PUBLISHED = bundles.runs()  # a run of every kind published (tests/bundles.py; test_repo_bundles checks it)


def run_of(manifest: dict, name: str = "capacity-run") -> Run:
    path = Path("runs") / name
    return Run(path=path, manifest=read_manifest({"run_id": name, **manifest}, path / "manifest.json"), records=[])


def capacity_plan(**changes) -> CapacityPlan:
    plan = CapacityPlan(
        sessions=[CapacitySession(request_id="cap-s0", session_id="s0", expected="1234567")],
        input_tokens=1536,
        window_s=6.0,
        max_gap_s=5.0,
        drain_timeout_s=30.0,
        kv_idle_bound=0.02,
        idle_timeout_s=120.0,
    )
    return msgspec.structs.replace(plan, **changes)


def test_every_scenario_with_claims_has_a_plan_schema():
    assert schemas.names() == claim_functions.names()
    for name in schemas.names():
        assert issubclass(schemas.get(name), Plan)


@pytest.mark.parametrize("run_dir", PUBLISHED, ids=[bundles.label(p) for p in PUBLISHED])
def test_every_published_manifest_loads_through_its_versioned_schema(run_dir):
    run = load_run(run_dir)
    # bundles published before plans were typed have no version (read as 1); later ones carry theirs
    version = run.manifest.plan_version
    assert run.manifest.scenario is not None
    assert version is None or 1 <= version <= schemas.get(run.manifest.scenario).version
    plan = load_plan(run)
    assert isinstance(plan, schemas.get(run.manifest.scenario))
    stored = run.manifest.plan
    if stored is not None:  # what a scenario writes now reads back as what it wrote then
        written = msgspec.to_builtins(plan)
        assert {k: v for k, v in written.items() if k in stored} == stored
        # a field added since reads back as its default (the idle guard's timeout, replay's KV size, ...)
        defaults = {
            f.encode_name: f.default_factory() if f.default_factory is not msgspec.NODEFAULT else f.default
            for f in msgspec.structs.fields(type(plan))
        }  # a mutable default ({}) is a factory
        added = {k: v for k, v in written.items() if k not in stored}
        assert all(defaults.get(k, msgspec.NODEFAULT) is not msgspec.NODEFAULT for k in added), added
        assert added == {k: msgspec.to_builtins(defaults[k]) for k in added}


def test_a_version_1_throughput_run_had_no_plan_and_its_options_stand_in():
    options = {
        "families": ["english", "code"],
        "concurrency": [1, 4],
        "max_tokens": 256,
        "num_prompts": 4,
        "temperature": 0.0,
        "ignore_eos": True,
        "seed": 731,
        "repeats": 1,
        "deadline_s": None,
    }
    plan = load_plan(run_of({"scenario": "throughput", "options": options}, "throughput-run"))
    assert plan == ThroughputPlan(
        families=["english", "code"],
        concurrency=[1, 4],
        max_tokens=256,
        num_prompts=4,
        repeats=1,
        temperature=0.0,
        ignore_eos=True,
        seed=731,
    )


def test_attach_plan_writes_the_version_and_reads_back_equal():
    manifest = Manifest(scenario="capacity")
    attach_plan(manifest, capacity_plan())
    assert manifest.plan_version == CapacityPlan.version == 1
    written = json.loads(json.dumps(manifest_json(manifest)))
    assert written["plan"]["sessions"][0]["expected"] == "1234567"
    assert load_plan(run_of(written)) == capacity_plan()


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        (
            {"plan_version": 2},
            "runs/capacity-run/manifest.json: the capacity plan is version 2, newer than this loadproof "
            "reads (up to 1); use a newer loadproof",
        ),
        # a plan_version that is no integer does not fit the manifest's schema: read_manifest says so
        (
            {"plan_version": "two"},
            "runs/capacity-run/manifest.json does not fit the manifest schema: Expected `int | null`, "
            "got `str` - at `$.plan_version`",
        ),
        ({"plan_version": True}, "Expected `int | null`, got `bool` - at `$.plan_version`"),
        ({"plan_version": 0}, "plan_version 0 of the capacity plan is not a version number"),
        (
            {"plan": {"input_tokens": "1536"}},
            "runs/capacity-run/manifest.json: the capacity plan (version 1) is malformed: ",
        ),
        ({"plan": [1, 2]}, "does not fit the manifest schema: Expected `object | null`, got `array` - at `$.plan`"),
        ({}, "runs/capacity-run: the capacity run was interrupted before its plan was written; nothing to report"),
    ],
)
def test_a_bad_or_newer_plan_is_one_clear_line(manifest, said):
    raw = {"scenario": "capacity", "plan": msgspec.to_builtins(capacity_plan()), **manifest}
    if not manifest:
        del raw["plan"]
    with pytest.raises(RunDirError) as failed:
        load_plan(run_of(raw))
    assert said in str(failed.value)
    assert "\n" not in str(failed.value)


def test_a_malformed_plan_names_the_field():
    raw = msgspec.to_builtins(capacity_plan())
    raw["input_tokens"] = "1536"
    with pytest.raises(RunDirError, match=r"Expected `int`, got `str` - at `\$.input_tokens`"):
        load_plan(run_of({"scenario": "capacity", "plan": raw}))
    raw["input_tokens"] = 1536
    del raw["sessions"]
    with pytest.raises(RunDirError, match="Object missing required field `sessions`"):
        load_plan(run_of({"scenario": "capacity", "plan": raw}))


def test_workload_differences_name_each_setting_that_matters():
    assert workload_difference(capacity_plan(), capacity_plan(drain_timeout_s=60.0)) == []  # a bound, not the workload
    assert workload_difference(capacity_plan(input_tokens=2048, window_s=10.0), capacity_plan()) == [
        "input_tokens 2048 vs 1536",
        "window_s 10 vs 6",
    ]
    negative = capacity_plan(
        sessions=[CapacitySession(request_id="cap-s0", session_id="s0", expected="1", planted=False)]
    )
    assert workload_difference(negative, capacity_plan()) == ["negative control True vs False"]
