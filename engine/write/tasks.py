"""The functions a write runs inside Spark tasks: assigning records to buckets and writing a bucket."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.taskcontext import TaskContext

from engine.data.file_names import write_token
from engine.write.assign import assign_buckets
from engine.write.file_writer import BucketWrite, WriteContext
from engine.write.log_writer import AppendContext
from engine.write.outcome import OUTCOME_SCHEMA, WriteOutcome

BUCKET_COL = "__hoodie_bucket"


def task_context() -> TaskContext:
    tc = TaskContext.get()
    if tc is None:  # only ever called inside Spark tasks
        raise RuntimeError("not running inside a Spark task")
    return tc


def assign_buckets_task(updates_idx: dict, ranges: dict, offsets: dict):
    """Bucket of every record: its file group's bucket, or (inserts) by insert number
    (`engine.write.assign.assign_buckets`, which says how insert numbers are counted)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sp = task_context().partitionId()
        received = list(batches)
        if not received:
            return
        table = pa.Table.from_batches(received)
        buckets = assign_buckets(table, sp, updates_idx, ranges, offsets)
        yield from table.append_column(BUCKET_COL, buckets).to_batches()

    return run


def write_bucket_task(ctx: WriteContext, buckets: dict[int, BucketWrite], actx: AppendContext | None = None):
    """Write one bucket: a new base file (merging the previous one), or, for an APPEND bucket of
    a merge-on-read table, a new log file of the group's slice."""

    def run(table: pa.Table) -> pa.Table:
        index = table.column(BUCKET_COL)[0].as_py()
        outcome = _write_one(ctx, actx, buckets[index], table, task_context(), index)
        return pa.Table.from_pylist([outcome.as_row()], schema=OUTCOME_SCHEMA)

    return run


def _write_one(
    ctx: WriteContext, actx: AppendContext | None, bucket: BucketWrite, table: pa.Table, tc: TaskContext,
    index: int,
) -> WriteOutcome:
    """One bucket written by the current task (`engine.write.bucket_work.write_one`)."""
    from engine.write.bucket_work import write_one

    token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId())
    return write_one(ctx, actx, bucket, table, index, token, tc.partitionId())


def write_groups_task(ctx: WriteContext, buckets: dict[int, BucketWrite], actx: AppendContext | None = None):
    """The one-job write's tasks (`engine.write.one_job`): each receives a list of (bucket, its
    records as Arrow IPC) and writes the buckets one after another; one outcome per bucket."""

    def run(groups: Iterator[list[tuple[int, bytes]]]) -> Iterator[WriteOutcome]:
        from engine.data.batch import from_ipc

        tc = task_context()
        for group in groups:
            for index, data in group:
                yield _write_one(ctx, actx, buckets[index], from_ipc(data), tc, index)

    return run


__all__ = ["BUCKET_COL", "OUTCOME_SCHEMA", "assign_buckets_task", "write_bucket_task", "write_groups_task"]
