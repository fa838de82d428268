"""workers.process_start: which process a runner's pid named (pids repeat after a restart)

A restarted container runs its job runner under the same pid as the runner that died, on the
same host name, so a live pid no longer proves that the recorded runner lives. The process's
start time (and the kernel's boot id) does.

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('process_start', sa.String(length=64), nullable=True))


def downgrade():
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.drop_column('process_start')
