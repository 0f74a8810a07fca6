"""The demo's pieces below the CLI: what its runs' manifests say of the engine, and its exit on a FAIL."""

from types import SimpleNamespace

import pytest

from loadproof.config.profile import packaged_profile
from loadproof.engines.base import StartupReport
from loadproof.errors import AcceptanceFailed
from loadproof.scenarios.demo import DemoOutcome, engine_manifest
from loadproof.store.run_dir import RunWriter, load_run


def test_the_engine_the_demo_started_reaches_the_manifest_whole(tmp_path):
    profile = packaged_profile("embedded")
    engine = SimpleNamespace(
        command=SimpleNamespace(argv=["python", "-m", "vllm", "--port", "8123"], env={"VLLM_CPU_KVCACHE_SPACE": "4"}),
        ready_after_s=87.5,
    )
    startup = StartupReport(kv_cache_tokens=32768, line="GPU KV cache size: 32,768 tokens")
    with RunWriter.create(tmp_path, "prefill") as writer:
        manifest = engine_manifest(profile, engine, startup)  # type: ignore[arg-type]  # a stand-in engine
        manifest.run_id, manifest.scenario = writer.run_id, "prefill"
        writer.write_manifest(manifest)
    manifest = load_run(writer.path).manifest
    assert manifest.engine is not None and manifest.engine.startup_report is not None
    assert manifest.engine.launch == ["-m", "vllm", "--port", "8123"]
    assert manifest.engine.env == {"VLLM_CPU_KVCACHE_SPACE": "4"} and manifest.engine.ready_after_s == 87.5
    assert manifest.engine.startup_report.kv_cache_tokens == 32768
    assert manifest.profile is not None and manifest.profile["engine"] == profile.engine


def test_a_fail_in_any_scenario_is_exit_1_naming_each():
    DemoOutcome(verdicts={"throughput": None, "capacity": "PASS"}).conclude()
    with pytest.raises(AcceptanceFailed, match=r"failed: capacity, soak$"):
        DemoOutcome(verdicts={"capacity": "FAIL", "prefill": None, "soak": "FAIL"}).conclude()
