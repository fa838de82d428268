"""The write pipeline on Spark: prepare keys -> dedupe -> tag -> profile -> plan -> write -> commit.

Every step is a Spark DAG; only small aggregates come back to the driver (touched partitions,
the workload profile, and one stats row per written file).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.taskcontext import TaskContext

from engine import failpoints
from engine.config.write_config import WriteConfig
from engine.constants import DEFAULT_PARTITION_PATH, EMPTY_RECORD_KEY_PLACEHOLDER, NULL_RECORD_KEY_PLACEHOLDER
from engine.data.columns import (
    EXISTING_PART_COL,
    FILE_ID_COL,
    KEY_COL,
    OP_COL,
    OP_DELETE,
    OP_UPSERT,
    PART_COL,
    PREV_FILE_ID_COL,
)
from engine.errors import EngineError, InvalidInputError, StorageError
from engine.index.base import Index, TagContext
from engine.read.scan import scan_parallelism
from engine.spark.errors import task_error_message, translate
from engine.table.create import require_writable
from engine.table.file_names import new_file_id, write_token
from engine.table.meta_client import MetaClient
from engine.table.schema import arrow_to_avro, avro_to_arrow, with_meta_fields
from engine.write import commit as commit_protocol
from engine.write.file_writer import BucketWrite, WriteContext, write_bucket
from engine.write.keygen import KeySpec
from engine.write.operation import Operation, WriteResult
from engine.write.planner import (
    ExistingFile,
    PartitionWorkload,
    WritePlan,
    bucket_for_insert,
    estimate_record_size,
    plan_writes,
)
from engine.write.schema_check import resolve_write_schema

if TYPE_CHECKING:
    from engine.services.transaction import WriteGuard

BUCKET_COL = "__hoodie_bucket"
# batches up to this many records ship their keys to the index scan tasks (a few MB per million)
BROADCAST_KEYS_LIMIT = 2_000_000
ORDER_COL = "__hoodie_order"
MOVED_COL = "__hoodie_moved"  # global index, partition changed: the delete row in the old partition
SP_COL = "__hoodie_task"

Progress = Callable[[str], None]

OUTCOME_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("file_id", pa.string()),
        ("partition", pa.string()),
        ("prev_instant", pa.string()),
        ("num_writes", pa.int64()),
        ("num_inserts", pa.int64()),
        ("num_updates", pa.int64()),
        ("num_deletes", pa.int64()),
        ("num_stale", pa.int64()),
        ("file_size", pa.int64()),
        ("min_key", pa.string()),
        ("max_key", pa.string()),
    ]
)


def record_key_expr(spec: KeySpec) -> Column:
    """The record key column; null where the key is invalid (null/empty)."""
    if not spec.complex_keys:
        (field,) = spec.record_key_fields
        value = F.col(field).cast("string")
        return F.when(value.isNull() | (value == ""), F.lit(None)).otherwise(value)
    parts, missing = [], []
    for field in spec.record_key_fields:
        value = F.col(field).cast("string")
        shown = (
            F.when(value.isNull(), F.lit(NULL_RECORD_KEY_PLACEHOLDER))
            .when(value == "", F.lit(EMPTY_RECORD_KEY_PLACEHOLDER))
            .otherwise(value)
        )
        parts.append(F.concat(F.lit(f"{field}:"), shown))
        missing.append(value.isNull() | (value == ""))
    all_missing = missing[0]
    for m in missing[1:]:
        all_missing = all_missing & m
    return F.when(all_missing, F.lit(None)).otherwise(F.concat_ws(",", *parts))


def partition_path_expr(spec: KeySpec) -> Column:
    if not spec.partition_fields:
        return F.lit("")
    segments = []
    for field in spec.partition_fields:
        value = F.col(field).cast("string")
        value = F.when(value.isNull() | (value == ""), F.lit(DEFAULT_PARTITION_PATH)).otherwise(value)
        segments.append(F.concat(F.lit(f"{field}="), value) if spec.hive_style else value)
    return F.concat_ws("/", *segments)


@dataclass
class WriteJob:
    meta: MetaClient
    index: Index
    config: WriteConfig
    operation: Operation
    progress: Progress
    # heartbeat + lock fencing from the transaction (None: unguarded, e.g. unit tests of the pipeline)
    guard: WriteGuard | None = None

    # ------------------------------------------------------------------------------------
    def run(self, df: DataFrame) -> WriteResult:
        started = time.monotonic()
        spark = df.sparkSession
        table_cfg = self.meta.config
        require_writable(table_cfg)
        self.index.check_available()
        spec = KeySpec.from_config(table_cfg)
        timeline = self.meta.timeline()
        table_schema = self.meta.latest_schema(timeline)
        is_delete = self.operation is Operation.DELETE
        write_schema = resolve_write_schema(
            to_arrow_schema(df.schema, timezone="UTC"),
            table_schema,
            spec,
            table_cfg.precombine_field,
            deleting=is_delete,
        )
        # files carry exactly the types the stored Avro schema describes (e.g. timestamps in UTC)
        write_schema = avro_to_arrow(arrow_to_avro(write_schema, table_cfg.name))
        full_schema = with_meta_fields(write_schema)
        data_cols = [c for c in write_schema.names if c in df.columns]
        pc_field = table_cfg.precombine_field if table_cfg.precombine_field in df.columns else None

        self.progress("preparing keys")
        prepared = df.select(
            *[F.col(c) for c in (data_cols if not is_delete else _delete_columns(spec, pc_field))],
            record_key_expr(spec).alias(KEY_COL),
            partition_path_expr(spec).alias(PART_COL),
            F.monotonically_increasing_id().alias(ORDER_COL),
        )
        prepared = prepared.persist(StorageLevel.MEMORY_AND_DISK)
        cached = [prepared]
        try:
            summary = _summarize(prepared)
            if summary.bad:
                fields = ", ".join(spec.record_key_fields)
                raise InvalidInputError(f"{summary.bad} input record(s) have a null or empty record key ({fields})")
            total, partitions = summary.total, summary.partitions
            if total == 0:
                return WriteResult(instant=None, operation=self.operation, seconds=time.monotonic() - started)

            records = prepared
            # a global index knows a key in one partition only: dedupe by key alone
            dedupe_by = [KEY_COL] if self.index.is_global else [KEY_COL, PART_COL]
            if self._combine() and summary.may_have_duplicates(dedupe_by):
                records = _dedupe(records, pc_field, dedupe_by)
            records = records.withColumn(OP_COL, _op_expr(is_delete, records.columns))

            view = self.meta.file_system_view(timeline)
            incoming = summary.keys_by_partition() if self.operation.tags else None
            tag_ctx = TagContext(spark, self.meta, view, partitions, incoming)
            if self.operation.tags:
                self.progress(f"tagging {total} records against {len(partitions)} partition(s) ({self.index.name})")
                tagged = self.index.tag_location(tag_ctx, records)
                if self.index.is_global:
                    tagged = _relocate(tagged, is_delete, self.config.update_partition_path)
            else:
                tagged = records.withColumn(FILE_ID_COL, F.lit(None).cast("string"))
            tagged = tagged.persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(tagged)

            self.progress("profiling the workload")
            group_cols = [PART_COL, FILE_ID_COL, OP_COL] + ([MOVED_COL] if MOVED_COL in tagged.columns else [])
            profile_rows = (
                tagged.groupBy(F.spark_partition_id().alias(SP_COL), *group_cols).count().collect()
            )
            if MOVED_COL in tagged.columns:
                tagged = tagged.drop(MOVED_COL)  # a projection of the cached rows
            # `tagged` is materialised now: one cached copy of the batch is enough
            prepared.unpersist()
            index_stats = self.index.tagging_stats() if self.operation.tags else {}
            workloads, offsets, absent, kept = _profile(profile_rows)
            dropped = total - kept

            frozen = _check_pending_clustering(self.meta, timeline, workloads)
            existing = {
                p: [
                    ExistingFile(b.partition, b.file_id, b.instant, b.path, b.size)
                    for b in view.latest_base_files([p])
                    if (b.partition, b.file_id) not in frozen  # never a small file to pack into
                ]
                for p in workloads
            }
            record_size = estimate_record_size(
                (m for _i, m in self.meta.completed_commits_newest_first(timeline)),
                self.config.record_size_estimate,
                min_bytes=int(self.config.record_size_estimation_threshold * self.config.small_file_limit),
            )
            plan = plan_writes(
                workloads.values(),
                existing,
                max_file_size=self.config.max_file_size,
                small_file_limit=self.config.small_file_limit,
                record_size=record_size,
                new_file_id=new_file_id,
                use_small_files=self.operation is not Operation.BULK_INSERT,
            )
            pending = commit_protocol.start(self.meta, timeline, self.operation, plan)
            instant = pending.instant
            index_touched = False
            try:
                if self.guard is not None:
                    self.guard.started(instant)
                outcomes, assigned = self._write(
                    tagged, plan, offsets, full_schema, pc_field, pending.instant, is_delete
                )
                commit_protocol.remove_debris(self.meta, pending, outcomes)
                if self.index.wants_locations and assigned is not None:
                    self.progress(f"updating the {self.index.name} index")
                    index_touched = True
                    self.index.update_location(tag_ctx, instant, _located(assigned, plan))
                    index_stats.update({f"update_{k}": v for k, v in self.index.update_stats().items()})
                extra = {f"engine.index.{k}": str(v) for k, v in index_stats.items()}
                failpoints.hit("write.before_complete")
                if self.guard is not None:
                    self.guard.before_complete()
                commit_protocol.complete(self.meta, pending, write_schema, outcomes, absent, extra)
            except BaseException as exc:
                _stop_tasks(spark, _job_group(instant))
                outcome = "failed and was rolled back"
                try:
                    if self.guard is not None and not self.guard.holds_lock():
                        outcome = "failed; the table lock was lost, so it is left for the next writer's repair"
                        # the table is another writer's now: touch nothing; its repair rolls this
                        # instant back once our heartbeat (stopped below) has expired
                    elif index_touched and not commit_protocol.is_completed(self.meta, pending):
                        # the index may already hold this write's locations (deleted or moved keys):
                        # undo it like a rollback, which also reverts the index
                        from engine.services.rollback import undo_instant

                        undo_instant(self.meta, instant, pending.action, (), self.index)
                        commit_protocol.abort(self.meta, pending)
                    else:
                        commit_protocol.abort(self.meta, pending)
                except Exception as cleanup:  # keep the original error; say what is left behind
                    exc.add_note(f"cleaning up instant {instant} also failed: {cleanup}")
                if not isinstance(exc, Exception):
                    raise
                typed = translate(exc)
                detail = str(typed) if typed is not None else task_error_message(exc)
                error_type = type(typed) if typed is not None else StorageError
                try:
                    wrapped = error_type(f"write of instant {instant} {outcome}: {detail}")
                except TypeError:  # an error type with extra constructor arguments: keep it as raised
                    exc.add_note(f"write of instant {instant} {outcome}")
                    raise exc from None
                raise wrapped from exc
            finally:
                if self.guard is not None:
                    self.guard.finished()
            return WriteResult(
                instant=instant,
                operation=self.operation,
                inserts=sum(o["num_inserts"] for o in outcomes),
                updates=sum(o["num_updates"] for o in outcomes),
                deletes=sum(o["num_deletes"] for o in outcomes),
                absent_deletes=absent,
                stale_ignored=sum(o["num_stale"] for o in outcomes),
                duplicates_dropped=dropped,
                input_records=total,
                files_written=len(outcomes),
                partitions=tuple(sorted({o["partition"] for o in outcomes})),
                bytes_written=sum(o["file_size"] for o in outcomes),
                seconds=round(time.monotonic() - started, 3),
                index_stats=index_stats,
            )
        except EngineError:
            raise
        except Exception as exc:
            typed = translate(exc)
            if typed is not None:
                raise typed from exc
            raise
        finally:
            for c in cached:
                c.unpersist()

    # ------------------------------------------------------------------------------------
    def _combine(self) -> bool:
        return {
            Operation.UPSERT: self.config.combine_before_upsert,
            Operation.INSERT: self.config.combine_before_insert,
            Operation.BULK_INSERT: self.config.combine_before_insert,
            Operation.DELETE: self.config.combine_before_delete,
        }[self.operation]

    def _write(
        self,
        tagged: DataFrame,
        plan: WritePlan,
        offsets: dict[tuple[int, str], int],
        full_schema: pa.Schema,
        pc_field: str | None,
        instant: str,
        is_delete: bool,
    ) -> tuple[list[dict], DataFrame | None]:
        n_buckets = len(plan.buckets)
        if n_buckets == 0:
            return [], None
        updates_idx, ranges = plan.lookup_tables()
        to_write = tagged.filter(F.col(FILE_ID_COL).isNotNull() | (F.col(OP_COL) == OP_UPSERT))
        with_bucket_schema = from_arrow_schema(
            to_arrow_schema(to_write.schema, timezone="UTC").append(pa.field(BUCKET_COL, pa.int32()))
        )
        assigned = to_write.mapInArrow(
            _assign_buckets_task(updates_idx, ranges, offsets), with_bucket_schema
        )
        ctx = WriteContext(
            storage=self.meta.storage,
            instant=instant,
            schema=full_schema,
            precombine_field=pc_field if not is_delete else None,
            compression=self.config.compression,
            match_keys=self.operation.tags,
            bloom=(self.config.bloom_num_entries, self.config.bloom_fpp, self.config.bloom_max_entries),
        )
        buckets = {
            b.index: BucketWrite(b.partition, b.file_id, b.base_path, b.prev_instant) for b in plan.buckets
        }
        parallelism = self.config.shuffle_parallelism or scan_parallelism(tagged.sparkSession, n_buckets)
        self.progress(f"writing {n_buckets} file group(s) for instant {instant}")
        written = (
            assigned.repartition(parallelism, BUCKET_COL)
            .groupBy(BUCKET_COL)
            .applyInArrow(_write_bucket_task(ctx, buckets), from_arrow_schema(OUTCOME_SCHEMA))
        )
        sc = tagged.sparkSession.sparkContext
        sc.setJobGroup(_job_group(instant), f"hoodie write {instant}", interruptOnCancel=True)
        try:
            return [r.asDict() for r in written.collect()], assigned
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


@dataclass
class _Summary:
    """What the driver learns about the incoming batch before tagging."""

    total: int
    bad: int
    partitions: list[str]
    keys: pa.Table | None  # (key, partition) of every record, for batches up to BROADCAST_KEYS_LIMIT

    def may_have_duplicates(self, by: list[str]) -> bool:
        if self.keys is None:
            return True
        return self.keys.group_by(by).aggregate([]).num_rows < self.total

    def keys_by_partition(self) -> dict[str, pa.Array] | None:
        """partition path -> the distinct incoming keys (None for big batches)."""
        if self.keys is None:
            return None
        grouped = self.keys.group_by(PART_COL).aggregate([(KEY_COL, "distinct")])
        return {
            part: pa.array(keys, pa.string())
            for part, keys in zip(
                grouped.column(PART_COL).to_pylist(),
                grouped.column(f"{KEY_COL}_distinct").to_pylist(),
                strict=True,
            )
        }


def _summarize(prepared: DataFrame) -> _Summary:
    """One job for small batches: collect (key, partition) through Arrow; else aggregate per partition."""
    keys = prepared.select(KEY_COL, PART_COL).limit(BROADCAST_KEYS_LIMIT + 1).toArrow()
    if keys.num_rows <= BROADCAST_KEYS_LIMIT:
        bad = keys.column(KEY_COL).null_count
        parts = sorted(p for p in pc.unique(keys.column(PART_COL)).to_pylist() if p is not None)
        return _Summary(keys.num_rows, bad, parts, keys if not bad else None)
    rows = (
        prepared.groupBy(PART_COL)
        .agg(F.count(F.lit(1)).alias("n"), F.sum(F.col(KEY_COL).isNull().cast("long")).alias("bad"))
        .collect()
    )
    return _Summary(
        total=sum(r["n"] for r in rows),
        bad=sum(r["bad"] for r in rows),
        partitions=sorted(r[PART_COL] for r in rows),
        keys=None,
    )


IS_DELETED_COL = "_hoodie_is_deleted"


def _op_expr(is_delete: bool, columns: list[str]) -> Column:
    """Delete for delete operations, and (as in Apache Hudi) for rows whose `_hoodie_is_deleted` is true."""
    if is_delete:
        return F.lit(OP_DELETE)
    if IS_DELETED_COL in columns:
        return F.when(F.coalesce(F.col(IS_DELETED_COL), F.lit(False)), F.lit(OP_DELETE)).otherwise(F.lit(OP_UPSERT))
    return F.lit(OP_UPSERT)


def _delete_columns(spec: KeySpec, pc_field: str | None) -> list[str]:
    cols = list(spec.fields)
    if pc_field and pc_field not in cols:
        cols.append(pc_field)
    return cols


def _located(assigned: DataFrame, plan: WritePlan) -> DataFrame:
    """(key, partition, file id, op) of every record a write placed, from its bucket."""
    file_of = F.create_map(*[v for b in plan.buckets for v in (F.lit(b.index), F.lit(b.file_id))])
    return assigned.select(
        KEY_COL,
        PART_COL,
        file_of[F.col(BUCKET_COL)].alias(FILE_ID_COL),
        OP_COL,
        F.col(FILE_ID_COL).alias(PREV_FILE_ID_COL),  # the file tagging found: unchanged locations need no put
    )


def _relocate(tagged: DataFrame, is_delete: bool, update_partition_path: bool) -> DataFrame:
    """Apply a global index's answer: where does each found key go?

    A key found in another partition than the incoming record's (Apache Hudi's
    `hoodie.index.update.partition.path`): true -> delete it there and insert the record into its
    new partition; false -> update it in place in the old partition. Deletes always act where the
    key lives.
    """
    found = F.col(FILE_ID_COL).isNotNull()
    moved = found & (F.col(EXISTING_PART_COL) != F.col(PART_COL))
    if is_delete or not update_partition_path:
        out = tagged.withColumn(PART_COL, F.when(found, F.col(EXISTING_PART_COL)).otherwise(F.col(PART_COL)))
    else:
        stay = tagged.filter(~moved | F.col(FILE_ID_COL).isNull())
        old = tagged.filter(moved).withColumn(PART_COL, F.col(EXISTING_PART_COL)).withColumn(OP_COL, F.lit(OP_DELETE))
        new = tagged.filter(moved).withColumn(FILE_ID_COL, F.lit(None).cast("string"))
        # the delete in the old partition is an extra row, not an input record: marked so that the
        # profile does not count it as one
        flag = F.lit(False)
        out = (
            stay.withColumn(MOVED_COL, flag)
            .unionByName(old.withColumn(MOVED_COL, F.lit(True)))
            .unionByName(new.withColumn(MOVED_COL, flag))
        )
    return out.drop(EXISTING_PART_COL)


def _dedupe(records: DataFrame, pc_field: str | None, by: list[str]) -> DataFrame:
    """Keep one record per key (and partition): the largest precombine value, later input on ties."""
    order = [F.col(pc_field).desc_nulls_last()] if pc_field else []
    order.append(F.col(ORDER_COL).desc())
    w = Window.partitionBy(*by).orderBy(*order)
    rank = "__hoodie_rank"
    return records.withColumn(rank, F.row_number().over(w)).filter(F.col(rank) == 1).drop(rank)


def _profile(rows) -> tuple[dict[str, PartitionWorkload], dict, int, int]:
    """Workloads per partition, insert-number offsets per (spark partition, partition), absent deletes."""
    inserts: dict[str, int] = defaultdict(int)
    updates: dict[str, dict[str, int]] = defaultdict(dict)
    deletes: dict[str, dict[str, int]] = defaultdict(dict)
    per_task: dict[tuple[int, str], int] = {}
    absent = kept = 0
    for r in rows:
        part, fid, op, n = r[PART_COL], r[FILE_ID_COL], r[OP_COL], r["count"]
        if not r.asDict().get(MOVED_COL, False):
            kept += n
        if op == OP_DELETE:
            if fid is None:
                absent += n
            else:
                deletes[part][fid] = deletes[part].get(fid, 0) + n
        elif fid is None:
            inserts[part] += n
            per_task[(r[SP_COL], part)] = per_task.get((r[SP_COL], part), 0) + n
        else:
            updates[part][fid] = updates[part].get(fid, 0) + n
    offsets: dict[tuple[int, str], int] = {}
    running: dict[str, int] = defaultdict(int)
    for sp, part in sorted(per_task):
        offsets[(sp, part)] = running[part]
        running[part] += per_task[(sp, part)]
    parts = set(inserts) | set(updates) | set(deletes)
    workloads = {
        p: PartitionWorkload(p, inserts.get(p, 0), dict(updates.get(p, {})), dict(deletes.get(p, {})))
        for p in parts
    }
    return workloads, offsets, absent, kept


def _check_pending_clustering(
    meta: MetaClient, timeline, workloads: dict[str, PartitionWorkload]
) -> dict[tuple[str, str], str]:
    """The file groups of pending clusterings (-> their instant). A batch that updates or deletes
    records in one of them is refused (PendingClusteringError) before anything is written, as
    Apache Hudi's SparkRejectUpdateStrategy does: the clustering would drop those changes."""
    from engine.errors import PendingClusteringError
    from engine.table.clustering import pending_clustering

    frozen = {g: c.instant.time for c in pending_clustering(meta, timeline) for g in c.groups}
    hit = sorted(
        (p, fid) for p, wl in workloads.items() for fid in (*wl.updates, *wl.deletes) if (p, fid) in frozen
    )
    if hit:
        instant = frozen[hit[0]]
        shown = ", ".join(f"{p}/{f}" if p else f for p, f in hit[:3]) + (" ..." if len(hit) > 3 else "")
        raise PendingClusteringError(
            f"the batch updates or deletes records in {len(hit)} file group(s) ({shown}) that the pending "
            f"clustering {instant} is going to rewrite; let Apache Hudi finish it, or remove it with "
            f"`hoodie rollback PATH {instant}`, then write again",
            instant,
            tuple(hit),
        )
    return frozen


