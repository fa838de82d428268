"""Jobs from the web side: queue one, read its state, ask for its cancellation.

The web process only writes rows; the job runner (`webui.jobs.runner`) executes them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from werkzeug.exceptions import Forbidden, NotFound, TooManyRequests

from webui.extensions import db
from webui.models import Job, JobState, Role, TableEntry, User, Worker, utcnow

WRITE_OPERATIONS = ("upsert", "insert", "delete")
PREVIEW_MODES = ("snapshot", "as_of", "incremental", "read_optimized")
SERVICE_OPERATIONS = ("rollback", "restore", "savepoint", "savepoint_delete", "clean", "archive", "compaction",
                      "clustering", "metadata_build", "metadata_drop")
ROLE_FOR = {
    **dict.fromkeys(WRITE_OPERATIONS, Role.OPERATOR),
    "rollback": Role.ADMIN,
    "restore": Role.ADMIN,
    "savepoint": Role.OPERATOR,
    "savepoint_delete": Role.OPERATOR,
    "clean": Role.OPERATOR,
    "archive": Role.OPERATOR,
    "compaction": Role.OPERATOR,
    "clustering": Role.OPERATOR,
    "metadata_build": Role.ADMIN,
    "metadata_drop": Role.ADMIN,
    "preview": Role.VIEWER,
}


# jobs bounded per user (CONSOLE_MAX_JOBS_PER_USER queued or running, each kind counted apart)
BOUNDED_KINDS = {"preview": ("preview",), "write": WRITE_OPERATIONS}


class QueueFullError(TooManyRequests):
    """The user already has as many jobs of this kind queued or running as allowed (429)."""


def _kind(operation: str) -> str | None:
    return next((k for k, ops in BOUNDED_KINDS.items() if operation in ops), None)


def check_user_quota(actor: User | None, operation: str) -> None:
    """QueueFullError when `actor` already has CONSOLE_MAX_JOBS_PER_USER preview (or write) jobs
    queued or running; system jobs (no actor) and table services are not bounded."""
    from flask import current_app

    kind = _kind(operation)
    if actor is None or kind is None:
        return
    limit = int(current_app.config.get("CONSOLE_MAX_JOBS_PER_USER") or 0)
    if limit <= 0:
        return
    active = db.session.scalar(
        sa.select(sa.func.count(Job.id)).where(
            Job.created_by == actor.id, Job.operation.in_(BOUNDED_KINDS[kind]),
            Job.state.in_((JobState.QUEUED.value, JobState.RUNNING.value))))
    if (active or 0) >= limit:
        raise QueueFullError(
            f"You already have {active} {kind} job(s) queued or running, the most one user may have "
            f"(CONSOLE_MAX_JOBS_PER_USER={limit}): wait for one to finish, or cancel one, then try again.")


def enqueue(actor: User | None, entry: TableEntry | None, operation: str, params: dict[str, Any], commit: bool = True) -> Job:
    if operation not in ROLE_FOR:
        raise ValueError(f"unknown operation {operation!r}")
    check_user_quota(actor, operation)
    job = _new_job(actor, entry, operation, params)
    db.session.add(job)
    if commit:
        db.session.commit()
    else:
        db.session.flush()
    return job


def _new_job(actor: User | None, entry: TableEntry | None, operation: str, params: dict[str, Any],
             dedupe_key: str | None = None) -> Job:
    return Job(
        table_id=entry.id if entry is not None else None,
        operation=operation,
        params=params,
        state=JobState.QUEUED.value,
        progress={},
        log_tail="",
        created_by=actor.id if actor is not None else None,
        created_at=utcnow(),
        dedupe_key=dedupe_key,
    )


def plan_key(entry: TableEntry, operation: str, plan_hash: str, fingerprint: str) -> str:
    """The key of a table service's confirmation: the same plan on the same timeline."""
    import hashlib

    digest = hashlib.sha256(f"{operation}\0{plan_hash}\0{fingerprint}".encode()).hexdigest()
    return f"plan:{entry.id}:{digest}"


