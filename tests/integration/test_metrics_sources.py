"""Where a run's engine metrics and token counts come from, against real processes on 127.0.0.1.

- A real Prometheus (Debian's `prometheus` package, installed here with apt-get when missing; skipped, in
  one line, where it cannot be) scrapes the simulator (`loadproof sim`, a real process) every 250 ms, under
  two jobs. loadproof's Prometheus source must read what the simulator's own /metrics say, summed over
  the label sets its selector keeps, and a capacity run whose only metrics source is that Prometheus must
  pass on every criterion.
- `--token-counts local`: the simulator's chat template rendered here with jinja2 plans exact-length chat
  prompts the simulator agrees with; a template that is not the engine's stops the run after its one
  check request, naming both counts.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadproof.client import StreamingClient
from loadproof.engines.process import free_port
from loadproof.engines.vllm import VLLM_METRICS
from loadproof.scenarios.token_counts import PROBE_TEXT
from loadproof.sim.text import CHAT_TEMPLATE, tokenizer_path
from loadproof.telemetry.server_metrics import MetricsScraper, MetricsSource, parse_metrics
from tests.integration.sim_process import SimProcess, spec
from tests.polling import eventually, ready_while_running

pytestmark = pytest.mark.timeout(300)

SCRAPE = "250ms"
SIM_CONFIG = {"time_scale": 10.0, "max_model_len": 8192, "num_gpu_blocks": 4096}


@pytest.fixture(scope="module")
def prometheus_binary() -> str:
    """Debian's prometheus, installed with apt-get when it is not on PATH (about 20 MB, 12 packages)."""
    found = shutil.which("prometheus")
    if found:
        return found
    if not shutil.which("apt-get") or os.geteuid() != 0:
        pytest.skip("prometheus is not installed and apt-get cannot install it here (not root, or no apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "prometheus"]
    started = time.monotonic()
    result = subprocess.run(install, capture_output=True, text=True, env=env, timeout=600)
    if result.returncode != 0:  # no package lists yet: fetch them once and try again
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, env=env, timeout=300)
        result = subprocess.run(install, capture_output=True, text=True, env=env, timeout=600)
    found = shutil.which("prometheus")
    if result.returncode != 0 or not found:
        why = (result.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"prometheus could not be installed with apt-get: {why}")
    print(f"installed Debian's prometheus with apt-get in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return found


class Prometheus:
    """A real Prometheus scraping `target` (host:port) under two jobs, `sim` and `sim-copy`."""

    def __init__(self, binary: str, workdir: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "prometheus.yml"
        jobs = "".join(
            f"  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n" for job in ("sim", "sim-copy")
        )
        config.write_text(f"global:\n  scrape_interval: {SCRAPE}\n  scrape_timeout: 200ms\nscrape_configs:\n{jobs}")
        self.log = workdir / "prometheus.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        if not ready_while_running(self._ready, self.proc, 30, every_s=0.1):
            self.stop()
            pytest.fail(f"prometheus did not come up:\n{self.log.read_text()[-2000:]}")

    def _ready(self) -> bool:
        """Serving, and both jobs scraped (Prometheus applies its targets up to 5 s after it starts)."""
        try:
            with urllib.request.urlopen(self.url + "/api/v1/query?query=up", timeout=2) as resp:
                result = json.loads(resp.read())["data"]["result"]
        except (OSError, ValueError, KeyError):
            return False
        return sorted(r["metric"]["job"] for r in result if r["value"][1] == "1") == ["sim", "sim-copy"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def sim_and_prometheus(prometheus_binary, tmp_path) -> Iterator[tuple[SimProcess, Prometheus]]:
    with SimProcess(tmp_path / "sim.log", config=SIM_CONFIG) as sim:
        prometheus = Prometheus(prometheus_binary, tmp_path, f"127.0.0.1:{sim.port}")
        try:
            yield sim, prometheus
        finally:
            prometheus.stop()


def sim_metrics(sim: SimProcess) -> dict[str, float]:
    with urllib.request.urlopen(sim.url + "/metrics", timeout=5) as resp:
        return parse_metrics(resp.read().decode(), VLLM_METRICS)


async def read(source: MetricsSource) -> dict[str, float]:
    async with MetricsScraper(source, VLLM_METRICS, interval_s=None) as scraper:
        assert scraper.samples, f"no sample from {source.url}: {scraper.last_error}"
        return scraper.latest()


async def until_equal(sim: SimProcess, source: MetricsSource, within_s: float = 5.0) -> dict[str, float]:
    """Prometheus's reading once it shows what the simulator's /metrics show (a scrape or two later)."""
    last: dict[str, dict[str, float]] = {}

    async def equal() -> dict[str, float] | None:
        last["own"], last["seen"] = own, seen = sim_metrics(sim), await read(source)
        return seen if seen == own else None

    def differences() -> str:
        own, seen = last["own"], last["seen"]
        return str({k: (own.get(k), seen.get(k)) for k in own.keys() | seen.keys() if own.get(k) != seen.get(k)})

    return await eventually(equal, within_s, differences, every_s=0.1)


@pytest.mark.asyncio
async def test_a_prometheus_source_reads_what_the_engines_own_metrics_say(sim_and_prometheus):
    sim, prometheus = sim_and_prometheus
    selected = MetricsSource.parse(f"prometheus+{prometheus.url}?job=sim")
    both_jobs = MetricsSource.parse(f"prometheus+{prometheus.url}")
    async with StreamingClient(sim.url) as client:
        done = await asyncio.gather(*(client.stream(spec(i, max_tokens=12)) for i in range(3)))
    assert all(r.ok for r in done)
    values = await until_equal(sim, selected)
    # every name the simulator exposes, the counters moved by the three requests
    assert set(values) == set(sim_metrics(sim)) and values["prompt_tokens_total"] > 0
    assert values["generation_tokens_total"] == 36 and values["request_success_total"] == 3

    async def summed() -> bool:  # without a selector, every label set is summed: both jobs scrape the same simulator
        return (await read(both_jobs))["generation_tokens_total"] == 2 * values["generation_tokens_total"]

    await eventually(summed, 5, "both jobs' generation_tokens_total summed", every_s=0.1)
    # a gauge follows a live request, and a selector that matches nothing gives absent values, never zeros
    async with StreamingClient(sim.url) as client:
        live = asyncio.create_task(client.stream(spec(9, max_tokens=100_000, ignore_eos=True)))

        async def shown_running() -> bool:
            return (await read(selected)).get("num_requests_running") == 1

        await eventually(shown_running, 5, "Prometheus showing the running request", every_s=0.1)
        assert sim_metrics(sim)["num_requests_running"] == 1
        live.cancel()
        await asyncio.gather(live, return_exceptions=True)
    await until_equal(sim, selected)
    assert await read(MetricsSource.parse(f"prometheus+{prometheus.url}?job=nothing-here")) == {}


def loadproof_run(
    scenario: str, url: str, out: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], Path | None]:
    result = subprocess.run(
        [sys.executable, "-m", "loadproof", "run", scenario, "--url", url, "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=200,
    )
    runs = sorted(out.glob(f"{scenario}-*"))
    return result, runs[-1] if runs else None


def claims_of(run: Path) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads((run / "claims.json").read_text())["claims"]}


def test_capacity_passes_with_a_prometheus_server_as_its_only_metrics_source(sim_and_prometheus, tmp_path):
    sim, prometheus = sim_and_prometheus
    source = f"prometheus+{prometheus.url}?job=sim"
    result, run = loadproof_run(
        "capacity",
        sim.url,
        tmp_path / "runs",
        "--tokenizer",
        str(tokenizer_path()),
        "--engine-metrics",
        source,
        "--sessions",
        "4",
        "--input-tokens",
        "2048",
        "--window-s",
        "2",
        "--max-gap-s",
        "1",
    )
    assert run is not None, result.stderr
    claims = claims_of(run)
    criteria = {k: v["value"] for k, v in claims.items() if ".criteria." in k}
    assert result.returncode == 0, (criteria, result.stderr[-2000:])
    assert len(criteria) == 10 and set(criteria.values()) == {"PASS"}
    assert "engine idle: 0 running, 0 waiting" in result.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["target"]["metrics"] == {"kind": "prometheus", "url": source}
    samples = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(s["values"]["num_requests_running"] for s in samples) == 4  # the sessions, seen through Prometheus


def sim_tokenizer_folder(folder: Path, template: str) -> Path:
    folder.mkdir()
    shutil.copy(tokenizer_path(), folder / "tokenizer.json")
    (folder / "chat_template.jinja").write_text(template, encoding="utf-8")
    return folder


# the simulator's chat template (sim.text.CHAT_TEMPLATE), as a model folder's jinja2 template
SIM_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'user' %}"
    + CHAT_TEMPLATE.replace("{content}", "{{ message['content'] }}")
    + "{% else %}{{ message['content'] }}{% endif %}{% endfor %}"
)


