"""The console's compact table: one row per distribution, columns mean/p50/p90/p99/max; the rest apart."""

from loadproof.metrics.claims import count, number
from loadproof.report.distributions import distribution_table


def test_one_row_per_metric_and_the_rest_untouched():
    claims = [count("load.requests", 10, "requests", "x", direction="neither")]
    for metric in ("ttft_s", "itl_s"):
        for i, stat in enumerate(("mean", "std", "p50", "p90", "p95", "p99", "p99_9", "max")):
            claims.append(
                number(f"load.{metric}.<stat>", 0.1 * (i + 1), "s", "f", 3, direction="lower", parts={"stat": stat})
            )
    claims.append(number("load.goodput_rps", 2.0, "requests/s", "g", 3, direction="higher"))
    header, rows, rest = distribution_table(claims)
    assert header == ["metric", "mean", "p50", "p90", "p99", "max", "unit"]
    assert rows == [
        ["load.ttft_s", "0.100", "0.300", "0.400", "0.600", "0.800", "s"],
        ["load.itl_s", "0.100", "0.300", "0.400", "0.600", "0.800", "s"],
    ]
    assert [c.name for c in rest] == ["load.requests", "load.goodput_rps"]


def test_a_distribution_without_every_column_leaves_the_cell_empty():
    claims = [
        number("load.client_lag_s.<stat>", 0.5, "s", "f", 3, direction="lower", parts={"stat": s})
        for s in ("p50", "p99", "max")
    ]
    _, rows, rest = distribution_table(claims)
    assert rows == [["load.client_lag_s", "", "0.500", "", "0.500", "0.500", "s"]] and not rest
