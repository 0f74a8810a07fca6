"""The results store's tables (SQLAlchemy Core): one row a run in `runs`, one row a claim in `claims`.

The migrations (`results/migrations/versions/`) create and change them; these definitions are what the code
queries, and tests/unit/results/test_migrations.py checks that the migrated schema and these agree.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(200), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),  # store.digest.measurement_digest of its records
    sa.Column("scenario", sa.String(100)),
    sa.Column("profile", sa.String(500)),
    sa.Column("model", sa.String(500)),
    sa.Column("engine", sa.String(100)),
    sa.Column("engine_version", sa.String(100)),
    sa.Column("endpoint", sa.String(100)),
    sa.Column("target", sa.String(500)),
    sa.Column("plan_version", sa.Integer),
    sa.Column("num_records", sa.Integer),
    sa.Column("started_at", sa.DateTime, nullable=False),  # UTC, naive (SQLite keeps no zone)
    sa.Column("ended_at", sa.DateTime),
    sa.Column("added_at", sa.DateTime, nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("environment", sa.JSON, nullable=False),
    sa.UniqueConstraint("run_id", "digest", name="uq_runs_run_digest"),
    sa.Index("ix_runs_started_at", "started_at"),
    sa.Index("ix_runs_scenario", "scenario"),
)

claims = sa.Table(
    "claims",
    metadata,
    sa.Column("run", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("name", sa.String(300), primary_key=True),
    sa.Column("value_type", sa.String(8), nullable=False),  # float, int, bool or text
    sa.Column("value_number", sa.Double),
    sa.Column("value_text", sa.Text),
    sa.Column("unit", sa.String(100), nullable=False),
    sa.Column("printed", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("direction", sa.String(16), nullable=False),
    sa.Column("low", sa.Double),
    sa.Column("high", sa.Double),
    sa.Column("confidence", sa.Double),
    sa.Column("method", sa.String(200)),
    sa.Index("ix_claims_name", "name"),
)
