"""The printed-precision rule, on figures worked out by hand."""

from decimal import Decimal

import pytest

from loadproof.metrics.claims import Claim
from loadproof.verify import matches_printed, printed_interval
from loadproof.verify.check import compare_claims


def test_a_printed_figure_stands_for_a_closed_interval():
    assert printed_interval("7.4") == (Decimal("7.35"), Decimal("7.45"))
    assert printed_interval("0.250") == (Decimal("0.2495"), Decimal("0.2505"))
    assert printed_interval("1536") == (Decimal("1535.5"), Decimal("1536.5"))
    assert printed_interval("-2.0") == (Decimal("-2.05"), Decimal("-1.95"))
    assert printed_interval("PASS") is None and printed_interval("nan") is None


@pytest.mark.parametrize(
    ("value", "printed", "ok"),
    [
        (7.35, "7.4", True),  # the double below 7.35 still counts: float rounding only at the ends
        (7.45, "7.4", True),
        (7.4, "7.4", True),
        (7.3, "7.4", False),
        (7.3499, "7.4", False),
        (7.4501, "7.4", False),
        (100 / 13.7, "7.3", True),  # 7.2992...
        (100 / 13.7, "7.30", True),
        (100 / 13.7, "7.299", True),
        (100 / 13.7, "7.298", False),
        (4, "4", True),
        (5, "4", False),
        (0, "0", True),
        (9.5, "9.50", True),
        (float("nan"), "nan", True),
        (float("nan"), "0.0", False),
        (True, "1", False),  # a boolean is not a number here
    ],
)
def test_matches_printed(value, printed, ok):
    assert matches_printed(value, printed) is ok


def claim(value, printed, name="throughput.english.c1.decode_tokens_per_s", unit="tokens/s"):
    return Claim(
        name, value, unit, printed, "formula", "fact" if isinstance(value, (bool, str)) else "figure", "neither"
    )


def published(value, printed, name="throughput.english.c1.decode_tokens_per_s", unit="tokens/s"):
    return {"name": name, "value": value, "unit": unit, "printed": printed, "formula": "formula"}


def test_recomputed_7_35_against_printed_7_4_passes_and_7_3_fails():
    assert compare_claims("r", [published(7.4, "7.4")], [claim(7.35, "7.3")])[0].ok
    check = compare_claims("r", [published(7.4, "7.4")], [claim(7.3, "7.3")])[0]
    assert not check.ok
    assert check.line() == (
        "MISMATCH  throughput.english.c1.decode_tokens_per_s  published 7.4 recomputed 7.3"
        "  (recomputed value outside [7.35, 7.45])"
    )


def test_the_published_value_must_round_to_its_own_printed_figure():
    check = compare_claims("r", [published(7.5, "7.4")], [claim(7.4, "7.4")])[0]
    assert not check.ok and "does not round to its printed" in check.reason


def test_names_strings_booleans_and_units():
    checks = compare_claims(
        "r",
        [
            published("PASS", "PASS", "capacity.verdict", ""),
            published(True, "yes", "telemetry.pcie_max_link_under_load", ""),
            published(3, "3", "extra.claim", ""),
        ],
        [
            claim("FAIL", "FAIL", "capacity.verdict", ""),
            claim(True, "yes", "telemetry.pcie_max_link_under_load", ""),
            claim(2, "2", "missing.claim", ""),
        ],
    )
    by_name = {c.name: c for c in checks}
    assert not by_name["capacity.verdict"].ok
    assert by_name["telemetry.pcie_max_link_under_load"].ok
    assert not by_name["missing.claim"].ok and by_name["missing.claim"].published == "(none)"
    assert not by_name["extra.claim"].ok and by_name["extra.claim"].recomputed == "(none)"
    assert not compare_claims("r", [published(7.4, "7.4", unit="s")], [claim(7.4, "7.4")])[0].ok
    assert not compare_claims("r", [published(1, "1", "b", "")], [claim(True, "yes", "b", "")])[0].ok
