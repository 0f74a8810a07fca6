"""trackers/mlflow_run.py without a server: what a run becomes in MLflow (params, metrics with their intervals,
tags), MLflow's key rules, and the one-line errors of a missing package and a server that does not answer."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from loadproof.errors import UsageError
from loadproof.trackers import mlflow_run
from loadproof.trackers.mlflow_run import key, probe, record
from loadproof.trackers.source import open_run
from tests.unit.trackers.runs import PRIVATE_HOST, add_claims, claims_of, tracked_run

ODD = "load.model_mix.org/model:v1@2.share_pct"  # a claim whose name holds `:` and `@`


def test_every_figure_is_a_metric_with_its_interval_and_every_other_claim_a_tag(tmp_path: Path):
    path = tracked_run(tmp_path)
    add_claims(
        path,
        {
            "name": "throughput.verdict",
            "value": "FAIL",
            "unit": "",
            "printed": "FAIL",
            "formula": "f",
            "kind": "verdict",
            "direction": "neither",
        },
        {
            "name": "throughput.english.note",
            "value": "a text",
            "unit": "",
            "printed": "a text",
            "formula": "f",
            "kind": "fact",
            "direction": "neither",
        },
    )
    logged = record(open_run(path))
    for claim in claims_of(path):
        if claim["kind"] in ("figure", "count"):
            assert logged.metrics[claim["name"]] == claim["value"]
            interval = claim.get("interval")
            assert (f"{claim['name']}.low" in logged.metrics) == (interval is not None)
            if interval is not None:
                assert logged.metrics[f"{claim['name']}.low"] == interval["low"]
                assert logged.metrics[f"{claim['name']}.high"] == interval["high"]
                assert logged.tags[f"{claim['name']}.interval"] == f"95% {interval['method']}"
        else:
            assert logged.tags[claim["name"]] == claim["printed"]
    assert logged.tags["loadproof.verdict"] == "FAIL" and logged.tags["loadproof.source"] == "loadproof"
    assert logged.tags["loadproof.run_id"] == path.name and logged.tags["loadproof.artifact"] == "run"


def test_params_say_what_ran_without_a_private_address(tmp_path: Path):
    logged = record(open_run(tracked_run(tmp_path)))
    assert logged.params["scenario"] == "throughput" and logged.params["model"] == "tiny-model"
    assert logged.params["engine_version"] == "0.9.1" and logged.params["route"] == "chat"
    assert logged.params["option.repeats"] == "3" and logged.params["option.families"] == '["english"]'
    assert "option.api_key_env" not in logged.params  # an option the run left unset
    assert PRIVATE_HOST not in json.dumps([logged.params, logged.tags])


def test_a_name_mlflow_refuses_is_cleaned_and_the_claims_name_kept_in_a_tag(tmp_path: Path):
    path = tracked_run(tmp_path)
    add_claims(
        path,
        {
            "name": ODD,
            "value": 12.5,
            "unit": "%",
            "printed": "12.5",
            "formula": "f",
            "kind": "figure",
            "direction": "neither",
        },
    )
    logged = record(open_run(path))
    cleaned = "load.model_mix.org/model_v1_2.share_pct"
    assert logged.metrics[cleaned] == 12.5 and logged.tags[f"loadproof.renamed.{cleaned}"] == ODD


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a.b_c-d/e f", "a.b_c-d/e f"),
        ("a:b@c", "a_b_c"),
        ("/lead", "_lead"),
        ("a//b", "a__b"),
        ("a/../b", "a_.._b"),
        ("..", "._"),
        ("a..b", "a..b"),
        ("x" * 300, "x" * 250),
    ],
)
def test_keys_keep_what_mlflow_allows(name: str, expected: str):
    assert key(name) == expected


def test_without_the_mlflow_package_the_error_is_one_line_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "mlflow.exceptions", None)
    with pytest.raises(UsageError, match=r"^--mlflow needs the mlflow package: pip install 'loadproof\[mlflow\]'$"):
        mlflow_run.track(open_run(tracked_run(tmp_path)), "http://127.0.0.1:9")


def test_a_server_that_does_not_answer_is_one_line():
    with socket.socket() as sock:  # a port bound and never listened on: the connection is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(
            UsageError, match=rf"^--mlflow http://127.0.0.1:{port}: no MLflow tracking server answers there"
        ):
            probe(f"http://127.0.0.1:{port}")
    probe("sqlite:///local.db")  # a local store has nothing to probe
