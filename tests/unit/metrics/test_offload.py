"""A KV connector's tier from the engine's counters (metrics.offload): the external prefix cache's queried and
hit tokens over the run, and the cached prompt tokens by the tier that supplied them, kept apart by `source`;
nothing where the counters did not move."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadproof.engines.vllm import VLLM_METRICS
from loadproof.metrics import compute_claims
from loadproof.metrics.offload import offload_claims
from loadproof.store.run_dir import Run
from loadproof.telemetry.server_metrics import parse_metrics
from tests import rundir_values as rv
from tests.unit.metrics import test_load

S = 1_000_000_000

# as vLLM 0.32 exposes them (loggers.py: per engine and model; the by-source counter one series per tier)
EXPOSITION = """# TYPE vllm:external_prefix_cache_queries counter
vllm:external_prefix_cache_queries_total{engine="0",model_name="m"} 4096.0
# TYPE vllm:external_prefix_cache_hits counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 3072.0
# TYPE vllm:prompt_tokens_cached_by_source counter
vllm:prompt_tokens_cached_by_source_total{engine="0",model_name="m",source="device"} 1024.0
vllm:prompt_tokens_cached_by_source_total{engine="0",model_name="m",source="host"} 3072.0
vllm:prompt_tokens_cached_by_source_total{engine="0",model_name="m",source="disk"} 0.0
"""


def test_the_counters_parse_with_each_tier_apart():
    values = parse_metrics(EXPOSITION, VLLM_METRICS)
    assert values["external_prefix_cache_queries_total"] == 4096 and values["external_prefix_cache_hits_total"] == 3072
    assert values["prompt_tokens_cached_by_source_total_host"] == 3072
    assert values["prompt_tokens_cached_by_source_total_device"] == 1024


def run(after: dict[str, float]) -> Run:
    """The load test's records with /metrics samples around them: zeros before, `after` after."""
    samples = [
        {"t_ns": test_load.T0 - S, "values": {k: 0.0 for k in after}},
        {"t_ns": test_load.T0 + 60 * S, "values": after},
    ]
    return rv.run_of(
        Path("offload"), {"run_id": "offload", "scenario": "load", "plan": {}}, test_load.RECORDS, samples=samples
    )


def docs_runs(_tmp_path: Path) -> list[Run]:
    """For the docs-formulas test: every offload claim's pattern."""
    return [offloaded()]


def offloaded() -> Run:
    import msgspec

    r = run(parse_metrics(EXPOSITION, VLLM_METRICS))
    r.manifest.plan = msgspec.to_builtins(test_load.plan())
    return r


def test_the_tier_served_three_quarters_of_what_it_was_asked():
    claims = {c.name: c.value for c in offload_claims(test_load.RECORDS, offloaded().samples)}
    assert claims["offload.external_hit_pct"] == pytest.approx(75.0)
    assert claims["offload.external_queried_tokens"] == 4096 and claims["offload.cached_tokens.host"] == 3072
    assert claims["offload.cached_tokens.device"] == 1024 and claims["offload.cached_tokens.disk"] == 0
    assert "offload.external_hit_pct" in {c.name for c in compute_claims(offloaded())}


def test_without_a_connector_nothing_is_claimed():
    flat = run(
        {
            "external_prefix_cache_queries_total": 0.0,
            "external_prefix_cache_hits_total": 0.0,
            "prompt_tokens_cached_by_source_total_device": 512.0,
        }
    )
    assert offload_claims(test_load.RECORDS, flat.samples) == []  # only the GPU's own cache: no tier to speak of
