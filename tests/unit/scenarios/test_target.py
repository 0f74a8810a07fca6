"""The target as an object: where requests go, where the engine's metrics come from (a /metrics URL or a
Prometheus server's query API, read on real HTTP here), and where exact-length prompts count the tokens
the engine adds (the chat template rendered locally)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp import web

from loadproof.errors import ConfigError, UsageError
from loadproof.scenarios import lifecycle
from loadproof.scenarios.base import Target
from loadproof.scenarios.options import from_cli
from loadproof.scenarios.token_counts import ChatTemplate
from loadproof.telemetry import server_metrics
from loadproof.telemetry.server_metrics import MetricsScraper, MetricsSource

NAMES = {"num_requests_running": "vllm:num_requests_running", "prompt_tokens_total": "vllm:prompt_tokens_total"}


@pytest.mark.parametrize(
    ("spec", "kind", "url", "matchers"),
    [
        ("http://engine:8000", "exposition", "http://engine:8000/metrics", ()),
        ("http://engine:8000/", "exposition", "http://engine:8000/metrics", ()),
        ("https://relay.example/engine/metrics", "exposition", "https://relay.example/engine/metrics", ()),
        ("http://gw/llm/metrics?x=1", "exposition", "http://gw/llm/metrics?x=1", ()),
        (
            "prometheus+http://prom:9090?job=vllm&instance=a:8000",
            "prometheus",
            "http://prom:9090",
            (("job", "vllm"), ("instance", "a:8000")),
        ),
        ("prometheus+https://prom/api-prefix/", "prometheus", "https://prom/api-prefix/", ()),
    ],
)
def test_metrics_sources_parse(spec, kind, url, matchers):
    source = MetricsSource.parse(spec)
    assert (source.kind, source.url, source.matchers) == (kind, url, matchers)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("relay:9", r"not an http\(s\) URL"),
        ("ftp://h/metrics", r"not an http\(s\) URL"),
        ("prometheus+file:///x", r"not an http\(s\) URL"),
        ("prometheus+http://p?__name__=up", "'__name__' is not a label"),
        ("prometheus+http://p?job-name=x", "'job-name' is not a label"),
        ("http://h/metrics#x", "no #fragment"),
    ],
)
def test_a_bad_metrics_source_is_refused_with_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        MetricsSource.parse(spec)


def test_the_target_options_check_the_metrics_source_and_the_token_counts_offline():
    base = {"url": "http://h:1"}
    with pytest.raises(ConfigError, match=r"^--engine-metrics relay:9: not an http\(s\) URL"):
        from_cli(lifecycle.TargetOptions, {**base, "engine_metrics": "relay:9"}, "target")
    with pytest.raises(ConfigError, match=r"^--token-counts remote: Input should be 'engine' or 'local'"):
        from_cli(lifecycle.TargetOptions, {**base, "token_counts": "remote"}, "target")
    options = from_cli(
        lifecycle.TargetOptions,
        {**base, "engine_metrics": "prometheus+http://p:9090?job=vllm", "token_counts": "local"},
        "target",
    )
    # parsed once, here: the target takes the typed source as it is
    assert options.engine_metrics == (
        MetricsSource("prometheus", "http://p:9090", (("job", "vllm"),), spec="prometheus+http://p:9090?job=vllm"),
    )
    assert options.token_counts == "local"


def test_the_target_says_where_requests_metrics_and_token_counts_come_from():
    plain = Target(url="http://gw/llm", model="m", endpoint="chat", api_key="sk-1")
    assert plain.metrics == MetricsSource("exposition", "http://gw/llm/metrics")  # beside the API, prefix kept
    assert plain.metrics_api_key == "sk-1" and plain.token_counts == "engine"
    relay = Target(
        url="http://relay:8080",
        model="m",
        endpoint="chat",
        api_key="sk-1",
        metrics=MetricsSource.parse("http://relay:8080/engine/metrics"),
        token_counts="local",
    )
    assert relay.metrics_api_key == "sk-1"  # the relay's /engine/metrics takes the API's key
    elsewhere = Target(
        url="http://relay:8080",
        model="m",
        endpoint="chat",
        api_key="sk-1",
        metrics=MetricsSource.parse("http://engine:8000/metrics"),
    )
    prometheus = Target(
        url="http://relay:8080",
        model="m",
        endpoint="chat",
        api_key="sk-1",
        metrics=MetricsSource.parse("prometheus+http://relay:8080?job=vllm"),
    )
    assert elsewhere.metrics_api_key is None and prometheus.metrics_api_key is None  # the key stays home
    described = relay.describe()
    assert described["metrics"] == {"kind": "exposition", "url": "http://relay:8080/engine/metrics"}
    assert described["token_counts"] == "local" and "sk-1" not in json.dumps(described)
    secret = MetricsSource.parse("prometheus+http://me:pw@prom:9090?job=vllm").describe()
    assert secret == {"kind": "prometheus", "url": "prometheus+http://prom:9090?job=vllm"}


def test_the_prometheus_query_reads_every_name_and_the_scrape_time_in_one_evaluation():
    query = MetricsSource.parse('prometheus+http://p?job=vl"lm').query(NAMES)
    assert query == (
        'sum by (__name__) ({__name__=~"vllm:num_requests_running|vllm:prompt_tokens_total",'
        'job="vl\\"lm"}) or label_replace(min(timestamp(vllm:num_requests_running{job="vl\\"lm"})), '
        '"loadproof", "scrape_time", "", "")'
    )
    with pytest.raises(ValueError, match="not a Prometheus metric name"):
        MetricsSource.parse("prometheus+http://p").query({"x": 'up"} or vector(1'})


class FakePrometheus:
    """Answers /api/v1/query as Prometheus does; its scrape lands on the third query."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.queries.append(request.query["query"])
        now = 1000.0 + len(self.queries) * 0.1
        scraped = 999.0 if len(self.queries) < 3 else now - 0.04
        series = [
            ({"__name__": "vllm:num_requests_running"}, "2"),
            ({"__name__": "vllm:prompt_tokens_total"}, "NaN"),
            ({"__name__": "vllm:other"}, "5"),
            ({"loadproof": "scrape_time"}, str(scraped)),
        ]
        return web.json_response(
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [{"metric": labels, "value": [now, value]} for labels, value in series],
                },
            }
        )


