"""Claiming queued jobs atomically, failing the jobs of runners that died, and the liveness of
this host's runner for a container healthcheck (no Spark here).

PostgreSQL: `SELECT ... FOR UPDATE SKIP LOCKED` picks the oldest queued row no other runner
holds, then it is marked running in the same transaction. SQLite has no row locks: the
oldest queued id is taken with a conditional `UPDATE ... WHERE state = 'queued'`, and the
runner owns the job only if that update changed exactly one row (else it tries the next).
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.orm import Session

# `<boot id>:<start ticks>` of a pid: re-exported for the runner, which records its own
from engine.facade import process_start
from webui.models import Job, JobState, Worker, utcnow

__all__ = ["STALE_AFTER", "claim_next", "fail_orphans", "local_runner_health", "process_start"]

STALE_AFTER = timedelta(seconds=30)  # a runner silent this long is dead (it beats every 2 s)


def claim_next(session: Session, worker_id: str) -> int | None:
    """Claim the oldest queued job for `worker_id`; its id, or None when nothing is queued."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        job_id = session.scalar(
            sa.select(Job.id).where(Job.state == JobState.QUEUED.value).order_by(Job.id)
            .limit(1).with_for_update(skip_locked=True)
        )
        if job_id is None:
            session.rollback()
            return None
        session.execute(
            sa.update(Job).where(Job.id == job_id)
            .values(state=JobState.RUNNING.value, worker_id=worker_id, started_at=utcnow())
        )
        session.commit()
        return job_id
    for _attempt in range(20):
        job_id = session.scalar(
            sa.select(Job.id).where(Job.state == JobState.QUEUED.value).order_by(Job.id).limit(1)
        )
        if job_id is None:
            session.rollback()
            return None
        res = session.execute(
            sa.update(Job).where(Job.id == job_id, Job.state == JobState.QUEUED.value)
            .values(state=JobState.RUNNING.value, worker_id=worker_id, started_at=utcnow())
        )
        session.commit()
        if res.rowcount == 1:  # type: ignore[attr-defined]
            return job_id
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _died_here(worker: Worker, host: str) -> str | None:
    """Why `worker`, a runner of this host, is known dead; None if it may live (or is elsewhere)."""
    if worker.host != host:
        return None
    if not _pid_alive(worker.pid):
        return f"its job runner {worker.id} (pid {worker.pid}) died"
    if worker.process_start and process_start(worker.pid) != worker.process_start:
        return f"its job runner {worker.id} (pid {worker.pid}, now another process) died"
    return None


def fail_orphans(session: Session, me: str | None = None) -> list[int]:
    """Mark `running` jobs whose runner is gone as failed, with the reason; returns their ids.

    A runner is gone when its process no longer exists on this host (no process has its pid, or
    the one that has it started at another time than the runner's: a pid reused after a
    restart), or when its heartbeat is older than STALE_AFTER. Queued jobs are left alone: they
    survive restarts."""
    host = socket.gethostname()
    now = utcnow()
    failed: list[int] = []
    running = list(session.scalars(sa.select(Job).where(Job.state == JobState.RUNNING.value)))
    for job in running:
        if job.worker_id == me:
            continue
        worker = session.get(Worker, job.worker_id) if job.worker_id else None
        if worker is None:
            reason = f"its job runner {job.worker_id or '(unknown)'} is gone"
        elif (died := _died_here(worker, host)) is not None:
            reason = died
        elif worker.stopped:
            reason = f"its job runner {worker.id} stopped"
        elif now - worker.heartbeat_at > STALE_AFTER:
            reason = f"its job runner {worker.id} stopped beating at {worker.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC"
        else:
            continue
        res = session.execute(
            sa.update(Job).where(Job.id == job.id, Job.state == JobState.RUNNING.value).values(
                state=JobState.FAILED.value,
                finished_at=now,
                error=f"{reason} while the job was running. Nothing more was done; the engine's repair rolls "
                "back any partial write of the table at its next write (at once on the host the job ran on, "
                "elsewhere once the write's heartbeat expires).",
            )
        )
        if res.rowcount == 1:  # type: ignore[attr-defined]
            failed.append(job.id)
    session.commit()
    return failed


def local_runner_health(session: Session, max_age: timedelta = STALE_AFTER) -> tuple[bool, str]:
    """Whether a job runner of this host lives and beats in the database (`hoodie-console
    worker-health`, the worker container's healthcheck): its process runs (pid and start time)
    and its last heartbeat is at most `max_age` old. Returns (healthy, what was seen)."""
    host = socket.gethostname()
    now = utcnow()
    workers = session.scalars(sa.select(Worker).where(Worker.host == host, Worker.stopped.is_(False))
                              .order_by(Worker.started_at.desc()))
    for worker in workers:
        if _died_here(worker, host) is not None:
            continue
        age = (now - worker.heartbeat_at).total_seconds()
        if age > max_age.total_seconds():
            return False, f"job runner {worker.id} runs but its last heartbeat is {age:.0f}s old"
        return True, f"job runner {worker.id} beat {age:.0f}s ago"
    return False, f"no live job runner of host {host} in the database"
