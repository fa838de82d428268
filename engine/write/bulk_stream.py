"""bulk_insert in one Spark job, as Apache Hudi's sort modes (`hoodie.bulkinsert.sort.mode`) write
it, with no counting or planning pass: each Spark task writes the rows it gets into new file groups
of its own, one or more per partition path it sees, rolled over at `hoodie.parquet.max.file.size`
by the record size estimate, and returns their write stats; the driver commits them.

- `NONE` / `PARTITION_SORT`: the tasks are the input's partitions (no shuffle, like Spark's own
  `write.partitionBy(...).parquet`); `PARTITION_SORT` sorts each file's rows by record key.
- `PARTITION_PATH_REPARTITION_AND_SORT` (our default): the input is first repartitioned by
  partition path (`hoodie.upsert.shuffle.parallelism` tasks, else Spark's shuffle partitions), so
  one task writes each partition path: one file group per partition until it outgrows the size.

What the driver cannot know before the job runs, and how it copes:
- the partitions: the instant is marked inflight with no write stats (as Apache Hudi's row-writer
  bulk insert does) and every task writes the partition metadata of the partitions it creates;
- the file ids: the driver draws a random stem, task `i`'s files are `<stem><i as 12 hex>-<n>`
  (`engine.data.file_names.task_file_id_prefix`: UUID-shaped, as Hudi's); a failed write records
  the stem (`engine.table.failed_writes`) and its clean-up looks for files of the instant with
  that stem in every partition. Nothing is asked of Spark before the job (not even its number
  of partitions, which for a shuffled input would run the shuffle);
- invalid (null or empty) keys: a task that finds one writes nothing and reports the count; the
  driver then removes what the other tasks wrote and raises `InvalidInputError`, with the table
  as it was (no record of a failed write is kept: every task has finished);
- an empty input: the instant is removed again and no commit is made.

Not for: de-duplicating bulk inserts (`hoodie.combine.before.insert`) and indexes that store
locations (RECORD, HBASE): they take the planned path (`engine.write.executor`, `one_job`), which
counts the batch per partition first and plans sized file groups.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from engine import failpoints
from engine.columns import PART_COL
from engine.data.file_names import new_file_id_stem, task_file_id_prefix, write_token
from engine.runtime.jobs import job_group
from engine.timeline.instant import Action
from engine.write import commit as commit_protocol
from engine.write import guarded
from engine.write.bulk_files import write_task_files
from engine.write.file_writer import WriteContext
from engine.write.operation import Operation, WriteResult
from engine.write.outcome import OUTCOME_SCHEMA, WriteOutcome
from engine.write.planner import WritePlan
from engine.write.prepare import BatchSummary
from engine.write.tasks import task_context

if TYPE_CHECKING:
    from engine.write.pipeline import Pipeline

BULK_OUTCOME_SCHEMA = OUTCOME_SCHEMA.append(pa.field("num_bad_keys", pa.int64())).append(pa.field("num_absent", pa.int64()))


def eligible(job: Pipeline) -> bool:
    """Whether `job` is a bulk_insert this module writes (see the module docstring); on a table
    with auto-generated keys, an insert too (its records are new by construction: their tasks name
    them, so nothing is looked up or de-duplicated)."""
    auto_insert = job.operation is Operation.INSERT and job.meta.config.auto_keys
    return (
        (job.operation is Operation.BULK_INSERT or auto_insert)
        and not (job.config.combine_before_insert and not job.meta.config.auto_keys)
        and not job.index.wants_locations
    )


def _task(ctx: WriteContext, stem: str, rows_per_file: int):
    """The mapInArrow function: a task's whole input partition written as new file groups."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = list(batches)
        if not received:
            return
        tc = task_context()
        token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId())
        rows = pa.Table.from_batches(received)
        prefix = task_file_id_prefix(stem, tc.partitionId())
        outcomes = write_task_files(ctx, prefix, token, tc.partitionId(), rows, rows_per_file)
        yield from pa.Table.from_pylist(outcomes, schema=BULK_OUTCOME_SCHEMA).to_batches()

    return run


