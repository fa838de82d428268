"""Event-time ordering inside `write_bucket` (pure pyarrow): updates and delete markers older than
the stored record change nothing; the delete operation (no precombine field) deletes anyway."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine.columns import KEY_COL, OP_COL, PART_COL
from engine.constants import META_COLUMNS, RECORD_KEY_COL
from engine.storage import storage_for
from engine.write.file_writer import BucketWrite, WriteContext, write_bucket

SCHEMA = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + [pa.field("v", pa.string()), pa.field("ts", pa.int64())])
T1, T2 = "20240101000000000", "20240102000000000"


def _base(tmp_path: Path) -> str:
    ctx = WriteContext(storage=storage_for(str(tmp_path)), instant=T1, schema=SCHEMA, precombine_field="ts")
    first = pa.table({KEY_COL: ["a", "b", "c"], PART_COL: ["p"] * 3, OP_COL: ["U"] * 3, "v": ["a1", "b1", "c1"],
                      "ts": [10, 10, 10]})
    return write_bucket(ctx, BucketWrite("p", "f1-0", None, None), first, "0-1-2", 0).path


def _merge(tmp_path: Path, base: str, rows: dict, precombine: str | None):
    ctx = WriteContext(storage=storage_for(str(tmp_path)), instant=T2, schema=SCHEMA, precombine_field=precombine)
    incoming = pa.table({KEY_COL: rows["k"], PART_COL: ["p"] * len(rows["k"]), OP_COL: rows["op"], "v": rows["v"],
                         "ts": rows["ts"]})
    out = write_bucket(ctx, BucketWrite("p", "f1-0", base, T1), incoming, "0-1-3", 0)
    table = pq.read_table(tmp_path / out.path, columns=[RECORD_KEY_COL, "v", "ts"])
    return out, sorted(zip(*(table.column(i).to_pylist() for i in range(3)), strict=True))


def test_older_delete_markers_and_updates_are_stale(tmp_path: Path) -> None:
    base = _base(tmp_path)
    out, rows = _merge(
        tmp_path, base,
        {"k": ["a", "b", "c"], "op": ["D", "D", "U"], "v": ["x", "x", "c0"], "ts": [5, 12, 9]},
        precombine="ts",
    )
    # a: older delete marker, ignored; b: newer, deleted; c: older update, ignored
    assert rows == [("a", "a1", 10), ("c", "c1", 10)]
    assert (out.num_stale, out.num_deletes, out.num_updates, out.num_inserts) == (2, 1, 0, 0)


def test_equal_ordering_value_wins_and_null_loses(tmp_path: Path) -> None:
    base = _base(tmp_path)
    out, rows = _merge(
        tmp_path, base, {"k": ["a", "b"], "op": ["D", "U"], "v": ["x", "b2"], "ts": [10, None]}, precombine="ts"
    )
    assert rows == [("b", "b1", 10), ("c", "c1", 10)]
    assert (out.num_stale, out.num_deletes) == (1, 1)


def test_delete_operation_ignores_the_ordering(tmp_path: Path) -> None:
    base = _base(tmp_path)
    out, rows = _merge(tmp_path, base, {"k": ["a", "b"], "op": ["D", "D"], "v": ["x", "x"], "ts": [0, None]},
                       precombine=None)
    assert rows == [("c", "c1", 10)]
    assert (out.num_stale, out.num_deletes) == (0, 2)
