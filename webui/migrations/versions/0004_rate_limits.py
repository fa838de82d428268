"""rate limits: Flask-Limiter's fixed windows in the console's database

rate_limits holds one row per rate-limit key (limit, scope, client address): the hits counted in
the current window and when it ends (`webui.ratelimit.DatabaseStorage`, the storage Flask-Limiter
uses for the login page and POST /api/v1/tokens), so every gunicorn worker spends one budget.
The per-address counting of login_attempts goes: its remote_addr index served only that count.

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('rate_limits',
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('hits', sa.Integer(), nullable=False),
    sa.Column('expires_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )
    with op.batch_alter_table('rate_limits', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_rate_limits_expires_at'), ['expires_at'], unique=False)

    with op.batch_alter_table('login_attempts', schema=None, recreate='never') as batch_op:
        batch_op.drop_index(batch_op.f('ix_login_attempts_remote_addr'))


def downgrade():
    with op.batch_alter_table('login_attempts', schema=None, recreate='never') as batch_op:
        batch_op.create_index(batch_op.f('ix_login_attempts_remote_addr'), ['remote_addr'], unique=False)

    with op.batch_alter_table('rate_limits', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rate_limits_expires_at'))

    op.drop_table('rate_limits')
