"""`loadproof track` on a real load run of the simulator: to a real MLflow tracking server (`mlflow server`, SQLite
backend, artifacts proxied by the server), read back with MLflow's own client; and, on the same run, the OTLP
files read back by `run replay --format otel`'s reader and the llm-d report against the run's own claims.

The server is started once per session, in its own process group, while the simulator run is made and the OTLP
test runs (5 to 15 s to come up here, without its job workers: its tables, then its app), polled on /health, and
stopped at the end. Neither it nor the
client sends usage telemetry (MLFLOW_DISABLE_TELEMETRY, DO_NOT_TRACK): nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadproof.engines.process import free_port
from loadproof.trackers import llm_d_schema
from loadproof.trackers.tracking import track
from loadproof.workloads.otel_trace import read_otel_trace
from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario
from tests.polling import ready_while_running

pytestmark = pytest.mark.timeout(240)

START_TIMEOUT_S = 120.0  # its first start on a loaded 2-core machine creates its tables and byte-compiles mlflow
QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}


class MlflowServer:
    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "mlflow-server.log"
        argv = [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--backend-store-uri",
            f"sqlite:///{folder / 'mlflow.db'}",
            "--artifacts-destination",
            str(folder / "artifacts"),
            "--workers",
            "1",
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **QUIET, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},  # no job workers
            )

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as reply:
                return reply.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def ready(self) -> str:
        if not ready_while_running(self.healthy, self.proc, START_TIMEOUT_S, every_s=0.2):
            pytest.fail(f"`mlflow server` did not come up:\n{self.log.read_text()[-3000:]}")
        return self.url

    def stop(self) -> None:
        """SIGKILL the whole group (uvicorn and any job worker): its database and artifacts are the test's to drop,
        and a graceful shutdown takes seconds."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    with pytest.MonkeyPatch.context() as env:  # the client in this process, too, sends no usage telemetry
        for name, value in QUIET.items():
            env.setenv(name, value)
        server = MlflowServer(tmp_path_factory.mktemp("mlflow"))
        yield server
        server.stop()


@pytest.fixture(scope="module")
def load_run(tmp_path_factory: pytest.TempPathFactory, mlflow_server: MlflowServer) -> Path:
    """A load run of 30 requests on the simulator, made while the MLflow server starts."""
    folder = tmp_path_factory.mktemp("track-run")
    with SimProcess(folder / "sim.log", config={"time_scale": 10.0}) as sim:
        code, _, run = run_scenario(
            sim, folder, "load", "--rate", "15", "-n", "30", "--input-tokens", "128", "--output-tokens", "uniform:4:12"
        )
    assert code == 0
    return run


def test_the_same_run_as_otlp_and_as_an_llm_d_report(load_run: Path, tmp_path: Path):
    """First, while the MLflow server may still be starting."""
    done = subprocess.run(
        [sys.executable, "-m", "loadproof", "track", str(load_run), "--otlp", str(tmp_path / "otel")]
        + ["--llm-d", str(tmp_path / "llm-d.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    claims: dict[str, Any] = {
        c["name"]: c["value"] for c in json.loads((load_run / "claims.json").read_text())["claims"]
    }
    trace = read_otel_trace(str(tmp_path / "otel" / "traces.jsonl"))
    calls = trace.of_kind("llm")
    assert len(calls) == claims["load.requests"] == 30
    assert sum(c.output_tokens or 0 for c in calls) == sum(
        json.loads(line)["output_tokens"] for line in (load_run / "requests.jsonl").read_text().splitlines()
    )
    report = llm_d_schema.decode((tmp_path / "llm-d.json").read_bytes())
    assert report.results.request_performance is not None and report.results.request_performance.aggregate is not None
    latency = report.results.request_performance.aggregate.latency
    assert latency is not None and latency.time_to_first_token is not None and latency.request_latency is not None
    assert latency.time_to_first_token.p99 == claims["load.ttft_s.p99"]
    assert latency.time_to_first_token.mean == claims["load.ttft_s.mean"]
    assert latency.request_latency.p50 == claims["load.e2el_s.p50"]


def test_an_mlflow_run_read_back_by_the_mlflow_client_says_what_claims_json_says(
    load_run: Path, mlflow_server: MlflowServer
):
    from mlflow.tracking import MlflowClient  # the test extra's: the tracker's own client reads the run back

    url = mlflow_server.ready()
    (first,) = track(load_run, mlflow=url, experiment="track-test")  # in process: no second start of mlflow
    claims = json.loads((load_run / "claims.json").read_text())["claims"]
    manifest = json.loads((load_run / "manifest.json").read_text())

    client = MlflowClient(tracking_uri=url)
    experiment = client.get_experiment_by_name("track-test")
    assert experiment is not None
    (found,) = client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`loadproof.run_id` = '{load_run.name}'"
    )
    assert found.info.run_id in first.line and found.info.status == "FINISHED"
    run = client.get_run(found.info.run_id)
    metrics, params, tags = run.data.metrics, run.data.params, run.data.tags
    numbers = [c for c in claims if c["kind"] in ("figure", "count") and not isinstance(c["value"], bool)]
    assert numbers and all(metrics[c["name"]] == c["value"] for c in numbers)
    with_interval = [c for c in numbers if "interval" in c]
    assert with_interval  # a load run's latencies and rates carry one (#41)
    for claim in with_interval:
        name, interval = claim["name"], claim["interval"]
        assert (metrics[f"{name}.low"], metrics[f"{name}.high"]) == (interval["low"], interval["high"])
        assert tags[f"{name}.interval"] == f"{interval['confidence']:.0%} {interval['method']}"
    assert len(metrics) == len(numbers) + 2 * len(with_interval)
    for claim in claims:
        if claim not in numbers:
            assert tags[claim["name"]] == claim["printed"]
    assert params["scenario"] == "load" and params["model"] == manifest["target"]["model"]
    assert (
        params["option.rate"] == str(manifest["options"]["rate"]) and params["route"] == manifest["target"]["endpoint"]
    )
    assert "127.0.0.1" not in json.dumps([params, tags])  # the target URL, sanitized
    assert tags["loadproof.source"] == "loadproof" and tags["loadproof.artifact"] == "run"
    stored = {a.path for a in client.list_artifacts(run.info.run_id, "run")}
    assert {"run/claims.json", "run/manifest.json", "run/requests.jsonl", "run/report.html"} <= stored

    (again,) = track(load_run, mlflow=url, experiment="track-test")
    assert f"already tracked as MLflow run {run.info.run_id}" in again.line
    assert len(client.search_runs([experiment.experiment_id])) == 1
