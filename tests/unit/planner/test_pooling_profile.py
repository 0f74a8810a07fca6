"""A pooling model in a profile (`runner = "pooling"`): rendered to vLLM's `--runner pooling` and SGLang's
`--is-embedding`, and bound to the embeddings endpoint both ways in one line when the profile loads."""

import pytest

from loadproof.engines import engines
from loadproof.errors import ConfigError
from tests.unit.planner.test_engine_figures import gpu_profile

POOLING = {"endpoint": "embeddings", "runner": "pooling"}


def test_vllm_and_sglang_serve_a_pooling_model():
    argv = engines.get("vllm").launch_command(gpu_profile("e5", 512, serving=POOLING), "python3", "/m", 8000).argv
    assert argv[argv.index("--runner") : argv.index("--runner") + 2] == ["--runner", "pooling"]
    assert (
        "--is-embedding"
        in engines.get("sglang").launch_command(gpu_profile("e5", 512, serving=POOLING), "python3", "/m", 8000).argv
    )
    generating = engines.get("vllm").launch_command(gpu_profile("e5", 512), "python3", "/m", 8000).argv
    assert "--runner" not in generating


@pytest.mark.parametrize("serving", [{"runner": "pooling"}, {"endpoint": "embeddings"}, {"endpoint": "rerank"}])
def test_the_runner_and_the_endpoint_go_together(serving):
    with pytest.raises(ConfigError, match="a pooling model is measured on the embeddings or rerank endpoint"):
        gpu_profile("e5", 512, serving=serving)
