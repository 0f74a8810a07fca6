"""The results store on SQLite (a file under tmp): runs added with their fields, claims and intervals, idempotent,
one transaction a run, nothing of a hostile or truncated claims.json stored, nothing private stored, a newer
schema refused, the migrated schema the one the code queries."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from loadproof.errors import UsageError
from loadproof.results import schema
from loadproof.results.entry import read_run
from loadproof.results.store import open_store
from loadproof.results.tables import metadata
from loadproof.store.digest import measurement_digest
from loadproof.store.run_dir import load_run
from tests.unit.results.stored_runs import (
    CAPACITY,
    CLAIM,
    PRIVATE_HOST,
    PRIVATE_PATH,
    SECRET_KEY,
    SECRET_PASSWORD,
    bundle_runs,
    edit_claims,
    history_runs,
    private_run,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return history_runs(tmp_path_factory.mktemp("runs") / "runs")


@pytest.fixture
def folder(runs: list[Path], tmp_path: Path) -> Path:
    """A writable copy of the runs' folder."""
    shutil.copytree(runs[0].parent, tmp_path / "runs")
    return tmp_path / "runs"


def test_a_run_is_stored_with_its_fields_claims_intervals_and_digest(runs, tmp_path):
    run = runs[-1]
    with open_store(str(tmp_path / "r.db")) as store:
        stored = store.add(run)
    published = json.loads((run / "claims.json").read_text())["claims"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert stored.store_id is not None and stored.run_id == run.name
    assert stored.digest == measurement_digest(load_run(run).records)
    assert (stored.scenario, stored.profile, stored.engine_version) == (
        "load",
        manifest["profile"]["name"],
        manifest["engine_version"],
    )
    assert stored.model == manifest["target"]["model"] and stored.endpoint == manifest["target"]["endpoint"]
    assert stored.path == str(run.resolve()) and stored.source == "run"
    assert stored.environment["versions"]["loadproof"] == manifest["versions"]["loadproof"]
    assert set(stored.claims) == {c["name"] for c in published}
    with_interval = [c for c in published if "interval" in c]
    assert with_interval, "the recomputed claims carry intervals"
    for claim in published:
        got = stored.claims[claim["name"]]
        assert (got.value, got.unit, got.printed, got.kind, got.direction) == (
            claim["value"],
            claim["unit"],
            claim["printed"],
            claim["kind"],
            claim["direction"],
        )
        assert type(got.value) is type(claim["value"])
        interval = claim.get("interval")
        if interval is None:
            assert not got.has_interval
        else:
            assert (got.low, got.high, got.confidence, got.method) == (
                interval["low"],
                interval["high"],
                interval["confidence"],
                interval["method"],
            )


def test_adding_again_stores_nothing_more(folder, tmp_path):
    url = str(tmp_path / "r.db")
    with open_store(url) as store:
        first, _ = store.add_path(folder)
        assert [o.new for o in first] == [True] * len(first) and store.count() == len(first)
        again, _ = store.add_path(folder)
        assert [o.new for o in again] == [False] * len(first)
        assert [o.run.store_id for o in again] == [o.run.store_id for o in first]
    with open_store(url) as store:  # reopened: the schema is current, nothing migrates or doubles
        assert store.count() == len(first)
        assert store.add(folder / first[0].run.run_id).store_id == first[0].run.store_id


def test_a_bundle_is_read_as_published_and_is_the_same_run_as_its_copy(tmp_path):
    (run,) = bundle_runs(CAPACITY)
    with open_store(str(tmp_path / "r.db")) as store:
        (published,), _ = store.add_path(run.parents[1])
        assert published.new and published.run.source == "bundle"
        assert published.run.claims["capacity.verdict"].value == "FAIL"
        copy = tmp_path / "copy"
        shutil.copytree(run, copy / run.name)
        (again,), _ = store.add_path(copy)
        assert not again.new and again.run.store_id == published.run.store_id


def test_query_filters_and_orders_newest_first(folder, tmp_path):
    with open_store(str(tmp_path / "r.db")) as store:
        store.add_path(folder)
        every = store.query()
        assert [r.started_at for r in every] == sorted((r.started_at for r in every), reverse=True)
        profiles = {r.profile for r in every}
        assert len(profiles) == 2
        for profile in profiles:
            picked = store.query(where={"profile": profile})
            assert picked and {r.profile for r in picked} == {profile}
        newest = every[0].started_at
        assert [r.run_id for r in store.query(since=newest)] == [every[0].run_id]
        assert store.query(since=newest + timedelta(seconds=1)) == []
        naive = newest.astimezone(UTC).replace(tzinfo=None)
        assert len(store.query(since=naive)) == 1  # a time without a zone is UTC
        assert len(store.query(scenario="load", claim=CLAIM)) == len(every)
        assert store.query(claim="no.such.claim") == []
        assert len(store.query(limit=2)) == 2
        with pytest.raises(UsageError, match="not a stored field"):
            store.query(where={"password": "x"})


def test_nothing_private_is_stored(tmp_path):
    run = private_run(tmp_path / "runs")
    db = tmp_path / "r.db"
    with open_store(str(db)) as store:
        stored = store.add(run)
        assert stored.target == "http://<host>:8000"
        assert stored.model == "<path>"
    data = db.read_bytes()
    for secret in (SECRET_PASSWORD, SECRET_KEY, PRIVATE_HOST, "gpu-7", PRIVATE_PATH, "alice", "admin"):
        assert secret.encode() not in data, secret


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
        ("https://localhost", "https://localhost"),
        ("http://[::1]:9000", "http://[::1]:9000"),
        ("http://10.0.0.7:8000", "http://<host>:8000"),
        ("http://user:pw@vllm.team.svc.cluster.local:80/x?key=1", "http://<host>:80"),
        ("<url>", "<url>"),
        ("not a url", "<host>"),
    ],
)
def test_only_a_local_host_is_kept_of_the_target(url, kept, tmp_path):
    from loadproof.results.privacy import address

    assert address(url) == kept


