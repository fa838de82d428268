"""credentials: forced password change, account lockout, token expiry, shared login attempts

users.must_change_password (the first admin's one-time password, an admin's reset),
users.locked_until (repeated failed logins), api_tokens.expires_at and revoked_at, and
login_attempts: the login rate limit's budget, shared by every gunicorn worker through the
database, and the failures that lock an account.

On SQLite, Alembic's batch mode would rebuild `users` (copy, DROP TABLE, rename) to add a NOT NULL
column; with foreign keys on, that DROP cascades: every API token deleted, every job's and
table's creator set to null. So the columns are added and dropped in place (`recreate="never"`:
ALTER TABLE ADD/DROP COLUMN, SQLite >= 3.35), which keeps every row (test_console_database).

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('users', schema=None, recreate='never') as batch_op:
        batch_op.add_column(sa.Column('must_change_password', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column('locked_until', sa.DateTime(), nullable=True))

    with op.batch_alter_table('api_tokens', schema=None, recreate='never') as batch_op:
        batch_op.add_column(sa.Column('revoked_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('expires_at', sa.DateTime(), nullable=True))

    op.create_table('login_attempts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(), nullable=False),
    sa.Column('username', sa.String(length=80), nullable=False),
    sa.Column('remote_addr', sa.String(length=64), nullable=False),
    sa.Column('channel', sa.String(length=16), nullable=False),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('login_attempts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_login_attempts_at'), ['at'], unique=False)
        batch_op.create_index(batch_op.f('ix_login_attempts_remote_addr'), ['remote_addr'], unique=False)
        batch_op.create_index(batch_op.f('ix_login_attempts_username'), ['username'], unique=False)


def downgrade():
    with op.batch_alter_table('login_attempts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_login_attempts_username'))
        batch_op.drop_index(batch_op.f('ix_login_attempts_remote_addr'))
        batch_op.drop_index(batch_op.f('ix_login_attempts_at'))

    op.drop_table('login_attempts')
    with op.batch_alter_table('api_tokens', schema=None, recreate='never') as batch_op:
        batch_op.drop_column('expires_at')
        batch_op.drop_column('revoked_at')

    with op.batch_alter_table('users', schema=None, recreate='never') as batch_op:
        batch_op.drop_column('locked_until')
        batch_op.drop_column('must_change_password')