def _job_group(instant: str) -> str:
    return f"hoodie-write-{instant}"


def _stop_tasks(spark, group: str, timeout: float = 30.0) -> None:
    """Cancel a failed write's jobs and wait until none of their tasks runs any more.

    A failed job does not wait for its other tasks; cleaning up before they stop could leave
    behind a file that a still-running task finishes writing afterwards.
    """
    sc = spark.sparkContext
    sc.cancelJobGroup(group)
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stages = [
            tracker.getStageInfo(s)
            for j in tracker.getJobIdsForGroup(group)
            if (info := tracker.getJobInfo(j)) is not None
            for s in info.stageIds
        ]
        if all(st is None or st.numActiveTasks == 0 for st in stages):
            break
        time.sleep(0.2)
    # Python workers of killed tasks get spark.python.task.killTimeout (2 s) to stop
    time.sleep(_seconds(sc.getConf().get("spark.python.task.killTimeout", "2s")) + 0.5)


def _seconds(value: str) -> float:
    """Spark duration strings ("2s", "1500ms", "2") as seconds."""
    value = value.strip().lower()
    if value.endswith("ms"):
        return float(value[:-2]) / 1000
    if value.endswith("min"):
        return float(value[:-3]) * 60
    return float(value.rstrip("s"))


def _task_context() -> TaskContext:
    tc = TaskContext.get()
    if tc is None:  # only ever called inside Spark tasks
        raise RuntimeError("not running inside a Spark task")
    return tc


