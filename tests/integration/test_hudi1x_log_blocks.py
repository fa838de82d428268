"""Writes and compaction on top of the Apache Hudi 1.x fixtures whose logs hold what only Apache Hudi
writes: a corrupt tail block, partial updates (commit-time and event-time ordering) and HFILE data
blocks. An upsert lands on the merged records (a change to a record the odd blocks updated, and a
new record) and rolls back cleanly; a compaction keeps what the table reads, and hudi-rs reads the
compacted table alike.
Our own writer never writes such blocks: every block it adds is whole, full and AVRO/PARQUET/DELETE.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Table
from engine.data import log_block as lb
from engine.data.log_file import read_log_blocks
from engine.storage import storage_for
from tests.support import hudi1x, hudi_rs

pytestmark = pytest.mark.spark

FIXTURES = {  # fixture -> (record key field, a string column to change, the key to change)
    "quickstart_trips_table/mor/avro/table_corrupt_tail_block": ("key", "value", "k1"),
    "quickstart_trips_table/mor/avro/table_partial_update": ("key", "value", "k1"),
    "quickstart_trips_table/mor/avro/table_partial_update_event_time": ("id", "b", "k1"),
    "quickstart_trips_table/mor/avro/table_hfile_log_block": ("key", "value", "k2"),
}


def _names(table: pa.Table) -> list[str]:
    return ["_hoodie_record_key", "_hoodie_commit_time"] + [c for c in table.column_names if not c.startswith("_hoodie_")]


def _data(table: pa.Table) -> list[tuple]:
    """(record key, commit time, data columns...) rows, sorted: what a reader sees, less file names
    and sequence numbers."""
    return sorted(tuple(r[n] for n in _names(table)) for r in table.select(_names(table)).to_pylist())


def _log_blocks(path) -> list[lb.LogBlock]:  # type: ignore[no-untyped-def]
    storage = storage_for(str(path))
    return [b for p in sorted(path.glob(".*.log.*")) for b in read_log_blocks(storage, p.name)]


@pytest.mark.parametrize("name", list(FIXTURES))
def test_upsert_and_compaction_on_top_of_blocks_only_apache_hudi_writes(spark, name, tmp_path):
    key_field, column, key = FIXTURES[name]
    fx = hudi1x.fixture(name, tmp_path)
    table = Table.open(spark, str(fx.table))
    before = table.read().toArrow()
    old_blocks = {(b.offset, b.instant) for b in _log_blocks(fx.table)}

    rows = [r for r in before.to_pylist() if r["_hoodie_record_key"] == key]
    assert len(rows) == 1, name
    changed = {k: v for k, v in rows[0].items() if not k.startswith("_hoodie_")}
    changed[column] = "CHANGED"
    added = {**changed, key_field: "NEW-KEY-1", column: "ADDED"}
    data_schema = pa.schema([f for f in before.schema if not f.name.startswith("_hoodie_")])
    batch = spark.createDataFrame(pa.Table.from_pylist([changed, added], schema=data_schema).to_pandas())
    first = table.upsert(batch).instant
    assert first is not None
    table.maintenance.rollback(first)  # the rollback finds its log file past the odd blocks
    assert _data(table.read().toArrow()) == _data(before), name
    instant = table.upsert(batch).instant

    names = _names(before)
    expected = [r for r in _data(before) if r[0] != key]
    for record_key, values in ((key, changed), ("NEW-KEY-1", added)):
        expected.append(tuple(record_key if n == "_hoodie_record_key" else instant if n == "_hoodie_commit_time"
                              else values[n] for n in names))
    assert _data(table.read().toArrow()) == sorted(expected), name

    new_blocks = [b for b in _log_blocks(fx.table) if (b.offset, b.instant) not in old_blocks]
    assert new_blocks and all(b.instant == instant for b in new_blocks), name
    assert all(not b.is_partial and b.block_type in (lb.BlockType.AVRO_DATA, lb.BlockType.PARQUET_DATA,
                                                      lb.BlockType.DELETE) for b in new_blocks), name

    result = table.maintenance.compact(spark=spark)
    assert result is not None and result.log_files_compacted >= 1, name
    compacted = table.read().toArrow()
    assert _data(compacted) == sorted(expected), name
    theirs = hudi_rs.arrow_snapshot(str(fx.table))
    assert theirs is not None and _data(theirs) == sorted(expected), name
