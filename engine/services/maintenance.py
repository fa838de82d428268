"""`Maintenance`: the table services as one object (`Table.maintenance`, the CLI, the console).

No SparkSession is needed: every service works on files through Storage. Destructive services
take the table lock and run `repair` first; `dry_run=True` only plans (no lock, nothing written).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, overload

from engine.config.write_config import WriteConfig
from engine.errors import InstantNotFoundError
from engine.services import archive as archive_service
from engine.services import clean as clean_service
from engine.services import metadata_archive
from engine.services import restore as restore_service
from engine.services import rollback as rollback_service
from engine.services import savepoint as savepoint_service
from engine.services.archive import ArchivePlan
from engine.services.clean import CleanPlan, CleanResult
from engine.services.clustering_maintenance import ClusteringServices
from engine.services.repair import RepairReport, repair
from engine.services.restore import RestorePlan, RestoreResult
from engine.services.rollback import RollbackPlan, RollbackResult
from engine.services.savepoint import Savepoint
from engine.services.transaction import Transaction
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from engine.index.base import Index
    from engine.metadata.build_column_stats import ColumnStatsBuild
    from engine.metadata.build_partition_stats import PartitionStatsBuild
    from engine.metadata.build_record_index import RecordIndexBuild
    from engine.metadata.build_secondary_index import SecondaryIndexBuild
    from engine.schema.changes import Change
    from engine.services.alter import AlterResult
    from engine.services.compaction import CompactionResult
    from engine.services.metadata_plans import MetadataPartitionPlan
    from engine.table.compaction_plan import CompactionPlan


class Maintenance(ClusteringServices):
    """Rollback, restore, savepoints, clean, archival and repair of one table."""

    def __init__(self, meta: MetaClient, options: Mapping[str, object] | None = None) -> None:
        self.meta = meta
        self._options = dict(options or {})
        self.config = WriteConfig.from_options(options)
        # what the repair before the last service did (None before the first, or in dry runs)
        self.last_repair: RepairReport | None = None

    def _index(self) -> Index:
        from engine.index import resolve_index

        return resolve_index(self.meta.config, self.config, self.meta)

    def _tx(self, purpose: str, index: Index | None, service: bool = True) -> Transaction:
        return _RecordingTransaction(self, purpose, index, service)

    # ---- rollback / restore ------------------------------------------------------------
    @overload
    def rollback(self, instant: str, dry_run: Literal[False] = False) -> RollbackResult: ...
    @overload
    def rollback(self, instant: str, dry_run: Literal[True]) -> RollbackPlan: ...
    @overload
    def rollback(self, instant: str, dry_run: bool) -> RollbackPlan | RollbackResult: ...
    def rollback(self, instant: str, dry_run: bool = False) -> RollbackPlan | RollbackResult:
        """Roll back one instant (see `engine.services.rollback`); the plan alone in a dry run."""
        index = self._index()
        # plan first without the lock: a refused rollback leaves the table byte for byte as it was
        timeline = self.meta.timeline()
        plan = rollback_service.plan_rollback(self.meta, timeline, instant, index)
        if dry_run:
            return rollback_service.describe_index_revert(self.meta, timeline, plan, index)
        with self._tx("rollback", index) as tx:
            report = tx.repair_report
            if report is not None and instant in report.failed_writes_rolled_back:
                # a failed write: the repair before every service already rolled it back
                return rollback_service.RollbackResult(None, instant, [], 0.0)
            return rollback_service.rollback(self.meta, instant, index, fence=tx.fence)

    @overload
    def restore(self, instant: str, dry_run: Literal[False] = False) -> RestoreResult: ...
    @overload
    def restore(self, instant: str, dry_run: Literal[True]) -> RestorePlan: ...
    @overload
    def restore(self, instant: str, dry_run: bool) -> RestorePlan | RestoreResult: ...
    def restore(self, instant: str, dry_run: bool = False) -> RestorePlan | RestoreResult:
        """Roll back every instant after `instant`, newest first, as one recoverable operation."""
        index = self._index()
        plan = restore_service.plan_restore(self.meta, self.meta.timeline(), instant)
        if dry_run:
            return plan
        with self._tx("restore", index) as tx:
            return restore_service.restore(self.meta, instant, index, fence=tx.fence)

    # ---- savepoints --------------------------------------------------------------------
    def create_savepoint(
        self, instant: str, user: str | None = None, comment: str = "", dry_run: bool = False
    ) -> Savepoint:
        """Savepoint a completed commit (the savepoint it would write, in a dry run)."""
        plan = savepoint_service.plan_savepoint(self.meta, self.meta.timeline(), instant, user, comment)
        if dry_run:
            return plan
        with self._tx("savepoint", self._index()) as tx:
            sp = savepoint_service.plan_savepoint(self.meta, self.meta.timeline(), instant, user, comment)
            tx.fence()
            return savepoint_service.create_savepoint(self.meta, sp)

    def delete_savepoint(self, instant: str, dry_run: bool = False) -> str:
        """Remove the savepoint at `instant`; returns that instant (also in a dry run)."""
        if not any(sp.time == instant for sp in self.meta.timeline().savepoints):
            raise InstantNotFoundError(f"there is no savepoint at {instant}")
        if dry_run:
            return instant
        with self._tx("savepoint delete", self._index()):
            savepoint_service.delete_savepoint(self.meta, self.meta.timeline(), instant)
        return instant

    def savepoints(self) -> list[Savepoint]:
        return savepoint_service.list_savepoints(self.meta)

    # ---- clean / archive ---------------------------------------------------------------
    @overload
    def clean(self, dry_run: Literal[False] = False) -> CleanResult | None: ...
    @overload
    def clean(self, dry_run: Literal[True]) -> CleanPlan: ...
    @overload
    def clean(self, dry_run: bool) -> CleanPlan | CleanResult | None: ...
    def clean(self, dry_run: bool = False) -> CleanPlan | CleanResult | None:
        """Clean by the configured policy (`hoodie.cleaner.policy`, retained counts)."""
        cfg = self.config
        retained = (
            cfg.cleaner_commits_retained
            if cfg.cleaner_policy == clean_service.KEEP_LATEST_COMMITS
            else cfg.cleaner_file_versions_retained
        )
        if dry_run:
            return clean_service.plan_clean(self.meta, self.meta.timeline(), cfg.cleaner_policy, retained)
        with self._tx("clean", self._index()) as tx:
            return clean_service.clean(self.meta, cfg.cleaner_policy, retained, fence=tx.fence)

    @overload
    def archive(self, dry_run: Literal[False] = False) -> list[str]: ...
    @overload
    def archive(self, dry_run: Literal[True]) -> ArchivePlan: ...
    @overload
    def archive(self, dry_run: bool) -> ArchivePlan | list[str]: ...
    def archive(self, dry_run: bool = False) -> ArchivePlan | list[str]:
        """Archive the oldest completed instants (the plan in a dry run; else the archived times)."""
        cfg = self.config
        if dry_run:
            return archive_service.plan_archive(self.meta, self.meta.timeline(), cfg.keep_min_commits, cfg.keep_max_commits)
        with self._tx("archive", self._index()) as tx:
            archived = archive_service.execute_archive(
                self.meta,
                archive_service.plan_archive(self.meta, self.meta.timeline(), cfg.keep_min_commits, cfg.keep_max_commits),
                fence=tx.fence,
                compaction_batch_size=cfg.timeline_compaction_batch_size,
            )
            tx.fence()
            metadata_archive.archive_metadata_table(self.meta, cfg.keep_min_commits, cfg.keep_max_commits,
                                                    cfg.timeline_compaction_batch_size)
            return archived

    def archived_instants(self) -> list[Instant]:
        return archive_service.archived_instants(self.meta)

    # ---- compaction (merge-on-read) ----------------------------------------------------------
    def compaction_plans(self) -> list[CompactionPlan]:
        """The pending compaction plans, oldest first."""
        from engine.table.compaction_plan import pending_compactions

        return pending_compactions(self.meta, self.meta.timeline())

    def schedule_compaction(self, dry_run: bool = False) -> CompactionPlan | None:
        """Plan a compaction of every slice with log files (`C.compaction.requested`); in a dry run the
        plan without an instant. None when no slice has log files."""
        from engine.services import compaction as compaction_service

        if dry_run:
            plan = compaction_service.plan_compaction(self.meta, self.meta.timeline())
            return plan if plan.operations else None
        with self._tx("compaction schedule", self._index()) as tx:
            timeline = self.meta.timeline()
            exclude: frozenset[tuple[str, str]] = frozenset()
            if self.config.optimistic:  # writes in flight keep their groups (see plan_beside_writers)
                from engine.transaction.occ import pending_write_groups

                exclude = pending_write_groups(self.meta, timeline)
            return compaction_service.schedule_compaction(self.meta, timeline, fence=tx.fence, exclude=exclude)

    def run_compaction(
        self, instant: str | None = None, spark: object = None, progress: Callable[[str], None] | None = None
    ) -> CompactionResult | None:
        """Run a pending compaction (`instant`), or every pending one oldest first, or, with none
        pending, schedule one and run it. With `spark`, the slices merge in Spark tasks."""
        from engine.services import compaction as compaction_service
        from engine.table.compaction_plan import read_plan
        from engine.table.create import require_format_writable

        require_format_writable(self.meta.config, self.meta.properties_uri)  # before the lock: nothing touched
        if self.config.optimistic:
            return self._run_compaction_beside_writers(instant, spark, progress)
        with self._tx("compaction", self._index()) as tx:
            compression, bloom = self.config.compression, self._bloom()
            beat = self.config.heartbeat_interval_ms / 1000
            if instant is None:
                return compaction_service.compact(
                    self.meta, spark=spark, fence=tx.fence, progress=progress, compression=compression, bloom=bloom,
                    heartbeat_interval=beat, local_max_bytes=self.config.local_service_bytes,
                )
            try:
                plan = read_plan(self.meta, instant)
            except FileNotFoundError as exc:
                raise InstantNotFoundError(f"no compaction plan {instant} in {self.meta.storage.base_uri}") from exc
            return compaction_service.execute_compaction(
                self.meta, plan, spark=spark, fence=tx.fence, progress=progress, compression=compression, bloom=bloom,
                heartbeat_interval=beat, local_max_bytes=self.config.local_service_bytes,
            )

    def _run_compaction_beside_writers(
        self, instant: str | None, spark: object, progress: Callable[[str], None] | None
    ) -> CompactionResult | None:
        """Optimistic concurrency control: Apache Hudi's async compaction. Under the lock, pick a
        pending plan no live process is running (`instant`, or the oldest), or schedule one that
        leaves out the file groups of writes in flight, and start its heartbeat; merge the slices
        without the lock (writers go on, appending to the slices the plan starts); take the lock
        again to complete it."""
        from engine.services import compaction as compaction_service
        from engine.transaction.heartbeat import Heartbeat

        beat = self.config.heartbeat_interval_ms / 1000
        with self._tx("compaction", self._index(), service=False) as tx:
            with tx.locked("compaction schedule"):
                plan = compaction_service.plan_beside_writers(
                    self.meta, self.config.heartbeat_interval_ms, self.config.heartbeat_tolerable_misses, instant
                )
                if plan is None:
                    return None
                heartbeat = Heartbeat.start(self.meta.storage, plan.instant, beat)  # running: others keep off
            try:
                return compaction_service.execute_compaction(
                    self.meta, plan, spark=spark, fence=tx.fence, progress=progress, compression=self.config.compression,
                    bloom=self._bloom(), heartbeat_interval=None, local_max_bytes=self.config.local_service_bytes,
                    before_complete=lambda: self._commit_lock(tx, plan.instant),
                )
            finally:
                heartbeat.stop()

    def _commit_lock(self, tx: Transaction, instant: str, action: Action | None = None) -> None:
        """The lock to complete a service run beside writers (a compaction, or `action`), once it is
        proven still ours."""
        from engine.transaction.occ import check_still_ours

        action = action or Action.COMPACTION
        tx.take_lock(f"{action.value} commit")
        cfg = self.config
        check_still_ours(self.meta, instant, action, cfg.heartbeat_interval_ms, cfg.heartbeat_tolerable_misses)

    def compact(self, dry_run: bool = False, spark: object = None) -> CompactionPlan | CompactionResult | None:
        """Schedule and run a compaction (the plan alone in a dry run)."""
        if dry_run:
            return self.schedule_compaction(dry_run=True)
        return self.run_compaction(spark=spark)

    def _bloom(self) -> tuple[int, float, int]:
        return (self.config.bloom_num_entries, self.config.bloom_fpp, self.config.bloom_max_entries)

    # ---- index ---------------------------------------------------------------------------
    def build_record_index(self, buckets: int | None = None, hash_name: str | None = None):
        """Build the RECORD index from the data files and make it the table's index (see
        `engine.index.record_service.build_index`), under the table lock after repair, so that
        no write can complete (with the old index, or without its entries) while it runs.
        Returns the updated MetaClient and the build's stats."""
        from engine.index.record_service import build_index

        with self._tx("index build", self._index()) as tx:
            tx.fence()
            updated, stats = build_index(self.meta, buckets, hash_name)
            tx.fence()
        self.meta = updated
        return updated, stats

    def build_metadata_partition(self, partition: str = "files") -> RepairReport:
        """Create the metadata table with its `files` partition (tables of version 8 and 9; kept
        from then on by every write), as a write with hoodie.metadata.enable=true does. The record
        index: `build_metadata_record_index`. Other partitions are not built by this engine yet."""
        from engine.errors import UnsupportedFeatureError

        if partition != "files":
            raise UnsupportedFeatureError(
                f"metadata partition {partition!r}: this engine builds the files, record_index, column_stats, partition_stats and "
                "secondary_index_<name> (with its column) "
                "partitions only" + {"record_index": " (Maintenance.build_metadata_record_index)",
                                     "column_stats": " (Maintenance.build_metadata_column_stats)"}.get(partition, ""))
        return Maintenance(self.meta, {**self._options, "hoodie.metadata.enable": "true"}).repair()

    def build_metadata_record_index(self) -> RecordIndexBuild:
        """Build Apache Hudi's record index (`record_index`) in the metadata table from the data
        files, creating the metadata table first where the table has none, under the table lock
        with no write in flight (`engine.metadata.build_record_index`). Every write keeps it from
        then on, and RECORD looks keys up through it."""
        from engine.metadata import build_record_index

        self.build_metadata_partition("files")
        self.meta = MetaClient.open(self.meta.storage)
        with self._tx("metadata build", self._index()) as tx:
            tx.fence()
            return build_record_index.build(self.meta, self.meta.timeline())

    def build_metadata_column_stats(
        self, columns: Sequence[str] = (), max_columns: int = 32, file_groups: int = 2
    ) -> ColumnStatsBuild:
        """Build Apache Hudi's column statistics (`column_stats`, index version V2) in the metadata
        table from the data files, creating the metadata table first where the table has none,
        under the table lock with no write in flight (`engine.metadata.build_column_stats`). The
        columns: `columns` (Hudi's `hoodie.metadata.index.column.stats.column.list`), else the
        first `max_columns` (`...max.columns.to.index`) the statistics cover; `file_groups`:
        `...file.group.count`. Every write keeps them from then on, and filtered reads skip file
        slices by them."""
        from engine.metadata import build_column_stats as bcs

        self.build_metadata_partition("files")
        self.meta = MetaClient.open(self.meta.storage)
        with self._tx("metadata build", self._index()) as tx:
            tx.fence()
            return bcs.build(self.meta, self.meta.timeline(), {
                bcs.COLUMN_LIST: ",".join(columns), bcs.MAX_COLUMNS: str(max_columns),
                bcs.FILE_GROUP_COUNT: str(file_groups)})

    def build_metadata_partition_stats(self, file_groups: int = 1) -> PartitionStatsBuild:
        """Build Apache Hudi's partition statistics (`partition_stats`) of a partitioned table from
        the column statistics of its latest file slices, under the table lock with no write in
        flight (`engine.metadata.build_partition_stats`). Every write keeps them from then on,
        and filtered reads of the latest snapshot skip partitions by them."""
        from engine.metadata import build_partition_stats

        with self._tx("metadata build", self._index()) as tx:
            tx.fence()
            self.meta = MetaClient.open(self.meta.storage)
            return build_partition_stats.build(self.meta, self.meta.timeline(), file_groups)

    def build_metadata_secondary_index(self, partition: str, column: str, file_groups: int = 10) -> SecondaryIndexBuild:
        """Build a secondary index (`secondary_index_<name>` over `column`, index version V2) in the
        metadata table from the data files, beside the record index, under the table lock with no
        write in flight (`engine.metadata.build_secondary_index`), as Hudi's `CREATE INDEX` does.
        Every write keeps it from then on, and equality filters on the column look keys up
        through it."""
        from engine.metadata import build_secondary_index

        with self._tx("metadata build", self._index()) as tx:
            tx.fence()
            self.meta = MetaClient.open(self.meta.storage)
            return build_secondary_index.build(self.meta, self.meta.timeline(), partition, column, file_groups)

    def plan_metadata_build(self, partition: str) -> MetadataPartitionPlan:
        """What building metadata partition `partition` would do, refused as the build would be
        (a dry run: no lock, nothing written; `engine.services.metadata_plans`)."""
        from engine.services.metadata_plans import plan_build

        return plan_build(self.meta, partition)

    def plan_metadata_drop(self, partition: str) -> MetadataPartitionPlan:
        """What dropping metadata partition `partition` would remove (a dry run)."""
        from engine.services.metadata_plans import plan_drop

        return plan_drop(self.meta, partition)

    def drop_metadata_partition(self, partition: str) -> list[str]:
        """Drop one partition of the metadata table (`files`: the whole metadata table, as a writer
        with hoodie.metadata.enable=false does; `column_stats`: the partition statistics derived
        from them too), under the table lock after repair: properties first, then index
        definitions, then the folder. Returns what was dropped."""
        from engine.errors import InvalidInputError
        from engine.metadata import writer as metadata_writer
        from engine.table import metadata_table

        present = metadata_writer.present_partitions(self.meta)
        if partition not in present:
            raise InvalidInputError(
                f"{self.meta.storage.base_uri} has no metadata partition {partition!r}"
                + (f" (it has: {', '.join(present)})" if present else " (it has no metadata table)"))
        with self._tx("metadata drop", self._index()) as tx:
            tx.fence()
            # the repair before it may have dropped it already (with the others this engine does not keep)
            dropped = list((tx.repair_report.metadata_partitions_dropped if tx.repair_report else None) or [])
            if partition == "files":
                if metadata_writer.has_metadata_table(self.meta):
                    metadata_table.remove(self.meta, "dropped on request")
                return present
            # the partition statistics are derived from the column statistics: they go with them
            going = [p for p in ([partition, "partition_stats"] if partition == "column_stats" else [partition])
                     if p in metadata_writer.present_partitions(self.meta)]
            if going:
                metadata_writer.apply(self.meta, metadata_writer.Decision(True, going, reason="dropped on request"))
                dropped += going
            return sorted(set(dropped))

    # ---- repair ------------------------------------------------------------------------
    def alter(self, changes: Sequence[Change], dry_run: bool = False) -> AlterResult:
        """Rename, drop, move or widen columns (schema on read) in one `alter_schema` commit; a dry
        run checks the changes and returns the schema they would give (`engine.services.alter`)."""
        from engine.services.alter import alter_schema
        from engine.table.create import require_writable

        require_writable(self.meta.config, self.meta.properties_uri)
        # checked first without the lock: a refused change leaves the table byte for byte as it was
        plan = alter_schema(self.meta, changes, dry_run=True)
        if dry_run:
            return plan
        with self._tx("alter", None):
            return alter_schema(self.meta, changes)

    def repair(self, dry_run: bool = False) -> RepairReport:
        """Finish interrupted services and roll back failed writes (also done before every write)."""
        index = self._index()
        cfg = self.config
        if dry_run:
            return repair(self.meta, index, cfg.heartbeat_interval_ms, cfg.heartbeat_tolerable_misses, dry_run=True,
                          metadata_enable=cfg.metadata_enable, auto_upgrade=cfg.auto_upgrade)
        with self._tx("repair", index) as tx:
            assert tx.repair_report is not None
            return tx.repair_report


class _RecordingTransaction(Transaction):
    """A Transaction that leaves its repair report on the Maintenance object (`last_repair`)."""

    def __init__(self, owner: Maintenance, purpose: str, index: Index | None, service: bool = True) -> None:
        super().__init__(owner.meta, owner.config, index, purpose, service)
        self._owner = owner

    def __enter__(self) -> Transaction:
        entered = super().__enter__()
        self._owner.last_repair = self.repair_report
        return entered
