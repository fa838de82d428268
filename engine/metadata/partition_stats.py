"""Apache Hudi's partition statistics (`partition_stats`): per data partition and indexed column,
one range over the partition's files, as Hudi 1.x writes it (`HoodieMetadataWriteUtils.
convertMetadataToPartitionStatRecords`, `FileFormatUtils.getColumnRangeInPartition`). Pure:
column ranges in, metadata records out.

A record shares the column_stats record (type 6 instead of 3) and is keyed
`b64(xxhash64(column)) + b64(xxhash64(partition))`; its file name is the partition, its value type
the column's type in the table schema, and it is a tight bound (it replaces the older record of
its key: `isTightBound`, while `column_stats` is available).

What a write puts in it, for each data partition the write's stats name: the ranges of the files
the write added there, merged (min of minimums, max of maximums, counts and sizes summed) with the
column_stats ranges of every other file in the partition's latest file slices *as they were
before the write completed*. Hudi takes that view before the write's own base files are
committed, so a copy-on-write update (or a compaction) counts the replaced version of a file
group together with the new one, and an insert overwrite still counts the groups it replaces:
the range is a superset of the partition's values (never too narrow for skipping), the counts
are not row counts. This engine writes the same, so both engines' records agree.

A deleted partition (`delete_partition`) gets a deleted record per column; cleans and rollbacks
add nothing (a rollback takes its deltacommit away, and the older record with it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from engine.metadata import column_stats as cs
from engine.metadata.records import TYPE_PARTITION_STATS

Record = dict[str, Any]


def range_of(rec: Mapping[str, Any]) -> cs.ColumnRange | None:
    """The column range a column_stats record holds (None: deleted, or without a V2 value type)."""
    stats = rec.get("ColumnStatsMetadata")
    if not isinstance(stats, Mapping) or stats.get("isDeleted"):
        return None
    kind = cs.kind_of(stats)
    if kind is None or kind.name == "V1":
        return None
    return cs.ColumnRange(
        str(stats.get("fileName")), str(stats.get("columnName")), kind,
        cs.unwrapped(stats, "minValue"), cs.unwrapped(stats, "maxValue"),
        int(stats.get("nullCount") or 0), int(stats.get("valueCount") or 0),
        int(stats.get("totalSize") or 0), int(stats.get("totalUncompressedSize") or 0))


def promote(kind: cs.ValueKind, value: Any) -> Any:
    """A file's statistic as a value of the column's type in the table schema, for a column whose
    type changed (`ValueType.standardizeJavaTypeAndPromote`: an int to a long or a double, a
    number to its text)."""
    if value is None:
        return None
    if kind.name == "STRING" and not isinstance(value, str):
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, bytes):
            return value.decode("utf-8")
        return str(value)
    if kind.name in ("INT", "LONG") and not isinstance(value, int):
        return int(str(value))
    if kind.name in ("INT", "LONG") and isinstance(value, bool):
        return int(value)
    if kind.name in ("FLOAT", "DOUBLE") and not isinstance(value, float):
        return float(value) if not isinstance(value, str) else float(value.strip())
    return value


def aggregate(partition: str, column: str, kind: cs.ValueKind, ranges: Iterable[cs.ColumnRange]) -> cs.ColumnRange | None:
    """One column's range over a partition's files (None: no file has the column)."""
    out: cs.ColumnRange | None = None
    for rng in ranges:
        if rng.column != column:
            continue
        as_column = replace(rng, file_name=partition, kind=kind, min=promote(kind, rng.min), max=promote(kind, rng.max))
        out = as_column if out is None else out.merge(as_column)
    return out


def record(partition: str, rng: cs.ColumnRange) -> Record:
    """The partition_stats record of a partition's range (`rng.file_name` is the partition)."""
    rec = cs.record(partition, rng)
    rec["key"] = cs.partition_stats_key(partition, rng.column)
    rec["type"] = TYPE_PARTITION_STATS
    rec["ColumnStatsMetadata"]["isTightBound"] = True
    return rec


def deleted(partition: str, column: str) -> Record:
    """The record of a deleted partition's column (`HoodieColumnRangeMetadata.stub("", ...)`)."""
    rec = cs.tombstone(partition, "", column)
    rec["key"] = cs.partition_stats_key(partition, column)
    rec["type"] = TYPE_PARTITION_STATS
    rec["ColumnStatsMetadata"]["isTightBound"] = True
    return rec


def records_for(partition: str, kinds: Mapping[str, cs.ValueKind], ranges: Sequence[cs.ColumnRange]) -> list[Record]:
    """The partition_stats records of `partition` from the ranges of its files (`kinds`: each
    indexed column's value type in the table schema, in index order)."""
    out = []
    for column, kind in kinds.items():
        rng = aggregate(partition, column, kind, ranges)
        if rng is not None:
            out.append(record(partition, rng))
    return out


__all__ = ["aggregate", "deleted", "promote", "range_of", "record", "records_for"]
