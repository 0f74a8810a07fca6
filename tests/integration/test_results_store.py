"""The results store on a real PostgreSQL server and on SQLite, side by side: the same runs added through the
command line, `history` over each the same, the trend page of each opened in a real headless Chromium (no console
error, every run a point linking to its run, every interval a whisker, no layout fault).

PostgreSQL is Debian's `postgresql` (installed once with apt-get when missing, as the Chromium test installs
chromium), its cluster made with initdb in a temporary folder and started with pg_ctl on 127.0.0.1 on a free port,
as the `postgres` user (the server refuses to run as root), with a password (scram-sha-256), and stopped at the end.
The runs are published sample runs (tests/bundles.py) with their claims recomputed, so they carry intervals
(tests/unit/results/stored_runs.py), and the seven runs of one `loadproof demo` on the embedded engine, as it
published them (docs/runs/embedded-2026-12-06-demo): each store keeps every claim of each, `history` lists the
demo's load run with its interval after the earlier runs, and the trend page shows it.
"""

from __future__ import annotations

import asyncio
import fcntl
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import sqlalchemy as sa
from rich.console import Console

from loadproof.cli import main, ui
from loadproof.results.store import open_store
from tests.bundles import DOCS_RUNS
from tests.integration.test_report_html_chromium import INSPECT, DevTools, chromium, complaints
from tests.unit.results.stored_runs import CLAIM, history_runs

__all__ = ["chromium"]  # the Chromium test's fixture: one headless Chromium for this module

pytestmark = pytest.mark.timeout(300)  # a fresh machine installs postgresql first

PASSWORD = "pg-Secret-7461"
USER = "loadproof"