def _assign_buckets_task(updates_idx: dict, ranges: dict, offsets: dict):
    """Bucket of every record: its file group's bucket, or (inserts) by insert number.

    Insert numbers count a partition path's inserts across Spark partitions (`offsets`), and
    within a Spark partition follow the record key order, not the arrival order: if Spark
    recomputes a lost partition, every record gets the same bucket again.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sp = _task_context().partitionId()
        received = list(batches)
        if not received:
            return
        table = pa.Table.from_batches(received)
        parts = table.column(PART_COL).to_pylist()
        fids = table.column(FILE_ID_COL).to_pylist()
        keys = table.column(KEY_COL).to_pylist()
        out = [0] * table.num_rows
        inserts = []
        for i, (part, fid) in enumerate(zip(parts, fids, strict=True)):
            if fid is not None:
                out[i] = updates_idx[(part, fid)]
            else:
                inserts.append(i)
        inserts.sort(key=lambda i: (parts[i], keys[i]))
        counters: dict[str, int] = {}
        for i in inserts:
            part = parts[i]
            n = counters.get(part, 0)
            counters[part] = n + 1
            out[i] = bucket_for_insert(ranges[part], offsets[(sp, part)] + n)
        yield from table.append_column(BUCKET_COL, pa.array(out, pa.int32())).to_batches()

    return run


def _write_bucket_task(ctx: WriteContext, buckets: dict[int, BucketWrite]):
    def run(table: pa.Table) -> pa.Table:
        tc = _task_context()
        token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId())
        index = table.column(BUCKET_COL)[0].as_py()
        outcome = write_bucket(ctx, buckets[index], table, token, tc.partitionId())
        return pa.Table.from_pylist([outcome.as_row()], schema=OUTCOME_SCHEMA)

    return run


__all__ = ["OUTCOME_SCHEMA", "WriteJob", "partition_path_expr", "record_key_expr"]
