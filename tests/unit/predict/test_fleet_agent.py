"""A recorded agent on the virtual clock (`predict.fleet.Chain`, `predict.replay_agent`) and `plan --simulate replay
--format otel --replicas N --policy A,B`: each request after its dependencies (a fork, a join) and its wait, copies,
sessions routed by the policy, the requests sized as the scenario sizes them, and the fleet's hit rate with a hybrid
model's sliding window kept at checkpoints."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import loadproof.scenarios.agent_replay as scenario
from loadproof.errors import ConfigError
from loadproof.predict.fleet import Chain, checkpointed_hit_pct, fleet_open_loop
from loadproof.predict.replay import PREDICTOR, ReplayQuestion, predict_replay_trace
from loadproof.predict.replay_agent import SALT, agent_requests
from loadproof.predict.replay_fleet import predict_replay_fleet, show_fleet
from loadproof.predict.whatif import WhatIf, predict
from loadproof.routing import Router
from loadproof.scenarios.base import Target
from loadproof.scenarios.long_context import HaystackTarget
from loadproof.scenarios.replay_options import ReplayOptions
from loadproof.scenarios.target import Served
from loadproof.sim import text as sim_text
from loadproof.sim.config import SimConfig
from loadproof.workloads.agent_calls import agent_calls
from loadproof.workloads.haystack import HaystackBuilder
from loadproof.workloads.otel_trace import read_otel_trace
from loadproof.workloads.tokens import LocalTokens
from tests.unit.predict.test_fleet import Lines

CONFIG = SimConfig(block_size=16, num_gpu_blocks=4000, max_model_len=8192)
TRACE = str(Path(__file__).resolve().parents[2] / "fixtures" / "agent-traces" / "agent-trace.genai.jsonl")
NS = 1_000_000_000


def question(**values: Any) -> ReplayQuestion:
    return PREDICTOR.question({"trace": TRACE, "format": "otel", **values}, "plan --simulate replay")


def test_a_fork_and_a_join_are_kept_on_the_virtual_clock() -> None:
    """0, then 1 and 2 together (a fork, 1 after a 0.3 s tool), then 3 once both ended (a join); 4 has no
    dependency and its floor at 0.2 s; 5 depends on 4 but its floor (2 s) is later than 4's end."""
    deps = [[], [0], [0], [1, 2], [], [4]]
    waits = [0.0, 0.3, 0.0, 0.0, 0.0, 0.0]
    offsets = [0.0, 0.0, 0.0, 0.0, 0.2, 2.0]
    n = len(deps)
    hashes = [[hash((i, b)) for b in range(8)] for i in range(n)]
    fleet = fleet_open_loop(
        CONFIG,
        Router("round_robin", 2),
        offsets,
        [128] * n,
        [8] * n,
        hashes,
        [None] * n,
        scenario="load",
        chain=Chain(deps, waits),
    )
    r = fleet.records
    assert all(x.ok for x in r)
    end = [x.end_ns or 0 for x in r]
    assert r[1].send_ns == pytest.approx(end[0] + 0.3 * NS, abs=1000) and r[2].send_ns == pytest.approx(
        end[0], abs=1000
    )
    assert r[3].send_ns == pytest.approx(max(end[1], end[2]), abs=1000) and r[3].send_ns > max(end[1], end[2]) - 1000
    assert end[1] > end[2]  # the join waited for the later of the two
    assert r[4].send_ns == pytest.approx(0.2 * NS, abs=1000) and r[4].send_ns < end[0]  # its floor, 0 running
    assert end[4] < 2 * NS and r[5].send_ns == pytest.approx(2 * NS, abs=1000)  # never before its floor
    # each record's intended send is when it was allowed: no send lag without a cap
    assert all(x.intended_send_ns == pytest.approx(x.send_ns, abs=1000) for x in r)


def test_a_request_waiting_for_one_never_run_is_never_sent() -> None:
    tiny = CONFIG.model_copy(update={"num_gpu_blocks": 4})  # 64 tokens: the 128-token prompt never fits
    fleet = fleet_open_loop(
        tiny,
        Router("round_robin", 1),
        [0.0, 0.0],
        [128, 16],
        [4, 4],
        [[], []],
        [None, None],
        scenario="load",
        chain=Chain([[], [0]], [0.0, 0.0]),
    )
    assert [x.error_kind for x in fleet.records] == ["never_scheduled", "never_scheduled"]
    assert fleet.replica_of == [0, -1] and fleet.cached == [-1, -1]


