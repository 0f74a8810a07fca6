"""A folder of runs gets index.html: a row per run and per series, each linking its report.html, with its
scenario, verdict and one key figure; `loadproof report FOLDER` writes it."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from loadproof.cli import app
from loadproof.report.index import INDEX_HTML, build_index, is_runs_folder
from loadproof.rundir.series import RateSearch, SearchTrial
from loadproof.store.series import SEARCH_JSON, write_document
from tests.unit.report.synthetic import throughput_run
from tests.unit.report.test_html import assert_self_contained, capacity_run


def search_folder(root, lower_bound: bool):
    """A search folder's summary as its command leaves it (its trials' run directories are not read here)."""
    folder = root / "load-search-1"
    folder.mkdir()
    trials = [SearchTrial(rate_rps=4.0, passed=True, run_dir="load-a")]
    summary = RateSearch(
        attainment=0.95, trials=trials, max_rate_rps=4.0, lower_bound=lower_bound, result="a lower bound, not a result"
    )
    write_document(folder / SEARCH_JSON, summary)
    return folder


def test_each_run_and_series_is_a_row_linking_its_report(tmp_path):
    throughput_run(tmp_path, "tp-1", [20.0, 21.0])
    capacity_run(tmp_path)  # its three streams all cancelled: it measured nothing, said before any verdict
    search_folder(tmp_path, lower_bound=True)
    (tmp_path / "notes").mkdir()  # neither a run nor a series: left out
    assert is_runs_folder(tmp_path) and not is_runs_folder(tmp_path / "tp-1")
    rows = build_index(tmp_path)
    assert [(r.name, r.kind, r.verdict) for r in rows] == [
        ("cap", "capacity", "NOTHING MEASURED"),
        ("load-search-1", "load rate search", "LOWER BOUND"),
        ("tp-1", "throughput", ""),
    ]
    assert rows[2].figure == "20.5 tokens/s (english: one stream, c1 decode)"
    assert rows[1].figure == "4 requests/s (at least)" and rows[1].note == "a lower bound, not a result"
    html = (tmp_path / INDEX_HTML).read_text()
    assert_self_contained(html)
    assert re.findall(r'<a href="([^"]+)">', html) == [
        "cap/report.html",
        "load-search-1/report.html",
        "tp-1/report.html",
    ]
    assert (tmp_path / "tp-1" / "report.html").is_file() and (tmp_path / "cap" / "report.html").is_file()
    assert '<td class="fail">NOTHING MEASURED</td>' in html and '<td class="bound">LOWER BOUND</td>' in html


def test_loadproof_report_of_a_folder_writes_its_index(tmp_path):
    throughput_run(tmp_path, "tp-1", [20.0])
    throughput_run(tmp_path, "tp-2", [30.0])
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"html: {tmp_path / INDEX_HTML}" in result.output and "tp-2" in result.output
    assert (tmp_path / "tp-1" / "report.html").is_file() and (tmp_path / INDEX_HTML).is_file()
