"""The index partitions' share of a metadata deltacommit (besides `files`): the record index,
the column and partition statistics and the secondary indexes this engine keeps, each in the
file groups its keys hash to (`engine.metadata.partition_writes`).

- record index: where the keys a write (not a compaction) put went, and the keys it removed
  (`record_index_updates`);
- column statistics: the ranges of the files an instant adds, tombstones for the files it deletes
  (`column_stats_updates`);
- partition statistics: the ranges of the partitions a write touches (`partition_stats_updates`);
- secondary indexes: the (value, key) pairs a write (not a compaction) inserts and removes
  (`secondary_index_updates`).

The record index and the secondary indexes read the slices a write touches once, together.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.metadata import column_stats_updates, partition_stats_updates, record_index_updates
from engine.metadata import records as mdr
from engine.metadata import secondary_index_updates as siu
from engine.metadata.file_changes import FILE_WRITES, FileChanges
from engine.metadata.partition_writes import (
    GroupWrite,
    keyed_writes,
    record_index_writes,
    secondary_index_writes,
)
from engine.metadata.reader import MetadataTableReader
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant
from engine.timeline.timeline import Timeline

LOCATION_WRITES = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING)
COMPACTIONS = ("COMPACT", "LOG_COMPACT")


def column_stats_records(meta: MetaClient, instant: Instant, changes: FileChanges) -> list[mdr.Record]:
    """The column_stats records of a data instant: the ranges of the files a write adds
    (rollback's appended log files carry no records), tombstones for the files deleted."""
    columns, _ = column_stats_updates.indexed_columns(meta)
    if columns is None:
        return []
    out = column_stats_updates.deleted_records(columns, changes.named(deleted=True))
    if instant.action in FILE_WRITES:
        out += column_stats_updates.written_records(meta, columns, changes.named(deleted=False))
    return out


def of_instant(meta: MetaClient, reader: MetadataTableReader, timeline: Timeline, instant: Instant,
               changes: FileChanges, kept: Sequence[str]) -> list[GroupWrite]:
    """The index partitions' group writes of the deltacommit of `instant` (`kept`: the partitions
    this deltacommit keeps)."""
    writes: list[GroupWrite] = []
    metadata = changes.commit
    secondary = [ix for ix in siu.indexes(meta, timeline)[0] if ix.partition in kept]
    locating = (instant.action in LOCATION_WRITES and metadata is not None
                and metadata.operation_type.upper() not in COMPACTIONS)
    if locating and metadata is not None and (mdr.RECORD_INDEX in kept or secondary):
        slices = record_index_updates.written_slices(meta, timeline, instant.time, metadata)
        if mdr.RECORD_INDEX in kept:
            writes += record_index_writes(reader, instant.time, record_index_updates.changes_in(
                meta, instant.time, slices))
        if secondary:
            by_index = siu.changes(meta, timeline, slices, secondary)
            for ix in secondary:
                writes += secondary_index_writes(reader, ix, by_index[ix.partition])
    if mdr.COLUMN_STATS in kept:
        stats_records = column_stats_records(meta, instant, changes)
        writes += keyed_writes(reader, mdr.COLUMN_STATS, stats_records)
        if mdr.PARTITION_STATS in kept and metadata is not None:
            columns, _ = column_stats_updates.indexed_columns(meta)
            writes += keyed_writes(reader, mdr.PARTITION_STATS, partition_stats_updates.written_records(
                meta, reader, timeline, instant.time, metadata, columns or [], stats_records))
    return writes


__all__ = ["COMPACTIONS", "LOCATION_WRITES", "column_stats_records", "of_instant"]
