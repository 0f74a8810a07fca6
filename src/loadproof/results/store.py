"""The results store: `open_store(url)` and its `Store` (add, query), on SQLite or PostgreSQL through SQLAlchemy.

The Python API other parts use (the CI gate, `results.gate`):

    store = open_store(url)            # url None: --store's default ($LOADPROOF_STORE, else the SQLite file)
    stored = store.add(run_path)       # one run directory; idempotent: the run as stored, new or not
    added, skipped = store.add_paths([path, ...])  # runs, bundles, folders: one AddOutcome a run (new or not)
    runs = store.query(where={"profile": "embedded"}, since=None, scenario="load", claim="load.ttft_s.p99")
    # newest first; each a StoredRun with its claims: {name: StoredClaim(value, unit, low, high, confidence, ...)}
    store.close()                      # or `with open_store(url) as store:`

Each run is added in one transaction (its row and all its claims, or nothing); a run is the same run when its
run_id and the digest of its records are (store.digest), so adding it again, or its published copy, stores
nothing and says "already stored". Opening a store brings its schema to this loadproof's (`results.schema`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from loadproof.errors import UsageError
from loadproof.results import schema
from loadproof.results.entry import read_run
from loadproof.results.model import StoredClaim, StoredRun, check_where
from loadproof.results.tables import claims, runs
from loadproof.results.url import StoreURL, resolve
from loadproof.results.walk import find_runs

BATCH = 500  # runs whose claims are read in one IN (...) query: under SQLite's variable limit


@dataclass(frozen=True)
class AddOutcome:
    run: StoredRun
    new: bool  # False: it was already stored (same run_id and digest)


class Store:
    def __init__(self, where: StoreURL, engine: sa.Engine) -> None:
        self.where = where
        self.engine = engine

    @property
    def shown(self) -> str:
        return self.where.shown

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # --- adding --------------------------------------------------------------------------------------

    def add(self, path: Path) -> StoredRun:
        """One run directory, stored unless it already is; the run as stored."""
        return self.add_run(read_run(path)).run

    def add_path(self, path: Path) -> tuple[list[AddOutcome], list[tuple[Path, str]]]:
        """A run directory, a bundle, or every run and bundle under a folder (`add_paths` of one path)."""
        return self.add_paths([path])

    def add_paths(self, paths: Sequence[Path]) -> tuple[list[AddOutcome], list[tuple[Path, str]]]:
        """Runs, bundles and folders: every run is read and checked first (one that cannot be used stops it all,
        nothing added), then each added in its own transaction. Returns each run's outcome, and the runs a folder
        held that were skipped with why."""
        found = [find_runs(path) for path in paths]
        entries = [read_run(run) for each in found for run in each.runs]
        return [self.add_run(entry) for entry in entries], [skip for each in found for skip in each.skipped]

    def add_run(self, entry: StoredRun) -> AddOutcome:
        """A run read by `results.entry.read_run`, stored in one transaction unless it already is."""
        with self._session("add to") as connection:
            existing = self._find(connection, entry.run_id, entry.digest)
            if existing is not None:
                return AddOutcome(existing, False)
            try:
                with connection.begin_nested():
                    inserted = connection.execute(runs.insert().values(**_run_row(entry))).inserted_primary_key
                    assert inserted is not None
                    key = inserted[0]
                    rows = [_claim_row(key, claim) for claim in entry.claims.values()]
                    if rows:
                        connection.execute(claims.insert(), rows)
            except IntegrityError:  # added meanwhile by another process
                existing = self._find(connection, entry.run_id, entry.digest)
                if existing is None:
                    raise
                return AddOutcome(existing, False)
            stored = self._find(connection, entry.run_id, entry.digest)
            assert stored is not None
            return AddOutcome(stored, True)

    # --- reading -------------------------------------------------------------------------------------

    def query(
        self,
        where: Mapping[str, str] | None = None,
        since: datetime | None = None,
        scenario: str | None = None,
        claim: str | None = None,
        limit: int | None = None,
    ) -> list[StoredRun]:
        """Stored runs whose fields equal `where`'s (keys: model.WHERE_KEYS), started at or after `since` (a naive
        time is UTC), of `scenario`, holding `claim` where given; newest first, each with all its claims."""
        where = dict(where or {})
        if scenario is not None:
            where["scenario"] = scenario
        check_where(where)
        statement = sa.select(runs)
        for key, value in where.items():
            statement = statement.where(runs.c[key] == value)
        if since is not None:
            statement = statement.where(runs.c.started_at >= _naive(since))
        if claim is not None:
            statement = statement.where(sa.exists().where(sa.and_(claims.c.run == runs.c.id, claims.c.name == claim)))
        statement = statement.order_by(runs.c.started_at.desc(), runs.c.id.desc())
        if limit is not None:
            statement = statement.limit(limit)
        with self._session("read") as connection:
            rows = connection.execute(statement).mappings().all()
            return self._with_claims(connection, rows)

    def claim_names(self) -> list[str]:
        """Every claim name some stored run has, sorted."""
        with self._session("read") as connection:
            return list(connection.execute(sa.select(claims.c.name).distinct().order_by(claims.c.name)).scalars())

    def count(self) -> int:
        with self._session("read") as connection:
            return int(connection.execute(sa.select(sa.func.count()).select_from(runs)).scalar_one())

    # --- inside ----------------------------------------------------------------------------------------

    @contextmanager
    def _session(self, doing: str) -> Iterator[sa.Connection]:
        """A connection in a transaction, committed on success; a database error is one line naming the store."""
        try:
            with self.engine.begin() as connection:
                yield connection
        except SQLAlchemyError as exc:
            raise UsageError(failure(self.where, exc, doing)) from None

    def _find(self, connection: sa.Connection, run_id: str, digest: str) -> StoredRun | None:
        statement = sa.select(runs).where(runs.c.run_id == run_id, runs.c.digest == digest)
        rows = connection.execute(statement).mappings().all()
        found = self._with_claims(connection, rows)
        return found[0] if found else None

    def _with_claims(self, connection: sa.Connection, rows: Sequence[sa.RowMapping]) -> list[StoredRun]:
        by_run: dict[int, dict[str, StoredClaim]] = {row["id"]: {} for row in rows}
        keys = list(by_run)
        for start in range(0, len(keys), BATCH):
            statement = sa.select(claims).where(claims.c.run.in_(keys[start : start + BATCH]))
            for row in connection.execute(statement).mappings():
                by_run[row["run"]][row["name"]] = _stored_claim(row)
        return [_stored_run(row, by_run[row["id"]]) for row in rows]


def open_store(url: str | None = None) -> Store:
    """The store at `url` (None: $LOADPROOF_STORE, else the SQLite file under the loadproof home), reached and
    brought to this loadproof's schema; one line (UsageError, exit 2) when it cannot be reached, its driver is
    missing, or its schema is newer than this loadproof reads."""
    where = resolve(url)
    engine = where.engine()
    try:
        with engine.begin() as connection:
            schema.migrate(connection, where.shown)
    except SQLAlchemyError as exc:
        engine.dispose()
        raise UsageError(failure(where, exc, "reach")) from None
    except UsageError:
        engine.dispose()
        raise
    return Store(where, engine)


def failure(where: StoreURL, exc: BaseException, doing: str) -> str:
    """`cannot reach the results store postgresql://u@host:5432/db: connection refused`: the driver's first
    line, its password (if it were ever repeated) removed."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    text = next((line.strip() for line in str(cause).splitlines() if line.strip()), type(cause).__name__)
    if where.password:
        text = text.replace(where.password, "***")
    return f"cannot {doing} the results store {where.shown}: {text[:300]}"


