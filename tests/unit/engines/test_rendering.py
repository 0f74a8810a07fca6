"""Profiles rendered into engine commands: every field lands on its flag, or is named as unsupported."""

import subprocess
import sys

import pytest

from loadproof.config.profile import Profile, packaged_profile, packaged_profiles
from loadproof.engines import engines


def argv_of(name: str, engine: str | None = None):
    profile = packaged_profile(name)
    return engines.get(engine or profile.engine).launch_command(profile, "python3", "/m", 8000)


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_reference_topology_on_vllm():
    cmd = argv_of("reference-tp4pp2")
    a = cmd.argv
    assert flag(a, "--tensor-parallel-size") == "4" and flag(a, "--pipeline-parallel-size") == "2"
    assert cmd.env["VLLM_PP_LAYER_PARTITION"] == "14,13"
    assert flag(a, "--kv-cache-dtype") == "fp8"
    assert flag(a, "--kv-cache-memory-bytes") == str(36 * 1024**3)
    assert flag(a, "--max-model-len") == "1048576" and flag(a, "--max-num-seqs") == "24"
    assert flag(a, "--speculative-config") == (
        '{"method":"mtp","num_speculative_tokens":5,"num_speculative_tokens_per_batch_size":[[1,4,5],[5,32,3]]}'
    )
    assert flag(a, "--max-cudagraph-capture-size") == "128" and flag(a, "--cpu-offload-gb") == "23.6"
    assert flag(a, "--load-format") == "dummy"
    assert cmd.notes == ()  # the draft schedule by batch size is vLLM's own option


def test_a_draft_method_vllm_lacks_or_a_bad_schedule_is_one_line():
    base = packaged_profile("reference-tp4pp2").model_dump()
    wrong = Profile.model_validate({**base, "speculative": {"method": "lookahead", "draft_tokens": 3}})
    notes = engines.get("vllm").launch_command(wrong, "python3", "/m", 8000).notes
    assert len(notes) == 1 and "no speculative method 'lookahead'" in notes[0]
    for schedule, problem in (
        ({"2-4": 3}, "must start at batch size 1"),
        ({"1-4": 3, "4-8": 2}, "overlap"),
        ({"1-4": 3, "6-8": 2}, "leave a gap"),
        ({"1-x": 3}, "not a batch-size range"),
        ({"1-4": 9}, "more than draft_tokens"),
    ):
        with pytest.raises(ValueError, match=problem):
            Profile.model_validate(
                {**base, "speculative": {"method": "ngram", "draft_tokens": 5, "draft_schedule": schedule}}
            )
    spec = packaged_profile("reference-tp4pp2").speculative
    assert [spec.draft_length(b) for b in (1, 4, 5, 32, 64)] == [5, 5, 3, 3, 3]


def test_multi_node_renders_a_ray_cluster():
    profile = packaged_profile("reference-2node")
    steps = engines.get("vllm").cluster_commands(profile, "python3", "/m", 8000)
    assert [s.node for s in steps] == ["head", "worker-1", "head"]
    assert steps[0].argv[:3] == ["ray", "start", "--head"] and "--num-gpus=4" in steps[0].argv
    assert steps[1].argv[2] == "--address=HEAD_NODE_IP:6379"
    assert flag(steps[2].argv, "--distributed-executor-backend") == "ray"


def test_sglang_names_what_it_cannot_express():
    cmd = argv_of("reference-sglang")
    assert flag(cmd.argv, "--tp-size") == "4" and flag(cmd.argv, "--max-running-requests") == "24"
    assert flag(cmd.argv, "--kv-cache-dtype") == "fp8_e4m3"
    assert cmd.notes == ()  # this profile only uses what SGLang has
    cmd = argv_of("reference-tp4pp2", engine="sglang")
    assert any("layer split" in n for n in cmd.notes) and any("GiB" in n for n in cmd.notes)


@pytest.mark.parametrize("name", sorted(packaged_profiles()))
def test_every_packaged_profile_dry_runs(name):
    from importlib import resources

    path = resources.files("loadproof") / "profiles" / f"{name}.toml"
    result = subprocess.run(
        [sys.executable, "-m", "loadproof", "serve", str(path), "--dry-run"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "--max-model-len" in result.stdout or "--context-length" in result.stdout


def test_a_launch_with_unsupported_fields_is_refused_not_degraded(tmp_path):
    from importlib import resources

    text = (resources.files("loadproof") / "profiles" / "reference-tp4pp2.toml").read_text()
    path = tmp_path / "lookahead.toml"  # a draft method vLLM lacks
    path.write_text(text.replace('method = "mtp"', 'method = "lookahead"'))
    result = subprocess.run(
        [sys.executable, "-m", "loadproof", "serve", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "no speculative method 'lookahead'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_partial_prefill_limits_render_on_vllm_and_are_named_unsupported_on_sglang():
    base = packaged_profile("reference-tp4pp2").model_dump()
    base["scheduler"] |= {"long_prefill_token_threshold": 2048, "max_num_partial_prefills": 4}
    profile = Profile.model_validate(base)
    a = engines.get("vllm").launch_command(profile, "python3", "/m", 8000).argv
    assert flag(a, "--long-prefill-token-threshold") == "2048" and flag(a, "--max-num-partial-prefills") == "4"
    notes = engines.get("sglang").launch_command(profile, "python3", "/m", 8000).notes
    assert any("long_prefill_token_threshold and max_num_partial_prefills are vLLM's" in n for n in notes)


def test_the_simulator_takes_the_schedulers_limits_and_still_refuses_the_kv_budget():
    model = {"path": "sim", "served_name": "s", "max_model_len": 50_000}
    profile = Profile.model_validate(
        {
            "name": "s",
            "engine": "sim",
            "model": model,
            "scheduler": {"max_num_seqs": 4, "max_num_batched_tokens": 1024, "max_num_partial_prefills": 2},
            "kv_cache": {"budget_gib_per_gpu": 1.0},
        }
    )
    command = engines.get("sim").launch_command(profile, "python3", "sim", 8000)
    assert flag(command.argv, "--max-num-seqs") == "4" and flag(command.argv, "--max-num-batched-tokens") == "1024"
    assert flag(command.argv, "--long-prefill-token-threshold") == "2000"  # vLLM's default: 4% of max_model_len
    assert any("[kv_cache]" in n for n in command.notes) and not any("[scheduler]" in n for n in command.notes)
    bare = (
        engines.get("sim")
        .launch_command(Profile.model_validate({**profile.model_dump(), "scheduler": {}}), "python3", "sim", 8000)
        .argv
    )
    assert "--max-num-seqs" not in bare and "--long-prefill-token-threshold" not in bare
