"""`loadproof run load --metrics-port` against the simulator (a real process): the live Prometheus endpoint,
scraped while the run runs and parsed by prometheus_client's own parser, rises as the run goes, and its final
figures are the run directory's: every request counted once by outcome, the tokens its records hold, and each
latency histogram's buckets the records' own latencies (`metrics.latency`'s definitions) counted under each
bound. The endpoint lingers until read once after the run (`--metrics-linger-s`), then goes away."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadproof.engines.process import free_port
from loadproof.metrics.latency import succeeded
from loadproof.records import RequestRecord
from loadproof.scenarios.live_metrics import E2E_BUCKETS_S, ITL_BUCKETS_S, TTFT_BUCKETS_S, sample_names
from loadproof.sim.text import tokenizer_path
from loadproof.store.run_dir import load_run
from loadproof.units import NS_PER_S
from tests.integration.sim_process import SimProcess
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(120)

REQUESTS = 40
Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]  # (sample name, labels) -> value


def scrape(url: str) -> Scrape | None:
    """One scrape, parsed by prometheus_client; None when nothing listens (the run has not bound the port yet,
    or its endpoint has gone)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = resp.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
    out: Scrape = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(s: Scrape, name: str, **labels: str) -> float:
    return s[(name, tuple(sorted(labels.items())))]


def completed(s: Scrape) -> float:
    return sum(value(s, "loadproof_requests_completed_total", outcome=o) for o in ("ok", "error", "cancelled"))


def under(values_ns: list[int], bounds_s: tuple[float, ...]) -> list[float]:
    """Each bound's cumulative count of `values_ns`, `+Inf` last: the histogram the records give."""
    counts = [float(sum(v <= round(b * NS_PER_S) for v in values_ns)) for b in bounds_s]
    return [*counts, float(len(values_ns))]


def buckets(s: Scrape, name: str) -> list[float]:
    rows = [(labels, v) for (n, labels), v in s.items() if n == f"{name}_bucket"]
    return [v for labels, v in sorted(rows, key=lambda row: float(dict(row[0])["le"]))]


def test_the_live_endpoint_rises_during_a_run_and_ends_at_the_run_directory(tmp_path: Path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    scrapes: list[Scrape] = []
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        argv = [
            sys.executable, "-m", "loadproof", "run", "load", "--url", sim.url, "--tokenizer", str(tokenizer_path()),
            "--out", str(tmp_path), "--rate", "8", "-n", str(REQUESTS), "--input-tokens", "64",
            "--output-tokens", "uniform:8:24", "--seed", "5",
            "--metrics-port", str(port), "--metrics-linger-s", "60",
        ]  # fmt: skip
        log = tmp_path / "run.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)

        def gone() -> bool:
            """Scrape until the command has exited (its endpoint lingers until one scrape after the run)."""
            got = scrape(url)
            if got is not None:
                scrapes.append(got)
            return proc.poll() is not None

        try:
            wait_until(gone, 100, lambda: f"the run did not end:\n{log.read_text()[-3000:]}", every_s=0.1)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert "live metrics: http://127.0.0.1:" in log.read_text()

    during = [s for s in scrapes if value(s, "loadproof_run_running") == 1]
    assert len(during) >= 2, f"{len(scrapes)} scrapes, {len(during)} while the run ran"
    sent = [value(s, "loadproof_requests_sent_total") for s in during]
    done = [completed(s) for s in during]
    assert sent == sorted(sent) and done == sorted(done), "a counter went down"
    assert sent[-1] > sent[0] or done[-1] > done[0], "nothing rose while the run ran"
    for s in during:  # in flight: sent and not ended (an ended record waiting to be reported is no longer counted)
        assert 0 <= value(s, "loadproof_requests_in_flight") <= value(s, "loadproof_requests_sent_total") - completed(s)
        assert value(s, "loadproof_requests_planned") in (0, REQUESTS)  # 0 until the plan is built
    assert max(value(s, "loadproof_requests_in_flight") for s in during) >= 1, "never a request in flight"
    for s in scrapes:  # every sample name served is one the exporter declares (what the dashboard is held to)
        assert {name for name, _ in s} <= sample_names()

    final = scrapes[-1]
    assert value(final, "loadproof_run_running") == 0
    run = load_run(next(tmp_path.glob("load-*")))
    records: list[RequestRecord] = run.records
    assert value(final, "loadproof_run_info", run_id=run.run_id, scenario="load") == 1
    assert len(records) == REQUESTS
    assert value(final, "loadproof_requests_sent_total") == completed(final) == len(records)
    assert value(final, "loadproof_requests_in_flight") == 0
    assert value(final, "loadproof_requests_planned") == REQUESTS
    assert value(final, "loadproof_requests_completed_total", outcome="ok") == sum(r.ok for r in records)
    assert value(final, "loadproof_output_tokens_total") == sum(r.output_tokens or 0 for r in records)
    assert value(final, "loadproof_prompt_tokens_total") == sum(r.prompt_tokens or 0 for r in records)
    good = [r for r in records if succeeded(r)]
    assert good, "no request succeeded"
    latencies: dict[str, tuple[list[int], tuple[float, ...]]] = {
        "loadproof_ttft_seconds": ([r.ttft_ns or 0 for r in good], TTFT_BUCKETS_S),
        "loadproof_itl_seconds": ([gap for r in good for gap in r.itl_ns()], ITL_BUCKETS_S),
        "loadproof_e2e_latency_seconds": ([r.latency_ns or 0 for r in good], E2E_BUCKETS_S),
    }
    for name, (values_ns, bounds) in latencies.items():
        assert values_ns, name
        assert buckets(final, name) == under(values_ns, bounds), name
        assert value(final, f"{name}_count") == len(values_ns)
        assert value(final, f"{name}_sum") == pytest.approx(sum(values_ns) / NS_PER_S, rel=1e-9)
    assert scrape(url) is None, "the endpoint outlived its command"