async def serve(handler) -> tuple[str, web.AppRunner]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return f"http://127.0.0.1:{runner.addresses[0][1]}", runner  # the one site's (host, port)


@pytest.mark.asyncio
async def test_a_prometheus_sample_waits_for_a_scrape_after_it_was_asked_and_is_placed_at_it():
    fake = FakePrometheus()
    url, runner = await serve(fake.handle)
    clock = iter(range(10_000_000_000, 20_000_000_000, 1_000_000_000))
    try:
        scraper = MetricsScraper(
            MetricsSource.parse(f"prometheus+{url}?job=vllm"), NAMES, interval_s=None, clock=lambda: next(clock)
        )
        async with scraper:
            sample = scraper.samples[0]
            assert len(fake.queries) == 3  # the first two answers held a scrape older than the request
            assert sample.values == {"num_requests_running": 2.0}  # NaN and unmapped names left out
            assert sample.t_ns == 11_000_000_000 - 40_000_000  # 0.04 s before the reading: the scrape
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_an_exposition_that_is_not_200_is_no_sample_and_says_why():
    async def deny(request: web.Request) -> web.Response:
        return web.json_response({"error": "missing or invalid API key"}, status=401)

    url, runner = await serve(deny)
    try:
        async with MetricsScraper(MetricsSource.parse(url + "/engine/metrics"), NAMES, interval_s=None) as scraper:
            assert scraper.samples == [] and scraper.last_error == "HTTP 401"
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_a_prometheus_that_stopped_scraping_is_no_source(monkeypatch):
    async def stale(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "status": "success",
                "data": {
                    "resultType": "vector",
                    "result": [{"metric": {"loadproof": "scrape_time"}, "value": [2000.0, "1000.0"]}],
                },
            }
        )

    monkeypatch.setattr(server_metrics, "FRESH_WAIT_S", 0.3)
    url, runner = await serve(stale)
    try:
        async with MetricsScraper(MetricsSource.parse(f"prometheus+{url}"), NAMES, interval_s=None) as scraper:
            assert scraper.samples == []
            assert scraper.last_error == "no scrape of the engine in 0.3 s (the last is 1000 s older than the request)"
    finally:
        await runner.cleanup()


def write_folder(tmp_path: Path, config: dict, template_file: str | None = None) -> Path:
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    if template_file is not None:
        (tmp_path / "chat_template.jinja").write_text(template_file)
    return tmp_path


def test_a_chat_template_renders_as_transformers_renders_it(tmp_path):
    template = (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] not in ['user', 'assistant'] %}"
        "{{ raise_exception('bad role') }}{% endif %}\n"
        "  {% if loop.index > 5 %}{% break %}{% endif %}\n"
        "<|{{ m['role'] }}|>{{ m['content'] | tojson }}{% generation %}!{% endgeneration %}\n"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
        "{% if enable_thinking is defined and not enable_thinking %}<no-think>{% endif %}"
    )
    folder = write_folder(tmp_path, {"bos_token": {"content": "<s>", "lstrip": False}, "chat_template": template})
    rendered = ChatTemplate.load(folder / "tokenizer.json").render(
        [{"role": "user", "content": "héllo"}], enable_thinking=False
    )
    # trim_blocks and lstrip_blocks: no newline after a tag, no indentation before one
    assert rendered == '<s><|user|>"héllo"!<|assistant|><no-think>'
    with pytest.raises(UsageError, match="failed to render: bad role"):
        ChatTemplate.load(folder).render([{"role": "tool", "content": "x"}])


def test_where_a_chat_template_is_found(tmp_path):
    for name in ("named", "file", "none"):
        (tmp_path / name).mkdir()
    named = write_folder(
        tmp_path / "named",
        {
            "eos_token": "</s>",
            "chat_template": [
                {"name": "tool_use", "template": "T"},
                {"name": "default", "template": "D{{ eos_token }}"},
            ],
        },
    )
    assert ChatTemplate.load(named).render([]) == "D</s>"
    file = write_folder(tmp_path / "file", {"chat_template": "ignored"}, template_file="F{{ messages | length }}")
    template = ChatTemplate.load(file)
    assert template.origin == "chat_template.jinja" and template.render([{"role": "user", "content": ""}]) == "F1"
    with pytest.raises(UsageError, match="needs the model's chat template"):
        ChatTemplate.load(write_folder(tmp_path / "none", {"bos_token": "<s>"}))
