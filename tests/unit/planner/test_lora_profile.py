"""LoRA adapters in a profile: rendered to vLLM's and SGLang's flags, and a malformed section refused in one
line before anything starts."""

import pytest

from loadproof.config.profile import packaged_profile
from loadproof.engines import engines
from loadproof.errors import ConfigError
from tests.unit.planner.test_engine_figures import gpu_profile

LORA = {
    "adapters": {"support": "/a/support", "legal": "/a/legal"},
    "max_loras": 2,
    "max_lora_rank": 16,
    "max_cpu_loras": 4,
}


def test_vllm_and_sglang_render_the_adapters_by_name():
    argv = engines.get("vllm").launch_command(gpu_profile("llama-dummy", 8192, lora=LORA), "python3", "/m", 8000).argv
    at = argv.index("--enable-lora")
    assert argv[at : at + 10] == [
        "--enable-lora",
        "--lora-modules",
        "support=/a/support",
        "legal=/a/legal",
        "--max-loras",
        "2",
        "--max-lora-rank",
        "16",
        "--max-cpu-loras",
        "4",
    ]
    sglang = engines.get("sglang").launch_command(gpu_profile("llama-dummy", 8192, lora=LORA), "python3", "/m", 8000)
    at = sglang.argv.index("--enable-lora")
    assert sglang.argv[at : at + 8] == [
        "--enable-lora",
        "--lora-paths",
        "support=/a/support",
        "legal=/a/legal",
        "--max-loras-per-batch",
        "2",
        "--max-lora-rank",
        "16",
    ]
    assert any("max_cpu_loras" in n for n in sglang.notes)  # never dropped silently
    embedded = packaged_profile("embedded")
    assert "--enable-lora" not in engines.get("embedded").launch_command(embedded, "python3", "/m", 8000).argv


@pytest.mark.parametrize(
    "lora, says",
    [
        ({"adapters": {}}, "names no adapter"),
        ({"adapters": {"a b": "/x"}}, "is no adapter name"),
        ({"adapters": {"a": "/x"}, "max_loras": 3, "max_cpu_loras": 2}, "less than lora.max_loras"),
        ({"adapters": {"a": "/x"}, "max_lora_rank": 0}, "greater than or equal to 1"),
    ],
)
def test_a_malformed_lora_section_is_one_line(lora, says):
    with pytest.raises(ConfigError, match=says):
        gpu_profile("llama-dummy", 8192, lora=lora)