def run(job: Pipeline, df: DataFrame, started: float, action: Action) -> WriteResult:
    """Write `df` as one bulk_insert instant (`action`: the table type's) in one Spark job; the
    table is left as it was when anything fails (see the module docstring)."""
    spec, timeline, write_schema, data_cols, pc_field = job.schema(df)
    keyed = job.keyed(df, spec, data_cols, pc_field, order=False)
    mode = job.config.bulk_insert_sort_mode
    if mode == "PARTITION_PATH_REPARTITION_AND_SORT":
        # every partition path to one task (one file group, rolled over by size): a shuffle, no count
        keyed = keyed.repartition(job.config.shuffle_parallelism, PART_COL) if job.config.shuffle_parallelism else keyed.repartition(PART_COL)
    stem = new_file_id_stem()
    record_size = job.record_size(timeline)
    rows_per_file = max(1, job.config.max_file_size // max(1, record_size))
    pending = guarded.claim(job, timeline, lambda tl: commit_protocol.start(
        job.meta, tl, job.operation, WritePlan((), {}, record_size), action, file_id_stems=[stem]
    ))
    instant = pending.instant
    # NONE keeps each partition's rows in arrival order, as Apache Hudi's does
    ctx = replace(job.write_context(write_schema, pc_field, instant), sort_by_key=mode != "NONE")
    spark = df.sparkSession
    sc = spark.sparkContext
    rows: list[dict] = []
    try:
        job.progress(
            f"writing new file groups for instant {instant} "
            f"(bulk_insert, sort mode {mode})"
        )
        sc.setJobGroup(job_group(instant), f"hoodie write {instant}", interruptOnCancel=True)
        try:
            written_df = keyed.mapInArrow(_task(ctx, stem, rows_per_file), from_arrow_schema(BULK_OUTCOME_SCHEMA))
            rows = [r.asDict() for r in written_df.collect()]
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        bad = sum(r["num_bad_keys"] or 0 for r in rows)
        absent = sum(r["num_absent"] or 0 for r in rows)
        written = [WriteOutcome.from_row(r) for r in rows if r["path"]]
        if bad or not written:
            # every task has finished: what they wrote is all there is, no failure record needed
            commit_protocol.abort(job.meta, pending, job.config.optimistic)
        else:
            commit_protocol.remove_debris(job.meta, pending, written, job.config.optimistic)
            # the lock fence, or the OCC commit lock (new file groups only: no file-group conflict)
            guarded.before_commit(job, pending, written)
            failpoints.hit("write.before_complete")
            schema = job.guard.final_schema(instant, write_schema) if job.guard else write_schema
            commit_protocol.complete(job.meta, pending, schema, written, absent, {},
                                     start_internal_schema=job.config.schema_on_read)
            failpoints.hit("write.after_complete")
    except BaseException as exc:
        guarded.undo(job, spark, pending, False, exc)
    finally:
        if job.guard is not None:
            job.guard.finished()
    if bad:
        job.check_keys(spec, BatchSummary(0, bad, [], None))
    if not written:
        return WriteResult(
            instant=None, operation=job.operation, absent_deletes=absent, input_records=absent,
            seconds=time.monotonic() - started,
        )
    return WriteResult(
        instant=instant,
        operation=job.operation,
        inserts=sum(o.num_inserts for o in written),
        absent_deletes=absent,
        input_records=sum(o.num_writes for o in written) + absent,
        files_written=len(written),
        partitions=tuple(sorted({o.partition for o in written})),
        bytes_written=sum(o.file_size for o in written),
        seconds=round(time.monotonic() - started, 3),
    )


__all__ = ["BULK_OUTCOME_SCHEMA", "eligible", "run"]
