"""jobs.dedupe_key: one queued or running job per confirmation

A confirm form submitted twice (a double click, a resent request) queued the same upload twice;
an insert written twice duplicates its records. A confirmation now names its job by a key (the
upload's id, or the plan's hash and timeline fingerprint) that is unique among jobs: the second
submission finds the job the first one queued.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('dedupe_key', sa.String(length=160), nullable=True))
        batch_op.create_unique_constraint('uq_jobs_dedupe_key', ['dedupe_key'])


def downgrade():
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_constraint('uq_jobs_dedupe_key', type_='unique')
        batch_op.drop_column('dedupe_key')
