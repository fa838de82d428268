"""Repair: bring a table back to a clean state after crashes, under the table lock.

Runs at the start of every write and through `hoodie repair`, in this order:
0. an archival killed after writing its archive file is finished;
1. pending restores and rollbacks are finished from their plans;
2. pending writes whose heartbeat expired (their writer died) are rolled back: partial data and
   index files deleted, timeline files removed. A pending write with a live heartbeat means a
   writer is still running without the lock: ConcurrentWriteError, nothing touched;
3. pending cleans are finished from their plans;
4. savepoints left inflight are removed, and heartbeat files of instants that are no longer
   pending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine.constants import HEARTBEAT_FOLDER, METAFOLDER
from engine.errors import ConcurrentWriteError
from engine.index.base import Index
from engine.services import archive as archive_service
from engine.services import clean as clean_service
from engine.services import restore as restore_service
from engine.services import rollback as rollback_service
from engine.services.savepoint import remove_savepoint_files
from engine.table.heartbeat import Heartbeat
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action


@dataclass
class RepairReport:
    """What repair did (or, in a dry run, would do)."""

    restores_finished: list[str] = field(default_factory=list)
    rollbacks_finished: list[str] = field(default_factory=list)
    failed_writes_rolled_back: list[str] = field(default_factory=list)
    cleans_finished: list[str] = field(default_factory=list)
    heartbeats_removed: list[str] = field(default_factory=list)
    archival_finished: list[str] = field(default_factory=list)
    savepoints_removed: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def nothing_done(self) -> bool:
        return not (
            self.restores_finished
            or self.rollbacks_finished
            or self.failed_writes_rolled_back
            or self.cleans_finished
            or self.heartbeats_removed
            or self.archival_finished
            or self.savepoints_removed
        )


def repair(
    meta: MetaClient,
    index: Index | None,
    heartbeat_interval_ms: int,
    tolerable_misses: int,
    dry_run: bool = False,
    fence: Callable[[], None] | None = None,
) -> RepairReport:
    report = RepairReport(dry_run=dry_run)
    timeline = meta.timeline()
    if timeline.has_archive:
        if dry_run:
            report.archival_finished = []
        else:
            report.archival_finished = archive_service.finish_interrupted(meta, timeline)
            timeline = meta.timeline()
    for inst in timeline.pending_services.instants:
        if inst.action is Action.RESTORE:
            report.restores_finished.append(inst.time)
            if not dry_run:
                restore_service.resume(meta, inst, index, fence)
    timeline = meta.timeline()
    for inst in timeline.pending_services.instants:
        if inst.action is Action.ROLLBACK:
            report.rollbacks_finished.append(inst.time)
            if not dry_run:
                rollback_service.resume(meta, inst, index, fence)
    timeline = meta.timeline()
    pending_writes = [i for i in timeline.writes.instants if not i.is_completed]
    live = [
        i.time
        for i in pending_writes
        if not Heartbeat.is_expired(meta.storage, i.time, heartbeat_interval_ms / 1000, tolerable_misses)
    ]
    if live:
        raise ConcurrentWriteError(
            f"instant(s) {', '.join(live)} of {meta.storage.base_uri} are being written by a live writer "
            "(their heartbeat is fresh); wait for it to finish or for its heartbeat to expire"
        )
    for inst in sorted(pending_writes, reverse=True):
        report.failed_writes_rolled_back.append(inst.time)
        if not dry_run:
            rollback_service.rollback(meta, inst.time, index, fence=fence)
    timeline = meta.timeline()
    for inst in timeline.pending_services.instants:
        if inst.action is Action.CLEAN:
            report.cleans_finished.append(inst.time)
            if not dry_run:
                clean_service.resume(meta, inst, fence)
    # a savepoint interrupted between its inflight and completed files protects nothing: remove it
    for inst in meta.timeline().instants:
        if inst.action is Action.SAVEPOINT and not inst.is_completed:
            report.savepoints_removed.append(inst.time)
            if not dry_run:
                remove_savepoint_files(meta, inst.time)
    pending = {i.time for i in meta.timeline().pending.instants}
    folder = f"{METAFOLDER}/{HEARTBEAT_FOLDER}"
    for f in meta.storage.list_dir(folder):
        if not f.is_dir and f.name not in pending:
            report.heartbeats_removed.append(f.name)
            if not dry_run:
                meta.storage.delete(f.path)
    return report
