"""Which bucket (file to write) each record of a write goes to, vectorised with pyarrow and numpy.

Runs inside the write's Spark tasks on one task's records; no Spark imports (pure, unit-tested
against the row-by-row definition in `tests/unit/test_assign_buckets.py`).

- A record tagged with a file group (`FILE_ID_COL` set) goes to that group's bucket.
- An insert gets an insert number within its partition path: the partition's offset for this Spark
  partition (`offsets[(spark partition, partition)]`, counted by the profile) plus its rank among
  this task's inserts of that partition in (partition, record key) order (stable: ties keep input
  order). Not the arrival order, so a recomputed Spark partition gives every record the same
  bucket again. The number falls in one of the partition's planned `InsertRange`s.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.columns import FILE_ID_COL, KEY_COL, PART_COL
from engine.write.planner import InsertRange

PAIR_SEP = "\x00"  # file ids never contain it, so "partition \x00 file id" names one pair


def assign_buckets(
    table: pa.Table,
    spark_partition: int,
    updates_idx: Mapping[tuple[str, str], int],
    ranges: Mapping[str, tuple[InsertRange, ...]],
    offsets: Mapping[tuple[int, str], int],
) -> pa.Array:
    """The bucket of every row of `table` (int32, in row order). KeyError for a tagged file group
    or partition the plan does not know; IndexError for an insert number outside the planned ranges."""
    n = table.num_rows
    out = np.zeros(n, dtype=np.int32)
    if n == 0:
        return pa.array(out, pa.int32())
    parts = table.column(PART_COL).combine_chunks().cast(pa.string())
    fids = table.column(FILE_ID_COL).combine_chunks().cast(pa.string())
    tagged = np.asarray(pc.is_valid(fids).to_numpy(zero_copy_only=False), dtype=bool)

    upd = np.flatnonzero(tagged)
    if len(upd):
        taken = pa.array(upd)
        pairs = pc.binary_join_element_wise(parts.take(taken), fids.take(taken), PAIR_SEP)
        known = pa.array([f"{p}{PAIR_SEP}{f}" for p, f in updates_idx], pa.string())
        pos = pc.index_in(pairs, value_set=known)
        if pos.null_count:
            missing = pairs.filter(pc.is_null(pos))[0].as_py()
            raise KeyError(tuple(missing.split(PAIR_SEP, 1)))
        buckets = np.fromiter(updates_idx.values(), dtype=np.int32, count=len(updates_idx))
        out[upd] = buckets[pos.to_numpy(zero_copy_only=False)]

    ins = np.flatnonzero(~tagged)
    if len(ins):
        taken = pa.array(ins)
        keys = table.column(KEY_COL).combine_chunks().cast(pa.string()).take(taken)
        sub = pa.table({"p": parts.take(taken), "k": keys})
        order = pc.sort_indices(sub, sort_keys=[("p", "ascending"), ("k", "ascending")]).to_numpy()
        rows = ins[order]  # table rows of the inserts, in (partition, key) order
        encoded = pc.dictionary_encode(sub.column("p").combine_chunks().take(pa.array(order)))
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        names = encoded.dictionary.to_pylist()
        bounds = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist(), len(rows)]
        for start, end in zip(bounds, bounds[1:], strict=False):  # one contiguous run per partition
            part = names[codes[start]]
            out[rows[start:end]] = _insert_buckets(ranges[part], offsets[(spark_partition, part)], end - start)
    return pa.array(out, pa.int32())


def _insert_buckets(planned: tuple[InsertRange, ...], offset: int, count: int) -> np.ndarray:
    """Buckets of insert numbers offset .. offset + count - 1 of one partition."""
    numbers = offset + np.arange(count, dtype=np.int64)
    starts = np.array([r.start for r in planned], dtype=np.int64)
    ends = np.array([r.end for r in planned], dtype=np.int64)
    buckets = np.array([r.bucket for r in planned], dtype=np.int32)
    if not planned:
        raise IndexError(f"insert number {offset} is outside the planned ranges")
    pos = np.searchsorted(starts, numbers, side="right") - 1
    bad = (pos < 0) | (numbers >= ends[np.maximum(pos, 0)])
    if bad.any():
        raise IndexError(f"insert number {int(numbers[np.argmax(bad)])} is outside the planned ranges")
    return buckets[pos]


__all__ = ["PAIR_SEP", "assign_buckets"]