# --- PostgreSQL: found, or installed once; a cluster of its own ---------------------------------------------


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _install_postgresql() -> str:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("PostgreSQL is not installed and cannot be installed here (needs root and apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with open(Path(tempfile.gettempdir()) / "loadproof-postgresql-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _bin_dir() is not None:
            return "installed meanwhile by another test process"
        start = time.monotonic()
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "postgresql"]
        done = subprocess.run(install, env=env, capture_output=True, text=True)
        if done.returncode != 0:  # a fresh machine may have no package lists yet
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, text=True)
            done = subprocess.run(install, env=env, capture_output=True, text=True)
        if done.returncode != 0 or _bin_dir() is None:
            pytest.fail("apt-get install postgresql failed:\n" + (done.stdout + done.stderr)[-3000:])
        return f"installed with apt-get in {time.monotonic() - start:.1f} s"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server of its own on 127.0.0.1; yields its URL (password included), without a database."""
    how = "already installed" if _bin_dir() is not None else _install_postgresql()
    bin_dir = _bin_dir()
    assert bin_dir is not None
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="loadproof-pg-"))
    if os.geteuid() == 0:  # postgres refuses to run as root: its own user runs it
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(folder, "postgres")
    data, log, secret = folder / "data", folder / "server.log", folder / "pw"
    secret.write_text(PASSWORD + "\n")
    if as_user:
        shutil.chown(secret, "postgres")
    port = _free_port()
    initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--pwfile", str(secret)]
    initdb += ["--auth", "scram-sha-256", "-E", "UTF8", "--no-sync"]
    done = subprocess.run(as_user + initdb, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    start = [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start"]
    done = subprocess.run(as_user + start, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr + (log.read_text() if log.exists() else "")
    print(f"\npostgresql: {bin_dir.parent.name}, {how}, on 127.0.0.1:{port}", file=sys.stderr)
    try:
        yield f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}"
    finally:
        subprocess.run(as_user + [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres(postgres_server: str, request: pytest.FixtureRequest) -> str:
    """The URL of a new, empty database on the server, one a test."""
    name = f"results_{abs(hash(request.node.nodeid)) % 10**8}"
    admin = sa.create_engine(f"{postgres_server.replace('postgresql://', 'postgresql+psycopg://')}/postgres")
    with admin.execution_options(isolation_level="AUTOCOMMIT").connect() as connection:
        connection.execute(sa.text(f"DROP DATABASE IF EXISTS {name}"))
        connection.execute(sa.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return f"{postgres_server}/{name}"


# --- the runs and the command line ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return history_runs(tmp_path_factory.mktemp("stored") / "runs")


def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["loadproof", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_sqlite_and_postgresql_keep_the_same_history(postgres, runs, tmp_path, monkeypatch, capsys):
    sqlite = str(tmp_path / "results.db")
    tables = {}
    for store in (sqlite, postgres):
        code, out, err = cli(monkeypatch, capsys, "store", "add", str(runs[0].parent), "--store", store)
        assert code == 0, err
        assert f"{len(runs)} run(s) added" in out and PASSWORD not in out + err
        code, out, err = cli(monkeypatch, capsys, "store", "add", str(runs[0].parent), "--store", store)
        assert code == 0 and f"0 run(s) added (0 claims), {len(runs)} already stored" in out, out + err
        page = tmp_path / ("sqlite" if store == sqlite else "postgresql") / "trend.html"
        code, out, err = cli(monkeypatch, capsys, "history", CLAIM, "--store", store, "--html", str(page))
        assert code == 0, err
        tables[store] = [line for line in out.splitlines() if not line.startswith("page: ")]
        names = [r.name for r in runs]
        assert sorted(names, key=out.index) == names  # oldest first
    assert tables[sqlite] == tables[postgres]
    with open_store(sqlite) as one, open_store(postgres) as other:
        stored = [_comparable(r) for r in one.query()]
        assert len(stored) == len(runs) and stored == [_comparable(r) for r in other.query()]
        assert one.claim_names() == other.claim_names()


def _comparable(run: Any) -> tuple[Any, ...]:
    """A stored run without what each store sets itself (its key, when it was added)."""
    return (run.run_id, run.digest, run.started_at, run.profile, run.target, run.path, run.environment, run.claims)


def test_postgresql_refuses_a_newer_schema_and_a_wrong_password(postgres, runs, monkeypatch, capsys):
    with open_store(postgres) as store:
        store.add(runs[0])
    engine = sa.create_engine(postgres.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as connection:
        old = connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one()
        connection.execute(sa.text("UPDATE alembic_version SET version_num = '9001'"))
    try:
        code, out, err = cli(monkeypatch, capsys, "history", CLAIM, "--store", postgres)
        assert code == 2 and out == "" and "schema 9001, written by a newer loadproof" in err, err
        assert len(err.strip().splitlines()) == 1 and PASSWORD not in err
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text("UPDATE alembic_version SET version_num = :v"), {"v": old})
        engine.dispose()
    wrong = postgres.replace(PASSWORD, "not-the-password")
    code, out, err = cli(monkeypatch, capsys, "history", CLAIM, "--store", wrong)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "cannot reach the results store postgresql://loadproof@127.0.0.1:" in err and "not-the-password" not in err


# --- the trend page in Chromium --------------------------------------------------------------------------------

TREND = r"""
(() => {
  const all = (s) => [...document.querySelectorAll(s)];
  const seen = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  return {points: all("svg circle.point").filter(seen).map((c) => c.dataset.run),
          linked: all("svg a circle.point").length,
          whiskers: all("svg g.whisker").filter(seen).length,
          rows: all("#runs table tr").length - 1};
})"""


async def _open(browser_ws: str, url: str, width: int) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.ws_connect(browser_ws, max_msg_size=0) as ws:
        dt = DevTools(ws)
        target = (await dt.call("Target.createTarget", url="about:blank"))["targetId"]
        try:
            sid = (await dt.call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                await dt.call(f"{domain}.enable", sid)
            await dt.call(
                "Emulation.setDeviceMetricsOverride", sid, width=width, height=900, deviceScaleFactor=1, mobile=False
            )
            seen = len(dt.events)
            await dt.call("Page.navigate", sid, url=url)
            await asyncio.wait_for(dt.until("Page.loadEventFired"), 20)
            facts = []
            for script in (INSPECT, TREND):
                result = await dt.call("Runtime.evaluate", sid, expression=f"({script})()", returnByValue=True)
                assert "exceptionDetails" not in result, result
                facts.append(result["result"]["value"])
            return complaints(dt.events[seen:]), facts[0], facts[1]
        finally:
            await dt.call("Target.closeTarget", targetId=target)


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_the_trend_page_in_chromium(store, chromium, postgres, runs, tmp_path, monkeypatch, capsys):
    url = str(tmp_path / "results.db") if store == "sqlite" else postgres
    with open_store(url) as opened:
        opened.add_paths([runs[0].parent])
        intervals = sum(r.claims[CLAIM].has_interval for r in opened.query(claim=CLAIM))
    page = tmp_path / "pages" / "trend.html"
    code, _, err = cli(monkeypatch, capsys, "history", CLAIM, "--store", url, "--html", str(page))
    assert code == 0, err
    for width in (1280, 600):
        problems, facts, trend = asyncio.run(_open(chromium, page.as_uri(), width))
        where = f"{store} trend page at {width} px"
        assert problems == [], where
        assert facts["faults"] == [] and facts["pageWidth"] <= facts["viewWidth"], where
        assert [plot["key"] for plot in facts["plots"] if plot["drawn"]] == ["history"], where
        assert sorted(trend["points"]) == sorted(r.name for r in runs) and trend["linked"] == len(runs), where
        assert trend["whiskers"] == intervals > 0 and trend["rows"] == len(runs), where
        missing = [h for h in facts["links"] if not (page.parent / h).exists()]
        assert missing == [] and len(facts["links"]) == 2 * len(runs), where  # a point and a table row each


# --- the demo's runs -----------------------------------------------------------------------------------------

DEMO = DOCS_RUNS / "embedded-2026-12-06-demo"  # one `loadproof demo`'s seven runs, published (docs/results.md)


def test_the_demos_runs_in_both_stores_with_their_history_and_trend_page(
    chromium, postgres, runs, tmp_path, monkeypatch, capsys
):
    # a console as wide as history's table, each run one line (a worker's console width depends on what ran before)
    monkeypatch.setattr(ui, "out", Console(file=sys.stdout, width=250, soft_wrap=True, emoji=False))
    demo = sorted((DEMO / "runs").iterdir())
    published = {run.name: json.loads((run / "claims.json").read_text())["claims"] for run in demo}
    (load,) = [run.name for run in demo if run.name.startswith("load-")]
    ttft = next(c for c in published[load] if c["name"] == CLAIM)
    for store in (str(tmp_path / "results.db"), postgres):
        code, out, err = cli(monkeypatch, capsys, "store", "add", str(DEMO), "--store", store)
        claims = sum(len(c) for c in published.values())
        assert code == 0 and f"{len(demo)} run(s) added ({claims:,} claims), 0 already stored" in out, out + err
        code, out, err = cli(monkeypatch, capsys, "store", "add", str(runs[0].parent), "--store", store)
        assert code == 0, err  # earlier runs, of other profiles, beside them
        with open_store(store) as opened:
            stored = {run.run_id: run for run in opened.query(where={"profile": "embedded"})}
        assert sorted(stored) == [run.name for run in demo]  # the demo's, each with every claim it published
        assert {name: set(run.claims) for name, run in stored.items()} == {
            name: {c["name"] for c in claims} for name, claims in published.items()
        }
        kept = stored[load].claims[CLAIM]
        assert (kept.value, kept.low, kept.high) == (ttft["value"], ttft["interval"]["low"], ttft["interval"]["high"])
        page = tmp_path / ("sqlite" if store.endswith(".db") else "postgresql") / "trend.html"
        code, out, err = cli(monkeypatch, capsys, "history", CLAIM, "--store", store, "--html", str(page))
        assert code == 0, err
        listed = [line for line in out.splitlines() if any(run.name in line for run in [*runs, *map(Path, [load])])]
        assert len(listed) == len(runs) + 1 and load in listed[-1], out  # the demo's run the newest, last
        assert ttft["printed"] in listed[-1] and "[" in listed[-1], listed[-1]  # its value with its interval
        code, out, err = cli(monkeypatch, capsys, "history", CLAIM, "--where", "profile=embedded", "--store", store)
        assert code == 0 and load in out and not any(run.name in out for run in runs), out + err
        problems, facts, trend = asyncio.run(_open(chromium, page.as_uri(), 1280))
        assert problems == [] and facts["faults"] == [], store
        assert sorted(trend["points"]) == sorted([load, *(run.name for run in runs)]), trend
