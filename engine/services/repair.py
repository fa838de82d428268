"""Repair: bring a table back to a clean state after crashes, under the table lock.

Runs at the start of every write and through `hoodie repair`, in this order:
0. an archival killed after writing its archive file is finished;
1. pending restores and rollbacks are finished from their plans;
2. pending writes whose heartbeat expired (their writer died) are rolled back: partial data and
   index files deleted, timeline files removed. A pending write with a live heartbeat means a
   writer is still running without the lock: ConcurrentWriteError, nothing touched;
   Pending compactions and clusterings (table services Apache Hudi scheduled) are left alone
   and reported in `left_pending`, as are failed writes of MERGE_ON_READ tables;
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
from engine.services.serial import Documented
from engine.table.heartbeat import Heartbeat
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant
from engine.timeline.timeline import Timeline


@dataclass
class RepairReport(Documented):
    """What repair did (or, in a dry run, would do)."""

    restores_finished: list[str] = field(default_factory=list)
    rollbacks_finished: list[str] = field(default_factory=list)
    failed_writes_rolled_back: list[str] = field(default_factory=list)
    cleans_finished: list[str] = field(default_factory=list)
    heartbeats_removed: list[str] = field(default_factory=list)
    archival_finished: list[str] = field(default_factory=list)
    savepoints_removed: list[str] = field(default_factory=list)
    # pending instants repair leaves alone, with the reason: table services Apache Hudi scheduled
    # (compaction, clustering: Hudi executes them), and failed writes this engine cannot roll back
    left_pending: dict[str, str] = field(default_factory=dict)
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


TABLE_SERVICE_ACTIONS = (Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING)


def failed_write_candidates(meta: MetaClient, timeline: Timeline, left: dict[str, str]) -> list[Instant]:
    """Pending write instants that are failed writes once their heartbeat expired (as Apache
    Hudi's `getInflightTimelineExcludeCompactionAndClustering`): pending compactions and
    clusterings are table services, not failed writes. Instants left alone go to `left`."""
    from engine.config.table_config import TableType
    from engine.table.clustering import pending_clustering

    clustering = {c.instant.time for c in pending_clustering(meta, timeline)}
    out = []
    for inst in timeline.writes.instants:
        if inst.is_completed:
            continue
        if inst.action in TABLE_SERVICE_ACTIONS or inst.time in clustering:
            left[inst.time] = (
                f"pending {inst.action.value} (a table service scheduled by Apache Hudi): run it with "
                f"Hudi, or remove it with `hoodie rollback`"
            )
        elif meta.config.table_type is not TableType.COPY_ON_WRITE:
            left[inst.time] = f"pending {inst.action.value}: rolling back MERGE_ON_READ writes is not implemented"
        else:
            out.append(inst)
    return out


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
    pending_writes = failed_write_candidates(meta, timeline, report.left_pending)
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