def enqueue_once(actor: User | None, entry: TableEntry | None, operation: str, params: dict[str, Any],
                 key: str) -> tuple[Job, bool]:
    """Queue the job of a confirmation named `key` unless one is queued or running already: a form
    submitted twice queues one job. Returns (the job, whether this call queued it). A finished
    job with the key gives it up (a failed plan may be confirmed again). Committed."""
    from sqlalchemy.exc import IntegrityError

    for _attempt in range(3):
        existing = db.session.scalar(sa.select(Job).where(Job.dedupe_key == key))
        if existing is not None:
            if not JobState(existing.state).finished:
                return existing, False
            existing.dedupe_key = None
            db.session.flush()
        if operation not in ROLE_FOR:
            raise ValueError(f"unknown operation {operation!r}")
        check_user_quota(actor, operation)
        job = _new_job(actor, entry, operation, params, dedupe_key=key)
        db.session.add(job)
        try:
            db.session.commit()
        except IntegrityError:  # another submission queued it meanwhile: that one stands
            db.session.rollback()
            continue
        return job, True
    raise RuntimeError(f"could not queue the job of {key!r}")  # pragma: no cover - three lost races


def get(job_id: int) -> Job:
    job = db.session.get(Job, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    return job


def may_see(actor: User, job: Job) -> bool:
    return actor.can(Role.VIEWER)


def may_cancel(actor: User | None, job: Job) -> bool:
    """Whether `actor` may cancel `job`: the job's own role, and its creator or an admin."""
    return actor is not None and actor.can(ROLE_FOR.get(job.operation, Role.ADMIN)) and (
        job.created_by == actor.id or actor.can(Role.ADMIN)
    )


def request_cancel(actor: User, job: Job) -> bool:
    """Ask the runner to cancel `job` (see `may_cancel`), audited unless it is a preview. A queued
    job is cancelled at once; a running one when the runner sees the request. False when the job
    had already finished."""
    if not may_cancel(actor, job):
        raise Forbidden("only the job's creator (with its role) or an admin can cancel it")
    if job.state_enum.finished:
        return False
    now = utcnow()
    # conditional updates: the runner may claim or finish the job meanwhile
    res = db.session.execute(
        sa.update(Job).where(Job.id == job.id, Job.state == JobState.QUEUED.value)
        .values(state=JobState.CANCELLED.value, cancel_requested=True, finished_at=now,
                error="cancelled before it started")
    )
    if res.rowcount == 0:  # type: ignore[attr-defined]
        db.session.execute(
            sa.update(Job).where(Job.id == job.id, Job.state == JobState.RUNNING.value).values(cancel_requested=True)
        )
    db.session.commit()
    db.session.refresh(job)
    if job.operation != "preview":
        from webui.services import audit

        audit.record(actor, "job.cancel", "requested", table=job.table.name if job.table else None,
                     params={"operation": job.operation}, job_id=job.id)
    return True


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat(timespec="seconds") + "Z" if dt is not None else None


def describe(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "table": job.table.name if job.table is not None else None,
        "operation": job.operation,
        "params": {k: v for k, v in (job.params or {}).items() if k != "upload"},
        "state": job.state,
        "progress": job.progress or {},
        "log_tail": job.log_tail or "",
        "result": job.result,
        "error": job.error,
        "created_by": job.creator.username if job.creator is not None else None,
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "worker_id": job.worker_id,
        "cancel_requested": job.cancel_requested,
    }


def recent(table: TableEntry | None = None, limit: int = 50) -> list[Job]:
    q = sa.select(Job).order_by(Job.id.desc()).limit(limit)
    if table is not None:
        q = q.where(Job.table_id == table.id)
    return list(db.session.scalars(q))


def worker_heartbeat_age() -> float | None:
    """Seconds since the freshest heartbeat of a live job runner (None: no runner ever beat)."""
    latest = db.session.scalar(sa.select(sa.func.max(Worker.heartbeat_at)).where(Worker.stopped.is_(False)))
    if latest is None:
        return None
    return max(0.0, (utcnow() - latest).total_seconds())
