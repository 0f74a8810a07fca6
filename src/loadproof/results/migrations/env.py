"""Alembic's environment: migrations run online, on the connection `results.schema.migrate` passes in
`config.attributes["connection"]`, in its transaction; never from an ini file or a URL of its own."""

from __future__ import annotations

from alembic import context

from loadproof.results.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
