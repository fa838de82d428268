"""Data skipping from Apache Hudi's column statistics (`column_stats` of the metadata table), as
Hudi's `ColumnStatsIndexSupport` does for filtered reads (`hoodie.enable.data.skipping`, on by
default): a file slice is not read when, for one of the query's predicates, the statistics of
every file of the slice (its base file and each log file) prove it false for every record
(`engine.read.prune.range_may_match`). A merged record takes each column's value from one of
those files, so no record of a skipped slice could match.

Nothing is skipped for a file without statistics (a column the index does not cover, a file
written by an instant the metadata table does not have) or where the metadata table cannot
answer (missing, behind the data timeline, unreadable): then `notice` says why, and every slice
is read. Never a wrong answer, only fewer files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from engine.data.file_names import name_of
from engine.data.slice_reader import SliceFiles
from engine.errors import CorruptTableError, StorageError
from engine.metadata import column_stats as cs
from engine.metadata import column_stats_updates
from engine.metadata import records as mdr
from engine.metadata.reader import MetadataTableReader, MetadataTableUnavailable
from engine.read.prune import Predicate, range_may_match
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline

_log = logging.getLogger(__name__)

def _files(files: SliceFiles) -> list[str]:
    return [name_of(p) for p in ((files.base_path,) if files.base_path else ()) + tuple(files.log_paths)]


@dataclass
class ColumnStatsSkipping:
    """The column statistics of the files a read plans, by (partition, file name, column)."""

    stats: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    notice: str | None = None

    def slice_may_match(self, files: SliceFiles, predicates: Sequence[Predicate],
                        types: Mapping[str, pa.DataType]) -> bool:
        names = _files(files)
        if not names or not self.stats:
            return True
        for pred in predicates:
            t = types.get(pred.column)
            found = [self.stats.get((files.partition, n, pred.column)) for n in names]
            known = [s for s in found if s is not None]
            if len(known) < len(found):
                continue
            if not any(range_may_match(pred, s, t, s.get("kind")) for s in known):
                return False
        return True


def _unwrapped(stats: Mapping[str, Any]) -> dict[str, Any]:
    kind = cs.kind_of(stats)

    def value(side: str) -> Any:
        wrapped = stats.get(side)
        return wrapped.get("value") if isinstance(wrapped, Mapping) else None

    return {"valueCount": stats.get("valueCount"), "nullCount": stats.get("nullCount"), "min": value("minValue"),
            "max": value("maxValue"), "kind": kind.name if kind is not None else None}


def load(meta: MetaClient, timeline: Timeline, slices: Iterable[SliceFiles],
         columns: Iterable[str]) -> ColumnStatsSkipping:
    """The statistics of `columns` in the files of `slices` (none, with a notice, where the
    metadata table cannot answer; none, silently, where the table has no column_stats)."""
    wanted = sorted(set(columns))
    if not wanted or meta.config.version < 8 or mdr.COLUMN_STATS not in metadata_table.partitions_in(meta.config):
        return ColumnStatsSkipping()
    indexed, _ = column_stats_updates.indexed_columns(meta)
    covered = [c for c in wanted if indexed is None or c in indexed]
    keys: dict[str, tuple[str, str, str]] = {}
    for files in slices:
        for name in _files(files):
            for column in covered:
                keys[cs.column_stats_key(files.partition, name, column)] = (files.partition, name, column)
    if not keys:
        return ColumnStatsSkipping()
    out, notice = _held(meta, timeline, mdr.COLUMN_STATS, keys, lambda where: where[1:],
                        "no data skipping, every file slice is read (column statistics: {})")
    return ColumnStatsSkipping(out, notice)


def _held(meta: MetaClient, timeline: Timeline, partition: str, keys: Mapping[str, tuple],
          names: Callable[[tuple], tuple], failed: str) -> tuple[dict[tuple, dict[str, Any]], str | None]:
    """The unwrapped statistics `partition` (column or partition statistics) holds for `keys`
    (key -> where), by where; a record whose (fileName, columnName) is not `names(where)` (a key
    collision) is never trusted. Where the metadata table cannot answer: none, and the notice
    `failed` says why (its `{}`: the reason)."""
    try:
        reader = MetadataTableReader(meta, timeline)
        reader.check_in_sync()
        found = reader.records(partition, keys)
    except (MetadataTableUnavailable, CorruptTableError, StorageError) as exc:
        notice = f"{meta.storage.base_uri}: {failed.format(exc)}"
        _log.warning("%s", notice)
        return {}, notice
    out: dict[tuple, dict[str, Any]] = {}
    for key, rec in found.items():
        stats = rec.get("ColumnStatsMetadata")
        where = keys.get(key)
        if where is None or not isinstance(stats, Mapping) or cs.is_deleted(rec):
            continue
        if (stats.get("fileName"), stats.get("columnName")) == names(where):
            out[where] = _unwrapped(stats)
    return out, None


@dataclass
class PartitionStatsSkipping:
    """The partition statistics of the partitions a read plans, by (partition, column)."""

    stats: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    notice: str | None = None

    def partition_may_match(self, partition: str, predicates: Sequence[Predicate],
                            types: Mapping[str, pa.DataType]) -> bool:
        for pred in predicates:
            held = self.stats.get((partition, pred.column))
            if held is not None and not range_may_match(pred, held, types.get(pred.column), held.get("kind")):
                return False
        return True


def load_partitions(meta: MetaClient, timeline: Timeline, partitions: Iterable[str],
                    columns: Iterable[str]) -> PartitionStatsSkipping:
    """The partition statistics (`partition_stats`: one range per partition and column, a
    superset of the values of the partition's latest file slices) of `columns` in `partitions`;
    none where the table has none or the metadata table cannot answer (a notice then)."""
    wanted = sorted(set(columns))
    built = metadata_table.partitions_in(meta.config)
    if not wanted or meta.config.version < 8 or mdr.PARTITION_STATS not in built or mdr.COLUMN_STATS not in built:
        return PartitionStatsSkipping()
    indexed, _ = column_stats_updates.indexed_columns(meta)
    keys = {cs.partition_stats_key(p, c): (p, c) for p in set(partitions) for c in wanted
            if indexed is None or c in indexed}
    if not keys:
        return PartitionStatsSkipping()
    out, notice = _held(meta, timeline, mdr.PARTITION_STATS, keys, lambda where: where,
                        "no partition skipping (partition statistics: {})")
    return PartitionStatsSkipping(out, notice)


__all__ = ["ColumnStatsSkipping", "PartitionStatsSkipping", "load", "load_partitions"]
