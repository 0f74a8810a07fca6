"""deploy/helm/loadproof, rendered by the real Helm (tests/helm.py) and every object it renders validated offline
against the Kubernetes API's own schemas (kubernetes-validate, which bundles them: nothing is fetched), strict (a
field the API does not have fails), for the oldest and the newest Kubernetes it bundles that the chart is for.
The Job's command line is parsed by loadproof's own CLI and its options checked as `loadproof run` checks them,
so the chart cannot name a flag or a value the command refuses; the parts that must agree (the metrics port and
its scrape annotations, the claim and its volume, the store's Secret, the image's user) are held to agree.
No cluster runs here and no image is built (docs/kubernetes.md)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer
import yaml

from loadproof.cli import app
from loadproof.scenarios import scenarios
from loadproof.scenarios.lifecycle import LiveMetricsOptions, check
from loadproof.scenarios.options import from_cli
from tests.helm import helm

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "loadproof"
CONTAINERFILE = ROOT / "deploy" / "Containerfile"
KUBERNETES = ("1.29.0", "1.37.0")  # the oldest the chart is for (every field it sets is GA there), the newest bundled

EVERYTHING = [  # every optional part of the chart turned on
    "--set", "target.model=llama-3-8b",
    "--set", "target.apiKeySecret.name=vllm-key",
    "--set", "store.enabled=true",
    "--set", "store.urlSecret.name=results-db",
    "--set", "metrics.port=9500",
    "--set", "results.persistentVolumeClaim.storageClassName=fast",
    "--set", "serviceAccountName=bench",
    "--set", "podAnnotations.team=inference",
    "--set", "podLabels.purpose=benchmark",
    "--set", "nodeSelector.pool=cpu",
    "--set", "tolerations[0].key=dedicated",
    "--set", "tolerations[0].operator=Exists",
    "--set", "extraEnv[0].name=TZ",
    "--set", "extraEnv[0].value=UTC",
    "--set", "imagePullSecrets[0].name=registry",
    "--set", "image.repository=registry.example/loadproof",
    "--set", "image.tag=0.1.0-test",
]  # fmt: skip
VARIANTS = {
    "defaults": [],
    "everything": EVERYTHING,
    "existing claim, no metrics": [
        "--set", "results.persistentVolumeClaim.create=false",
        "--set", "results.persistentVolumeClaim.existingClaim=shared-runs",
        "--set", "metrics.enabled=false",
    ],
    "another scenario": [
        "--set", "scenario=capacity",
        "--set-json", 'args=["--sessions","4","--input-tokens","2048","--window-s","30"]',
    ],
}  # fmt: skip


def render(*flags: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(helm()), "template", "bench", str(CHART), *flags], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds = [d["kind"] for d in docs]
    assert len(kinds) == len(set(kinds)), kinds  # one of each
    return {d["kind"]: d for d in docs}


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (only,) = by_kind(docs)["Job"]["spec"]["template"]["spec"]["containers"]
    return only


def test_helm_lint_finds_nothing():
    done = subprocess.run([str(helm()), "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "0 chart(s) failed" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_rendered_object_is_valid_against_the_kubernetes_api(variant: str):
    docs = render(*VARIANTS[variant])
    assert {d["kind"] for d in docs} >= {"Job"}
    for doc in docs:
        for version in KUBERNETES:
            # raises ValidationError on a wrong or unknown field, SchemaNotFoundError on a kind it has no schema of
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_refuses_what_the_api_would():
    job = by_kind(render())["Job"]
    job["spec"]["backoffLimit"] = "none"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES[-1], strict=True)
    job["spec"]["backoffLimit"] = 0
    job["spec"]["template"]["spec"]["containers"][0]["comand"] = ["loadproof"]  # strict: no such field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES[-1], strict=True)


def parse(argv: list[str]) -> tuple[str, dict[str, Any]]:
    """`loadproof ARGV` as loadproof's CLI parses it (an unknown flag or a value of the wrong type raises here):
    the scenario and the command's values."""
    assert argv[0] == "run", argv
    root = typer.main.get_command(app)
    run = root.commands["run"]  # a group: loadproof run
    ctx = run.commands[argv[1]].make_context(argv[1], list(argv[2:]))
    return argv[1], ctx.params


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_jobs_command_is_a_loadproof_run_the_cli_takes(variant: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LOADPROOF_API_KEY", "k")  # --api-key-env names it: the check wants it set
    c = container(render(*VARIANTS[variant]))
    assert c["command"] == ["loadproof"]
    name, values = parse(c["args"])
    checked = check(scenarios.get(name), values)  # every option as `loadproof run` checks it before sending
    assert checked.target.url.startswith("http://") and str(checked.target.out).startswith("/results/")
    live = from_cli(LiveMetricsOptions, values, "live metrics")
    if variant == "existing claim, no metrics":
        assert live.metrics_port is None and "ports" not in c
    else:
        assert live.metrics_host == "0.0.0.0" and live.metrics_linger_s > 0
        (port,) = c["ports"]
        assert port["containerPort"] == live.metrics_port


def test_the_parts_that_must_agree_do():
    docs = render(*EVERYTHING)
    kinds = by_kind(docs)
    pod = kinds["Job"]["spec"]["template"]
    c = container(docs)
    _, values = parse(c["args"])
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(values["metrics_port"]) == "9500"
    assert pod["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    assert pod["metadata"]["annotations"]["team"] == "inference"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert (
        volumes["results"]["persistentVolumeClaim"]["claimName"] == kinds["PersistentVolumeClaim"]["metadata"]["name"]
    )
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert str(values["out"]).startswith(mounts["results"] + "/")
    env = {e["name"]: e for e in c["env"]}
    assert env["LOADPROOF_STORE_AUTO"]["value"] == "1"
    assert env["LOADPROOF_STORE"]["valueFrom"]["secretKeyRef"] == {"name": "results-db", "key": "url"}
    assert env["LOADPROOF_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "vllm-key"
    assert values["api_key_env"] == "LOADPROOF_API_KEY" and values["model"] == "llama-3-8b"
    assert env["LOADPROOF_HOME"]["value"].startswith(mounts["scratch"])  # the root file system is read-only
    assert c["image"] == "registry.example/loadproof:0.1.0-test"
    assert pod["spec"]["securityContext"]["runAsUser"] == image_user()


def test_without_the_store_or_a_key_no_secret_is_named():
    c = container(render())
    assert not [e for e in c["env"] if "valueFrom" in e]
    _, values = parse(c["args"])
    assert values["api_key_env"] is None


def test_an_existing_claim_is_used_and_none_is_made():
    docs = render(*VARIANTS["existing claim, no metrics"])
    assert "PersistentVolumeClaim" not in by_kind(docs)
    pod = by_kind(docs)["Job"]["spec"]["template"]
    assert "annotations" not in pod["metadata"]
    (results,) = [v for v in pod["spec"]["volumes"] if v["name"] == "results"]
    assert results["persistentVolumeClaim"]["claimName"] == "shared-runs"


def image_user() -> int:
    """The numeric USER the Containerfile runs as."""
    (user,) = re.findall(r"^USER\s+(\d+)\s*$", CONTAINERFILE.read_text(), flags=re.M)
    return int(user)


def test_the_containerfile_builds_from_what_the_repository_has():
    text = CONTAINERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, flags=re.M)
    for line in re.findall(r"^COPY\s+(.+)$", text, flags=re.M):
        *sources, _ = line.split()
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    extras = re.findall(r"^ARG EXTRAS=(\S*)$", text, flags=re.M)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras and all(e in declared for e in extras[0].split(",") if e), extras
    assert 'ENTRYPOINT ["loadproof"]' in text
