"""The console's database: users, API tokens, registered tables, jobs, workers and the audit log.

The schema is created and changed only by the Alembic migrations in `webui/migrations/`.
The audit log is append-only: the ORM refuses updates and deletes of `AuditEntry` rows (see
`_refuse_audit_changes`), and the migration adds database triggers that refuse them too.
"""

from __future__ import annotations

import enum
import hashlib
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from flask_login import UserMixin
from sqlalchemy import event
from sqlalchemy.orm import Mapped, Session, mapped_column, relationship
from werkzeug.security import check_password_hash, generate_password_hash

from webui.extensions import db


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Role(enum.StrEnum):
    """Roles, lowest first: each one may do everything the roles before it may."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank


class JobState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # the job runner was stopped (Ctrl-C, SIGTERM) while it ran: the table is left for the next
    # write's repair, which rolls back what the job had started (the job is not retried)
    INTERRUPTED = "interrupted"

    @property
    def finished(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.INTERRUPTED)


class User(UserMixin, db.Model):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(sa.String(80), unique=True)
    password_hash: Mapped[str] = mapped_column(sa.String(255))
    role: Mapped[str] = mapped_column(sa.String(16), default=Role.VIEWER.value)
    active: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # set for the first admin's one-time password and by an admin's reset: every page leads to the
    # change-password page, and the API refuses the user's tokens, until the user picks a password
    must_change_password: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
    # after repeated failed logins (`webui.services.logins`); kept once past, as the point from
    # which failures count again (an admin's unlock sets it to the unlock time)
    locked_until: Mapped[datetime | None] = mapped_column(default=None)

    tokens: Mapped[list[ApiToken]] = relationship(back_populates="user", cascade="all, delete-orphan")

    def set_password(self, password: str) -> None:
        self.password_hash = generate_password_hash(password)

    def check_password(self, password: str) -> bool:
        return check_password_hash(self.password_hash, password)

    @property
    def session_stamp(self) -> str:
        """Part of the session's user id: a password change or reset ends every older session."""
        return hashlib.sha256(self.password_hash.encode("utf-8")).hexdigest()[:16]

    def get_id(self) -> str:  # Flask-Login: what the session cookie holds
        return f"{self.id}:{self.session_stamp}"

    def is_locked(self, now: datetime) -> bool:
        return self.locked_until is not None and self.locked_until > now

    @property
    def role_enum(self) -> Role:
        return Role(self.role)

    def can(self, needed: Role) -> bool:
        return self.active and self.role_enum.allows(needed)

    @property
    def is_active(self) -> bool:  # Flask-Login
        return self.active

    def __repr__(self) -> str:  # never the hash
        return f"User({self.username!r}, {self.role})"


class ApiToken(db.Model):
    """A bearer token for the JSON API; only the SHA-256 of the token is stored."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked: Mapped[bool] = mapped_column(default=False)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
    expires_at: Mapped[datetime | None] = mapped_column(default=None)  # None: never (lifetime 0)

    user: Mapped[User] = relationship(back_populates="tokens")

    @staticmethod
    def hash(token: str) -> str:
        return hashlib.sha256(token.encode("utf-8")).hexdigest()

    def state(self, now: datetime) -> str:
        """active, revoked or expired."""
        if self.revoked:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


class LoginAttempt(db.Model):
    """One login or token request that reached the password check (`webui.services.logins`): the
    failures that lock an account and the successes after which they stop counting. Never the
    password. The rate limit per address is not counted here but by Flask-Limiter
    (`RateLimitWindow`). Rows older than a day (or the lockout window) are pruned."""

    __tablename__ = "login_attempts"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    username: Mapped[str] = mapped_column(sa.String(80), index=True)
    remote_addr: Mapped[str] = mapped_column(sa.String(64))
    channel: Mapped[str] = mapped_column(sa.String(16))  # page or api
    outcome: Mapped[str] = mapped_column(sa.String(16))  # pending, succeeded, failed, locked


class RateLimitWindow(db.Model):
    """One fixed window of a Flask-Limiter rate limit (`webui.ratelimit.DatabaseStorage`): the key
    (limit, scope, client address), the hits counted in it and when it ends. Every gunicorn worker
    and every host on the console's database counts in the same row."""

    __tablename__ = "rate_limits"

    key: Mapped[str] = mapped_column(sa.String(255), primary_key=True)
    hits: Mapped[int] = mapped_column(sa.Integer)
    expires_at: Mapped[datetime] = mapped_column(index=True)  # naive UTC, like every time here


