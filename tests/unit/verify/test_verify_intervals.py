"""verify recomputes every interval of a published load run; a tampered interval is a mismatch that names it.

The bundle is a synthetic load run (tests/unit/publish/synthetic_load.py) published as a user publishes one,
so its claims.json carries intervals. The expected interval of TTFT's p50 is worked out here from the run's
TTFTs and the order-statistic ranks, not read back from loadproof's claim. Each tamperer rewrites SHA256SUMS,
so only the recomputation can catch it.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

import pytest

from loadproof.metrics.intervals import order_statistic_ranks
from loadproof.publish import publish
from loadproof.verify import verify
from tests.unit.publish.synthetic import reseal
from tests.unit.publish.synthetic_load import LOAD_RUN, REQUESTS, load_run, ttft_s

RUN = f"runs/{LOAD_RUN}"
P50, P99 = "load.ttft_s.p50", "load.ttft_s.p99"  # p99: 60 values, fewer than a 95% interval needs


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("published")
    publish([load_run(root / "src")], root / "bundle")
    return root / "bundle"


@pytest.fixture
def bundle(published, tmp_path):
    shutil.copytree(published, tmp_path / "bundle")
    return tmp_path / "bundle"


def p50_by_hand() -> tuple[float, float, float]:
    """TTFT's median and the values at the ranks that bracket it at 95%."""
    ttfts = sorted(ttft_s(i) for i in range(REQUESTS))
    ranks = order_statistic_ranks(REQUESTS, 0.5)
    assert ranks is not None
    return (ttfts[29] + ttfts[30]) / 2, ttfts[ranks.low - 1], ttfts[ranks.high - 1]


def edit_claim(bundle, name, change) -> None:
    path = bundle / RUN / "claims.json"
    payload = json.loads(path.read_text())
    (claim,) = [c for c in payload["claims"] if c["name"] == name]
    change(claim)
    path.write_text(json.dumps(payload))
    reseal(bundle)


def checks_of(result, name):
    return [c for c in result.checks if c.name == name]


def test_the_published_load_run_verifies_with_its_intervals_recomputed(bundle):
    claims = json.loads((bundle / RUN / "claims.json").read_text())["claims"]
    with_interval = [c for c in claims if "interval" in c]
    assert len(with_interval) >= 10
    result = verify(bundle)
    assert result.ok, [line for line in result.lines() if not line.startswith("ok")]
    assert result.summary().endswith(f"; {len(with_interval)} published interval(s) recomputed")
    median, low, high = p50_by_hand()
    assert f"ok  {P50}  {median:.4f} [{low:.4f}, {high:.4f}]" in result.lines()
    (p99,) = checks_of(result, P99)
    assert p99.ok and p99.interval is None and p99.line() == f"ok  {P99}  {p99.published}"


def widened(key, by):
    return lambda claim: claim["interval"].update({key: claim["interval"][key] + by})


@pytest.mark.parametrize(
    ("name", "change", "says"),
    [
        (P50, widened("low", -0.001), "interval ["),  # one unit of the 4th decimal
        (P50, widened("high", +0.001), "interval ["),
        (P50, lambda c: c["interval"].update(confidence=0.9), "interval confidence 0.9, recomputed 0.95"),
        (P50, lambda c: c["interval"].update(method="Wilson score"), "interval method 'Wilson score', recomputed"),
        (
            "load.slo_attainment_pct",
            lambda c: c["interval"].update(low=c["interval"]["low"] + 0.5),
            "interval [",
        ),
        (
            P99,
            lambda c: c.update(interval={"low": 0.2, "high": 0.3, "confidence": 0.95, "method": "order statistics"}),
            "an interval is published, the records give none",
        ),
    ],
    ids=["low", "high", "confidence", "method", "share-bound", "added-to-a-claim-without-one"],
)
def test_a_tampered_interval_is_a_mismatch_naming_the_interval(bundle, name, change, says):
    edit_claim(bundle, name, change)
    result = verify(bundle)
    assert not result.ok and not result.problems
    assert [c.name for c in result.checks if not c.ok] == [name]
    (check,) = checks_of(result, name)
    assert says in check.reason
    assert check.line().startswith(f"MISMATCH  {name}  published ") and says in check.line()
    assert result.summary().startswith("FAILED")


