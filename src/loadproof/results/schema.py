"""The store's schema version, kept by Alembic in the store itself (`alembic_version`): a store is brought to
this loadproof's newest revision when it is opened, and a store written by a newer loadproof (a revision this
one does not know) is refused in one line, before anything is read or written."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from loadproof.errors import UsageError

MIGRATIONS = Path(__file__).with_name("migrations")


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head() -> str:
    """This loadproof's newest schema revision."""
    revision = ScriptDirectory.from_config(_config()).get_current_head()
    assert revision is not None
    return revision


def known() -> set[str]:
    return {script.revision for script in ScriptDirectory.from_config(_config()).walk_revisions()}


def current(connection: sa.Connection) -> set[str]:
    """The revisions the store records (none: a new, empty store)."""
    return set(MigrationContext.configure(connection).get_current_heads())


def migrate(connection: sa.Connection, shown: str) -> None:
    """Refuse a store of a newer schema; bring an older one (or a new one) to `head`, in one transaction."""
    newer = sorted(current(connection) - known())
    if newer:
        raise UsageError(
            f"the results store {shown} has schema {newer[0]}, written by a newer loadproof "
            f"(this one reads up to {head()}): upgrade loadproof to use it"
        )
    if current(connection) == {head()}:
        return
    config = _config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