class TableEntry(db.Model):
    """A registered table: where it lives and how it is keyed (no secrets here)."""

    __tablename__ = "tables"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(128), unique=True)
    base_path: Mapped[str] = mapped_column(sa.String(1024), unique=True)
    table_type: Mapped[str] = mapped_column(sa.String(32))
    record_key: Mapped[str] = mapped_column(sa.String(512))
    partition_fields: Mapped[str] = mapped_column(sa.String(512), default="")
    precombine_field: Mapped[str | None] = mapped_column(sa.String(255), default=None)
    index_type: Mapped[str | None] = mapped_column(sa.String(32), default=None)
    created_by: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id", ondelete="SET NULL"), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Job(db.Model):
    """One unit of work for the job runner (writes, table services, data previews)."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(primary_key=True)
    table_id: Mapped[int | None] = mapped_column(sa.ForeignKey("tables.id", ondelete="SET NULL"), index=True)
    operation: Mapped[str] = mapped_column(sa.String(32))
    params: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
    state: Mapped[str] = mapped_column(sa.String(16), default=JobState.QUEUED.value, index=True)
    progress: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
    log_tail: Mapped[str] = mapped_column(sa.Text, default="")
    result: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON, default=None)
    error: Mapped[str | None] = mapped_column(sa.Text, default=None)
    created_by: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id", ondelete="SET NULL"), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    worker_id: Mapped[str | None] = mapped_column(sa.String(128), default=None)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    # what a confirmation queued (`upload:<id>`, or a plan's hash and fingerprint): unique, so a
    # form submitted twice finds the job the first submission queued (`services.jobs.enqueue`)
    dedupe_key: Mapped[str | None] = mapped_column(sa.String(160), unique=True, default=None)

    table: Mapped[TableEntry | None] = relationship()
    creator: Mapped[User | None] = relationship()

    @property
    def state_enum(self) -> JobState:
        return JobState(self.state)


class Upload(db.Model):
    """A checked batch waiting for its write job (Parquet bytes; web and runner share only the
    database, so no shared upload folder is needed). Deleted once its job has finished."""

    __tablename__ = "uploads"

    id: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    table_id: Mapped[int] = mapped_column(sa.ForeignKey("tables.id", ondelete="CASCADE"), index=True)
    filename: Mapped[str] = mapped_column(sa.String(255))
    rows: Mapped[int]
    size: Mapped[int]
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)
    created_by: Mapped[int | None] = mapped_column(sa.ForeignKey("users.id", ondelete="SET NULL"), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Worker(db.Model):
    """A job runner process and its heartbeat (for /healthz and for failing orphaned jobs)."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    host: Mapped[str] = mapped_column(sa.String(255))
    pid: Mapped[int]
    # the process's identity beyond its pid (`webui.jobs.claim.process_start`): boot id + start
    # time, so that a pid reused after a restart is not mistaken for the runner that had it
    process_start: Mapped[str | None] = mapped_column(sa.String(64), default=None)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(default=utcnow)
    stopped: Mapped[bool] = mapped_column(default=False)


class AuditEntry(db.Model):
    """One action someone took (never page views or dry runs). Append-only."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    user_id: Mapped[int | None] = mapped_column(sa.Integer, default=None, index=True)
    username: Mapped[str] = mapped_column(sa.String(80))
    action: Mapped[str] = mapped_column(sa.String(64))
    table_name: Mapped[str | None] = mapped_column(sa.String(128), default=None)
    params: Mapped[dict[str, Any]] = mapped_column(sa.JSON, default=dict)
    plan_hash: Mapped[str | None] = mapped_column(sa.String(64), default=None)
    outcome: Mapped[str] = mapped_column(sa.String(512))
    job_id: Mapped[int | None] = mapped_column(sa.Integer, default=None)


class AuditLogIsAppendOnly(RuntimeError):
    """Raised on any attempt to change or delete an audit row."""


@event.listens_for(Session, "before_flush")
def _refuse_audit_changes(session: Session, _ctx: object, _instances: object) -> None:
    for obj in session.dirty:
        if isinstance(obj, AuditEntry) and session.is_modified(obj):
            raise AuditLogIsAppendOnly("audit log entries cannot be changed")
    for obj in session.deleted:
        if isinstance(obj, AuditEntry):
            raise AuditLogIsAppendOnly("audit log entries cannot be deleted")


@event.listens_for(Session, "do_orm_execute")
def _refuse_bulk_audit_changes(state: Any) -> None:
    if (state.is_update or state.is_delete) and any(
        getattr(m, "class_", None) is AuditEntry for m in state.all_mappers
    ):
        raise AuditLogIsAppendOnly("audit log entries cannot be changed or deleted")