def test_a_bound_moved_within_the_printed_precision_still_verifies(bundle):
    edit_claim(bundle, P50, widened("low", 0.00004))  # 0.1520 stays 0.1520 at 4 decimals
    assert verify(bundle).ok


def test_a_removed_interval_claims_less_and_still_verifies(bundle):
    before = verify(bundle)
    edit_claim(bundle, P50, lambda c: c.pop("interval"))
    result = verify(bundle)
    assert result.ok
    (check,) = checks_of(result, P50)
    assert check.interval is None and check.line() == f"ok  {P50}  {check.published}"
    count = sum(c.interval is not None for c in before.checks)
    assert result.summary().endswith(f"; {count - 1} published interval(s) recomputed")


HOSTILE = {
    "a string": "0.15 to 0.21",
    "a list": [0.152, 0.212],
    "a huge list": [0] * 200_000,
    "a number": 0.18,
    "an extra key": {"low": 0.152, "high": 0.212, "confidence": 0.95, "method": "x", "note": "mine"},
    "a NaN bound": {"low": math.nan, "high": 0.212, "confidence": 0.95, "method": "x"},
    "an infinite bound": {"low": 0.152, "high": math.inf, "confidence": 0.95, "method": "x"},
    "a 39-digit bound": {"low": 10**38, "high": 10**38, "confidence": 0.95, "method": "x"},
    "a boolean bound": {"low": True, "high": 0.212, "confidence": 0.95, "method": "x"},
    "a string bound": {"low": "0.152", "high": 0.212, "confidence": 0.95, "method": "x"},
    "a NaN confidence": {"low": 0.152, "high": 0.212, "confidence": math.nan, "method": "x"},
    "a huge confidence": {"low": 0.152, "high": 0.212, "confidence": 10**38, "method": "x"},
    "a list confidence": {"low": 0.152, "high": 0.212, "confidence": [0.95] * 100_000, "method": "x"},
    "a huge method": {"low": 0.152, "high": 0.212, "confidence": 0.95, "method": "m" * 1_000_000},
    "a list method": {"low": 0.152, "high": 0.212, "confidence": 0.95, "method": ["m"] * 100_000},
    "a method with escapes": {"low": 0.152, "high": 0.212, "confidence": 0.95, "method": "\x1b[2Kok"},
}


@pytest.mark.parametrize("interval", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_interval_is_a_mismatch_never_a_crash(bundle, interval):
    edit_claim(bundle, P50, lambda c: c.update(interval=interval))
    result = verify(bundle)
    assert not result.ok and not result.problems  # the claims file was read and compared
    assert [c.name for c in result.checks if not c.ok] == [P50]
    (check,) = checks_of(result, P50)
    assert "interval" in check.reason and len(check.line()) < 400
    assert "\x1b" not in "\n".join(result.lines())


def test_a_bound_of_more_digits_than_the_reader_takes_is_a_file_problem(bundle):
    edit_claim(bundle, P50, lambda c: c["interval"].update(low=10**400))
    result = verify(bundle)
    assert not result.ok and [p.path for p in result.problems] == [f"{RUN}/claims.json"]
    assert "integer of 401 digits" in result.problems[0].detail


def test_the_cli_shows_each_interval_and_fails_on_a_tampered_one(bundle):
    def loadproof_verify():
        return subprocess.run(
            [sys.executable, "-m", "loadproof", "verify", str(bundle)], capture_output=True, text=True, timeout=120
        )

    ok = loadproof_verify()
    assert ok.returncode == 0, ok.stdout + ok.stderr
    median, low, high = p50_by_hand()
    assert f"ok  {P50}  {median:.4f} [{low:.4f}, {high:.4f}]" in ok.stdout.splitlines()
    assert "published interval(s) recomputed" in ok.stdout.splitlines()[-1]
    edit_claim(bundle, P50, widened("high", 0.01))
    tampered = loadproof_verify()
    assert tampered.returncode == 1 and "Traceback" not in tampered.stderr
    assert any(line.startswith(f"MISMATCH  {P50}") and "interval [" in line for line in tampered.stdout.splitlines())