def _count(url: str) -> int:
    with open_store(url) as store:
        return store.count()


BAD_CLAIMS = {
    "truncated": (lambda text: text[: len(text) // 2], "not valid JSON"),
    "not an object": (lambda text: "[]", "not a claims file"),
    "another run's": (lambda text: text.replace('"run_id": "', '"run_id": "x', 1), "claims of run x"),
    "a NaN value": (lambda text: _first_claim(text, value=math.nan), "not a finite number"),
    "a list as value": (lambda text: _first_claim(text, value=[1, 2]), "not a finite number"),
    "an interval upside down": (
        lambda text: _first_claim(text, interval={"low": 2, "high": 1, "confidence": 0.95, "method": "x"}),
        "low <= high",
    ),
    "a confidence of 95": (
        lambda text: _first_claim(text, interval={"low": 1, "high": 2, "confidence": 95, "method": "x"}),
        "between 0 and 1",
    ),
    "a method not a text": (
        lambda text: _first_claim(text, interval={"low": 1, "high": 2, "confidence": 0.95, "method": ["x"] * 9}),
        "method is not a text",
    ),
    "a control character in a name": (lambda text: _first_claim(text, name="a\x1b[2Jb"), "not a claim name"),
    "a name listed twice": (lambda text: _twice(text), "listed twice"),
}


def _first_claim(text: str, **change: object) -> str:
    payload = json.loads(text)
    payload["claims"][0].update(change)
    return json.dumps(payload)


def _twice(text: str) -> str:
    payload = json.loads(text)
    payload["claims"].append(payload["claims"][0])
    return json.dumps(payload)


@pytest.mark.parametrize("case", list(BAD_CLAIMS))
def test_a_bad_claims_file_stores_nothing_of_a_folder(case, folder, tmp_path):
    spoil, says = BAD_CLAIMS[case]
    bad = sorted(folder.iterdir())[2]
    edit_claims(bad, spoil((bad / "claims.json").read_text()))
    url = str(tmp_path / "r.db")
    with open_store(url) as store, pytest.raises(UsageError) as refused:
        store.add_path(folder)
    message = str(refused.value)
    assert "\n" not in message and says in message and str(bad / "claims.json") in message
    assert "\x1b" not in message
    assert _count(url) == 0


def test_a_run_without_claims_is_skipped_under_a_folder_and_refused_alone(folder, tmp_path):
    unreported = sorted(folder.iterdir())[0]
    (unreported / "claims.json").unlink()
    with open_store(str(tmp_path / "r.db")) as store:
        added, skipped = store.add_path(folder)
        assert unreported.name not in {o.run.run_id for o in added} and skipped == [(unreported, "no claims.json")]
        with pytest.raises(UsageError, match="the run has no claims"):
            store.add(unreported)


def test_a_folder_with_nothing_to_add_is_one_line(tmp_path):
    (tmp_path / "empty" / "deeper").mkdir(parents=True)
    with open_store(str(tmp_path / "r.db")) as store:
        with pytest.raises(UsageError, match="no run directory or bundle to add"):
            store.add_path(tmp_path / "empty")
        with pytest.raises(UsageError, match="no run directory, bundle or folder"):
            store.add_path(tmp_path / "nowhere")


def test_a_failed_insert_leaves_nothing_of_the_run(runs, tmp_path, monkeypatch):
    """One transaction a run: a claim row the database refuses takes the run's row with it."""
    entry = read_run(runs[0])
    claims = dict(entry.claims)
    name = list(claims)[-1]  # the last claim row: the run's row and the others are written by then
    claims[name] = replace(claims[name], unit=None)  # the claims table's unit is NOT NULL
    url = str(tmp_path / "r.db")
    with open_store(url) as store, pytest.raises(UsageError, match="cannot add to the results store"):
        store.add_run(replace(entry, claims=claims))
    assert _count(url) == 0


def test_the_migrated_schema_is_the_one_queried(tmp_path):
    url = str(tmp_path / "r.db")
    open_store(url).close()
    engine = sa.create_engine(f"sqlite:///{url}")
    with engine.connect() as connection:
        assert schema.current(connection) == {schema.head()}
        assert compare_metadata(MigrationContext.configure(connection), metadata) == []
    engine.dispose()


def test_a_store_of_a_newer_schema_is_refused_untouched(runs, tmp_path):
    url = str(tmp_path / "r.db")
    with open_store(url) as store:
        store.add(runs[0])
    engine = sa.create_engine(f"sqlite:///{url}")
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE alembic_version SET version_num = '9001'"))
    engine.dispose()
    before = Path(url).read_bytes()
    with pytest.raises(UsageError) as refused:
        open_store(url)
    assert "schema 9001, written by a newer loadproof" in str(refused.value) and "\n" not in str(refused.value)
    assert Path(url).read_bytes() == before


def test_a_store_whose_folder_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="cannot make the results store's folder .*file/sub"):
        open_store(str(tmp_path / "file" / "sub" / "r.db"))
    with pytest.raises(UsageError, match="cannot reach the results store .*: unable to open database file"):
        open_store(str(tmp_path))  # a folder, not a file


def test_not_a_database_is_one_line(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not SQLite" * 100)
    with pytest.raises(UsageError, match=f"cannot reach the results store {junk}: file is not a database"):
        open_store(str(junk))


def test_the_started_time_is_the_manifests(runs):
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    stored = read_run(runs[0])
    assert stored.started_at == datetime.strptime(manifest["start_wall_time"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
