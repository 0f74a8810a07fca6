"""A fleet's claims from hand-built runs (tests/unit/metrics/fleet_runs.py): per replica, for the fleet, the
recovery timeline of a replica lost and back, and the expected prefix hits under the router's policy, each figure
worked out by hand beside its assertion."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.figures import LinePlot, tables_of
from loadproof.metrics.fleet import fleet_claims
from loadproof.metrics.fleet_figures import fleet_panels
from loadproof.metrics.fleet_rows import growth
from loadproof.rundir import EngineSample
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics import fleet_runs, test_sessions

S = fleet_runs.S


def values(run: Run) -> dict[str, object]:
    return {c.name: c.value for c in fleet_claims(run)}


def docs_runs(tmp_path: Path) -> list[Run]:
    """Runs reaching every fleet claim (test_docs_formulas): the outage, and replays under a policy its model places
    and one it only groups, and one without a policy."""
    return [
        fleet_runs.outage_run(),
        fleet_runs.replay_run(),
        fleet_runs.replay_run(policy="consistent_hash"),
        fleet_runs.replay_run(policy=None, router_before=0),
        sessions_run("round_robin"),
    ]


def rows(*points: tuple[float, float]) -> list[EngineSample]:
    return [EngineSample(t_ns=round(t * S), values={"c_total": v}) for t, v in points]


def test_a_counters_growth_counts_the_value_it_restarted_to():
    # 10 -> 15 (+5), restart: 3 (+3), 3 -> 7 (+4): 12, never the 10 - 3 the raw difference says
    assert growth(rows((0, 10), (1, 15), (2, 3), (3, 7)), "c_total", 0) == 12
    # from the last row at or before the start; to the last at or before the end
    assert growth(rows((0, 10), (1, 15), (2, 3), (3, 7)), "c_total", S, 2 * S) == 3
    assert growth(rows((1, 10), (2, 15)), "c_total", S // 2) is None  # nothing at or before the start


def test_each_replica_and_the_fleet_over_a_replica_lost_and_restarted():
    got = values(fleet_runs.outage_run())
    # replica 0: 100 -> 120 finished; replica 1: 50 -> 57, restarted (its first row 1: counted), then 1 -> 8
    assert got["fleet.replica-0.requests"] == 20
    assert got["fleet.replica-1.requests"] == 7 + 1 + 7
    assert got["fleet.requests"] == 35
    # hits: replica 0 8x50 + 5x20 + 7x60 = 920 of 2000; replica 1 7x80 = 560 of 700, restart 10 of 100, then
    # 7x30 = 210 of 700: 780 of 1500
    assert got["fleet.replica-0.prefix_hit_pct"] == pytest.approx(46.0)
    assert got["fleet.replica-1.prefix_hit_pct"] == pytest.approx(52.0)
    assert got["fleet.prefix_hit_pct"] == pytest.approx(100 * 1700 / 3500)
    # KV 0.20 .. 0.39 over the rows from 0 s to 19 s (the last end, 19.5 s); waiting 1 at 8..12 s: 5 of 20 rows
    assert got["fleet.replica-0.kv_usage_max_pct"] == pytest.approx(39.0)
    assert got["fleet.replica-0.kv_usage_mean_pct"] == pytest.approx(29.5)
    assert got["fleet.replica-0.waiting_max"] == 1.0 and got["fleet.replica-0.waiting_mean"] == pytest.approx(0.25)
    # the router: replica 0 sent 0 -> 21; replica 1 0 -> 9, then 9 -> 17 from 14 s: 17
    assert got["fleet.replica-0.router_requests"] == 21 and got["fleet.replica-1.router_requests"] == 17
    # the failures and the retries, shown from their first count on, counted from 0
    assert got["fleet.replica-1.router_failures"] == 3 and got["fleet.router.retries"] == 3
    # balance: 20 and 15 of 35: 20/35 x 2 = 1.143; mean 17.5, population sd 2.5: cv 0.143
    assert got["fleet.balance.max_share_over_even"] == pytest.approx(40 / 35)
    assert got["fleet.balance.cv"] == pytest.approx(2.5 / 17.5)
    assert got["fleet.balance.shares"] == "replica-0 57.1%, replica-1 42.9%"


def test_the_recovery_timeline_of_the_replica_lost():
    got = values(fleet_runs.outage_run())
    base = "fleet.replica-1.outage1"
    assert got[f"{base}.silent_from_s"] == pytest.approx(8.0)
    assert got[f"{base}.back_s"] == pytest.approx(13.0) and got[f"{base}.silent_s"] == pytest.approx(5.0)
    assert got[f"{base}.restarted"] is True
    # the router: sent 7 -> 9 over [7 s, 13 s], the last growth at 9 s, unhealthy at 10 s, again from 14 s
    assert got[f"{base}.router_sent"] == 2 and got[f"{base}.router_last_sent_s"] == pytest.approx(9.0)
    assert got[f"{base}.router_unhealthy_s"] == pytest.approx(10.0)
    assert got[f"{base}.router_cb_open_s"] == pytest.approx(11.0)
    assert got[f"{base}.router_resumed_s"] == pytest.approx(14.0)
    assert got[f"{base}.router_failures"] == 3
    # requests ending in [7 s, 13 s]: those sent at 7..12 s (ends 7.5..12.5 s), two failed
    assert got[f"{base}.finished_requests"] == 4 and got[f"{base}.failed_requests"] == 2
    assert got[f"{base}.errors"] == "ConnectError 2"
    assert not any(name.startswith("fleet.replica-0.outage") for name in got)
    # around it: replica 0 50 % before, 25 % during (150 of 600), 60 % after; replica 1 80 %, its restart's
    # first row 10 %, 30 % after
    for replica, phases in (("replica-0", (50.0, 25.0, 60.0)), ("replica-1", (80.0, 10.0, 30.0))):
        for phase, expected in zip(("before_outage", "during_outage", "after_outage"), phases):
            assert got[f"fleet.{replica}.prefix_hit_pct.{phase}"] == pytest.approx(expected), (replica, phase)


def test_a_run_without_replica_rows_has_no_fleet_claims():
    run = fleet_runs.outage_run()
    run.fleet_samples = []
    assert fleet_claims(run) == []
    assert not any(c.name.startswith("fleet.") for c in compute_claims(run))


def test_round_robin_places_each_request_and_each_replicas_expectation_is_beside_its_counters():
    got = values(fleet_runs.replay_run())
    # requests i -> replica i mod 2: replica 0 takes A B A B, so does replica 1: each first A and B cold, each
    # second one hits its 3 whole leading blocks (63 + 1 tokens: (64 - 1) // 16 = 3): 96 of 4 x 64 = 256
    for i in (0, 1):
        assert got[f"fleet.replica-{i}.requests.expected"] == 4
        assert got[f"fleet.replica-{i}.prefix_hit_pct.expected"] == pytest.approx(37.5)
    assert got["fleet.prefix_hit_pct.expected"] == pytest.approx(37.5)
    # measured: 96 of 256 and 80 of 256
    assert got["fleet.replica-1.prefix_hit_pct.measured_minus_expected_pp"] == pytest.approx(31.25 - 37.5)
    assert got["fleet.prefix_hit_pct.measured_minus_expected_pp"] == pytest.approx(100 * 176 / 512 - 37.5)
    assert got["fleet.expected.policy"].startswith("round_robin (--router-policy); each replica compared")
    # the router rendered no prompt: 8 lookups without tokens, counted from 0 (the series shows from its first count)
    assert got["fleet.router.prefix_decisions.missing_tokens"] == 8


def test_round_robin_is_turned_as_far_as_the_router_had_gone_before_the_run():
    # the router had sent 1 request before: request 0 goes to replica 1. Sessions A A B B A A B B become
    # replica 1: A B A B, replica 0: A B A B: the same counts, each replica's own
    plain, turned = values(fleet_runs.replay_run()), values(fleet_runs.replay_run(router_before=1))
    assert turned["fleet.replica-0.requests.expected"] == plain["fleet.replica-1.requests.expected"] == 4
    # sessions A A A A A B A B: the even requests are A A A A (3 hits of 48: 144 of 256), the odd ones A A B B
    # (2 hits: 96 of 256); turned by one, replica 0 takes the odd ones
    ids = [fleet_runs.BLOCKS[s] for s in "AAAAABAB"]
    plain = values(fleet_runs.replay_run(hash_ids=ids))
    turned = values(fleet_runs.replay_run(router_before=1, hash_ids=ids))
    assert plain["fleet.replica-0.prefix_hit_pct.expected"] == pytest.approx(100 * 144 / 256)
    assert plain["fleet.replica-1.prefix_hit_pct.expected"] == pytest.approx(100 * 96 / 256)
    assert turned["fleet.replica-0.prefix_hit_pct.expected"] == pytest.approx(100 * 96 / 256)
    assert turned["fleet.replica-1.prefix_hit_pct.expected"] == pytest.approx(100 * 144 / 256)


def test_round_robin_starts_where_the_routers_first_request_of_the_run_went():
    # vllm-router turns its round robin on requests it does not count (a GET /v1/models): its count before the run
    # (0) says replica 0, its counters' first rise in the run says replica 1, and the first rise decides
    ids = [fleet_runs.BLOCKS[s] for s in "AAAAABAB"]
    got = values(fleet_runs.replay_run(first=1, hash_ids=ids))
    assert got["fleet.replica-0.prefix_hit_pct.expected"] == pytest.approx(100 * 96 / 256)
    assert got["fleet.replica-1.prefix_hit_pct.expected"] == pytest.approx(100 * 144 / 256)
    got = values(fleet_runs.replay_run(router_before=1, first=0, hash_ids=ids))
    assert got["fleet.replica-0.prefix_hit_pct.expected"] == pytest.approx(100 * 144 / 256)


def test_cache_aware_keeps_a_prefix_where_it_is():
    got = values(fleet_runs.replay_run(policy="cache_aware"))
    # one request at a time: every load 0, a miss goes to the first replica, a match above 0.3 stays: all on
    # replica 0, which hits every repeat: 6 x 48 of 8 x 64
    assert got["fleet.replica-0.requests.expected"] == 8 and got["fleet.replica-1.requests.expected"] == 0
    assert got["fleet.replica-0.prefix_hit_pct.expected"] == pytest.approx(100 * 288 / 512)
    assert "fleet.replica-1.prefix_hit_pct.expected" not in got  # it was sent nothing
    assert got["fleet.prefix_hit_pct.expected"] == pytest.approx(100 * 288 / 512)


def test_consistent_hash_compares_the_fleet_alone():
    got = values(fleet_runs.replay_run(policy="consistent_hash"))
    assert "fleet.prefix_hit_pct.expected" in got
    assert not any(name.endswith(".expected") and name.startswith("fleet.replica-") for name in got)
    assert got["fleet.expected.policy"].endswith("the fleet's totals compared only")


def test_the_policy_comes_from_the_routers_decisions_without_router_policy():
    got = values(fleet_runs.replay_run(policy=None))
    assert got["fleet.expected.policy"].startswith("round_robin (the router's vllm_router_policy_decisions_total)")
    assert got["fleet.router.policy"] == "round_robin"


def test_no_expectation_without_a_cache_size():
    run = fleet_runs.replay_run()
    assert run.manifest.target.fleet is not None
    run.manifest.target.fleet.replicas[1].num_blocks = None
    assert values(run)["fleet.expected.skipped"] == "a replica's /metrics gave no KV cache size (cache_config_info)"


def test_the_report_panels_show_each_replica_and_the_recovery():
    run = fleet_runs.outage_run()
    claims = compute_claims(run)
    panels = fleet_panels(run, claims)
    tables = {t.title: t for t in tables_of(panels)}
    replicas = tables["Fleet: the replicas"]
    assert [r[0] for r in replicas.rows] == ["replica-0", "replica-1"]
    assert replicas.rows[1][replicas.header.index("requests (engine)")] == "15"
    recovery = [what for _, what in tables["Fleet: a replica lost"].rows]
    assert recovery[:3] == [
        "replica-1: its /metrics stopped answering",
        "replica-1: the router's last row still sending it requests",
        "replica-1: the router marked it unhealthy",
    ]
    assert recovery[3:6] == [
        "replica-1: the router's circuit breaker for it opened",
        "replica-1: its /metrics answered again",
        "replica-1: the router sent it requests again",
    ]
    assert recovery[6].startswith("replica-1, outage 1: restarted: yes; requests the router sent it meanwhile 2")
    around = tables["Fleet: prefix hits around the outage"]
    assert around.rows[0] == ["replica-0", "50.00", "25.00", "60.00"]
    assert {p.key for p in panels if isinstance(p, LinePlot)} == {"fleet-requests", "fleet-prefix-hits"}


def sessions_run(policy: str, header: str | None = None) -> Run:
    """test_sessions' turns (user 1's second failed) through two replicas of blocks of 16 tokens."""
    plan = msgspec.structs.replace(
        test_sessions.PLAN, block_tokens=16, session_header=header, session_ids=["s-u0", "s-u1"]
    )
    manifest = {
        "scenario": "sessions",
        "plan": msgspec.to_builtins(plan),
        "target": {"url": "http://127.0.0.1:18910", "fleet": fleet_runs.fleet_info(policy)},
    }
    rows = [
        fleet_runs.row(t, f"replica-{i}", {"prefix_cache_hits_total": 0.0, "prefix_cache_queries_total": 0.0})
        for t in (-60, 0)
        for i in (0, 1)
    ]
    return rv.run_of(None, manifest, test_sessions.RECORDS, samples=rows)


def test_a_sessions_run_expected_per_replica_under_round_robin_and_a_session_header():
    # sent in order: u0 t0 (100 tokens), u1 t0 (100), u0 t1 (130), u0 t2 (160): round robin puts u0's t0 and t1 on
    # replica 0 (t1 hits u0's 100 // 16 = 6 whole blocks: 96), u1's t0 and u0's t2 on replica 1 (nothing to hit)
    got = values(sessions_run("round_robin"))
    assert got["fleet.replica-0.prefix_hit_pct.expected"] == pytest.approx(100 * 96 / 230)
    assert got["fleet.replica-1.prefix_hit_pct.expected"] == 0.0
    assert got["fleet.prefix_hit_pct.expected"] == pytest.approx(100 * 96 / 490)
    # consistent_hash on x-session-id: each user on one replica: u0's t1 hits 96, its t2 130 // 16 = 8 blocks: 128
    got = values(sessions_run("consistent_hash", header="x-session-id"))
    assert got["fleet.prefix_hit_pct.expected"] == pytest.approx(100 * 224 / 490)


def test_a_replays_sessions_keep_each_on_one_replica_under_consistent_hash():
    # sessions A A B B A A B B as the plan's; consistent_hash keeps each on one replica: every repeat hits 48 of 64
    sessions = list(fleet_runs.SESSIONS)
    read = values(fleet_runs.replay_run("consistent_hash", session_header="x-session-id", sessions=sessions))
    assert read["fleet.prefix_hit_pct.expected"] == pytest.approx(100 * 6 * 48 / 512)
