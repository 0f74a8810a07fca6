"""`loadproof compare ... --out FILE.html`: the decision, the sides' latency distributions overlaid, the change
table; one self-contained page."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from loadproof.cli import app
from loadproof.report.compare import compare
from loadproof.report.compare_html import render_compare_html
from tests.unit.report.synthetic import throughput_run
from tests.unit.report.test_compare import side
from tests.unit.report.test_html import assert_self_contained, plot_keys


def test_the_page_overlays_each_sides_distributions(tmp_path):
    base, other, cand = (
        side(tmp_path, "base", [10.0, 10.5]),
        side(tmp_path, "old", [9.0, 9.1]),
        side(tmp_path, "cand", [12.0, 12.2]),
    )
    html = render_compare_html(compare(cand, [base, other], max_slowdown=0.05))
    assert_self_contained(html)
    assert plot_keys(html) == ["ttft-by-side", "itl-by-side", "tpot-by-side", "e2el-by-side"]
    ttft = html[html.index('data-plot="ttft-by-side"') : html.index('data-plot="itl-by-side"')]
    assert ttft.count("<polyline") == 3  # B1, B2 and the candidate, one over the other
    assert ">base (B1) (n=2)<" in ttft and ">old (B2) (n=2)<" in ttft and ">cand (candidate) (n=2)<" in ttft
    assert '<div class="verdict pass">ACCEPT</div>' in html
    assert "<code>throughput.english.c1.decode_tokens_per_s</code>" in html  # the change table follows


def test_compare_out_html_writes_the_page(tmp_path):
    base = throughput_run(tmp_path, "base", [10.0, 10.2, 9.9])
    cand = throughput_run(tmp_path, "cand", [12.0, 12.1, 11.8])
    out = tmp_path / "compare.html"
    result = CliRunner().invoke(app, ["compare", str(base), str(cand), "--out", str(out)])
    assert result.output.count(f"comparison: {out}") == 1, result.output
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and re.findall(r'data-plot="([^"]+)"', page)[0] == "ttft-by-side"
