"""The driver's half of a one-job write: a batch small enough to hold on the driver is keyed,
de-duplicated, tagged, profiled and split into buckets here, with pyarrow, so that Spark only runs
the one job that merges and writes the file groups (`engine.write.one_job`).

Pure: Arrow in, Arrow out; no Spark, no I/O. Every rule is the distributed pipeline's
(`engine.write.prepare`, `engine.write.tagging`), applied to the batch as one Arrow table; the
row order of that table is the input's arrival order.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.columns import FILE_ID_COL, KEY_COL, OP_COL, OP_DELETE, OP_UPSERT, PART_COL
from engine.data.keys import KEYS_SCHEMA
from engine.data.slice_reader import IS_DELETED_COL


class ProfileRow(dict):
    """One count row of the profile, shaped like the Spark `Row`s `engine.write.tagging.profile` reads."""

    def asDict(self) -> dict:  # noqa: N802 (Spark's Row API)
        return dict(self)


def repeated(value: str, n: int) -> pa.Array:
    """`value` `n` times as a string array, built without a Python list of `n` items."""
    return pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(n, np.int8)), pa.array([value], pa.string())
    ).cast(pa.string())


def null_keys(batch: pa.Table) -> int:
    """Records whose key is invalid (the key column is null for null/empty keys)."""
    return batch.column(KEY_COL).null_count


def with_ops(batch: pa.Table, is_delete: bool) -> pa.Table:
    """`batch` + OP_COL: delete for a delete operation and for rows whose `_hoodie_is_deleted` is
    true (as `engine.write.prepare.op_expr`), upsert otherwise."""
    n = batch.num_rows
    if is_delete:
        ops = repeated(OP_DELETE, n)
    elif IS_DELETED_COL in batch.column_names:
        flag = pc.fill_null(batch.column(IS_DELETED_COL).cast(pa.bool_()), False)
        ops = pc.if_else(flag, OP_DELETE, OP_UPSERT)
    else:
        ops = repeated(OP_UPSERT, n)
    return batch.append_column(OP_COL, ops)


def has_duplicates(batch: pa.Table, by: Sequence[str]) -> bool:
    return batch.select(list(by)).group_by(list(by)).aggregate([]).num_rows < batch.num_rows


def dedupe(batch: pa.Table, precombine: str | None, by: Sequence[str]) -> pa.Table:
    """One record per `by` (the key, and the partition for non-global indexes): the largest
    precombine value, the later input on ties; nulls lose (`engine.write.prepare.dedupe`).
    The kept records stay in input order."""
    order = pa.array(np.arange(batch.num_rows, dtype=np.int64))
    work = batch.select(list(by)).append_column("__order", order)
    sort_keys = [(c, "ascending", "at_end") for c in by]
    if precombine:
        work = work.append_column("__pc", batch.column(precombine))
        sort_keys.append(("__pc", "descending", "at_end"))
    sort_keys.append(("__order", "descending", "at_end"))
    idx = pc.sort_indices(work, sort_keys=sort_keys)
    ranked = work.take(idx)
    first = np.ones(ranked.num_rows, dtype=bool)
    if ranked.num_rows > 1:
        same = np.ones(ranked.num_rows - 1, dtype=bool)
        for c in by:
            col = ranked.column(c).combine_chunks()
            equal = pc.fill_null(pc.equal(col.slice(1), col.slice(0, len(col) - 1)), False)
            same &= equal.to_numpy(zero_copy_only=False)
        first[1:] = ~same
    kept = np.sort(ranked.column("__order").to_numpy()[first])
    return batch.take(pa.array(kept))


def attach_locations(batch: pa.Table, found: pa.Table, is_global: bool) -> pa.Table:
    """`batch` + FILE_ID_COL from an index's answer `found` (KEYS_SCHEMA: key, partition, file id).

    Non-global indexes match (key, partition). A global index matches the key alone, and the
    record is written where the key lives (Apache Hudi's update.partition.path=false; the one-job
    path is not taken for indexes that move records)."""
    key, part, fid = KEYS_SCHEMA.names
    found = found.select([key, part, fid]).cast(KEYS_SCHEMA)
    if is_global:
        pos = pc.index_in(batch.column(KEY_COL), value_set=_array(found.column(key)))
    else:
        probe = pc.binary_join_element_wise(batch.column(KEY_COL), batch.column(PART_COL), "\x00")
        stored = pc.binary_join_element_wise(found.column(key), found.column(part), "\x00")
        pos = pc.index_in(probe, value_set=_array(stored))
    pos = _array(pos)
    fids = found.column(fid).combine_chunks().take(pos)
    out = batch.append_column(FILE_ID_COL, fids)
    if is_global and found.num_rows:
        lives = found.column(part).combine_chunks().take(pos)
        i = out.schema.get_field_index(PART_COL)
        out = out.set_column(i, PART_COL, pc.coalesce(lives, out.column(PART_COL).combine_chunks()))
    return out


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def profile_rows(tagged: pa.Table) -> list[ProfileRow]:
    """The profile's count rows (`engine.write.tagging.profile`) of a tagged batch held as one
    Spark partition (number 0)."""
    counts = (
        tagged.select([PART_COL, FILE_ID_COL, OP_COL])
        .group_by([PART_COL, FILE_ID_COL, OP_COL])
        .aggregate([([], "count_all")])
    )
    return [
        ProfileRow({"__hoodie_task": 0, PART_COL: p, FILE_ID_COL: f, OP_COL: o, "count": n})
        for p, f, o, n in zip(
            counts.column(PART_COL).to_pylist(),
            counts.column(FILE_ID_COL).to_pylist(),
            counts.column(OP_COL).to_pylist(),
            counts.column("count_all").to_pylist(),
            strict=True,
        )
    ]


def records_to_write(tagged: pa.Table) -> pa.Table:
    """What the write tasks receive: everything but deletes of keys the table does not hold."""
    keep = pc.or_(pc.is_valid(tagged.column(FILE_ID_COL)), pc.equal(tagged.column(OP_COL), OP_UPSERT))
    return tagged.filter(keep)


def split_by_bucket(rows: pa.Table, buckets: pa.Array) -> dict[int, pa.Table]:
    """bucket -> its rows (input order kept within a bucket)."""
    if rows.num_rows == 0:
        return {}
    b = buckets.to_numpy(zero_copy_only=False)
    order = np.argsort(b, kind="stable")
    sorted_b = b[order]
    taken = rows.take(pa.array(order))
    bounds = np.flatnonzero(np.diff(sorted_b)) + 1
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(sorted_b)]
    return {int(sorted_b[s]): taken.slice(s, e - s) for s, e in zip(starts, ends, strict=True)}


def pack_tasks(weights: dict[int, int], tasks: int) -> list[list[int]]:
    """Buckets spread over at most `tasks` groups of about equal weight (largest first onto the
    lightest group); each group keeps its buckets in ascending order. Empty groups are dropped."""
    tasks = max(1, min(tasks, len(weights)))
    heap = [(0, i) for i in range(tasks)]
    groups: list[list[int]] = [[] for _ in range(tasks)]
    for bucket, weight in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])):
        load, i = heapq.heappop(heap)
        groups[i].append(bucket)
        heapq.heappush(heap, (load + max(1, weight), i))
    return [sorted(g) for g in groups if g]


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


__all__ = [
    "ProfileRow",
    "attach_locations",
    "dedupe",
    "from_ipc",
    "has_duplicates",
    "null_keys",
    "pack_tasks",
    "profile_rows",
    "records_to_write",
    "split_by_bucket",
    "to_ipc",
    "with_ops",
]
