"""A bulk_insert task's files (`engine.write.bulk_stream` runs `write_task_files` in `mapInArrow`):
the rows a task was given, written into new file groups of its own, one or more per partition
path it sees (rolled over by rows), with no counting pass before it.

Pure apart from the files it is told to write (through the `Storage` in the `WriteContext`): no
Spark. File ids are `<prefix>-<n>`, Hudi's bulk-insert naming: `prefix` the task's UUID-shaped
prefix (`engine.data.file_names.task_file_id_prefix`: the write's stem and the task's number, so
that a failed write's record names every file id it can have used), `n` counting the task's files.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.columns import KEY_COL, OP_COL, OP_DELETE, PART_COL
from engine.data.batch import with_ops
from engine.data.file_names import bulk_file_id
from engine.keygen.keys import AUTO_KEY
from engine.table.meta_client import write_partition_metadata
from engine.write.file_writer import BucketWrite, WriteContext, write_bucket


def split_files(rows: pa.Table, rows_per_file: int, by_key: bool = False) -> Iterator[tuple[str, pa.Table]]:
    """(partition path, rows) of each file the task writes: its rows grouped by partition path (in
    order of the paths; arrival order inside a path, or record key order with `by_key`), each
    group cut into files of at most `rows_per_file` rows. One reordering copy of the rows at most
    (none when they are in one partition and not to be sorted)."""
    if rows.num_rows == 0:
        return
    encoded = rows.column(PART_COL).combine_chunks().dictionary_encode()
    paths = encoded.dictionary
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    # partition paths in string order, then the rows by that rank (stable: arrival order kept)
    rank = np.empty(len(paths), dtype=np.int64)
    rank[np.argsort(np.array(paths.to_pylist(), dtype=object), kind="stable")] = np.arange(len(paths))
    row_rank = rank[codes]
    if by_key:
        keyed = pa.table({"r": row_rank, "k": rows.column(KEY_COL)})
        order = pc.sort_indices(keyed, sort_keys=[("r", "ascending"), ("k", "ascending")])
        ordered = rows.take(order)
        row_rank = row_rank[order.to_numpy()]
    elif len(paths) > 1:
        order_np = np.argsort(row_rank, kind="stable")
        ordered = rows.take(pa.array(order_np))
        row_rank = row_rank[order_np]
    else:
        ordered = rows
    by_rank = {int(r): paths[int(i)].as_py() for i, r in enumerate(rank)}
    bounds = [0, *(np.flatnonzero(np.diff(row_rank)) + 1).tolist(), len(row_rank)]
    step = max(1, rows_per_file)
    for start, end in zip(bounds, bounds[1:], strict=False):
        partition = by_rank[int(row_rank[start])]
        for lo in range(start, end, step):
            yield partition, ordered.slice(lo, min(end, lo + step) - lo)


def with_auto_keys(rows: pa.Table, instant: str, task_partition: int) -> pa.Table:
    """New records of a table with auto-generated keys (KEY_COL = AUTO_KEY) named as Apache Hudi's
    `AutoRecordGenWrapperKeyGenerator` names them: `<instant>_<Spark partition id>_<row number in
    the task>` (`HoodieRecord.generateSequenceId`), in arrival order."""
    keys = rows.column(KEY_COL)
    auto = pc.equal(keys, AUTO_KEY)
    if not pc.any(auto).as_py():
        return rows
    generated = pa.array([f"{instant}_{task_partition}_{i}" for i in range(rows.num_rows)], pa.string())
    index = rows.schema.get_field_index(KEY_COL)
    return rows.set_column(index, rows.schema.field(index), pc.if_else(auto, generated, keys))


def write_task_files(
    ctx: WriteContext, prefix: str, token: str, task_partition: int, rows: pa.Table, rows_per_file: int
) -> list[dict]:
    """Write one task's rows (data columns + KEY_COL + PART_COL) as new base files; one outcome
    row (`engine.write.file_writer.WriteOutcome` + `num_bad_keys`, `num_absent`) per file. A task
    whose rows include an invalid (null) key writes nothing and returns one row with no path
    counting them: the driver then fails the whole write (`engine.write.bulk_stream`). Rows whose
    `_hoodie_is_deleted` is true are not written; a row with no path counts them (`num_absent`:
    deletes of keys a bulk insert does not look up, as the planned path counts them)."""
    bad = rows.column(KEY_COL).null_count
    if bad:
        return [{"path": None, "file_id": None, "partition": None, "num_bad_keys": bad, "num_absent": 0}]
    rows = with_auto_keys(rows, ctx.instant, task_partition)
    rows = with_ops(rows, False)
    deleted = pc.equal(rows.column(OP_COL), OP_DELETE)  # delete markers delete nothing a bulk insert sees
    absent = pc.sum(deleted.cast(pa.int64())).as_py() or 0
    if absent:
        rows = rows.filter(pc.invert(deleted))
    out = []
    seen: set[str] = set()
    by_key = ctx.sort_by_key
    ctx = replace(ctx, sort_by_key=False)  # sorted here already, with the partitions, when asked
    for n, (partition, chunk) in enumerate(split_files(rows, rows_per_file, by_key)):
        if partition not in seen:
            write_partition_metadata(ctx.storage, partition, ctx.instant)
            seen.add(partition)
        bucket = BucketWrite(partition, bulk_file_id(prefix, n), None, None)
        out.append(write_bucket(ctx, bucket, chunk, token, task_partition).as_row() | {"num_bad_keys": 0, "num_absent": 0})
    if absent:
        out.append({"path": None, "file_id": None, "partition": None, "num_bad_keys": 0, "num_absent": absent})
    return out


__all__ = ["split_files", "with_auto_keys", "write_task_files"]
