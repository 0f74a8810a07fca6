"""report.md and report.html show every figure that has an interval with it, in one form (`0.1780 [0.1520,
0.2120]`), say where a percentile had too few values for one, and draw each marked percentile's interval as a
whisker; the console's headline stays within ten lines, its decision first.

The run is the synthetic load run of tests/unit/publish/synthetic_load.py: TTFT's p50 has an interval (worked
out here from its TTFTs and the order-statistic ranks), its p99 has none (60 values, a p99 needs 368).
"""

from __future__ import annotations

import json
import re

import pytest

from loadproof.metrics.intervals import order_statistic_ranks
from loadproof.report.build import build_report
from loadproof.report.headline import decision, headline_lines
from tests.unit.publish.synthetic_load import REQUESTS, load_run, ttft_s

TOO_FEW = "(n too small for a 95% interval)"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = load_run(tmp_path_factory.mktemp("report"))
    report = build_report(path)
    claims = json.loads((path / "claims.json").read_text())["claims"]
    return report, path, claims


def places(printed: str) -> int:
    return len(printed.split(".", 1)[1]) if "." in printed else 0


def shown(claim: dict) -> str:
    """`printed [low, high]` as a reader should see it, from claims.json."""
    interval, n = claim["interval"], places(claim["printed"])
    return f"{claim['printed']} [{interval['low']:.{n}f}, {interval['high']:.{n}f}]"


def ttft_p50_by_hand() -> tuple[float, float, float]:
    ttfts = sorted(ttft_s(i) for i in range(REQUESTS))
    ranks = order_statistic_ranks(REQUESTS, 0.5)
    assert ranks is not None
    return (ttfts[29] + ttfts[30]) / 2, ttfts[ranks.low - 1], ttfts[ranks.high - 1]


def claim_row(markdown: str, name: str) -> str:
    (row,) = [line for line in markdown.splitlines() if line.startswith(f"| `{name}` |")]
    return row


def test_report_md_shows_every_interval_beside_its_figure(built):
    report, path, claims = built
    markdown = (path / "report.md").read_text()
    with_interval = [c for c in claims if "interval" in c]
    assert len(with_interval) >= 10
    for claim in with_interval:
        assert f"| {shown(claim)} |" in claim_row(markdown, claim["name"]), claim["name"]
    median, low, high = ttft_p50_by_hand()
    assert f"| {median:.4f} [{low:.4f}, {high:.4f}] | s |" in claim_row(markdown, "load.ttft_s.p50")
    assert "95% confidence interval stands beside it in brackets" in markdown


def test_a_percentile_of_too_few_values_says_so_and_a_figure_without_one_is_plain(built):
    _, path, claims = built
    markdown = (path / "report.md").read_text()
    by_name = {c["name"]: c for c in claims}
    p99 = by_name["load.ttft_s.p99"]
    assert "interval" not in p99
    assert f"| {p99['printed']} {TOO_FEW} | s |" in claim_row(markdown, "load.ttft_s.p99")
    for plain in ("load.ttft_s.std", "load.ttft_s.max", "load.requests"):  # never an interval: nothing said
        assert f"| {by_name[plain]['printed']} | " in claim_row(markdown, plain)


def test_report_html_shows_the_intervals_in_its_cards_and_tables(built):
    _, path, claims = built
    html = (path / "report.html").read_text()
    median, low, high = ttft_p50_by_hand()
    card = re.search(r'<div class="card" title="load.ttft_s.p50">.*?</div></div>', html)
    assert card is not None and f'<div class="interval">[{low:.4f}, {high:.4f}]</div>' in card.group(0)
    card99 = re.search(r'<div class="card" title="load.ttft_s.p99">.*?</div></div>', html)
    assert card99 is not None and TOO_FEW in card99.group(0)
    percentiles = html[html.index('<section id="percentiles">') :]
    percentiles = percentiles[: percentiles.index("</section>")]
    assert f'{median:.4f} <span class="interval">[{low:.4f}, {high:.4f}]</span>' in percentiles
    assert f'<span class="interval">{TOO_FEW}</span>' in percentiles
    folded = html[html.index('<details class="fold" id="claims">') :]
    for claim in claims:
        if "interval" in claim:
            figure, _, bounds = shown(claim).partition(" ")
            assert f'{figure} <span class="interval">{bounds}</span>' in folded, claim["name"]


def whisker_titles(svg: str) -> list[str]:
    return re.findall(r'<g class="whisker"[^>]*><title>95% interval \[([^\]]+)\]</title>', svg)


def figure_svg(html: str, key: str) -> str:
    start = html.index(f'id="fig-{key}"')
    return html[start : html.index("</svg>", start)]


def test_each_marked_percentile_with_an_interval_has_a_whisker_of_its_bounds(built):
    _, path, claims = built
    html = (path / "report.html").read_text()
    by_name = {c["name"]: c for c in claims}
    for stem, name in (("ttft", "ttft_s"), ("itl", "itl_s"), ("e2el", "e2el_s")):
        expected = []
        for stat in ("p50", "p99"):
            claim = by_name[f"load.{name}.{stat}"]
            if "interval" in claim:
                factor = 1000.0 if by_name[f"load.{name}.max"]["value"] < 1.0 else 1.0  # the plot's ms or s
                expected.append(f"{claim['interval']['low'] * factor:.4g}, {claim['interval']['high'] * factor:.4g}")
        assert expected, name
        for plot in (f"{stem}-cdf", f"{stem}-histogram"):
            assert whisker_titles(figure_svg(html, plot)) == expected, plot
    assert TOO_FEW in figure_svg(html, "ttft-cdf")  # the p99 mark says why it has no whisker


def test_the_console_headline_stays_within_ten_lines_its_decision_first(built):
    report, _, _ = built
    lines = headline_lines(report)
    assert lines[0] == decision(report) and len(lines) <= 10
