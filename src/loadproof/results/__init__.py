"""The results store: runs and bundles kept in SQLite or PostgreSQL, their claims over time, and the CI gate."""
