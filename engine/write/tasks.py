"""The functions a write runs inside Spark tasks: assigning records to buckets and writing a bucket."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.taskcontext import TaskContext

from engine.data.columns import FILE_ID_COL, KEY_COL, PART_COL
from engine.table.file_names import write_token
from engine.write.file_writer import BucketWrite, WriteContext, write_bucket
from engine.write.planner import bucket_for_insert

BUCKET_COL = "__hoodie_bucket"


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


def task_context() -> TaskContext:
    tc = TaskContext.get()
    if tc is None:  # only ever called inside Spark tasks
        raise RuntimeError("not running inside a Spark task")
    return tc


def assign_buckets_task(updates_idx: dict, ranges: dict, offsets: dict):
    """Bucket of every record: its file group's bucket, or (inserts) by insert number.

    Insert numbers count a partition path's inserts across Spark partitions (`offsets`), and
    within a Spark partition follow the record key order, not the arrival order: if Spark
    recomputes a lost partition, every record gets the same bucket again.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sp = task_context().partitionId()
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


def write_bucket_task(ctx: WriteContext, buckets: dict[int, BucketWrite]):
    def run(table: pa.Table) -> pa.Table:
        tc = task_context()
        token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId())
        index = table.column(BUCKET_COL)[0].as_py()
        outcome = write_bucket(ctx, buckets[index], table, token, tc.partitionId())
        return pa.Table.from_pylist([outcome.as_row()], schema=OUTCOME_SCHEMA)

    return run


__all__ = ["BUCKET_COL", "OUTCOME_SCHEMA", "assign_buckets_task", "write_bucket_task"]
