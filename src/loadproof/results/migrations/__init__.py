"""The results store's Alembic migrations: `env.py` runs them on the connection `results.schema` hands it;
`versions/` holds one hand-written revision a schema change (docs/results.md, "Schema")."""
