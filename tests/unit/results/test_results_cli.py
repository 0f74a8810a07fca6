"""`loadproof store add` and `loadproof history` as a user runs them (in process, through the CLI's one place that
maps errors to exit codes): what they print, the trend page, and every mistake one line with exit 2."""

from __future__ import annotations

import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from loadproof.cli import main
from loadproof.results.auto import storing
from loadproof.results.history import history, parse_since
from loadproof.results.store import open_store
from loadproof.results.trend import page_html
from tests.unit.results.stored_runs import CLAIM, history_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return history_runs(tmp_path_factory.mktemp("runs") / "runs")


def cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["loadproof", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_store_add_then_history(runs, tmp_path, monkeypatch, capsys):
    db = tmp_path / "r.db"
    code, out, _ = cli(monkeypatch, capsys, "store", "add", str(runs[0].parent), "--store", str(db))
    assert code == 0, out
    assert out.count("\nadded  ") + out.startswith("added  ") == len(runs)
    assert re.search(rf"{len(runs)} run\(s\) added \([\d,]+ claims\), 0 already stored; results store {db}", out)
    code, out, _ = cli(monkeypatch, capsys, "store", "add", str(runs[0]), "--store", str(db))
    assert (code, out.splitlines()[0]) == (0, f"already stored  {runs[0].name}  (load, {_claims(runs[0])} claims)")
    monkeypatch.setenv("LOADPROOF_STORE", str(db))  # the setting, instead of --store
    page = tmp_path / "pages" / "ttft.html"
    code, out, _ = cli(monkeypatch, capsys, "history", CLAIM, "--html", str(page))
    assert code == 0, out
    assert f"{CLAIM}: {len(runs)} run(s), every stored run" in out
    assert _order(out, [r.name for r in runs]) == [r.name for r in runs]  # oldest first
    assert re.search(r"\d\.\d+ s \[\d\.\d+, \d\.\d+\]", out), "values with their intervals"
    assert f"page: {page}" in out and page.is_file()


def _order(text: str, names: list[str]) -> list[str]:
    """`names` in the order `text` first mentions them (a name it does not mention left out)."""
    return sorted((n for n in names if n in text), key=text.index)


def _claims(run: Path) -> int:
    return (run / "claims.json").read_text().count('"name"')


def test_history_where_and_since(runs, tmp_path):
    with open_store(str(tmp_path / "r.db")) as store:
        store.add_path(runs[0].parent)
        every = history(store, CLAIM)
        assert [p.run.run_id for p in every.points] == [r.name for r in runs]  # oldest first
        last = every.points[-1].run
        one = history(store, CLAIM, {"profile": last.profile or ""})
        assert [p.run.run_id for p in one.points] == [last.run_id]
        assert [p.run.run_id for p in history(store, CLAIM, since=last.started_at).points] == [last.run_id]


def test_since_takes_dates_times_and_ages():
    assert parse_since("2026-12-01").isoformat() == "2026-12-01T00:00:00+00:00"
    assert parse_since("2026-12-01T10:30").isoformat() == "2026-12-01T10:30:00+00:00"
    assert parse_since("2026-12-01T10:30+02:00").isoformat() == "2026-12-01T10:30:00+02:00"
    now = parse_since("2026-12-08")
    assert parse_since("7d", now) == parse_since("2026-12-01") == parse_since("1w", now)


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.points: list[str] = []
        self.links: list[str] = []
        self.whiskers = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        got = dict(attrs)
        if tag == "a" and got.get("href"):
            self.links.append(got["href"] or "")
        if tag == "circle" and got.get("class") == "point":
            self.points.append(got.get("data-run") or "")
        if tag == "g" and got.get("class") == "whisker":
            self.whiskers += 1


def test_the_trend_page_draws_each_run_its_interval_and_links_it(runs, tmp_path):
    with open_store(str(tmp_path / "r.db")) as store:
        store.add_path(runs[0].parent)
        found = history(store, CLAIM)
    page = tmp_path / "out" / "trend.html"
    page.parent.mkdir()
    html = page_html(found, page)
    parsed = Links()
    parsed.feed(html)
    assert parsed.points == [r.name for r in runs] or sorted(parsed.points) == sorted(r.name for r in runs)
    assert parsed.whiskers == sum(p.claim.has_interval for p in found.points) > 0
    assert parsed.links and all((page.parent / link).exists() for link in parsed.links)
    assert {Path(link).name for link in parsed.links} == {r.name for r in runs}
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_a_text_claim_has_a_table_and_no_plot(runs, tmp_path):
    with open_store(str(tmp_path / "r.db")) as store:
        store.add_path(runs[0].parent)
        text_claims = [c.name for c in store.query()[0].claims.values() if not c.is_number]
        found = history(store, text_claims[0])
    html = page_html(found, tmp_path / "p.html")
    assert "<svg" not in html and "Not a number" in html and "<table>" in html


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["history", "load.ttft_s.p5"], "has the claim load.ttft_s.p5; the nearest: load.ttft_s.p95, load.ttft_s.p50"),
        (["history", CLAIM, "--where", "profile=nobody"], "matches profile=nobody (6 stored run(s) have the claim)"),
        (["history", CLAIM, "--where", "pasword=x"], "--where pasword: not a stored field"),
        (["history", CLAIM, "--where", "profile"], "each condition is KEY=VALUE"),
        (["history", CLAIM, "--since", "yesterday"], "--since yesterday: a date"),
        (["history", CLAIM, "--since", "2099-01-01"], "matches since 2099-01-01 00:00 UTC"),
        (["store", "add", "EMPTY"], "no run directory or bundle to add under it"),
        (["store", "add", "NOWHERE"], "no run directory, bundle or folder there"),
    ],
)
def test_a_mistake_is_one_line_with_exit_2(args, says, runs, tmp_path, monkeypatch, capsys):
    db = tmp_path / "r.db"
    with open_store(str(db)) as store:
        store.add_path(runs[0].parent)
    (tmp_path / "EMPTY").mkdir()
    args = [str(tmp_path / a) if a in ("EMPTY", "NOWHERE") else a for a in args]
    code, out, err = cli(monkeypatch, capsys, *args, "--store", str(db))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and says in err, err


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (
            "postgresql://alice:s3cret-pw@127.0.0.1:1/results",
            "cannot reach the results store postgresql://alice@127.0.0.1:1/results",
        ),
        ("mysql://alice@db/results", "mysql:// is not a store this loadproof keeps"),
        ("sqlite://", "a SQLite store is a file"),
    ],
)
def test_a_store_that_cannot_be_used_is_one_line_without_its_password(url, says, monkeypatch, capsys):
    code, out, err = cli(monkeypatch, capsys, "history", CLAIM, "--store", url)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and says in err, err
    assert "s3cret" not in err


