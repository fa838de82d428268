"""A driver-planned write's buckets, ready to write: every record assigned to its bucket, the
buckets packed into task groups of about equal weight, and what each bucket's writer needs.

Shared by the two writers of a batch planned on the driver: one Spark job (`engine.write.one_job`)
and threads of the driver process (`engine.write.local`). Both call `write_one` for every bucket,
so the files they write are the same (names aside: the write token names the task).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from engine.columns import FILE_ID_COL, KEY_COL, OP_COL, PART_COL, PREV_FILE_ID_COL
from engine.data import batch as lb
from engine.data.file_names import write_token
from engine.write.assign import assign_buckets
from engine.write.file_writer import BucketWrite, WriteContext, write_bucket
from engine.write.log_writer import AppendContext, append_bucket
from engine.write.outcome import WriteOutcome
from engine.write.planner import WritePlan

if TYPE_CHECKING:
    from engine.write.pipeline import Batch, Pipeline


@dataclass
class BucketWork:
    """The plan's buckets with their records: `groups` lists, per task, (bucket index, records)."""

    ctx: WriteContext
    writes: dict[int, BucketWrite]
    actx: AppendContext | None
    groups: list[list[tuple[int, pa.Table]]]
    located: Callable[[], pa.Table]  # the located records, for indexes that store locations


def prepare(job: Pipeline, rows: pa.Table, plan: WritePlan, batch: Batch, instant: str, tasks: int) -> BucketWork:
    """Assign the tagged `rows` to the buckets of `plan` and pack the buckets into at most `tasks`
    groups, weighted by their records plus the stored records a merge rewrites."""
    updates_idx, ranges = plan.lookup_tables()
    to_write = lb.records_to_write(rows)
    offsets = {(0, p): 0 for p in ranges}
    buckets = assign_buckets(to_write, 0, updates_idx, ranges, offsets)
    by_bucket = lb.split_by_bucket(to_write, buckets)
    ctx = job.batch_write_context(batch, instant)
    writes = {b.index: job.bucket_write(b, batch.view) for b in plan.buckets if b.index in by_bucket}
    actx = job.append_context(batch, ctx.schema) if any(w.append for w in writes.values()) else None
    sizes = touched_sizes(plan, batch)
    per_row = max(1, rows.nbytes // max(1, rows.num_rows))
    weights = {
        b.index: by_bucket[b.index].num_rows + sizes.get((b.partition, b.file_id), 0) // per_row
        for b in plan.buckets
        if b.index in by_bucket
    }
    groups = [[(b, by_bucket[b]) for b in g] for g in lb.pack_tasks(weights, tasks)]

    def located() -> pa.Table:
        # the file id of every record's bucket: an array indexed by bucket number
        file_of: list[str | None] = [None] * (max(b.index for b in plan.buckets) + 1)
        for b in plan.buckets:
            file_of[b.index] = b.file_id
        return pa.table(
            {
                KEY_COL: to_write.column(KEY_COL),
                PART_COL: to_write.column(PART_COL),
                FILE_ID_COL: pa.array(file_of, pa.string()).take(buckets),
                OP_COL: to_write.column(OP_COL),
                PREV_FILE_ID_COL: to_write.column(FILE_ID_COL),
            }
        )

    return BucketWork(ctx, writes, actx, groups, located)


def touched_sizes(plan: WritePlan, batch: Batch) -> dict[tuple[str, str], int]:
    """(partition, file id) -> bytes of the latest slice (base file and log files) of every file
    group the plan writes into: what its writers read."""
    wanted = {(b.partition, b.file_id) for b in plan.buckets}
    out: dict[tuple[str, str], int] = {}
    for s in batch.view.latest_slices(sorted({b.partition for b in plan.buckets})):
        if (s.partition, s.file_id) in wanted:
            out[(s.partition, s.file_id)] = s.size
    return out


def write_one(
    ctx: WriteContext, actx: AppendContext | None, bucket: BucketWrite, table: pa.Table, index: int, token: str, task: int
) -> WriteOutcome:
    """One bucket written: a new base file (merging the previous one), or, for an APPEND bucket of
    a merge-on-read table, a new log file of its slice. New records of a table with auto-generated
    keys are named `<instant>_<bucket index>_<row>` (unique in the write: a bucket is written once)."""
    from engine.write.bulk_files import with_auto_keys

    table = with_auto_keys(table, ctx.instant, index)
    if bucket.append:
        assert actx is not None
        return append_bucket(ctx, actx, bucket, table, token, task)
    return write_bucket(ctx, bucket, table, token, task)


def local_token(task: int) -> str:
    """The write token of a bucket written by the driver's task `task` (stage 0, attempt = task)."""
    return write_token(task, 0, task)


__all__ = ["BucketWork", "local_token", "prepare", "touched_sizes", "write_one"]
