"""One Alembic revision a change of the results store's schema, oldest first (Alembic skips this file)."""
