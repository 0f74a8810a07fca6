"""A failed reading of the engine's metrics carries the source's HTTP status as a field, so callers decide on
the status (a 401 is a wrong --engine-metrics or key; a refused connection may be a restart), never on the
message text; the message stays what users read."""

from __future__ import annotations

import pytest
from aiohttp import web

from loadproof.errors import LoadproofError, MetricsUnavailable
from loadproof.telemetry.server_metrics import MetricsScraper, MetricsSource
from tests.unit.scenarios.test_target import serve

NAMES = {"num_requests_running": "vllm:num_requests_running"}


def answering(status: int, body: object):
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(body, status=status)

    return handler


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "prefix, status, body, message",
    [
        ("", 401, {"error": "missing or invalid API key"}, "HTTP 401"),
        ("", 404, {"detail": "Not Found"}, "HTTP 404"),
        ("prometheus+", 400, {"status": "error", "error": "parse error"}, "HTTP 400: parse error"),
        ("prometheus+", 404, "<html>", "HTTP 404: not a Prometheus answer"),
    ],
)
async def test_a_refused_reading_carries_the_status_and_keeps_its_message(prefix, status, body, message):
    url, runner = await serve(answering(status, body))
    try:
        async with MetricsScraper(MetricsSource.parse(prefix + url + "/metrics"), NAMES, interval_s=None) as scraper:
            assert scraper.samples == [] and scraper.errors == 1
            assert isinstance(scraper.last_failure, MetricsUnavailable)
            assert scraper.last_failure.status == status
            assert scraper.last_error == message
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_a_source_that_never_answers_has_no_status():
    url, runner = await serve(answering(200, {}))
    await runner.cleanup()  # nothing listens there any more
    async with MetricsScraper(MetricsSource.parse(url + "/metrics"), NAMES, interval_s=None) as scraper:
        assert scraper.last_failure is not None and scraper.last_failure.status is None
        assert scraper.last_error == "ClientConnectorError"
    assert issubclass(MetricsUnavailable, LoadproofError)
