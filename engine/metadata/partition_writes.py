"""What a metadata deltacommit writes to the file groups of the index partitions: each record to
the file group its key hashes to (`HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex`, Java's
`String.hashCode` modulo the partition's number of groups, as for every partition of Hudi's
metadata table), its records in an HFILE block and its deleted keys in a DELETE block."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from engine.data.file_names import name_of, parse_log_file_name
from engine.errors import CorruptTableError
from engine.metadata import record_index as ri
from engine.metadata import records as mdr
from engine.metadata import secondary_index as si
from engine.metadata.reader import INIT_PREFIX, MetadataTableReader
from engine.metadata.record_index_updates import IndexChanges
from engine.metadata.secondary_index_updates import SecondaryChanges, SecondaryIndex

PREFIX = {mdr.RECORD_INDEX: ri.FILE_GROUP_PREFIX, mdr.COLUMN_STATS: "col-stats-", mdr.PARTITION_STATS: "partition-stats-"}


def group_id(partition: str, index: int) -> str:
    prefix = PREFIX.get(partition) or (si.group_prefix(partition) if partition.startswith(si.PREFIX) else None)
    if prefix is None:
        raise KeyError(partition)
    return f"{prefix}{index:04d}-0"


@dataclass
class GroupWrite:
    """What a deltacommit writes to one file group of the metadata table: records (an HFILE
    block) and deleted keys (a DELETE block)."""

    partition: str
    file_id: str
    records: list[mdr.Record] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    # record-index locations (key, partition, file id) in key order, written at the deltacommit's
    # instant: encoded straight to cells (`hfiles.location_cells`), no record per key
    located: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def written(self) -> int:
        return len(self.records) + len(self.located)


def numbered_groups(reader: MetadataTableReader, partition: str) -> list[str]:
    """The file ids of `partition`'s file groups, in order: those with a base file of a completed
    instant or a log file of a valid one (a leftover of a failed write names none)."""
    out = []
    for sl in reader.slices(partition):
        logs = (parse_log_file_name(name_of(p)) for p in sl.logs)
        if sl.base is not None or any(
                log is not None and (reader.counts(log.base_instant) or log.base_instant.startswith(INIT_PREFIX))
                for log in logs):
            out.append(sl.file_id)
    return sorted(out)


def well_numbered(partition: str, groups: list[str]) -> bool:
    return bool(groups) and groups == [group_id(partition, i) for i in range(len(groups))]


def _groups(reader: MetadataTableReader, partition: str) -> list[str]:
    groups = numbered_groups(reader, partition)
    if not well_numbered(partition, groups):
        raise CorruptTableError(
            f"{reader.meta.storage.uri(partition)}: {partition} file groups {', '.join(groups)} are not numbered "
            f"{group_id(partition, 0)} onwards"
        )
    return groups


def _spread(reader: MetadataTableReader, partition: str, records: list[mdr.Record], deleted: list[str],
            groups_of: Callable[[list[str], int], np.ndarray],
            located: Sequence[tuple[str, str, str]] = ()) -> list[GroupWrite]:
    """`records`, record-index `located` entries (key first) and `deleted` keys of `partition` to
    the file groups `groups_of` hashes them to, each group's share in the order given (the groups a
    write leaves untouched are left out)."""
    groups = _groups(reader, partition)
    writes = {i: GroupWrite(partition, groups[i]) for i in range(len(groups))}

    def hashed(keys: list[str]) -> list[int]:
        return groups_of(keys, len(groups)).tolist()

    for rec, group in zip(records, hashed([str(r["key"]) for r in records]), strict=True):
        writes[group].records.append(rec)
    for entry, group in zip(located, hashed([e[0] for e in located]), strict=True):
        writes[group].located.append(entry)
    for key, group in zip(deleted, hashed(deleted), strict=True):
        writes[group].deleted.append(key)
    return [w for w in writes.values() if w.written or w.deleted]


def record_index_writes(reader: MetadataTableReader, time: str, changes: IndexChanges) -> list[GroupWrite]:
    """The record index's share of the deltacommit at `time`."""
    located = [(key, *changes.located[key]) for key in sorted(changes.located)]  # key order within each group
    return _spread(reader, mdr.RECORD_INDEX, [], sorted(changes.deleted), ri.file_groups_of, located)


def keyed_writes(reader: MetadataTableReader, partition: str, records: Iterable[mdr.Record]) -> list[GroupWrite]:
    """Records of `partition` (column or partition statistics) to the file groups their keys hash to."""
    return _spread(reader, partition, list(records), [], ri.file_groups_of)


def secondary_index_writes(reader: MetadataTableReader, index: SecondaryIndex,
                           changes: SecondaryChanges) -> list[GroupWrite]:
    """A secondary index's share of a deltacommit: inserted keys as records, deleted ones in a
    DELETE block, each in the group its value hashes to (`secondary_index.file_groups_of`)."""
    def groups_of(keys: list[str], count: int) -> np.ndarray:
        return si.file_groups_of(keys, count, index.version)

    records = [si.record(key) for key in sorted(changes.inserted)]
    return _spread(reader, index.partition, records, sorted(changes.deleted), groups_of)


__all__ = ["GroupWrite", "PREFIX", "group_id", "keyed_writes", "numbered_groups", "record_index_writes",
           "secondary_index_writes", "well_numbered"]
