"""Records of Apache Hudi's metadata table (`HoodieMetadataRecord`), as its payload
(`HoodieMetadataPayload`) merges them. Pure: dicts in, dicts out.

A record is keyed (`key`) and typed (`type`):

    1  the partition list: key `__all_partitions__`, `filesystemMetadata` maps each partition
       path ("." for a non-partitioned table) to {size 0, isDeleted}
    2  a partition's files: key the partition path (or "."), `filesystemMetadata` maps each file
       name (base and log files) to {size, isDeleted}
    3  column stats, 4 bloom filters, 5 record index, 6 partition stats, 7 secondary index

Files records merge as `HoodieMetadataPayload.combineFileSystemMetadata` does, newer over older:
a file in both keeps the larger size (sizes only grow: a log file appended to); a tombstone
(`isDeleted`) drops the file and itself when the older record lists the file, and is kept when it
does not (the base file may list it: merges run log records first, then base over them). A
DELETE block's key resets the record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.metadata import column_stats

FILES = "files"
COLUMN_STATS = "column_stats"
PARTITION_STATS = "partition_stats"
RECORD_INDEX = "record_index"
BLOOM_FILTERS = "bloom_filters"
SECONDARY_INDEX_PREFIX = "secondary_index_"
EXPRESSION_INDEX_PREFIX = "expr_index_"

ALL_PARTITIONS_KEY = "__all_partitions__"
NON_PARTITIONED_KEY = "."

TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2
TYPE_COLUMN_STATS = column_stats.RECORD_TYPE
TYPE_BLOOM_FILTER = 4
TYPE_RECORD_INDEX = 5
TYPE_PARTITION_STATS = 6
TYPE_SECONDARY_INDEX = 7

Record = dict[str, Any]


def partition_key(partition: str) -> str:
    """The files-partition key of a data partition path ("" for a non-partitioned table)."""
    return partition or NON_PARTITIONED_KEY


def data_partition(key: str) -> str:
    """The data partition path of a files-partition key."""
    return "" if key == NON_PARTITIONED_KEY else key


def _file_infos(record: Record | None) -> Mapping[str, Any]:
    infos = (record or {}).get("filesystemMetadata")
    return infos if isinstance(infos, Mapping) else {}


def combine_file_lists(older: Record | None, newer: Record) -> Record:
    """`newer` merged over `older` (types 1 and 2), as HoodieMetadataPayload combines them."""
    combined: dict[str, dict[str, Any]] = {name: dict(info) for name, info in _file_infos(older).items()}
    for name, info in _file_infos(newer).items():
        old = combined.get(name)
        if old is None:
            combined[name] = dict(info)
        elif info.get("isDeleted"):
            if old.get("isDeleted"):
                combined[name] = dict(info)  # deleted twice: Hudi keeps the newer tombstone (and warns)
            else:
                del combined[name]
        else:
            combined[name] = {**info, "size": max(int(info.get("size") or 0), int(old.get("size") or 0)),
                              "isDeleted": False}
    return {**newer, "filesystemMetadata": combined}


def merge(older: Record | None, newer: Record) -> Record:
    """The record after `newer` (a later write of the same key): files and partition lists combine;
    column and partition statistics merge as Hudi merges them (`column_stats.merge`); every other
    type is replaced by its newer version."""
    if older is not None and newer.get("type") in (TYPE_PARTITION_LIST, TYPE_FILE_LIST):
        return combine_file_lists(older, newer)
    if older is not None and newer.get("type") in (TYPE_COLUMN_STATS, TYPE_PARTITION_STATS):
        return column_stats.merge(older, newer)
    return newer


def merge_all(versions: Iterable[Record | None]) -> Record | None:
    """The record after every version in order (None: a delete, which resets it)."""
    current: Record | None = None
    for version in versions:
        current = None if version is None else merge(current, version)
    if (current is not None and current.get("type") in (TYPE_COLUMN_STATS, TYPE_PARTITION_STATS)
            and column_stats.is_deleted(current)):
        return None  # a deleted file's statistics: gone (HoodieMetadataPayload reads them as absent)
    if current is not None and current.get("type") == TYPE_SECONDARY_INDEX:
        info = current.get("SecondaryIndexMetadata")
        if isinstance(info, Mapping) and info.get("isDeleted"):
            return None  # a deleted secondary key (Hudi writes them as deletes; read one as absent)
    return current


def live_files(record: Record | None) -> dict[str, int]:
    """File (or partition) name -> size of the entries not deleted."""
    return {
        name: int(info.get("size") or 0)
        for name, info in _file_infos(record).items()
        if not info.get("isDeleted")
    }


__all__ = [
    "ALL_PARTITIONS_KEY", "COLUMN_STATS", "FILES", "NON_PARTITIONED_KEY", "PARTITION_STATS", "RECORD_INDEX",
    "combine_file_lists", "data_partition", "live_files", "merge", "merge_all", "partition_key",
]
