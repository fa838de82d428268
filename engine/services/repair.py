"""Repair: bring a table back to a clean state after crashes, under the table lock.

Runs at the start of every write and through `hoodie repair`, in this order:
0. Apache Hudi's metadata table (`.hoodie/metadata/`) is kept on tables of version 8 and 9 when
   its `files` partition is in sync (`engine.metadata.writer`: the partitions this engine does
   not keep are dropped alone); otherwise it is removed, first from hoodie.properties, then from
   storage (`engine.table.metadata_table`; `hoodie.metadata.enable=true` is refused instead);
   with `hoodie.metadata.enable=true` a table of version 8 or 9 without one gets one, with its
   files partition, once everything below is done (`engine.metadata.create`);
   an archival killed after writing its archive file is finished;
1. pending restores and rollbacks are finished from their plans;
2. pending writes whose heartbeat expired (their writer died) are rolled back: partial data and
   index files deleted, timeline files removed. So is, at once, a pending write whose heartbeat
   names a process of this host and boot that is provably dead (`engine.transaction.liveness`: a
   writer killed here need not be waited for). A pending write with a live heartbeat means a
   writer is still running without the lock: ConcurrentWriteError naming when its heartbeat
   expires, nothing touched; or, with `lazy` (optimistic concurrency control, Apache Hudi's LAZY
   failed-writes policy), a concurrent writer at work: left alone and reported in `left_pending`;
   Pending compactions and clusterings (table services Apache Hudi scheduled) are left alone
   and reported in `left_pending`, as are failed writes of MERGE_ON_READ tables;
3. pending cleans are finished from their plans;
4. savepoints left inflight are removed, and heartbeat files of instants that are no longer
   pending.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.constants import HEARTBEAT_FOLDER, METAFOLDER
from engine.errors import ConcurrentWriteError
from engine.index.base import Index
from engine.metadata import create as metadata_create
from engine.metadata import writer as metadata_writer
from engine.serial import Documented
from engine.services import archive as archive_service
from engine.services import clean as clean_service
from engine.services import restore as restore_service
from engine.services import rollback as rollback_service
from engine.services.savepoint import remove_savepoint_files
from engine.table import metadata_table, upgrade
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline
from engine.transaction.heartbeat import Heartbeat, heartbeat_file, is_writer_gone
from engine.transaction.liveness import ProcReader
from engine.transaction.lock_info import iso_ms


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
    # inflight compactions whose runner died: partial base files removed, back to requested
    compactions_reverted: list[str] = field(default_factory=list)
    # inflight clusterings this engine ran whose runner died: partial file groups removed, back to requested
    clusterings_reverted: list[str] = field(default_factory=list)
    # pending instants repair leaves alone, with the reason: table services Apache Hudi scheduled
    # (compaction, clustering: Hudi executes them), and failed writes this engine cannot roll back
    left_pending: dict[str, str] = field(default_factory=dict)
    # the notice when Apache Hudi's metadata table was removed (engine.table.metadata_table)
    metadata_table_removed: str | None = None
    # the partitions of a kept metadata table this engine does not keep, dropped alone
    # (engine.metadata.writer)
    metadata_partitions_dropped: list[str] = field(default_factory=list)
    # a metadata table with its files partition created (hoodie.metadata.enable=true, versions 8, 9)
    metadata_table_created: bool = False
    # metadata partitions built (hoodie.metadata.index.column.stats.enable=true: column_stats)
    metadata_partitions_built: list[str] = field(default_factory=list)
    # a version 4 or 5 table upgraded before the write ("table version 5 -> 6")
    upgraded: str | None = None
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
            or self.compactions_reverted
            or self.clusterings_reverted
            or self.metadata_table_removed
            or self.metadata_partitions_dropped
            or self.metadata_table_created
            or self.metadata_partitions_built
            or self.upgraded
        )


_log = logging.getLogger(__name__)
TABLE_SERVICE_ACTIONS = (Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING)


def failed_write_candidates(meta: MetaClient, timeline: Timeline, left: dict[str, str]) -> list[Instant]:
    """Pending write instants that are failed writes once their heartbeat expired (as Apache
    Hudi's `getInflightTimelineExcludeCompactionAndClustering`): pending compactions and
    clusterings are table services, not failed writes. Instants left alone go to `left`."""
    from engine.table.clustering import pending_clustering

    clustering = {c.instant.time for c in pending_clustering(meta, timeline)}
    out = []
    for inst in timeline.writes.instants:
        if inst.is_completed:
            continue
        if inst.action is Action.COMPACTION:
            left[inst.time] = (
                f"pending compaction ({inst.state.value}): run it with `hoodie compaction run PATH {inst.time}` "
                f"(or the next inline compaction), or Apache Hudi"
            )
        elif inst.time in clustering:
            left[inst.time] = (
                f"pending {inst.action.value} (a table service scheduled by Apache Hudi): run it with "
                f"`hoodie clustering run PATH {inst.time}` (or Hudi), or remove it with `hoodie rollback`"
            )
        elif inst.action in TABLE_SERVICE_ACTIONS:
            left[inst.time] = (
                f"pending {inst.action.value} (a table service scheduled by Apache Hudi): run it with "
                f"Hudi, or remove it with `hoodie rollback`"
            )
        else:
            out.append(inst)
    return out


def interrupted_compactions(
    meta: MetaClient,
    timeline: Timeline,
    heartbeat_interval_ms: int,
    tolerable_misses: int,
    proc: ProcReader | None = None,
    actions: tuple[Action, ...] = (Action.COMPACTION,),
) -> list[Instant]:
    """Inflight compactions (or, with `actions`, clusterings) this engine started (they keep a
    heartbeat) whose runner died: their heartbeat expired or names a provably dead process. One
    Apache Hudi runs has no heartbeat of ours and is left alone."""
    out = []
    for inst in timeline.pending.instants:
        if inst.action not in actions or not inst.is_inflight:
            continue
        if not meta.storage.exists(heartbeat_file(inst.time)):
            continue
        if is_writer_gone(meta.storage, inst.time, heartbeat_interval_ms, tolerable_misses, proc):
            out.append(inst)
    return out


def repair(
    meta: MetaClient,
    index: Index | None,
    heartbeat_interval_ms: int,
    tolerable_misses: int,
    dry_run: bool = False,
    fence: Callable[[], None] | None = None,
    metadata_enable: bool | None = None,
    proc: ProcReader | None = None,
    lazy: bool = False,
    auto_upgrade: bool = True,
    skip_default_partition_validation: bool = False,
    column_stats_enable: bool | None = None,
) -> RepairReport:
    """Repair the table (see the module docstring); `proc` reads /proc to prove writers dead;
    `lazy`: pending writes with a live writer are left alone instead of refused. A table of
    version 4 or 5 is upgraded to 6 once its failed writes are rolled back (`engine.table.upgrade`;
    refused before anything changes when `auto_upgrade` is false)."""
    report = RepairReport(dry_run=dry_run)
    upgrade.check_allowed(meta.config, auto_upgrade, meta.properties_uri)
    # before anything changes: a timeline this engine cannot read (layouts mixed, the latest
    # commit's metadata truncated) refuses the write or service with the table as it was
    timeline = meta.timeline()
    meta.latest_avro_schema(timeline)
    present = metadata_table.is_present(meta.storage, meta.config)
    # hoodie.metadata.enable=true on a table of version 8 or 9 without one: created at the end
    create_metadata = bool(metadata_enable) and not present and meta.config.version >= 8
    if not create_metadata:
        metadata_table.check_enable_option(metadata_enable, meta.storage, present)
    if present:
        decision = metadata_writer.decide(meta, timeline, metadata_enable)
        if metadata_enable and not decision.keep and meta.config.version >= 8:
            create_metadata = True  # one it cannot keep (behind, half made) is built again below
        else:
            metadata_table.check_enable_option(
                metadata_enable, meta.storage, present, None if decision.keep else decision.reason)
        if decision.keep:
            # kept up to date from here on (engine.metadata.writer); what it cannot keep goes alone
            report.metadata_partitions_dropped = decision.dropped
            if not dry_run:
                if fence is not None:
                    fence()
                metadata_writer.apply(meta, decision)
        else:
            report.metadata_table_removed = metadata_table.removal_notice(
                meta.storage, metadata_table.named_partitions(meta.config)
            ) + f" ({decision.reason})"
            if not dry_run:
                remove_metadata_table(
                    meta, fence
                )  # the metadata folder and properties: the timeline stays as listed
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
        if not is_writer_gone(meta.storage, i.time, heartbeat_interval_ms, tolerable_misses, proc)
    ]
    if live and lazy:
        for t in live:
            report.left_pending[t] = "being written by a concurrent writer (its heartbeat is fresh)"
        pending_writes = [i for i in pending_writes if i.time not in live]
    elif live:
        expiries = [
            Heartbeat.expires_at_ms(meta.storage, t, heartbeat_interval_ms / 1000, tolerable_misses)
            for t in live
        ]
        retry = max((e for e in expiries if e is not None), default=None)
        raise ConcurrentWriteError(
            f"instant(s) {', '.join(live)} of {meta.storage.base_uri} are being written by a live writer "
            "(their heartbeat is fresh); wait for it to finish or for its heartbeat to expire"
            + ("" if retry is None else f": retry after {iso_ms(retry)}")
        )
    for inst in sorted(pending_writes, reverse=True):
        report.failed_writes_rolled_back.append(inst.time)
        if not dry_run:
            rollback_service.rollback(meta, inst.time, index, fence=fence)
    if upgrade.needs_upgrade(meta.config):
        report.upgraded = f"table version {meta.config.version} -> {upgrade.TARGET}"
        if not dry_run:
            if fence is not None:
                fence()
            tl = meta.timeline()
            requested = [
                i.time for i in tl.instants if i.action is Action.COMPACTION and i.state is State.REQUESTED
            ]
            upgrade.upgrade(meta.storage, meta.config, requested, skip_default_partition_validation)
            meta.reload_config()
    for inst in interrupted_compactions(meta, meta.timeline(), heartbeat_interval_ms, tolerable_misses, proc):
        report.compactions_reverted.append(inst.time)
        if not dry_run:
            from engine.services.compaction import revert_to_requested

            revert_to_requested(meta, inst.time, fence)
    from engine.table.clustering import pending_clustering

    clusterings = {c.instant.time for c in pending_clustering(meta, meta.timeline())}
    for inst in interrupted_compactions(meta, meta.timeline(), heartbeat_interval_ms, tolerable_misses, proc,
                                        (Action.CLUSTERING, Action.REPLACE_COMMIT)):
        if inst.time not in clusterings:
            continue  # an insert_overwrite: a failed write, rolled back above
        report.clusterings_reverted.append(inst.time)
        if not dry_run:
            from engine.services.clustering import revert_to_requested as revert_clustering

            revert_clustering(meta, inst.time, fence)
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
    if create_metadata:
        report.metadata_table_created = True
        if not dry_run:
            if fence is not None:
                fence()
            metadata_create.initialize(meta, meta.timeline())
    if column_stats_enable is not None and meta.config.version >= 8:
        _column_stats_option(meta, column_stats_enable, report, dry_run, fence)
    pending = {i.time for i in meta.timeline().pending.instants}
    folder = f"{METAFOLDER}/{HEARTBEAT_FOLDER}"
    for f in meta.storage.list_dir(folder):
        if not f.is_dir and f.name not in pending:
            report.heartbeats_removed.append(f.name)
            if not dry_run:
                meta.storage.delete(f.path)
    return report


def _column_stats_option(meta: MetaClient, enable: bool, report: RepairReport, dry_run: bool,
                         fence: Callable[[], None] | None) -> None:
    """hoodie.metadata.index.column.stats.enable, as Apache Hudi's writers follow it on a table with
    a metadata table: true builds the column statistics where they are missing (not while another
    instant is in flight: its files would be missed; the next write builds them); false drops
    them, with the partition statistics that depend on them."""
    from engine.metadata import build_column_stats
    from engine.metadata import records as mdr

    meta.reload_config()
    if not metadata_writer.has_metadata_table(meta):
        return
    named = metadata_table.named_partitions(meta.config)
    if enable and mdr.COLUMN_STATS not in named:
        timeline = meta.timeline()
        in_flight = [i.time for i in timeline.pending.instants]
        if in_flight:
            _log.warning("%s: column statistics not built while %s are in flight (the next write builds them)",
                         meta.storage.base_uri, ", ".join(in_flight))
            return
        report.metadata_partitions_built.append(mdr.COLUMN_STATS)
        if not dry_run:
            if fence is not None:
                fence()
            build_column_stats.build(meta, timeline)
    elif not enable:
        gone = [p for p in (mdr.COLUMN_STATS, mdr.PARTITION_STATS) if p in metadata_writer.present_partitions(meta)]
        if gone:
            report.metadata_partitions_dropped = sorted({*report.metadata_partitions_dropped, *gone})
            if not dry_run:
                if fence is not None:
                    fence()
                metadata_writer.apply(meta, metadata_writer.Decision(
                    True, gone, reason="hoodie.metadata.index.column.stats.enable=false"))


def remove_metadata_table(meta: MetaClient, fence: Callable[[], None] | None = None) -> None:
    """Remove Apache Hudi's metadata table as a writer with `hoodie.metadata.enable=false` does:
    hoodie.properties stops naming it (readers list storage from then on), then its folder goes."""
    if fence is not None:
        fence()
    metadata_table.remove(meta)