def test_local_token_counts_plan_exact_chat_prompts_and_a_wrong_template_stops_at_the_check(tmp_path):
    with SimProcess(tmp_path / "sim.log", config=SIM_CONFIG) as sim:
        good = sim_tokenizer_folder(tmp_path / "good", SIM_TEMPLATE)
        result, run = loadproof_run(
            "prefill",
            sim.url,
            tmp_path / "runs",
            "--endpoint",
            "chat",
            "--token-counts",
            "local",
            "--tokenizer",
            str(good),
            "-l",
            "1500",
            "-r",
            "1",
            "--decode-tokens",
            "4",
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert run is not None
        plan = json.loads((run / "manifest.json").read_text())["plan"]
        overhead = len(CHAT_TEMPLATE.format(content="").encode())  # one token a byte
        probe = len(PROBE_TEXT.encode())  # the check request's text
        assert plan["overhead_tokens"] == overhead
        assert plan["overhead_source"].startswith("local: the chat template (chat_template.jinja) rendered locally")
        assert f"usage.prompt_tokens {overhead + probe} == {overhead + probe}" in plan["overhead_source"]
        assert claims_of(run)["prefill.criteria.prompt_tokens"]["value"] == "PASS"
        served = sim_metrics(sim)["request_success_total"]

        wrong = sim_tokenizer_folder(tmp_path / "wrong", "System: be brief.\n" + SIM_TEMPLATE)
        result, _ = loadproof_run(
            "prefill",
            sim.url,
            tmp_path / "runs-wrong",
            "--endpoint",
            "chat",
            "--token-counts",
            "local",
            "--tokenizer",
            str(wrong),
            "-l",
            "1500",
            "-r",
            "1",
        )
        assert result.returncode == 2
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and errors[0].startswith("error: --token-counts local:"), result.stderr
        planned, counted = overhead + probe + len("System: be brief.\n"), overhead + probe
        assert f"makes the check prompt {planned} tokens, but the engine counted {counted}" in errors[0]
        assert sim_metrics(sim)["request_success_total"] == served + 1  # the check request, nothing else
