"""Scale-out of `run load` (scenarios/load/scaleout/): the split, the clock alignment and its bound, the merge,
the Ray hub, and a worker's spool read back. The processes and the Ray cluster themselves are in
tests/integration/test_load_workers.py."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from loadproof.client import RequestSpec
from loadproof.errors import UsageError
from loadproof.records import RequestRecord
from loadproof.scenarios.load.scaleout.clock import (
    ClockOffset,
    align,
    alignment_bound_ns,
    measure_offset,
    merge,
    shift_ns,
    to_worker_clock,
)
from loadproof.scenarios.load.scaleout.parent import split_concurrency, split_schedule
from loadproof.scenarios.load.scaleout.protocol import read_spool
from loadproof.scenarios.load.scaleout.ray_tasks import RayHub, RayTasks, _host_port
from loadproof.scenarios.load.schedule import Planned
from loadproof.store.run_dir import RunWriter


def planned(n: int) -> list[Planned]:
    return [
        Planned(i, i * 1_000_000, RequestSpec(request_id=f"r{i}", endpoint="/v1/completions", body=b"{}"), 10, 2)
        for i in range(n)
    ]


def test_the_schedule_is_dealt_round_robin_and_every_request_goes_to_exactly_one_worker():
    shards = split_schedule(planned(11), 3)
    assert [[p.index for p in shard] for shard in shards] == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8]]
    # every worker covers the whole span at 1/N of the rate: its first and last offsets are near the ends
    assert all(shard[0].offset_ns < 3_000_000 and shard[-1].offset_ns >= 8_000_000 for shard in shards)
    assert sorted(p.index for shard in shards for p in shard) == list(range(11))
    with pytest.raises(ValueError):
        split_schedule(planned(3), 0)


def test_a_concurrency_cap_is_shared_out_without_exceeding_it():
    assert split_concurrency(None, 3) == [None, None, None]
    assert split_concurrency(10, 3) == [4, 3, 3]
    assert split_concurrency(4, 4) == [1, 1, 1, 1]
    for cap, n in itertools.product(range(1, 30), range(1, 8)):
        if cap >= n:
            shares = split_concurrency(cap, n)
            counts = [s for s in shares if s is not None]  # an int cap gives no None
            assert counts == shares and sum(counts) == cap and max(counts) - min(counts) <= 1 and min(counts) >= 1
    with pytest.raises(ValueError, match="no slot"):
        split_concurrency(2, 3)


def scripted(values: list[int]):
    it = iter(values)
    return lambda: next(it)


def test_the_offset_comes_from_the_tightest_bracket_and_its_error_is_half_of_it():
    # three readings (mono a, wall, mono b): brackets 100, 10 and 40 ns; the 10 ns one is kept
    mono = scripted([1_000, 1_100, 2_000, 2_010, 3_000, 3_040])
    wall = scripted([50_000, 51_004, 52_020])
    clock = measure_offset(samples=3, wall=wall, mono=mono)
    assert clock == ClockOffset(offset_ns=51_004 - 2_005, bracket_ns=10)
    assert clock.error_ns == 5
    odd = ClockOffset(offset_ns=0, bracket_ns=7)
    assert odd.error_ns == 4  # ceil(7 / 2): the bound is never rounded down


def test_a_time_mapped_onto_the_parent_clock_is_within_the_stated_bound():
    # a true offset for each process; its measurement is off by at most half its bracket
    true_worker, true_parent = 7_000_000_123, 5_000_000_456
    worker = ClockOffset(offset_ns=true_worker + 30, bracket_ns=61)  # 30 <= ceil(61 / 2)
    parent = ClockOffset(offset_ns=true_parent - 20, bracket_ns=40)
    bound = alignment_bound_ns(worker, parent)
    assert bound == 31 + 20
    event_wall = 9_000_000_000_000
    t_worker, t_parent = event_wall - true_worker, event_wall - true_parent  # one event on both monotonic clocks
    assert abs(t_worker + shift_ns(worker, parent) - t_parent) <= bound
    # the agreed start, turned into each clock, is the same instant within the same bound
    start_wall = event_wall + 5_000
    assert (
        abs((to_worker_clock(start_wall, worker) + shift_ns(worker, parent)) - to_worker_clock(start_wall, parent))
        <= bound
    )
    # and a bound too small fails the check: the test can fail
    assert abs(t_worker + shift_ns(worker, parent) + bound + 1 - t_parent) > bound


def record(i: int, end: int, worker: int, batch: int = 0) -> RequestRecord:
    return RequestRecord(
        request_id=f"r{i}",
        endpoint="/v1/completions",
        ok=True,
        send_ns=end - 100,
        first_token_ns=end - 50,
        last_token_ns=end - 10,
        end_ns=end,
        intended_send_ns=end - 120,
        dispatch_ns=end - 110,
        chunk_ns=[end - 50, end - 10],
        worker=worker,
        batch=batch,
    )


def test_records_are_shifted_onto_the_parent_clock_and_merged_in_order_of_their_end():
    a = [record(0, 1_000, 0), record(2, 3_000, 0)]
    b = [record(1, 500, 1), record(3, 2_900, 1)]
    merged = merge([(a, 0), (b, 1_000)])
    assert [(r.request_id, r.end_ns) for r in merged] == [("r0", 1_000), ("r1", 1_500), ("r2", 3_000), ("r3", 3_900)]
    r1 = merged[1]
    assert (r1.send_ns, r1.first_token_ns, r1.intended_send_ns, r1.dispatch_ns, r1.chunk_ns) == (
        1_400,
        1_450,
        1_380,
        1_390,
        [1_450, 1_490],
    )
    never = RequestRecord(request_id="x", endpoint="/v1/completions", first_token_ns=None, send_ns=0)
    assert align(never, 99).first_token_ns is None and never.send_ns == 0  # a time never taken stays untaken


def test_a_worker_spool_reads_back_with_its_chunk_times(tmp_path: Path):
    writer = RunWriter(tmp_path / "records")
    for rec in (record(0, 1_000, 1), record(1, 2_000, 1)):
        writer.append(rec)
    writer.close()
    back = read_spool(tmp_path / "records")
    assert [(r.request_id, r.worker, r.chunk_ns) for r in back] == [("r0", 1, [950, 990]), ("r1", 1, [1_950, 1_990])]


def test_the_ray_hub_hands_over_what_was_posted_once_and_carries_the_stop_flag():
    hub = RayHub()
    assert hub.post(0, "clock", b"{}") is False
    assert hub.post(1, "requests", b"") is False  # nothing new: nothing kept
    assert hub.post(1, "requests", b'{"a":1}\n') is False
    assert hub.take() == [(0, "clock", b"{}"), (1, "requests", b'{"a":1}\n')]
    assert hub.take() == []
    hub.stop()
    assert hub.post(0, "requests", b"x\n") is True


def test_ray_tasks_are_placed_round_robin_over_the_nodes_cpus():
    tasks = RayTasks("auto")
    tasks.nodes, tasks.cpus = ["a", "b", "c"], [2, 1, 3]
    assert [tasks._node_of(k) for k in range(6)] == ["a", "b", "c", "a", "c", "c"]
    assert tasks.count(None) == 3 and tasks.count(6) == 6
    with pytest.raises(UsageError, match="--workers 7: the Ray cluster at auto has 6 CPU"):
        tasks.count(7)


@pytest.mark.parametrize(
    ("address", "host", "port"),
    [
        ("127.0.0.1:6379", "127.0.0.1", 6379),
        ("ray://10.0.0.5:10001", "10.0.0.5", 10001),
        ("auto", "auto", None),
        ("[::1]:6379", "::1", 6379),
        ("head.example:abc", "head.example:abc", None),
    ],
)
def test_the_ray_address_is_split_into_host_and_port(address: str, host: str, port: int | None):
    assert _host_port(address) == (host, port)
