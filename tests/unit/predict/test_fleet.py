"""A fleet on the virtual clock (predict.fleet) and `plan --simulate replay --replicas N --policy A,B`
(predict.replay_fleet): N modeled engines behind a modelled router policy."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from loadproof.errors import ConfigError
from loadproof.predict.fleet import fleet_open_loop
from loadproof.predict.replay import PREDICTOR, ReplayQuestion
from loadproof.predict.replay_fleet import predict_replay_fleet, show_fleet
from loadproof.predict.virtual import open_loop
from loadproof.routing import Router
from loadproof.sim.assumptions import Assumption, Variant
from loadproof.sim.config import SimConfig

CONFIG = SimConfig(block_size=16, num_gpu_blocks=2000, max_model_len=8192)


def sessions_trace(path: Path, sessions: int = 11, turns: int = 6, gap_s: float = 0.5) -> Path:
    """A Bailian trace of `sessions` conversations taking turns: each turn is the last one's blocks and new ones,
    a child of the last turn (its session the first chat)."""
    rng = random.Random(5)
    ids: list[list[int]] = [[] for _ in range(sessions)]
    parents = [-1] * sessions
    rows, chat, fresh = [], 0, 1000
    for turn in range(1, turns + 1):
        for s in range(sessions):
            new = rng.randint(4, 10)
            ids[s] = ids[s] + list(range(fresh, fresh + new))
            fresh += new
            row: dict[str, object] = {
                "chat_id": chat,
                "parent_chat_id": parents[s],
                "timestamp": round(gap_s * chat, 3),
            }
            row |= {"input_length": 16 * len(ids[s]), "output_length": 8, "type": "text", "turn": turn}
            rows.append(row | {"hash_ids": list(ids[s])})
            parents[s], chat = chat, chat + 1
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def question(trace: Path, **values: object) -> ReplayQuestion:
    return PREDICTOR.question({"trace": str(trace), "format": "bailian", **values}, "plan --simulate replay")


class Lines:
    def __init__(self) -> None:
        self.text: list[str] = []

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        self.text += [title, " | ".join(header), *(" | ".join(r) for r in rows)]

    def line(self, text: str) -> None:
        self.text.append(text)

    def progress(self, text: str) -> None:
        pass


def test_a_fleet_of_one_predicts_what_one_engine_does() -> None:
    rng = random.Random(1)
    n = 60
    offsets = [0.05 * i for i in range(n)]
    inputs = [rng.randint(100, 900) for _ in range(n)]
    outputs = [rng.randint(4, 40) for _ in range(n)]
    hashes = [
        [hash(("shared", b)) for b in range(3)] + [hash((i, b)) for b in range(x // 16 - 3)]
        for i, x in enumerate(inputs)
    ]
    one = open_loop(CONFIG, offsets, inputs, outputs, scenario="load", hashes=hashes)
    fleet = fleet_open_loop(
        CONFIG, Router("round_robin", 1), offsets, inputs, outputs, hashes, [None] * n, scenario="load"
    )
    assert all(r.ok for r in fleet.records) and fleet.decisions == [n] and set(fleet.replica_of) == {0}
    assert (fleet.hits[0], fleet.queries[0]) == (one.prefix_cache_hits, one.prefix_cache_queries)
    ttft_one = sorted((r.first_token_ns or 0) - (r.intended_send_ns or 0) for r in one.records)
    ttft_fleet = sorted((r.first_token_ns or 0) - (r.intended_send_ns or 0) for r in fleet.records)
    # the same engine: the single loop only sends at a step's end, so each TTFT may differ by one step (~ms)
    assert all(abs(a - b) < 0.05e9 for a, b in zip(ttft_one, ttft_fleet, strict=True))


def test_the_router_sees_a_request_end_before_it_decides() -> None:
    """One request at a time (max_concurrency 1): cache_aware sees every replica idle each time and takes the
    first, so everything lands on replica 0; round robin alternates."""
    n = 8
    args = ([0.0] * n, [64] * n, [4] * n, [[hash((i, b)) for b in range(4)] for i in range(n)], [None] * n)
    aware = fleet_open_loop(CONFIG, Router("cache_aware", 2), *args, scenario="load", max_concurrency=1)
    assert aware.decisions == [n, 0]
    sends = [r.send_ns for r in aware.records]
    assert sends == sorted(sends) and all(b >= a.end_ns for a, b in zip(aware.records, sends[1:]))
    spread = fleet_open_loop(CONFIG, Router("round_robin", 2), *args, scenario="load", max_concurrency=1)
    assert spread.decisions == [4, 4] and spread.replica_of == [0, 1] * 4


def test_cache_aware_and_session_affinity_keep_the_sessions_hits(tmp_path: Path) -> None:
    trace = sessions_trace(tmp_path / "sessions.jsonl")
    policies = "round_robin,cache_aware,consistent_hash,sticky_least_loaded"
    blind = predict_replay_fleet(CONFIG, *question(trace, replicas=2, policies=policies))
    told = predict_replay_fleet(CONFIG, *question(trace, replicas=2, policies=policies, session_header="x-session-id"))
    hit = {p.policy: p.fleet.hit_pct for p in blind.policies}
    told_hit = {p.policy: p.fleet.hit_pct for p in told.policies}
    assert blind.num_requests == 66 and blind.sessions == 0 and told.sessions == 11
    # round robin splits each session's turns over the two replicas (11 sessions: each turn changes replica);
    # cache_aware follows the prefix, and, the fleet lightly loaded, puts every miss on replica 0
    assert hit["cache_aware"] > hit["round_robin"] + 15
    assert hit["cache_aware"] == pytest.approx(blind.expected_hit_pct, abs=0.5)
    assert blind.policies[1].fleet.decisions == [66, 0]
    # a session header keeps each session on one replica: every hit one engine would have, spread over both
    for policy in ("consistent_hash", "sticky_least_loaded"):
        assert told_hit[policy] == pytest.approx(told.expected_hit_pct, abs=0.5)
        assert told_hit[policy] > hit[policy] + 15  # without it: each body its own key, each request balanced
        assert min(next(p for p in told.policies if p.policy == policy).fleet.decisions) > 0
    assert told_hit["round_robin"] == hit["round_robin"]  # round robin reads no header
    lines = Lines()
    show_fleet(told, "fleet", lines)
    said = "\n".join(lines.text)
    assert "cache_aware against round_robin: prefix hits +" in said and "11 sessions in a header" in said


def test_a_header_the_router_does_not_read_is_no_session(tmp_path: Path) -> None:
    trace = sessions_trace(tmp_path / "sessions.jsonl", sessions=3, turns=2)
    forecast = predict_replay_fleet(
        CONFIG, *question(trace, replicas=2, policies="consistent_hash", session_header="x-my-session")
    )
    assert forecast.sessions == 0


@pytest.mark.parametrize(
    "values, problem",
    [
        ({"policies": "round_robin"}, "--policy predicts a fleet: give --replicas 2 or more"),
        ({"replicas": 2, "policies": "round_robin,fastest"}, "router policies must be among random, round_robin"),
        ({"replicas": 0}, "--replicas"),
    ],
)
def test_bad_fleet_options_are_one_line(tmp_path: Path, values: dict[str, object], problem: str) -> None:
    trace = sessions_trace(tmp_path / "sessions.jsonl", sessions=2, turns=1)
    with pytest.raises(ConfigError, match=problem) as caught:
        question(trace, **values)
    assert "\n" not in str(caught.value)


def test_each_policy_has_its_figures_ranged_over_the_open_assumptions(tmp_path: Path) -> None:
    trace = sessions_trace(tmp_path / "sessions.jsonl", sessions=5, turns=3, gap_s=0.01)
    slower = CONFIG.cost.prefill_s_per_token * 3
    share = Assumption(
        name="prefill_attention_share",
        point=0.0,
        variants=[Variant(value=0.0), Variant(value=0.5, overrides={"cost.prefill_s_per_token": slower})],
    )
    config = CONFIG.model_copy(update={"assumptions": [share]})
    forecast = predict_replay_fleet(config, *question(trace, replicas=2, policies="round_robin,cache_aware"))
    for policy in forecast.policies:
        p50 = policy.ranges["load.ttft_s.p50"]
        assert p50.low == p50.point < p50.high and p50.driver == "prefill_attention_share"
        assert p50.point == policy.run.value("load.ttft_s.p50")
    lines = Lines()
    show_fleet(forecast, "fleet", lines)
    assert any(f"{forecast.policies[0].ranges['load.ttft_s.p50'].high:.3f}]" in line for line in lines.text)
