"""A fleet's metrics: the list of sources `--engine-metrics` takes, the router's series mapped from worker URLs onto
replicas (on a real vllm-router 0.1.17 scrape), the fleet's row from its replicas' (counters across a restart and a
silence), discovery from the router's /workers, and the scraper against live servers that stop answering."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web

from loadproof.errors import UsageError
from loadproof.rundir.fleet_keys import policies_in
from loadproof.telemetry.fleet import Fleet, discover, fleet_of, parse_sources
from loadproof.telemetry.fleet_scraper import FleetScraper, FleetTotals, kind_of
from loadproof.telemetry.router_metrics import parse_router
from loadproof.telemetry.server_metrics import MetricsSource
from tests.unit.scenarios.test_target import serve

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "routers" / "vllm-router-0.1.17-round-robin.metrics.txt"
NAMES = {
    "num_requests_running": "vllm:num_requests_running",
    "request_success_total": "vllm:request_success_total",
    "kv_cache_usage_perc": "vllm:kv_cache_usage_perc",
}


def test_a_list_is_split_before_each_url_and_each_item_parsed_once():
    a, b = parse_sources("http://h:1/metrics, http://h:2")
    assert (a.url, b.url) == ("http://h:1/metrics", "http://h:2/metrics")
    # a Prometheus matcher keeps its commas: a comma starts an item only before a scheme
    (p,) = parse_sources("prometheus+http://p:9090?instance=a,b")
    assert p.matchers == (("instance", "a,b"),)
    with pytest.raises(ValueError, match=r"^item 2 \(ftp://h:2\): not an http\(s\) URL"):
        parse_sources("http://h:1,ftp://h:2")
    with pytest.raises(ValueError, match=r"^http://h:1/metrics is listed twice: one URL a replica$"):
        parse_sources("http://h:1, http://h:1/metrics")


def test_the_routers_series_land_on_replicas_by_the_workers_host_and_port():
    text = FIXTURE.read_text()
    # the replicas as --engine-metrics gives them: the router knows 18901 first, the list may name it second
    values = parse_router(text, ["http://127.0.0.1:18902/metrics", "http://127.0.0.1:18901/metrics"])
    assert values["router_processed_requests_replica-1"] == 4 and values["router_processed_requests_replica-0"] == 3
    assert values["router_policy_decisions_round_robin_replica-1"] == 4
    assert values["router_cb_success_replica-0"] == 3 and values["router_cb_success_replica-1"] == 4
    assert values["router_worker_health_replica-0"] == values["router_worker_health_replica-1"] == 1
    assert values["router_active_workers"] == 2 and values["router_requests"] == 7
    assert policies_in(values) == ["round_robin"]
    assert not any("127.0.0.1" in key for key in values)  # no URL survives into a key
    # a worker the fleet does not list is left out
    only = parse_router(text, ["http://127.0.0.1:18901"])
    assert "router_processed_requests_replica-1" not in only and only["router_processed_requests_replica-0"] == 4


def test_each_name_is_taken_from_the_replicas_by_its_kind():
    assert [kind_of(n) for n in ("prompt_tokens_total", "ttft_seconds_sum", "ttft_seconds_count")] == ["counter"] * 3
    assert kind_of("spec_decode_num_accepted_tokens_per_pos_total_0") == "counter"
    assert kind_of("kv_cache_usage_perc") == "ratio" and kind_of("lora_running_adapters") == "most"
    assert kind_of("num_requests_waiting") == "sum"


def test_the_fleets_row_never_goes_back_across_a_silence_and_a_restart():
    totals = FleetTotals(2)
    a = {"request_success_total": 10.0, "kv_cache_usage_perc": 0.2, "num_requests_running": 1.0}
    b = {"request_success_total": 20.0, "kv_cache_usage_perc": 0.6, "num_requests_running": 3.0}
    assert totals.add([a, b]) == {
        "request_success_total": 30.0,
        "kv_cache_usage_perc": 0.4,
        "num_requests_running": 4.0,
    }
    # replica 1 silent: its counter carried (20), its gauges out of the sum and the mean
    got = totals.add([dict(a, request_success_total=12.0), None])
    assert got == {"request_success_total": 32.0, "kv_cache_usage_perc": 0.2, "num_requests_running": 1.0}
    # replica 1 back, restarted at 2: counted on from the 20 it had reached
    got = totals.add([dict(a, request_success_total=12.0), dict(b, request_success_total=2.0)])
    assert got is not None and got["request_success_total"] == 12.0 + 20.0 + 2.0
    assert totals.add([None, None]) is None


@pytest.mark.asyncio
async def test_discovery_from_a_routers_workers_list():
    async def router(request: web.Request) -> web.Response:
        if request.path == "/workers":
            return web.json_response(
                {"workers": [{"url": "http://127.0.0.1:18901"}, {"url": "http://127.0.0.1:18902"}]}
            )
        return web.json_response({"detail": "Not Found"}, status=404)

    async def engine(request: web.Request) -> web.Response:
        return web.json_response({"detail": "Not Found"}, status=404)

    url, runner = await serve(router)
    plain, plain_runner = await serve(engine)
    try:
        assert await _in_thread(discover, url, None) == ("http://127.0.0.1:18901", "http://127.0.0.1:18902")
        fleet = await _in_thread(fleet_of, (), None, "round_robin", url, None)
        assert fleet is not None and fleet.discovered and fleet.policy == "round_robin"
        assert [s.url for s in fleet.replicas] == ["http://127.0.0.1:18901/metrics", "http://127.0.0.1:18902/metrics"]
        assert await _in_thread(discover, plain, None) is None  # an engine: not a fleet
        with pytest.raises(UsageError, match=r"^--router-policy needs a fleet: "):
            await _in_thread(fleet_of, (), None, "round_robin", plain, None)
    finally:
        await runner.cleanup()
        await plain_runner.cleanup()


async def _in_thread(function, *args):
    return await asyncio.to_thread(function, *args)  # urllib, blocking: off the loop that serves


def exposition(success: float, kv: float) -> str:
    return (
        "# TYPE vllm:request_success counter\n"
        f'vllm:request_success_total{{engine="0",finished_reason="stop"}} {success}\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        f'vllm:kv_cache_usage_perc{{engine="0"}} {kv}\n'
    )


@pytest.mark.asyncio
async def test_the_scraper_stores_each_replica_the_router_and_the_fleets_row():
    state = {"down": False}

    async def replica0(request: web.Request) -> web.Response:
        return web.Response(text=exposition(5, 0.2))

    async def replica1(request: web.Request) -> web.Response:
        if state["down"]:
            return web.Response(status=503, text="down")
        return web.Response(text=exposition(7, 0.4))

    url0, r0 = await serve(replica0)
    url1, r1 = await serve(replica1)
    port0 = url0.rsplit(":", 1)[1]

    async def router(request: web.Request) -> web.Response:
        return web.Response(text=f'vllm_router_processed_requests_total{{worker="http://127.0.0.1:{port0}"}} 9\n')

    urlr, rr = await serve(router)
    rows = []
    fleet = Fleet((MetricsSource.parse(url0), MetricsSource.parse(url1)), MetricsSource.parse(urlr))
    try:
        async with FleetScraper(fleet, NAMES, interval_s=None, sink=rows.append) as scraper:
            state["down"] = True
            await scraper.sample()
    finally:
        for runner in (r0, r1, rr):
            await runner.cleanup()
    sources = [r.source for r in rows]
    # entering, the sample in between, and leaving: each tick replica-0, replica-1, router, then the fleet's row
    assert sources == ["replica-0", "replica-1", "router", "engine"] * 3
    first, second = rows[:4], rows[4:8]
    assert first[1].values == {"request_success_total": 7.0, "kv_cache_usage_perc": 0.4, "up": 1.0}
    assert first[2].values == {"router_processed_requests_replica-0": 9.0, "up": 1.0}
    assert first[3].values == {"request_success_total": 12.0, "kv_cache_usage_perc": pytest.approx(0.3)}
    assert len({r.t_ns for r in first}) == 1  # one tick, one time
    assert second[1].values == {"up": 0.0}  # replica 1 did not answer: nothing else in its row
    assert second[3].values == {"request_success_total": 12.0, "kv_cache_usage_perc": 0.2}
    assert scraper.samples == [first[3], second[3], rows[11]]
