"""Every bundle the repository publishes (docs/runs/) verifies offline, claim by claim."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadproof.verify import verify

ROOT = Path(__file__).resolve().parents[3]
BUNDLES = sorted(p.parent for p in (ROOT / "docs" / "runs").glob("**/SHA256SUMS"))


def test_the_repository_publishes_bundles():
    assert BUNDLES, "docs/runs/ holds no bundle"


@pytest.mark.parametrize("bundle", BUNDLES, ids=[str(b.relative_to(ROOT / "docs" / "runs")) for b in BUNDLES])
def test_bundle_verifies(bundle: Path):
    result = verify(bundle)
    assert not result.problems, [str(p) for p in result.problems]
    bad = [c for c in result.checks if not c.ok]
    assert not bad, bad[:5]
    assert len(result.checks) > 10
