"""The write pipeline's steps on Spark, as named phases: prepare -> tag -> profile -> plan -> commit
(write the files, update the index, complete the instant). Their public types (the prepared
`Batch`, the workload `Profile`) and the contexts handed to the tasks live in
`engine.write.prepared`, re-exported here.

The strategies (`engine.write.executor.WriteJob.run` chooses) run these steps and write the files
their own way: the distributed path (a Spark job per phase), the one-job write planned on the
driver (`engine.write.one_job`), and the one-pass bulk_insert (`engine.write.bulk_stream`). The
table type decides the timeline action (`commit` for COPY_ON_WRITE, `deltacommit` for
MERGE_ON_READ) and how a file group that receives updates is written (`FileHandle`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from engine import failpoints
from engine.columns import FILE_ID_COL, KEY_COL, OP_COL, PART_COL
from engine.config.table_config import TableType
from engine.config.write_config import WriteConfig
from engine.data.file_names import new_file_id
from engine.errors import InvalidInputError
from engine.index.base import Index, TagContext
from engine.keygen.keys import KeySpec
from engine.read.reader import slice_merge
from engine.schema import internal as internal_schema
from engine.schema.avro import (
    arrow_to_avro,
    avro_to_arrow,
)
from engine.schema.evolution import resolve_write_schema
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action
from engine.timeline.timeline import Timeline
from engine.write import commit as commit_protocol
from engine.write import guarded, occ_keys
from engine.write.existing import existing_files
from engine.write.index_rows import replaced_key_rows
from engine.write.operation import Operation, WriteResult
from engine.write.outcome import totals
from engine.write.planner import (
    MergeOnReadRules,
    WritePlan,
    estimate_record_size,
    plan_writes,
)
from engine.write.prepare import (
    ORDER_COL,
    BatchSummary,
    count_batch,
    dedupe,
    delete_columns,
    op_expr,
    partition_path_expr,
    record_key_expr,
    summarize,
)
from engine.write.prepared import (
    Batch,
    FileHandle,
    Profile,
    Progress,
    TaskContexts,
    WriteFiles,
    Written,
    file_handle,
    write_action,
)
from engine.write.tagging import (
    MOVED_COL,
    STALE_COL,
    check_pending_clustering,
    check_replace_clustering,
    mark_stale,
    order_check,
    profile,
    profile_columns,
    relocate,
)

if TYPE_CHECKING:
    from engine.transaction.guard import WriteGuard




@dataclass
class Pipeline(TaskContexts):
    """A write's steps, shared by its strategies (`engine.write.executor.WriteJob.run` picks one):
    `schema`, `keyed`, `prepare`, `tag`, `profile`, `plan`, `commit`; the files themselves are
    written by the strategy, which `commit` calls back with the claimed instant."""

    meta: MetaClient
    index: Index
    config: WriteConfig
    operation: Operation
    progress: Progress
    # heartbeat + lock fencing from the transaction (None: unguarded, e.g. unit tests of the pipeline)
    guard: WriteGuard | None = None
    # set by the local write: every file was written once, by this process, and nothing else can
    # still be writing one for the instant, so there is no debris of retried tasks to list for
    debris_free: bool = False

    # ---- steps --------------------------------------------------------------------------
    def schema(self, df: DataFrame) -> tuple[KeySpec, Timeline, pa.Schema, list[str], str | None]:
        """The key spec, timeline, write schema, the input's data columns and precombine field."""
        return self.schema_of(to_arrow_schema(df.schema, timezone="UTC"))

    def schema_of(self, input_schema: pa.Schema) -> tuple[KeySpec, Timeline, pa.Schema, list[str], str | None]:
        """`schema` for input rows of the Arrow schema `input_schema` (as Spark types them)."""
        table_cfg = self.meta.config
        spec = KeySpec.from_config(table_cfg, self.config.keygen_options)
        timeline = self.meta.timeline()
        versions = self.meta.schema_versions(timeline)  # schema on read (one listing of .hoodie/.schema)
        write_schema = resolve_write_schema(
            input_schema,
            self.meta.latest_schema(timeline, versions=versions),
            spec,
            table_cfg.precombine_field,
            deleting=self.is_delete,
            fill_missing=self.config.fills_missing_columns,
        )
        # files carry exactly the types the stored Avro schema describes (e.g. timestamps in UTC)
        write_schema = avro_to_arrow(arrow_to_avro(write_schema, table_cfg.name))
        # schema on read: checked as the commit records it; carries the ids its merges read files by
        hint = int(timeline.last_time or 0) + 1
        write_schema = internal_schema.for_write(write_schema, versions, hint)
        data_cols = [c for c in write_schema.names if c in input_schema.names]
        pc_field = table_cfg.precombine_field if table_cfg.precombine_field in input_schema.names else None
        return spec, timeline, write_schema, data_cols, pc_field

    def keyed(
        self, df: DataFrame, spec: KeySpec, data_cols: list[str], pc_field: str | None, order: bool
    ) -> DataFrame:
        """The input's written columns with the record key, partition path (and arrival order)."""
        self.progress("preparing keys")
        cols = [F.col(c) for c in (data_cols if not self.is_delete else delete_columns(spec, pc_field))]
        cols += [
            record_key_expr(spec, df.schema).alias(KEY_COL),
            partition_path_expr(spec, df.schema).alias(PART_COL),
        ]
        if order:
            cols.append(F.monotonically_increasing_id().alias(ORDER_COL))
        return df.select(*cols)

    def prepare(self, df: DataFrame, cached: list[DataFrame]) -> Batch | None:
        """Resolve the write schema, key the records, summarise and de-duplicate the batch and give
        each row its operation. None for an empty batch; InvalidInputError for invalid keys."""
        spec, timeline, write_schema, data_cols, pc_field = self.schema(df)
        prepared = self.keyed(df, spec, data_cols, pc_field, order=True).persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(prepared)
        view = self.meta.file_system_view(timeline)
        if not self.operation.tags and not self.combine():
            # nothing to look up or de-duplicate: one job counts the batch, which is both its
            # summary and the planner's profile (no keys collected, no second cached copy)
            records = prepared.withColumn(OP_COL, op_expr(False, prepared.columns)).withColumn(
                FILE_ID_COL, F.lit(None).cast("string")
            )
            summary, counts = count_batch(records, profile_columns(records))
            self.check_keys(spec, summary)
            if summary.total == 0:
                return None
            return Batch(records, summary, write_schema, pc_field, timeline, view, counts)
        summary = summarize(prepared)
        self.check_keys(spec, summary)
        if summary.total == 0:
            return None
        records = prepared
        # a global index knows a key in one partition only: dedupe by key alone
        dedupe_by = [KEY_COL] if self.index.is_global else [KEY_COL, PART_COL]
        if self.combine() and summary.may_have_duplicates(dedupe_by):
            records = dedupe(records, pc_field, dedupe_by)
        records = records.withColumn(OP_COL, op_expr(self.is_delete, records.columns))
        return Batch(records, summary, write_schema, pc_field, timeline, view)

    @staticmethod
    def check_keys(spec: KeySpec, summary: BatchSummary) -> None:
        if summary.bad:
            fields = ", ".join(spec.record_key_fields)
            raise InvalidInputError(
                f"{summary.bad} input record(s) have a null or empty record key ({fields})"
            )

    def tag(self, batch: Batch, cached: list[DataFrame]) -> tuple[DataFrame, TagContext]:
        """Look the keys up in the index, decide event-time ordering where it must be decided before
        writing, and (global indexes) where each record goes."""
        records = batch.records
        assert records is not None, "tag() is the distributed path's: its batch is a DataFrame"
        summary = batch.summary
        incoming = summary.keys_by_partition() if self.operation.tags else None
        tag_ctx = TagContext(
            records.sparkSession,
            self.meta,
            batch.view,
            summary.partitions,
            incoming,
            slice_merge(self.meta, batch.timeline, batch.view),
        )
        if batch.counts is not None:  # counted while preparing: the cached input is read as it is
            return records, tag_ctx
        if not self.operation.tags:
            tagged = records.withColumn(FILE_ID_COL, F.lit(None).cast("string"))
        else:
            self.progress(
                f"tagging {summary.total} records against {len(summary.partitions)} partition(s) ({self.index.name})"
            )
            tagged = self.index.tag_location(tag_ctx, records)
            update_pp = self.config.update_partition_path_for(self.index.name)
            check = order_check(
                tagged.columns, batch.pc_field, self.is_delete, self.index.is_global, update_pp
            )
            if check is not None:
                assert batch.pc_field is not None
                tagged = tagged.persist(StorageLevel.MEMORY_AND_DISK)
                cached.append(tagged)
                ordering = batch.write_schema.field(batch.pc_field)
                tagged = mark_stale(
                    tagged, check, self.meta, batch.view, ordering, self.index.is_global, tag_ctx.merge
                )
            if self.index.is_global:
                tagged = relocate(tagged, self.is_delete, update_pp)
        tagged = tagged.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(tagged)
        return tagged, tag_ctx

    def profile(self, batch: Batch, tagged: DataFrame, cached: list[DataFrame]) -> tuple[DataFrame, Profile]:
        """Count records per (partition, file group, operation): the planner's input."""
        self.progress("profiling the workload")
        if batch.counts is not None:
            rows = batch.counts
        else:
            rows = tagged.groupBy(*profile_columns(tagged)).count().collect()
        # projections of the cached rows: the moved-row marks are counted, stale rows are not written
        if MOVED_COL in tagged.columns:
            tagged = tagged.drop(MOVED_COL)
        if STALE_COL in tagged.columns:
            tagged = tagged.filter(~F.col(STALE_COL)).drop(STALE_COL)
        # `tagged` is materialised now: one cached copy of the batch is enough
        for c in cached[:-1]:
            c.unpersist()
        workloads, offsets, absent, kept, stale = profile(rows)
        index_stats = self.index.tagging_stats() if self.operation.tags else {}
        return tagged, Profile(workloads, offsets, absent, batch.summary.total - kept, stale, index_stats)

    def plan(self, batch: Batch, prof: Profile) -> WritePlan:
        """Assign updates to their file groups and inserts to small files or new file groups."""
        let_in = self.config.clustering.lets_updates_in
        frozen = check_pending_clustering(self.meta, batch.timeline, prof.workloads, let_in=let_in)
        if let_in:  # SparkAllowUpdateStrategy: the groups take this write (the clustering then refuses to run)
            frozen = {}
        if self.operation.replaces:
            check_replace_clustering(self.replaced(batch), frozen)
        mor = self.meta.config.table_type is TableType.MERGE_ON_READ
        existing = {
            p: [f for f in existing_files(batch.view, p, mor) if (f.partition, f.file_id) not in frozen]
            for p in prof.workloads
        }  # a group a pending clustering rewrites is never a small file to pack into
        rules = (
            MergeOnReadRules(
                can_index_log_files=self.index.can_index_log_files,
                candidates_limit=self.config.small_file_candidates_limit,
                log_to_parquet_ratio=self.config.log_to_parquet_ratio,
            )
            if mor
            else None
        )
        record_size = self.record_size(batch.timeline)
        return plan_writes(
            prof.workloads.values(),
            existing,
            max_file_size=self.config.max_file_size,
            small_file_limit=self.config.small_file_limit,
            record_size=record_size,
            new_file_id=new_file_id,
            # insert_overwrite packs nothing into the groups it replaces (Hudi's SparkInsertOverwritePartitioner)
            use_small_files=self.operation is not Operation.BULK_INSERT and not self.operation.replaces,
            mor=rules,
        )

    def commit(
        self,
        batch: Batch,
        tag_ctx: TagContext,
        prof: Profile,
        plan: WritePlan,
        started: float,
        write_files: WriteFiles,
    ) -> WriteResult:
        """Claim the instant, write the files (`write_files(instant)`: the strategy's job), update the
        index and complete the instant; on any failure undo all of it (or, having lost the table
        lock, leave it to the holder's repair)."""
        spark = tag_ctx.spark
        replaced = self.replaced(batch) if self.operation.replaces else None
        action = Action.REPLACE_COMMIT if replaced is not None else write_action(self.meta.config.table_type)
        pending = guarded.claim(
            self,
            batch.timeline,
            lambda tl: commit_protocol.start(self.meta, tl, self.operation, plan, action, replaced=replaced),
        )
        instant = pending.instant
        index_stats = dict(prof.index_stats)
        index_touched = False
        try:
            outcomes, located_of = write_files(instant)
            # an APPEND bucket whose records were all stale (or deletes of absent keys) wrote no file
            written = [o for o in outcomes if o.path]
            if not self.debris_free:
                commit_protocol.remove_debris(self.meta, pending, written, self.config.optimistic)
            checked = guarded.before_commit(self, pending, written)
            if self.index.wants_locations and located_of is not None:
                located = located_of()
                if (
                    checked is not None and self.operation is Operation.UPSERT
                ):  # insert may duplicate, as in Hudi
                    occ_keys.check_new_keys(self.index, tag_ctx, located, instant, checked.concurrent_writes)
                self.progress(f"updating the {self.index.name} index")
                index_touched = True
                if replaced:  # the replaced groups' keys leave the index (unless written again)
                    located = located.unionByName(replaced_key_rows(tag_ctx, replaced))
                self.index.update_location(tag_ctx, instant, located)
                index_stats.update({f"update_{k}": v for k, v in self.index.update_stats().items()})
            extra = {f"engine.index.{k}": str(v) for k, v in index_stats.items()}
            failpoints.hit("write.before_complete")
            if self.guard is not None:
                self.guard.before_complete()
            schema = (
                self.guard.final_schema(instant, batch.write_schema) if self.guard else batch.write_schema
            )
            commit_protocol.complete(
                self.meta,
                pending,
                schema,
                written,
                prof.absent,
                extra,
                stale_before_write=prof.stale + sum(o.num_stale for o in outcomes if not o.path),
                start_internal_schema=self.config.schema_on_read,
            )
            failpoints.hit("write.after_complete")
        except BaseException as exc:
            guarded.undo(self, spark, pending, index_touched, exc)
        finally:
            if self.guard is not None:
                self.guard.finished()
        counts = totals(outcomes)
        return WriteResult(
            instant=instant,
            operation=self.operation,
            inserts=counts["inserts"],
            updates=counts["updates"],
            deletes=counts["deletes"],
            absent_deletes=prof.absent,
            stale_ignored=prof.stale + counts["stale"],
            duplicates_dropped=prof.dropped,
            input_records=batch.summary.total,
            files_written=len(written),
            partitions=tuple(sorted({o.partition for o in written})),
            bytes_written=sum(o.file_size for o in written),
            replaced_file_groups=sum(len(ids) for ids in (replaced or {}).values()),
            seconds=round(time.monotonic() - started, 3),
            index_stats=index_stats,
        )

    # ------------------------------------------------------------------------------------
    def combine(self) -> bool:
        if self.meta.config.auto_keys and self.operation not in (Operation.UPSERT, Operation.DELETE):
            return False  # new records of auto-generated keys are unique: nothing to combine
        return {
            Operation.UPSERT: self.config.combine_before_upsert,
            Operation.INSERT: self.config.combine_before_insert,
            Operation.BULK_INSERT: self.config.combine_before_insert,
            Operation.DELETE: self.config.combine_before_delete,
            Operation.INSERT_OVERWRITE: self.config.combine_before_insert,
            Operation.INSERT_OVERWRITE_TABLE: self.config.combine_before_insert,
        }[self.operation]

    def replaced(self, batch: Batch) -> dict[str, list[str]]:
        """partition -> the file ids an insert_overwrite replaces, as Apache Hudi lists them: every
        partition of the table (INSERT_OVERWRITE_TABLE) or those the input touches, each with all
        its file groups (possibly none)."""
        view = batch.view
        parts = view.partitions if self.operation is Operation.INSERT_OVERWRITE_TABLE else []
        out: dict[str, list[str]] = {p: [] for p in (*parts, *batch.summary.partitions)}
        for sl in view.latest_slices(out):
            out[sl.partition].append(sl.file_id)
        return {p: sorted(ids) for p, ids in sorted(out.items())}

    def record_size(self, timeline: Timeline) -> int:
        """Bytes per record for sizing files: from the latest big enough commit, else the configured estimate."""
        return estimate_record_size(
            (m for _i, m in self.meta.completed_commits_newest_first(timeline)),
            self.config.record_size_estimate,
            min_bytes=int(self.config.record_size_estimation_threshold * self.config.small_file_limit),
        )


__all__ = [
    "Batch",
    "FileHandle",
    "Pipeline",
    "Profile",
    "Progress",
    "WriteFiles",
    "Written",
    "file_handle",
    "write_action",
]
