"""Building Apache Hudi's record index in a table's metadata table from the data files, as Hudi
1.x initializes the partition (`HoodieBackedTableMetadataWriter.initializeFromFilesystem` for
`RECORD_INDEX`), for a table of version 8 or 9 that has a metadata table without one
(`hoodie index build PATH --partition record_index`, `Maintenance.build_metadata_partition`).

Under the table lock, with no other write of the data table in flight (its keys would be missed):

1. the live records of every latest file slice, read from their key columns: key -> (partition,
   file id, the slice's base instant), as Hudi's bootstrap records them (a key stored twice, at the
   later slice);
2. N file groups `record-index-0000-0` ..., N as Hudi's `estimateFileGroupCount` chooses it
   (defaults: at least 10, at most 10,000, 2x growth over 48-byte entries in 1 GiB groups: 10 up
   to ~110M keys);
3. an initializing deltacommit at the next `0000000000000000N` instant of the metadata table
   (Hudi's are 00000000000000000 for `files`, then one more per partition it initializes): the
   partition metadata and one base HFile per group, `record-index-000i-0_0-0-0_<instant>.hfile`,
   keys hashed as `engine.metadata.record_index` says, in the metadata table's record schema
   (the `recordIndexMetadata` field added where this engine's `files`-only schema lacks it);
4. only then `record_index` joins `hoodie.table.metadata.partitions` and the index definitions
   (`hoodie.table.index.defs.path`, created where missing) define it, global
   (`isPartitioned=false`). A crash before leaves files no reader uses; building again replaces them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.data.keys import ScanFile, live_keys
from engine.errors import InvalidInputError, UnsupportedFeatureError
from engine.metadata import initialize
from engine.metadata import record_index as ri
from engine.metadata import records as mdr
from engine.metadata.reader import MetadataTableReader
from engine.metadata.writer import schema_of
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from engine.table.slice_merge import merge_context
from engine.timeline.timeline import Timeline

MIN_FILE_GROUPS, MAX_FILE_GROUPS = 10, 10_000  # hoodie.metadata.record.index.{min,max}.filegroup.count
GROWTH_FACTOR = 2.0  # hoodie.metadata.record.index.growth.factor
MAX_FILE_GROUP_BYTES = 1 << 30  # hoodie.metadata.record.index.max.filegroup.size
AVERAGE_RECORD_BYTES = 48  # HoodieTableMetadataUtil's RECORD_INDEX_AVERAGE_RECORD_SIZE

# HoodieMetadataRecord.recordIndexMetadata, as Apache Hudi's HoodieMetadata.avsc declares it
_STRING = {"type": "string", "avro.java.string": "String"}
RECORD_INDEX_FIELD = {
    "name": "recordIndexMetadata",
    "type": ["null", {"type": "record", "name": "HoodieRecordIndexInfo", "fields": [
        {"name": "partitionName", "type": ["null", _STRING], "default": None},
        {"name": "fileIdHighBits", "type": ["null", "long"], "default": None},
        {"name": "fileIdLowBits", "type": ["null", "long"], "default": None},
        {"name": "fileIndex", "type": ["null", "int"], "default": None},
        {"name": "fileId", "type": ["null", _STRING], "default": None},
        {"name": "instantTime", "type": ["null", "long"], "default": None},
        {"name": "fileIdEncoding", "type": "int", "default": 0},
        {"name": "position", "type": ["null", "long"], "default": None},
    ]}],
    "doc": "Metadata Index that contains information about record keys and their location in the dataset",
    "default": None,
}
DEFINITION = {"indexName": mdr.RECORD_INDEX, "indexType": mdr.RECORD_INDEX, "indexFunction": "", "sourceFields": [],
              "indexOptions": {"isPartitioned": "false"}, "version": "V1"}


def file_group_count(records: int) -> int:
    """Hudi's `estimateFileGroupCount` for the record index with its default settings."""
    expected = math.ceil(records * GROWTH_FACTOR)
    estimated = expected // (MAX_FILE_GROUP_BYTES // AVERAGE_RECORD_BYTES)
    if estimated >= MAX_FILE_GROUPS:
        return MAX_FILE_GROUPS
    if estimated <= MIN_FILE_GROUPS:
        return MIN_FILE_GROUPS
    return max(1, int(estimated))


def with_record_index_field(schema_json: str) -> str:
    """The record schema with `recordIndexMetadata` (unchanged when it has it)."""
    return initialize.with_field(schema_json, RECORD_INDEX_FIELD)


def live_locations(meta: MetaClient, timeline: Timeline) -> dict[str, tuple[str, str, str]]:
    """Key -> (partition, file id, base instant) of every live record (a key stored twice: the
    slice begun later)."""
    view = meta.file_system_view(timeline)
    merge = merge_context(meta, timeline)
    out: dict[str, tuple[str, str, str]] = {}
    for sl in sorted(view.latest_slices(), key=lambda s: (s.base_instant, s.partition, s.file_id)):
        for key in live_keys(meta.storage, ScanFile.of_slice(sl), merge=merge).to_pylist():
            out[key] = (sl.partition, sl.file_id, sl.base_instant)
    return out


@dataclass(frozen=True)
class RecordIndexBuild:
    """What a build wrote."""

    instant: str
    file_groups: int
    keys: int
    bytes: int


def build(meta: MetaClient, timeline: Timeline) -> RecordIndexBuild:
    """Build the record index of the table at `meta` (the caller holds the table lock)."""
    if meta.config.version < 8:
        raise UnsupportedFeatureError(f"table version {meta.config.version}: the record index is built from version 8")
    if not meta.config.populate_meta_fields:
        raise UnsupportedFeatureError("the record index is built for tables with meta fields (_hoodie_record_key)")
    if mdr.RECORD_INDEX in metadata_table.named_partitions(meta.config):
        raise InvalidInputError(f"{meta.storage.base_uri} has a record index already (drop it first to build it again)")
    initialize.refuse_in_flight(meta, timeline, "the record index", missed="keys")
    reader = MetadataTableReader(meta, timeline)
    reader.check_in_sync()
    schema_json = with_record_index_field(schema_of(reader))
    locations = live_locations(meta, timeline)
    count = file_group_count(len(locations))
    groups: list[list[mdr.Record]] = [[] for _ in range(count)]
    keys = list(locations)
    for key, group in zip(keys, ri.file_groups_of(keys, count).tolist(), strict=True):
        partition, file_id, instant = locations[key]
        groups[group].append(ri.location_record(key, partition, file_id, instant))

    time, total = initialize.write_partition(
        meta, reader.meta, mdr.RECORD_INDEX, [(ri.file_group_id(i), records) for i, records in enumerate(groups)],
        schema_json)
    initialize.define_and_name(meta, mdr.RECORD_INDEX, DEFINITION)
    return RecordIndexBuild(time, count, len(keys), total)


__all__ = ["RECORD_INDEX_FIELD", "RecordIndexBuild", "build", "file_group_count", "live_locations",
           "with_record_index_field"]