def _naive(moment: datetime) -> datetime:
    """A time as the tables keep it: UTC without a zone (a naive one is taken as UTC already)."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment


def _aware(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=UTC) if moment is not None else None


def _run_row(entry: StoredRun) -> dict[str, Any]:
    return {
        "run_id": entry.run_id,
        "digest": entry.digest,
        "scenario": entry.scenario,
        "profile": entry.profile,
        "model": entry.model,
        "engine": entry.engine,
        "engine_version": entry.engine_version,
        "endpoint": entry.endpoint,
        "target": entry.target,
        "plan_version": entry.plan_version,
        "num_records": entry.num_records,
        "started_at": _naive(entry.started_at),
        "ended_at": _naive(entry.ended_at) if entry.ended_at is not None else None,
        "added_at": _naive(datetime.now(UTC)),
        "path": entry.path,
        "source": entry.source,
        "environment": entry.environment,
    }


def _claim_row(run: int, claim: StoredClaim) -> dict[str, Any]:
    value = claim.value
    kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "float"
    kind = "text" if isinstance(value, str) else kind
    return {
        "run": run,
        "name": claim.name,
        "value_type": kind,
        "value_number": float(value) if kind in ("int", "float") else None,
        "value_text": value if isinstance(value, str) else ("true" if value else "false") if kind == "bool" else None,
        "unit": claim.unit,
        "printed": claim.printed,
        "kind": claim.kind,
        "direction": claim.direction,
        "low": claim.low,
        "high": claim.high,
        "confidence": claim.confidence,
        "method": claim.method,
    }


def _stored_claim(row: sa.RowMapping) -> StoredClaim:
    kind = row["value_type"]
    value: float | int | str | bool
    if kind == "int":
        value = int(row["value_number"])
    elif kind == "float":
        value = float(row["value_number"])
    elif kind == "bool":
        value = row["value_text"] == "true"
    else:
        value = row["value_text"] or ""
    return StoredClaim(
        name=row["name"],
        value=value,
        unit=row["unit"],
        printed=row["printed"],
        kind=row["kind"],
        direction=row["direction"],
        low=row["low"],
        high=row["high"],
        confidence=row["confidence"],
        method=row["method"],
    )


def _stored_run(row: sa.RowMapping, stored_claims: dict[str, StoredClaim]) -> StoredRun:
    started = _aware(row["started_at"])
    assert started is not None
    return StoredRun(
        run_id=row["run_id"],
        digest=row["digest"],
        started_at=started,
        scenario=row["scenario"],
        profile=row["profile"],
        model=row["model"],
        engine=row["engine"],
        engine_version=row["engine_version"],
        endpoint=row["endpoint"],
        target=row["target"],
        plan_version=row["plan_version"],
        num_records=row["num_records"],
        ended_at=_aware(row["ended_at"]),
        path=row["path"],
        source=row["source"],
        environment=dict(row["environment"] or {}),
        claims=stored_claims,
        store_id=row["id"],
        added_at=_aware(row["added_at"]),
    )
