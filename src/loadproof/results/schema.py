"""The store's schema version, kept by Alembic in the store itself (`alembic_version`): a store is brought to
this loadproof's newest revision when it is opened, and a store written by a newer loadproof (a revision this
one does not know) is refused in one line, before anything is read or written."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from loadproof.errors import UsageError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")


def _config() -> Config:
    # alembic when a store is opened, not when loadproof starts: importing it added 0.1 s to every command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head() -> str:
    """This loadproof's newest schema revision."""
    from alembic.script import ScriptDirectory  # alembic when a store is opened (see _config)

    revision = ScriptDirectory.from_config(_config()).get_current_head()
    assert revision is not None
    return revision


def known() -> set[str]:
    from alembic.script import ScriptDirectory  # alembic when a store is opened (see _config)

    return {script.revision for script in ScriptDirectory.from_config(_config()).walk_revisions()}


def current(connection: sa.Connection) -> set[str]:
    """The revisions the store records (none: a new, empty store)."""
    from alembic.runtime.migration import MigrationContext  # alembic when a store is opened (see _config)

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
    from alembic import command  # alembic when a store is opened (see _config)

    config = _config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
