"""A rate search's and a sweep's page: the curves of attainment and TTFT against the rate, the target, the SLO
and the rate found (a lower bound said to be one), the whole trial table with each run linked, the claims
folded; and report.md's curves as SVG files beside it."""

from __future__ import annotations

import re

from loadproof.metrics.figures import Headline, LinePlot
from loadproof.metrics.load_series import search_claims
from loadproof.metrics.series_figures import search_outcome, search_panels, sweep_panels
from loadproof.report.series import write_series_report
from loadproof.rundir.series import SearchTrial, SweepPoint
from tests.unit.report.test_html import assert_self_contained, plot_keys

SLO = {"ttft": 0.25, "tpot": 0.02}


def trial(rate: float, attained: float, index: int) -> SearchTrial:
    return SearchTrial(
        rate_rps=rate,
        passed=attained >= 95,
        index=index,
        run_dir=f"load-{index}",
        slo_attainment_pct=attained,
        slo_attainment_pct_printed=f"{attained:.2f}",
        ttft_p50_s=0.02 * rate,
        ttft_p99_s=0.05 * rate,
        goodput_rps=rate * attained / 100,
        request_throughput_rps=rate,
    )


TRIALS = [trial(16, 100.0, 0), trial(32, 60.0, 1), trial(24, 99.0, 2), trial(28, 40.0, 3)]


def marks(panel: LinePlot) -> list[str]:
    return [m.label for m in panel.marks]


def test_a_search_draws_attainment_and_ttft_against_the_rate_with_the_rate_found():
    claims = search_claims(TRIALS, 0.95, "ttft <= 250 ms, tpot <= 20 ms")
    top, attained, ttft, goodput = search_panels(TRIALS, claims, 0.95, SLO)
    assert isinstance(top, Headline) and top.figures[0].label == "highest rate meeting the SLO"
    assert top.figures[0].printed == "24.0000" and top.note == "SLO: ttft <= 250 ms, tpot <= 20 ms"
    assert isinstance(attained, LinePlot) and attained.key == "attainment-vs-rate"
    every, passed, failed = attained.series
    assert every.points == [(16, 100.0), (24, 99.0), (28, 40.0), (32, 60.0)]  # by rate, not in the order tried
    assert (passed.points, failed.points) == ([(16, 100.0), (24, 99.0)], [(28, 40.0), (32, 60.0)])
    assert [(level.y, level.label) for level in attained.levels] == [(95.0, "target 95%")]
    assert marks(attained) == ["highest passing: 24 requests/s", "fails: 28"]
    assert isinstance(ttft, LinePlot) and ttft.key == "ttft-vs-rate" and ttft.levels[0].label == "SLO: ttft <= 250 ms"
    assert ttft.series[1].points[0] == (16, 800.0)  # p99 in ms
    assert goodput.key == "goodput-vs-rate" and search_outcome(claims) == "FOUND"


def test_an_interrupted_search_marks_a_lower_bound_and_says_why():
    claims = search_claims(TRIALS[:1], 0.95, "ttft <= 250 ms", interrupted=True)
    top, attained, *_ = search_panels(TRIALS[:1], claims, 0.95, SLO)
    assert marks(attained) == ["lower bound: at least 16 requests/s (search interrupted)"]
    assert isinstance(top, Headline) and top.figures[0].label == "at least (a lower bound)"
    assert search_outcome(claims) == "LOWER BOUND"
    every_passed = search_claims(TRIALS[:1], 0.95, "")
    assert marks(search_panels(TRIALS[:1], every_passed, 0.95, {})[1]) == [
        "lower bound: at least 16 requests/s (every rate tried passed)"
    ]
    assert search_outcome(search_claims(TRIALS[1:2], 0.95, "")) == "NONE PASSED"


def test_the_search_page_holds_every_trial_linked_and_the_claims_folded(tmp_path):
    claims = search_claims(TRIALS, 0.95, "ttft <= 250 ms")
    header = ["rate", "SLO met %", "verdict", "run"] + [f"figure {i}" for i in range(12)] + ["run"]
    rows = [
        [f"{t.rate_rps:g}", t.slo_attainment_pct_printed, "PASS" if t.passed else "FAIL"]
        + [t.run_dir]
        + [f"{i}.000" for i in range(12)]
        + [t.run_dir]
        for t in TRIALS
    ]
    write_series_report(
        tmp_path,
        "loadproof load rate search s",
        ["a result"],
        header,
        rows,
        search_panels(TRIALS, claims, 0.95, SLO),
        claims,
        search_outcome(claims),
    )
    html = (tmp_path / "report.html").read_text()
    assert_self_contained(html)
    assert plot_keys(html) == ["attainment-vs-rate", "ttft-vs-rate", "goodput-vs-rate"]
    assert '<div class="verdict pass">FOUND</div>' in html
    table = html[html.index('<table class="wide">') : html.index("</table>")]
    assert table.count("<tr>") == 1 + len(TRIALS) and table.count("<th>") == len(header)  # nothing clipped
    assert all(f'<a href="load-{i}/report.html"><code>load-{i}</code></a>' in table for i in range(4))
    assert '<td class="fail">FAIL</td>' in table and '<td class="pass">PASS</td>' in table
    assert '<details class="fold" id="claims">' in html and "<code>load.search.max_rate_rps</code>" in html
    markdown = (tmp_path / "report.md").read_text()
    files = re.findall(r"\]\(([^)]+\.svg)\)", markdown)
    assert files == ["attainment-vs-rate.svg", "ttft-vs-rate.svg", "goodput-vs-rate.svg"]
    assert all((tmp_path / f).read_text().startswith("<svg") for f in files)


def test_a_sweep_keeps_its_curve_files():
    points = [
        SweepPoint(
            kind="rate",
            rate_rps=r,
            ttft_p50_s=0.1 * r,
            ttft_p99_s=0.2 * r,
            itl_p99_s=0.01,
            e2el_p50_s=1.0 * r,
            goodput_rps=r,
            request_throughput_rps=r,
            slo_attainment_pct=100.0 - r,
        )
        for r in (1.0, 2.0, 4.0)
    ]
    assert [p.key for p in sweep_panels(points)] == ["latency", "e2el", "goodput", "attainment"]
    assert sweep_panels(points[:1]) == []  # a curve needs two points