def test_a_missing_postgres_driver_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the postgres extra were not installed
    code, _, err = cli(monkeypatch, capsys, "history", CLAIM, "--store", "postgresql://u@127.0.0.1:1/db")
    assert code == 2 and "a PostgreSQL store needs psycopg: pip install 'loadproof[postgres]'" in err, err


def test_the_automatic_setting_adds_the_runs_a_command_made(runs, tmp_path, monkeypatch):
    out = tmp_path / "runs"
    out.mkdir()
    shutil.copytree(runs[0], out / runs[0].name)  # there before the command: not its run
    said: list[str] = []
    monkeypatch.setenv("LOADPROOF_STORE", str(tmp_path / "r.db"))
    with storing(out, said.append):  # the setting off: nothing stored, nothing said
        shutil.copytree(runs[1], out / runs[1].name)
    assert said == [] and not (tmp_path / "r.db").exists()
    monkeypatch.setenv("LOADPROOF_STORE_AUTO", "1")
    with pytest.raises(KeyboardInterrupt), storing(out, said.append):  # interrupted: what finished is added
        shutil.copytree(runs[2], out / "search" / runs[2].name)
        shutil.copytree(runs[3], out / "search" / runs[3].name)
        (out / "search" / runs[3].name / "claims.json").unlink()  # ended before it was reported
        raise KeyboardInterrupt
    assert said[-1] == f"results store: 1 run(s) added to {tmp_path / 'r.db'}"
    assert "not added" in said[0] and runs[3].name in said[0]
    with open_store(None) as store:
        assert [r.run_id for r in store.query()] == [runs[2].name]
