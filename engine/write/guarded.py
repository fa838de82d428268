"""A write's steps that go through its transaction's guard (`engine.transaction.guard.WriteGuard`):
claiming the instant, the check once the files are written (the lock fence, or under optimistic
concurrency control the commit lock and the conflict check), and undoing a failed write.

Shared by the planned and one-job writes (`engine.write.executor`) and the one-pass bulk_insert
(`engine.write.bulk_stream`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from engine import failpoints
from engine.errors import ConcurrentWriteError, StorageError, WriteConflictError
from engine.runtime.errors import task_error_message, translate
from engine.runtime.jobs import job_group, stop_tasks
from engine.timeline.timeline import Timeline
from engine.transaction.undo import undo_instant
from engine.write import commit as commit_protocol

if TYPE_CHECKING:
    from engine.transaction.occ import CheckResult
    from engine.write.outcome import WriteOutcome
    from engine.write.pipeline import Pipeline


def claim(
    job: Pipeline, timeline: Timeline, start: Callable[[Timeline], commit_protocol.PendingCommit]
) -> commit_protocol.PendingCommit:
    """Claim the write's instant (through the transaction's guard: heartbeat, and under OCC the
    lock for the claim and the starting point of the commit check)."""
    failpoints.hit("write.prepared")
    if job.guard is None:
        pending = start(timeline)
    else:

        def abort(claimed: commit_protocol.PendingCommit) -> None:
            commit_protocol.abort(job.meta, claimed, job.config.optimistic)

        pending = job.guard.claim(timeline, start, abort)
    failpoints.hit("write.claimed")
    return pending


def before_commit(
    job: Pipeline, pending: commit_protocol.PendingCommit, written: list[WriteOutcome]
) -> CheckResult | None:
    """The guard's check once the files are written: the file groups this write touched (and
    those it replaces) against what completed since it started (OCC), or the lock fence."""
    if job.guard is None:
        return None
    groups = {(o.partition, o.file_id) for o in written}
    groups.update((p, f) for p, ids in (pending.replaced or {}).items() for f in ids)
    checked = job.guard.before_commit(pending.instant, pending.action, pending.operation.value, groups)
    if checked is not None:
        # under the commit lock: a partition another writer created and then, failing, removed
        # (it held no file yet) gets its metadata file back before this write's files count
        for partition in sorted({o.partition for o in written}):
            job.meta.ensure_partition_metadata(partition, pending.instant)  # written only if missing
    return checked


def undo(
    job: Pipeline, spark: Any, pending: commit_protocol.PendingCommit, index_touched: bool, exc: BaseException
) -> NoReturn:
    """Stop the failed write's tasks, remove what it wrote, and raise a typed error saying so."""
    instant = pending.instant
    if spark is not None:  # a local write's threads have all stopped when its error arrives
        stop_tasks(spark, job_group(instant))
    outcome = "failed and was rolled back"
    try:
        if job.guard is None or job.guard.holds_lock():
            # remembered before anything goes: a straggler task may still write a file named
            # with this instant, which archival deletes only as a known failed write's
            commit_protocol.record_failure(job.meta, pending)
        if job.guard is not None and not job.guard.holds_lock():
            outcome = "failed; the table lock was lost, so it is left for the next writer's repair"
            # the table is another writer's now: touch nothing; its repair rolls this
            # instant back once our heartbeat (stopped below) has expired
        elif index_touched and not commit_protocol.is_completed(job.meta, pending):
            # the index may already hold this write's locations (deleted or moved keys):
            # undo it like a rollback, which also reverts the index
            replaced = {(p, f) for p, ids in (pending.replaced or {}).items() for f in ids}
            undo_instant(job.meta, instant, pending.action, (), job.index, replaced=replaced)
            commit_protocol.abort(job.meta, pending, job.config.optimistic)
        else:
            commit_protocol.abort(job.meta, pending, job.config.optimistic)
    except Exception as cleanup:  # keep the original error; say what is left behind
        exc.add_note(f"cleaning up instant {instant} also failed: {cleanup}")
    if not isinstance(exc, Exception):
        raise exc
    if isinstance(exc, WriteConflictError) and outcome.endswith("rolled back"):
        raise exc  # its message says the write was rolled back, its attributes name the other
    if isinstance(exc, ConcurrentWriteError):  # keep the holder's details (its attributes)
        exc.add_note(f"write of instant {instant} {outcome}")
        raise exc
    typed = translate(exc)
    detail = str(typed) if typed is not None else task_error_message(exc)
    error_type = type(typed) if typed is not None else StorageError
    try:
        wrapped = error_type(f"write of instant {instant} {outcome}: {detail}")
    except TypeError:  # an error type with extra constructor arguments: keep it as raised
        exc.add_note(f"write of instant {instant} {outcome}")
        raise exc from None
    raise wrapped from exc


__all__ = ["before_commit", "claim", "undo"]
