"""The live Prometheus endpoint of a `loadproof run` command (`--metrics-port`): while the command runs, an
HTTP server on its own thread serves `GET /metrics`, the load generator's figures (`scenarios.live_metrics`) in
Prometheus' text format, for a Prometheus server to scrape (in a cluster: the Job's pod, deploy/helm/loadproof)
and deploy/grafana/loadproof-live.json to draw. It listens from before the first request is sent until the
command ends (a rate search's trials, `--repeats` and an A/B run's runs all on one endpoint), then goes away;
`--metrics-linger-s S` keeps it up to S seconds more, until one scrape has read the final figures.

`exported(options, console)` is the whole of it for the lifecycle: it binds the port (a taken one is one line,
exit 2, before anything is sent) and gives back a console that puts each run's `LiveStatus` on the endpoint as
the run shows it (`Console.live`), so every scenario that records a run is exported, none knowing of it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from pydantic import Field, field_validator, model_validator

from loadproof.config.base import StrictModel
from loadproof.protocol.ports import refusal
from loadproof.report.build import Report
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.live_metrics import LiveMetrics
from loadproof.scenarios.options import Panel, cli
from loadproof.scenarios.recording import Console

PATH = "/metrics"
LOOPBACK = "127.0.0.1"
REMEDY = "pass another --metrics-port (0: any free port)"


class LiveMetricsOptions(StrictModel):
    """The live endpoint's options, on every `loadproof run` command."""

    metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="serve this run's live figures (requests in flight, sent and completed by outcome, tokens, "
        "TTFT / ITL / E2E histograms) at http://HOST:PORT/metrics in Prometheus' format while the command runs "
        "(0: any free port, printed; docs/live-metrics.md)",
        json_schema_extra=cli(panel=Panel.OUTPUT, metavar="PORT"),
    )
    metrics_host: str = Field(
        default=LOOPBACK,
        description="the address the live endpoint listens on (0.0.0.0 in a container, for a Prometheus server to "
        "reach it)",
        json_schema_extra=cli(panel=Panel.OUTPUT, metavar="HOST"),
    )
    metrics_linger_s: float = Field(
        default=0.0,
        ge=0,
        description="after the command, keep the live endpoint up until it is scraped once more, at most this many "
        "seconds, so a Prometheus server reads the final figures",
        json_schema_extra=cli(panel=Panel.OUTPUT, metavar="SECONDS"),
    )

    @field_validator("metrics_host")
    @classmethod
    def _host(cls, value: str) -> str:
        if value != "localhost":
            try:
                ip_address(value)
            except ValueError:
                raise ValueError("an IP address of this host (127.0.0.1, 0.0.0.0, ::) or localhost") from None
        return value

    @model_validator(mode="after")
    def _needs_port(self) -> LiveMetricsOptions:
        if self.metrics_port is None:  # (the command line gives every default: a value other than it was asked for)
            if self.metrics_host != LOOPBACK:
                raise ValueError("--metrics-host needs --metrics-port")
            if self.metrics_linger_s:
                raise ValueError("--metrics-linger-s needs --metrics-port")
        return self


class Endpoint:
    """The HTTP server of `/metrics` on a daemon thread; `close` stops it (after lingering, if asked)."""

    def __init__(self, metrics: LiveMetrics, host: str, port: int) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(metrics)
        self.scrapes = 0
        self.scraped = threading.Condition()
        try:
            self.server = _Server((host, port), _handler(self))
        except OSError as exc:
            raise refusal(exc, host, port, REMEDY, "another process") from None
        self.thread = threading.Thread(target=self.server.serve_forever, name="loadproof-live-metrics", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}{PATH}"

    def render(self) -> bytes:
        body: bytes = generate_latest(self.registry)
        with self.scraped:
            self.scrapes += 1
            self.scraped.notify_all()
        return body

    def linger(self, seconds: float) -> bool:
        """Wait, at most `seconds`, until the endpoint is scraped once from now; whether it was."""
        with self.scraped:
            seen = self.scrapes
            return self.scraped.wait_for(lambda: self.scrapes > seen, timeout=seconds)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)


def _handler(endpoint: Endpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != PATH:
                self.send_error(404, f"only {PATH} here")
                return
            body = endpoint.render()
            self.send_response(200)
            # the text format every Prometheus reads (2.x and 3.x); the names are all plain ones, so the same bytes
            self.send_header("Content-Type", CONTENT_TYPE_PLAIN_0_0_4)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a scrape every few seconds is no line for the person watching the run."""

    return Handler


class Exported:
    """A console that puts each run it shows on the live endpoint too; everything else is the console's."""

    def __init__(self, console: Console, metrics: LiveMetrics) -> None:
        self.console = console
        self.metrics = metrics

    def say(self, text: str) -> None:
        self.console.say(text)

    def live(self, status: LiveStatus) -> AbstractContextManager[object]:
        self.metrics.attach(status)
        return self.console.live(status)

    def brief_live(self, status: LiveStatus) -> AbstractContextManager[object]:
        """A series' run (`recording.Nested`): its brief view where the console has one."""
        self.metrics.attach(status)
        brief = getattr(self.console, "brief_live", None)
        return brief(status) if brief is not None else self.console.live(status)

    def show(self, report: Report) -> None:
        self.console.show(report)

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        self.console.table(title, header, rows)

    def result(self, text: str) -> None:
        self.console.result(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console, name)  # its settings (`verbose`)


@contextlib.contextmanager
def exported(options: LiveMetricsOptions, console: Console) -> Iterator[Console]:
    """`console` unchanged without `--metrics-port`; else the endpoint listens while the block runs (a port
    taken: one line, exit 2) and the block gets a console whose runs it serves."""
    if options.metrics_port is None:
        yield console
        return
    metrics = LiveMetrics()
    endpoint = Endpoint(metrics, options.metrics_host, options.metrics_port)
    console.say(f"live metrics: {endpoint.url} (Prometheus text format, while the command runs)")
    try:
        try:
            yield Exported(console, metrics)
        except Exception:  # a FAIL verdict, a run that measured nothing: its final figures are read too
            _linger(endpoint, options.metrics_linger_s, console)
            raise
        _linger(endpoint, options.metrics_linger_s, console)
    finally:
        endpoint.close()


def _linger(endpoint: Endpoint, seconds: float, console: Console) -> None:
    if seconds > 0:
        console.say(f"live metrics: up to {seconds:g} s more, until scraped once")
        endpoint.linger(seconds)
