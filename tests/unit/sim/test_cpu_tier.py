"""The simulator's CPU tier (vLLM's --kv-offloading-size): a session's prefix evicted from the GPU's cache
comes back from the tier, counted as vLLM's connector counts it and paid for in load time; without the tier
the same turn recomputes it."""

from __future__ import annotations

import pytest

from loadproof.engines.vllm import VLLM_METRICS
from loadproof.sim.metrics import render_metrics
from loadproof.sim.scheduler import Scheduler
from loadproof.telemetry.server_metrics import parse_metrics
from tests.unit.sim.test_scheduler import config, request, run_steps

S_PER_TOKEN = 1e-4


def second_turn(cpu_blocks: int) -> tuple[Scheduler, float]:
    """Session a (480 tokens) answers; three others of 480 evict it from the 64-block GPU cache; then a's
    second turn (its 480 tokens and 160 more) arrives. Returns the scheduler and that turn's first step's time."""
    s = Scheduler(config(num_gpu_blocks=64, cpu_tier_blocks=cpu_blocks, cpu_tier_s_per_token=S_PER_TOKEN))
    s.add(request("a", 480, max_tokens=2))
    run_steps(s)
    for other in ("b", "c", "d"):
        s.add(request(other, 480, max_tokens=2))
        run_steps(s)
    s.add(request("a-turn2", 640, max_tokens=2, salt="a"))
    step = s.schedule()
    return s, s.step_duration_s(step)


def test_an_evicted_prefix_comes_back_from_the_cpu_tier_and_costs_its_transfer():
    tier, with_tier = second_turn(cpu_blocks=256)
    plain, without = second_turn(cpu_blocks=0)
    assert tier.counters.external_hits == 480 and tier.counters.prefix_cache_hits == 0  # all of it from the tier
    assert tier.counters.external_queries == 4 * 480 + 640  # each admission asks for what the GPU lacked
    assert plain.counters.external_hits == 0
    turn = [r for r in tier.requests.values() if r.request_id == "a-turn2"][0]
    assert turn.cached_tokens == 480
    # the step loads 480 tokens' KV and prefills the 160 new ones; without the tier it prefills 256 (the budget)
    assert with_tier == pytest.approx(tier.config.cost.step_s([(480, 160)], []) + 480 * S_PER_TOKEN)
    assert without == pytest.approx(plain.config.cost.step_s([(0, 256)], []))


def test_a_full_tier_forgets_the_least_recently_used():
    small, _ = second_turn(cpu_blocks=60)  # holds the last 60 blocks stored: c and d, not a
    assert small.counters.external_hits == 0


def test_the_tiers_counters_are_served_as_vllm_names_them():
    s, _ = second_turn(cpu_blocks=256)
    values = parse_metrics(render_metrics("sim", s), VLLM_METRICS)
    assert values["external_prefix_cache_hits_total"] == 480
    assert values["prompt_tokens_cached_by_source_total_host"] == 480
    assert "external_prefix_cache_hits_total" not in parse_metrics(
        render_metrics("sim", second_turn(0)[0]), VLLM_METRICS
    )
