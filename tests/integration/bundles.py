"""Publish a run (or a search folder) with the CLI and verify the bundle with the CLI: the path a user takes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def verify_bundle(bundle: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadproof", "verify", str(bundle)], capture_output=True, text=True, timeout=120
    )


def publish_and_verify(source: Path, bundle: Path) -> subprocess.CompletedProcess[str]:
    """`loadproof publish SOURCE --out BUNDLE`, then `loadproof verify BUNDLE`, both asserted to succeed;
    returns verify's result."""
    published = subprocess.run(
        [sys.executable, "-m", "loadproof", "publish", str(source), "--out", str(bundle)],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert published.returncode == 0, published.stderr[-2000:]
    verified = verify_bundle(bundle)
    assert verified.returncode == 0 and "VERIFIED" in verified.stdout, verified.stdout[-2000:]
    return verified
