"""The first schema: runs (the manifest fields users query by, the environment, the digest, the path) and
claims (value, unit, printed figure, meaning, interval).

Revision ID: 0001
Revises: none
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("scenario", sa.String(100)),
        sa.Column("profile", sa.String(500)),
        sa.Column("model", sa.String(500)),
        sa.Column("engine", sa.String(100)),
        sa.Column("engine_version", sa.String(100)),
        sa.Column("endpoint", sa.String(100)),
        sa.Column("target", sa.String(500)),
        sa.Column("plan_version", sa.Integer),
        sa.Column("num_records", sa.Integer),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("ended_at", sa.DateTime),
        sa.Column("added_at", sa.DateTime, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("environment", sa.JSON, nullable=False),
        sa.UniqueConstraint("run_id", "digest", name="uq_runs_run_digest"),
    )
    op.create_index("ix_runs_started_at", "runs", ["started_at"])
    op.create_index("ix_runs_scenario", "runs", ["scenario"])
    op.create_table(
        "claims",
        sa.Column("run", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(300), primary_key=True),
        sa.Column("value_type", sa.String(8), nullable=False),
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
    )
    op.create_index("ix_claims_name", "claims", ["name"])


def downgrade() -> None:
    op.drop_table("claims")
    op.drop_table("runs")
