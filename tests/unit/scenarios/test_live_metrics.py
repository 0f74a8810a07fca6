"""The live Prometheus endpoint (`scenarios.live_metrics`, `scenarios.live_endpoint`): each request counted once
by outcome as its record ends, in flight until then, its latencies in the histograms under each bound they do
not exceed; the HTTP server that serves them, its options, and the Grafana dashboard shipped beside it, held to
naming only what the endpoint exports."""

from __future__ import annotations

import contextlib
import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from threading import Event, Thread

import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadproof.errors import ConfigError, PortInUse
from loadproof.records import RequestRecord
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.live_endpoint import Endpoint, Exported, LiveMetricsOptions, exported
from loadproof.scenarios.live_metrics import FAMILIES, LiveMetrics, label_names, sample_names
from loadproof.scenarios.options import from_cli
from loadproof.units import NS_PER_S as NS
from tests.polling import poll
from tests.ports import listening

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "loadproof-live.json"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parsed(metrics: LiveMetrics) -> Samples:
    """What a scrape of `metrics` reads, through the endpoint's own registry and prometheus_client's parser."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    out: Samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def at(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def record(i: int, *, ok: bool = True, ttft_s: float = 0.1, gaps_s: tuple[float, ...] = (0.02, 0.03), **kw: object) -> RequestRecord:  # fmt: skip
    send = 10 * NS
    first = send + round(ttft_s * NS)
    chunks = [first]
    for gap in gaps_s:
        chunks.append(chunks[-1] + round(gap * NS))
    fields: dict[str, object] = dict(
        request_id=f"r{i}",
        endpoint="chat",
        ok=ok,
        send_ns=send,
        first_token_ns=first if ok else None,
        last_token_ns=chunks[-1] if ok else None,
        end_ns=chunks[-1] + 1,
        chunk_ns=chunks if ok else [],
        chunk_tokens=[1] * len(chunks) if ok else [],
        output_tokens=len(chunks) if ok else 0,
        prompt_tokens=64,
    )
    fields.update(kw)
    return RequestRecord(**fields)


def test_requests_are_in_flight_until_they_end_then_counted_once_by_outcome():
    status = LiveStatus("load", run_id="load-20260101-000000-abcd")
    metrics = LiveMetrics()
    metrics.attach(status)
    good, failed, cancelled = (
        record(1),
        record(2, ok=False, error_kind="http_status"),
        record(3, ok=False, error_kind="cancelled"),
    )
    ends = [r.end_ns for r in (good, failed, cancelled)]
    for r in (good, failed, cancelled):
        r.end_ns = 0  # sent, not ended
        status.started(r)
    now = parsed(metrics)
    assert at(now, "loadproof_requests_sent_total") == 3 and at(now, "loadproof_requests_in_flight") == 3
    assert at(now, "loadproof_run_info", run_id="load-20260101-000000-abcd", scenario="load") == 1
    assert at(now, "loadproof_run_running") == 1
    for r, end in zip((good, failed, cancelled), ends):
        r.end_ns = end
        status.ended(r)
    status.finish()
    now = parsed(metrics)
    assert at(now, "loadproof_requests_in_flight") == 0 and at(now, "loadproof_run_running") == 0
    assert [at(now, "loadproof_requests_completed_total", outcome=o) for o in ("ok", "error", "cancelled")] == [1, 1, 1]
    assert at(now, "loadproof_request_errors_total", kind="http_status") == 1
    assert ("loadproof_request_errors_total", (("kind", "cancelled"),)) not in now  # a cancel is no failure
    assert at(now, "loadproof_output_tokens_total") == 3 and at(now, "loadproof_prompt_tokens_total") == 3 * 64
    # the failed and cancelled requests give no latency: one TTFT, one E2E, two gaps
    assert at(now, "loadproof_ttft_seconds_count") == 1 and at(now, "loadproof_itl_seconds_count") == 2
    assert at(now, "loadproof_e2e_latency_seconds_sum") == pytest.approx(0.15)


def test_a_latency_on_a_bound_is_counted_under_it_and_not_under_the_bound_below():
    metrics = LiveMetrics()
    status = LiveStatus("load")
    metrics.attach(status)
    status.ended(record(1, ttft_s=0.1, gaps_s=(0.005, 0.0050001)))
    now = parsed(metrics)
    ttft = {le: at(now, "loadproof_ttft_seconds_bucket", le=le) for le in ("0.08", "0.1", "0.25", "+Inf")}
    assert ttft == {"0.08": 0, "0.1": 1, "0.25": 1, "+Inf": 1}
    assert at(now, "loadproof_itl_seconds_bucket", le="0.005") == 1  # the gap of 5 ms is <= 0.005, the other not
    assert at(now, "loadproof_itl_seconds_bucket", le="0.01") == 2


def test_a_record_that_ended_unreported_is_not_in_flight_and_counters_add_up_over_runs():
    metrics = LiveMetrics()
    first, second = LiveStatus("load", run_id="a"), LiveStatus("load", run_id="b")
    metrics.attach(first)
    first.started(record(1))
    first.ended(record(1))
    lost = record(2)
    first.started(lost)  # its record ends (end_ns set), but nobody reports it (a request nobody waits for)
    metrics.attach(second)  # a rate search's next trial
    second.started(record(3, end_ns=0))
    now = parsed(metrics)
    assert at(now, "loadproof_requests_sent_total") == 3 and at(now, "loadproof_requests_in_flight") == 1
    assert at(now, "loadproof_run_info", run_id="b", scenario="load") == 1
    assert ("loadproof_run_info", (("run_id", "a"), ("scenario", "load"))) not in now


def test_every_family_is_served_under_the_names_it_declares():
    metrics = LiveMetrics()
    status = LiveStatus("load", run_id="x")
    metrics.attach(status)
    status.ended(record(1, ok=False, error_kind="timeout"))
    served = {name for name, _ in parsed(metrics)}
    assert served == sample_names()
    assert {f.name for f in FAMILIES} == {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in served}


class Console:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        self.lines.append(text)

    result = say

    def live(self, status: LiveStatus) -> contextlib.AbstractContextManager[object]:
        return contextlib.nullcontext()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def test_the_endpoint_serves_while_the_block_runs_and_is_gone_after():
    console = Console()
    with exported(LiveMetricsOptions(metrics_port=0), console) as inner:
        assert isinstance(inner, Exported)
        url = console.lines[0].split()[2]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", url), console.lines
        status = LiveStatus("load", run_id="r")
        with inner.live(status):
            status.started(record(1, end_ns=0))
            code, text = get(url)
        assert code == 200
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert families["loadproof_requests_in_flight"].samples[0].value == 1
        assert get(url.replace("/metrics", "/"))[0] == 404
        console.verbose = True
        assert inner.verbose is True  # the console's settings, read through
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)


def test_without_a_port_nothing_listens_and_the_console_is_the_same():
    console = Console()
    with exported(LiveMetricsOptions(), console) as inner:
        assert inner is console and not console.lines


@contextlib.contextmanager
def endpoint() -> Iterator[Endpoint]:
    served = Endpoint(LiveMetrics(), "127.0.0.1", 0)
    try:
        yield served
    finally:
        served.close()


def test_linger_waits_for_one_scrape_and_no_longer():
    with endpoint() as served:
        assert served.linger(0.01) is False  # nobody scrapes: it gives up at its limit
        stop = Event()

        def scrape_until_stopped() -> None:
            poll(lambda: stop.is_set() or (get(served.url) and False), 60)

        scraper = Thread(target=scrape_until_stopped)
        scraper.start()
        try:
            assert served.linger(60) is True
        finally:
            stop.set()
            scraper.join()


def test_a_taken_port_is_one_line_naming_the_option():
    with listening() as port, pytest.raises(PortInUse, match=rf"port {port} on 127\.0\.0\.1 .*--metrics-port"):
        Endpoint(LiveMetrics(), "127.0.0.1", port)


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"metrics_host": "0.0.0.0"}, "--metrics-host needs --metrics-port"),
        ({"metrics_linger_s": 30}, "--metrics-linger-s needs --metrics-port"),
        ({"metrics_port": 9400, "metrics_host": "prometheus.example"}, "--metrics-host prometheus.example: an IP"),
        ({"metrics_port": 70000}, "--metrics-port 70000"),
    ],
)
def test_options_that_cannot_work_are_one_line(values: dict[str, object], said: str):
    with pytest.raises(ConfigError, match=re.escape(said)):
        from_cli(LiveMetricsOptions, values, "live metrics")


# ----- the Grafana dashboard -----

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
TARGET_LABELS = {"instance", "job"}  # what Prometheus adds to every scraped sample


def promql_names(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and label names a PromQL expression (or a Grafana `label_values(...)` query) uses."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings: label values, Grafana variables
    labels: set[str] = set()
    metrics: set[str] = set()
    for metric, label in re.findall(r"label_values\(\s*([\w:]+)\s*(?:\{[^}]*\})?\s*,\s*(\w+)\s*\)", expr):
        metrics.add(metric)
        labels.add(label)
    expr = re.sub(r"label_values\([^)]*\)", " ", expr)
    for matchers in re.findall(r"\{([^}]*)\}", expr):
        labels |= set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)  # matchers, ranges ($__rate_interval)
    for grouping in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        labels |= set(re.findall(r"\w+", grouping))
    expr = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", " ", expr)
    for name, call in re.findall(r"(?<![\w.$])([A-Za-z_:][\w:]*)(\s*\()?", expr):
        if not call and name not in KEYWORDS:
            metrics.add(name)
    return metrics, labels


def dashboard_queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in board["panels"] for t in p["targets"]]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            queries.append(query["query"] if isinstance(query, dict) else query)
    return queries


def test_the_checker_sees_metrics_and_labels_in_promql():
    metrics, labels = promql_names(
        'histogram_quantile(0.99, sum by (le) (rate(vllm:ttft_bucket{instance=~"$i", model_name="x"}[5m]))) '
        "/ on (job) group_left foo_total > 0"
    )
    assert metrics == {"vllm:ttft_bucket", "foo_total"} and labels == {"le", "instance", "model_name", "job"}


def test_the_dashboard_names_only_what_the_endpoint_exports_and_draws_all_of_it():
    queries = dashboard_queries()
    assert len(queries) >= 10
    used: set[str] = set()
    for query in queries:
        metrics, labels = promql_names(query)
        assert metrics, f"no metric in {query!r}"
        assert metrics <= sample_names(), f"{query!r} names {sorted(metrics - sample_names())}, not exported"
        assert labels <= label_names() | TARGET_LABELS, f"{query!r} uses labels {sorted(labels - label_names())}"
        used |= metrics
    drawn = {f.name for f in FAMILIES if used & set(f.samples)}
    assert drawn == {f.name for f in FAMILIES}, f"not drawn: {sorted({f.name for f in FAMILIES} - drawn)}"
