"""Building a secondary index (`secondary_index_<name>`) in a table's metadata table from the data
files, as Apache Hudi 1.x initializes one for `CREATE INDEX <name> ON t (column)`
(`HoodieBackedTableMetadataWriter.initializeSecondaryIndexPartition`,
`SecondaryIndexRecordGenerationUtils.readSecondaryKeysFromFileSlices`; index version V2)
(`hoodie index build PATH --partition secondary_index_<name> --columns C`,
`Maintenance.build_metadata_secondary_index`).

Under the table lock, with no other write in flight and the record index built (Hudi builds a
secondary index only beside it: a lookup goes value -> record keys -> file groups):

1. the (record key, value) of every live record of every latest file slice (merged with its log
   files), rendered as `engine.metadata.secondary_index` renders them;
2. `hoodie.metadata.secondary.index.file.group.count` (10) file groups
   `secondary-index-<name>-0000-0`..., each key `<value>$<record key>` in the group its value
   hashes to, base HFiles at the next initializing instant (the `SecondaryIndexMetadata` field
   added to the record schema where this engine's metadata table lacks it);
3. then the index definition (type `secondary_index`, function `identity`, the column, V2) and
   the property. Every write keeps it from then on (`engine.metadata.secondary_index_updates`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.data.keys import ScanFile
from engine.errors import InvalidInputError, UnsupportedFeatureError
from engine.metadata import initialize
from engine.metadata import records as mdr
from engine.metadata import secondary_index as si
from engine.metadata.avro_fields import SECONDARY_INDEX_FIELD
from engine.metadata.reader import MetadataTableReader
from engine.metadata.secondary_index_updates import slice_pairs, unkept_reason
from engine.metadata.writer import schema_of
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from engine.table.slice_merge import merge_context
from engine.timeline.timeline import Timeline

DEFAULT_FILE_GROUPS = 10  # hoodie.metadata.secondary.index.file.group.count, as in Hudi's fixtures
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class SecondaryIndexBuild:
    """What a build wrote."""

    instant: str
    partition: str
    column: str
    file_groups: int
    keys: int
    bytes: int


def definition(partition: str, column: str) -> dict[str, object]:
    return {"indexName": partition, "indexType": "secondary_index", "indexFunction": "identity",
            "sourceFields": [column], "indexOptions": {}, "version": "V2"}


def build(meta: MetaClient, timeline: Timeline, partition: str, column: str,
          file_groups: int = DEFAULT_FILE_GROUPS) -> SecondaryIndexBuild:
    """Build secondary index `partition` over `column` (the caller holds the table lock)."""
    if meta.config.version < 8:
        raise UnsupportedFeatureError(f"table version {meta.config.version}: secondary indexes are built from version 8")
    name = partition.removeprefix(si.PREFIX)
    if not partition.startswith(si.PREFIX) or not _NAME.match(name):
        raise InvalidInputError(f"{partition!r}: a secondary index partition is secondary_index_<name>, the name in "
                                "lower-case letters, digits and _")
    named = metadata_table.named_partitions(meta.config)
    if partition in named:
        raise InvalidInputError(f"{meta.storage.base_uri} has {partition} already (drop it first to build it again)")
    if mdr.RECORD_INDEX not in metadata_table.partitions_in(meta.config):
        raise InvalidInputError(f"{meta.storage.base_uri} has no record index: a secondary index is built beside it "
                                "(hoodie index build PATH --partition record_index first)")
    initialize.refuse_in_flight(meta, timeline, "the secondary index")
    schema = meta.latest_schema(timeline)
    reason = unkept_reason(meta, definition(partition, column), schema)
    if reason:
        raise InvalidInputError(f"a secondary index on {column!r} cannot be kept by this engine: {reason}")
    assert schema is not None
    reader = MetadataTableReader(meta, timeline)
    reader.check_in_sync()
    schema_json = initialize.with_field(schema_of(reader), SECONDARY_INDEX_FIELD)
    merge = merge_context(meta, timeline)
    keys: set[str] = set()
    for sl in meta.file_system_view(timeline).latest_slices():
        pairs = slice_pairs(meta.storage, ScanFile.of_slice(sl), merge, schema, [column])[column]
        keys |= {si.key(value, record_key) for record_key, value in pairs.items()}
    ordered = sorted(keys)
    groups: list[list[mdr.Record]] = [[] for _ in range(file_groups)]
    for key, group in zip(ordered, si.file_groups_of(ordered, file_groups, "V2").tolist(), strict=True):
        groups[group].append(si.record(key))
    prefix = si.group_prefix(partition)
    time, total = initialize.write_partition(
        meta, reader.meta, partition, [(f"{prefix}{i:04d}-0", g) for i, g in enumerate(groups)], schema_json)
    initialize.define_and_name(meta, partition, definition(partition, column))
    return SecondaryIndexBuild(time, partition, column, file_groups, len(ordered), total)


__all__ = ["DEFAULT_FILE_GROUPS", "SecondaryIndexBuild", "build", "definition"]
