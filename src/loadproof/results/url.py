"""Where the results store is: `--store URL`, else `$LOADPROOF_STORE`, else the embedded default, a SQLite
file under the loadproof home (`~/.cache/loadproof/results.db`); and the SQLAlchemy engine that reaches it.

A URL is `sqlite:///FILE`, a plain file path (SQLite), or `postgresql://USER[:PASSWORD]@HOST[:PORT]/DB`
(psycopg, the `postgres` extra). Every message names the store by `shown`: the URL without its password.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from loadproof.engines.embedded import loadproof_home
from loadproof.errors import UsageError

ENV = "LOADPROOF_STORE"
DEFAULT_FILE = "results.db"
CONNECT_TIMEOUT_S = 5  # a PostgreSQL server that does not answer: one line after this, not a hang
POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
MISSING_DRIVER = "a PostgreSQL store needs psycopg: pip install 'loadproof[postgres]'"


@dataclass(frozen=True)
class StoreURL:
    url: URL  # what SQLAlchemy connects with (postgresql+psycopg, or sqlite with an absolute file)

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    @property
    def shown(self) -> str:
        """The store as messages name it: a SQLite file's path, a server's URL without its password."""
        if self.is_sqlite:
            return str(self.url.database)
        return self.url.set(drivername="postgresql").render_as_string(hide_password=True).replace(":***@", "@")

    @property
    def password(self) -> str | None:
        return self.url.password if isinstance(self.url.password, str) else None

    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine (nothing connected yet); a missing driver is one line."""
        if self.is_sqlite:
            folder = Path(str(self.url.database)).parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"cannot make the results store's folder {folder}: {exc.strerror or exc}") from None
            return sa.create_engine(self.url)
        try:
            return sa.create_engine(self.url, connect_args={"connect_timeout": CONNECT_TIMEOUT_S})
        except ImportError:
            raise UsageError(MISSING_DRIVER) from None


def default_path() -> Path:
    return loadproof_home() / DEFAULT_FILE


def resolve(given: str | None = None) -> StoreURL:
    """The store `--store` names, else `$LOADPROOF_STORE`'s, else the default SQLite file."""
    text = given if given else os.environ.get(ENV) or None
    if text is None:
        return StoreURL(make_url(f"sqlite:///{default_path()}"))
    text = text.strip()
    where = "--store" if given else f"${ENV}"
    if "://" not in text:  # a file path: SQLite
        return StoreURL(URL.create("sqlite", database=str(Path(text).expanduser().resolve())))
    scheme = text.split("://", 1)[0].lower()
    try:
        if scheme == "sqlite":
            url = make_url(text)
            if not url.database or url.database == ":memory:":
                raise UsageError(f"{where}: a SQLite store is a file: sqlite:///PATH")
            return StoreURL(url.set(database=str(Path(url.database).expanduser().resolve())))
        if scheme in POSTGRES_SCHEMES:
            url = make_url(text).set(drivername="postgresql+psycopg")
            if not url.host and not url.query.get("host"):
                raise UsageError(f"{where}: a PostgreSQL store names its server: postgresql://USER@HOST:PORT/DB")
            return StoreURL(url)
    except ArgumentError:
        pass
    raise UsageError(
        f"{where}: {scheme}:// is not a store this loadproof keeps; "
        "give a file (SQLite), sqlite:///FILE or postgresql://USER@HOST:PORT/DB"
    )