def test_the_agent_is_sized_as_the_scenario_sizes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scenario's planner on a faked engine that counts as the simulator does, its salt the prediction's: the
    same prompt tokens, outputs, block ids, dependencies, waits and floors, request by request."""
    tokens = LocalTokens.load(sim_text.tokenizer_path())

    def haystack(target: Target, seed: int, probe: str = "") -> HaystackTarget:
        return HaystackTarget(target, HaystackBuilder(tokens, overhead_tokens=0, seed=seed, style="chat"), "fake")

    monkeypatch.setattr(scenario, "haystack_target", haystack)
    monkeypatch.setattr(
        scenario, "chat_prompt_counter", lambda t, k: (lambda m: tokens.count(sim_text.chat_prompt(m)), "fake")
    )
    monkeypatch.setattr(scenario.secrets, "token_hex", lambda n: SALT)
    opts = ReplayOptions(trace=TRACE, format="otel", copies=3, copy_interval_s=1.5, input_scale=2, block_tokens=16)
    target = Target(url="http://127.0.0.1:9", model="m", endpoint="chat", served=Served(max_model_len=8192))
    planned = scenario.AgentPlanner(target, opts, None).build()
    predicted = agent_requests(CONFIG, opts, None)
    assert predicted.inputs == planned.plan.text_tokens == [r.input_tokens for r in planned.requests]
    assert predicted.outputs == [r.output_tokens for r in planned.requests]
    assert predicted.plan.hash_ids == planned.plan.hash_ids
    assert predicted.chain.deps == planned.deps
    assert [round(w * NS) for w in predicted.chain.waits_s] == planned.wait_ns
    assert [round(o * NS) for o in predicted.offsets_s] == [r.offset_ns for r in planned.requests]
    assert predicted.sessions == planned.plan.sessions
    agent = planned.plan.agent
    assert agent is not None and predicted.tokens_per_char == pytest.approx(agent.tokens_per_char, abs=1e-6)


def test_copies_keep_their_order_and_the_session_header_keeps_each_on_one_replica() -> None:
    calls = agent_calls(read_otel_trace(TRACE))
    n, copies = len(calls), 5
    forecast = predict_replay_fleet(
        CONFIG,
        *question(
            copies=copies,
            copy_interval_s=2.0,
            session_header="x-session-id",
            replicas=2,
            policies="round_robin,consistent_hash",
        ),
    )
    assert forecast.num_requests == n * copies and forecast.sessions == copies
    assert any("fork" in c.links for c in calls) and any("join" in c.links for c in calls)
    by_policy = {p.policy: p for p in forecast.policies}
    for p in forecast.policies:
        r = p.fleet.records
        assert all(x.ok for x in r)
        for copy in range(copies):
            first = r[copy * n]
            assert first.send_ns == pytest.approx(2.0 * copy * NS, abs=1000)  # each copy at its start
            for j, call in enumerate(calls):  # no request before the end of a call it waits for (its copy's)
                i = copy * n + j
                assert all(r[i].send_ns >= (r[copy * n + d].end_ns or 0) for d in call.deps), (p.policy, i)
    sticky = by_policy["consistent_hash"].fleet.replica_of
    assert all(len({sticky[c * n + j] for j in range(n)}) == 1 for c in range(copies))  # a copy, one replica
    spread, sent = by_policy["round_robin"].fleet.replica_of, by_policy["round_robin"].fleet.records
    in_order = sorted(range(n * copies), key=lambda i: (sent[i].send_ns, i))
    assert [spread[i] for i in in_order] == [k % 2 for k in range(n * copies)]  # reads no header: alternates
    assert any(len({spread[c * n + j] for j in range(n)}) == 2 for c in range(copies))  # so a copy is split
    lines = Lines()
    show_fleet(forecast, "fleet", lines)
    said = "\n".join(lines.text)
    assert f"{copies} sessions in a header the router reads" in said
    assert "messages sized as run replay sizes them" in said and "the simulator's counts" in said
    assert "checkpointed" not in said  # the simulator's model keeps every block


def test_one_engine_is_a_fleet_of_one() -> None:
    one = predict_replay_trace(CONFIG, *question(copies=2, copy_interval_s=0.5)[:2])
    fleet = predict_replay_fleet(CONFIG, *question(copies=2, copy_interval_s=0.5, replicas=2, policies="cache_aware"))
    assert one.num_requests == fleet.num_requests and one.expected_hit_pct == fleet.expected_hit_pct
    assert 0 < one.modeled_hit_pct <= one.expected_hit_pct + 1e-9 and one.block_tokens == CONFIG.block_size


def test_the_sliding_window_kept_at_checkpoints_cuts_a_later_divergence() -> None:
    """A: 8 blocks; B: A's first 6, then its own; C: the same 6, then its own, each after the last ended. With a
    64-token window (4 blocks of 16) kept only before A's replay boundary (blocks 3-6), B's modelled hit of 6
    blocks has no run of 4 kept blocks: it computes them again and marks its junction (blocks 2-5), so C hits."""
    a = list(range(8))
    b, c = a[:6] + [100, 101], a[:6] + [200, 201]
    fleet = fleet_open_loop(
        CONFIG,
        Router("round_robin", 1),
        [0.0] * 3,
        [128] * 3,
        [2] * 3,
        [a, b, c],
        [None] * 3,
        scenario="load",
        chain=Chain([[], [0], [1]], [0.0] * 3),
    )
    assert fleet.cached == [0, 96, 96] and fleet.hit_pct == pytest.approx(100 * 192 / 384)
    assert checkpointed_hit_pct(fleet, [a, b, c], [128] * 3, 16, 64) == pytest.approx(100 * 96 / 384)
    # a window as long as the prompts: every block before A's boundary kept, B's hit runs from block 0
    assert checkpointed_hit_pct(fleet, [a, b, c], [128] * 3, 16, 128) == pytest.approx(100 * 192 / 384)


def test_the_fleet_shows_the_checkpointed_hits_beside_the_modelled() -> None:
    forecast = predict_replay_fleet(
        CONFIG,
        *question(copies=4, input_scale=4, replicas=2, policies="round_robin,cache_aware", engine_sliding_window=64),
    )
    assert forecast.window == 64
    for p in forecast.policies:
        assert p.checkpointed_pct is not None and 0 < p.checkpointed_pct <= p.fleet.hit_pct
    lines = Lines()
    show_fleet(forecast, "fleet", lines)
    assert "checkpointed: the hits left where each replica keeps" in "\n".join(lines.text)
    assert predict_replay_fleet(CONFIG, *question(replicas=2, engine_sliding_window=0)).window is None


def test_plan_counts_with_the_profiles_tokenizer_and_its_chat_template(tmp_path: Path) -> None:
    """`plan PROFILE` hands the profile's tokenizer to the prediction (WhatIf.tokenizer): the prompts are counted
    with its chat template, here `[role] content` lines, so every prompt is the simulator's count plus them."""
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(sim_text.tokenizer_path(), folder / "tokenizer.json")
    (folder / "chat_template.jinja").write_text(
        "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    )
    (folder / "config.json").write_text(json.dumps({"model_type": "none"}))
    values = {"trace": TRACE, "format": "otel", "replicas": 2, "policies": "round_robin"}
    lines = Lines()
    predict(CONFIG, WhatIf("replay", "plan --simulate replay", tokenizer=folder), values, lines)
    said = "\n".join(lines.text)
    assert "the model's tokenizer and chat template (chat_template.jinja) rendered here" in said
    own = agent_requests(CONFIG, ReplayOptions(trace=TRACE, format="otel"), folder)
    assert own.counted_by.startswith("the model's tokenizer")


@pytest.mark.parametrize(
    "values, problem",
    [
        ({"overhead_tokens": 3}, "--overhead-tokens: a recorded agent's prompts are counted whole"),
        ({"copies": 0}, "--copies"),
        ({"format": "mooncake", "copies": 2}, "--copies: for a recorded agent only"),
    ],
)
def test_bad_agent_options_are_one_line(values: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as caught:
        question(**values)
    assert "\n" not in str(caught.value)


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=120)


def test_the_commands_predict_a_recorded_agent() -> None:
    """`plan --simulate replay --format otel` on a fleet, and `sim predict-replay`, which passes every option's
    default (its --policy and --overhead-tokens included) without asking for a fleet."""
    agent = ("--trace", TRACE, "--format", "otel", "--copies", "3", "--session-header", "x-session-id")
    fleet = loadproof("plan", "sim-small", "--simulate", "replay", *agent, "--replicas", "2", "--policy", "round_robin")
    assert fleet.returncode == 0, fleet.stderr
    said = " ".join(fleet.stdout.split())  # the console wraps its lines
    assert "3 copies 0 s apart, pace deps" in said and "3 sessions in a header the router reads" in said
    one = loadproof("sim", "predict-replay", "sim-small", *agent)
    assert one.returncode == 0, one.stderr
    assert "messages sized as run replay sizes them" in " ".join(one.stdout.split())
    refused = loadproof("sim", "predict-replay", "sim-small", *agent, "--overhead-tokens", "4")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--overhead-tokens" in refused.stderr
