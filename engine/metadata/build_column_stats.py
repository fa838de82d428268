"""Building Apache Hudi's column statistics (`column_stats`) in a table's metadata table from the
data files, as Hudi 1.x initializes the partition (`HoodieBackedTableMetadataWriter`,
`initializeFromFilesystem` for `COLUMN_STATS`, index version V2), for a table of version 8 or 9
(`hoodie index build PATH --partition column_stats`, `Maintenance.build_metadata_column_stats`).

Under the table lock, with no other write of the data table in flight (its files would be missed):

1. the columns (`HoodieTableMetadataUtil.getColumnsToIndex`): the ones named
   (`hoodie.metadata.index.column.stats.column.list`), else the first
   `hoodie.metadata.index.column.stats.max.columns.to.index` (32) top-level columns of a type the
   V2 statistics cover (not structs, maps or lists), and, on tables with meta fields, always
   `_hoodie_commit_time`, `_hoodie_partition_path` and `_hoodie_record_key` first;
2. the ranges of those columns in every committed file the files partition lists (older versions
   of a file group too, as Hudi's `partitionIdToAllFilesMap`: base files from their footers, log
   files from their records: `engine.metadata.column_stats_updates`);
3. `hoodie.metadata.index.column.stats.file.group.count` (2) file groups `col-stats-0000-0` ...,
   each record in the group its key hashes to, base HFiles at the next initializing instant in
   the metadata table's record schema (Hudi's `ColumnStatsMetadata` field added where this
   engine's `files`-only schema lacks it), then the index definition (version V2, its columns) and
   the property (`engine.metadata.initialize`).

Every write keeps the statistics from then on, and filtered reads skip file slices by them
(`engine.read.data_skipping`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from engine.constants import COMMIT_TIME_COL, META_COLUMNS, PARTITION_PATH_COL, RECORD_KEY_COL
from engine.errors import InvalidConfigError, InvalidInputError, UnsupportedFeatureError
from engine.metadata import column_stats as cs
from engine.metadata import initialize
from engine.metadata import record_index as ri
from engine.metadata import records as mdr
from engine.metadata.avro_fields import COLUMN_STATS_FIELD
from engine.metadata.column_stats_updates import written_records
from engine.metadata.partition_writes import group_id
from engine.metadata.reader import MetadataTableReader
from engine.metadata.writer import schema_of
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline

COLUMN_LIST = "hoodie.metadata.index.column.stats.column.list"
MAX_COLUMNS = "hoodie.metadata.index.column.stats.max.columns.to.index"
FILE_GROUP_COUNT = "hoodie.metadata.index.column.stats.file.group.count"
DEFAULT_MAX_COLUMNS, DEFAULT_FILE_GROUPS = 32, 2
ALWAYS = (COMMIT_TIME_COL, PARTITION_PATH_COL, RECORD_KEY_COL)  # META_COLS_TO_ALWAYS_INDEX, as Hudi sorts them
OPERATION_COL = "_hoodie_operation"


@dataclass(frozen=True)
class ColumnStatsBuild:
    """What a build wrote."""

    instant: str
    file_groups: int
    files: int
    columns: tuple[str, ...]
    bytes: int


def _supported(t: pa.DataType) -> bool:
    try:
        cs.kind_of_arrow(t)
    except cs.UnsupportedColumn:
        return False
    return not pa.types.is_null(t)


def columns_to_index(schema: pa.Schema, meta_fields: bool, named: Sequence[str] = (),
                     max_columns: int = DEFAULT_MAX_COLUMNS) -> list[str]:
    """The columns Hudi's `getColumnsToIndex` chooses for table schema `schema` (pure)."""
    data = [f for f in schema if f.name not in META_COLUMNS and f.name != OPERATION_COL]
    if named:
        by_name = {f.name: f for f in data}
        unknown = [c for c in named if c not in by_name and c not in META_COLUMNS]
        if unknown:
            raise InvalidConfigError(f"{COLUMN_LIST}: {', '.join(unknown)} are not top-level columns of the table "
                                     f"(its columns: {', '.join(by_name)})")
        chosen = [c for c in named if c in by_name and _supported(by_name[c].type)]
    else:
        chosen = [f.name for f in data if _supported(f.type)][:max_columns]
    return [*(ALWAYS if meta_fields else ()), *chosen]


def _int(options: Mapping[str, str], key: str, default: int) -> int:
    text = options.get(key)
    try:
        value = int(text) if text not in (None, "") else default
    except ValueError:
        raise InvalidConfigError(f"{key}={text!r}: a positive integer") from None
    if value <= 0:
        raise InvalidConfigError(f"{key}={text!r}: a positive integer")
    return value


def build(meta: MetaClient, timeline: Timeline, options: Mapping[str, str] | None = None) -> ColumnStatsBuild:
    """Build the column statistics of the table at `meta` (the caller holds the table lock)."""
    opts = dict(options or {})
    if meta.config.version < 8:
        raise UnsupportedFeatureError(
            f"table version {meta.config.version}: column statistics are built from version 8")
    if mdr.COLUMN_STATS in metadata_table.named_partitions(meta.config):
        raise InvalidInputError(
            f"{meta.storage.base_uri} has column statistics already (drop them first to build them again)")
    initialize.refuse_in_flight(meta, timeline, "the column statistics")
    named = [c.strip() for c in (opts.get(COLUMN_LIST) or "").split(",") if c.strip()]
    groups_count = _int(opts, FILE_GROUP_COUNT, DEFAULT_FILE_GROUPS)
    schema = meta.latest_schema(timeline)
    if schema is None:
        raise InvalidInputError(f"{meta.storage.base_uri} has no committed schema yet: nothing to index")
    columns = columns_to_index(schema, meta.config.populate_meta_fields, named,
                               _int(opts, MAX_COLUMNS, DEFAULT_MAX_COLUMNS))
    reader = MetadataTableReader(meta, timeline)
    reader.check_in_sync()
    schema_json = initialize.with_field(schema_of(reader), COLUMN_STATS_FIELD)

    # every committed file, as Hudi initializes the partition (`partitionIdToAllFilesMap`): the
    # statistics of an older version of a file group stay until a clean tombstones them
    files = {partition: sorted(names) for partition, names in reader.file_listing().items() if names}
    records = written_records(meta, columns, files)
    groups: list[list[mdr.Record]] = [[] for _ in range(groups_count)]
    keys = [str(r["key"]) for r in records]
    for rec, group in zip(records, ri.file_groups_of(keys, groups_count).tolist(), strict=True):
        groups[group].append(rec)
    time, total = initialize.write_partition(
        meta, reader.meta, mdr.COLUMN_STATS, [(group_id(mdr.COLUMN_STATS, i), g) for i, g in enumerate(groups)],
        schema_json)
    initialize.define_and_name(meta, mdr.COLUMN_STATS, {
        "indexName": mdr.COLUMN_STATS, "indexType": mdr.COLUMN_STATS, "indexFunction": mdr.COLUMN_STATS,
        "sourceFields": columns, "indexOptions": {}, "version": "V2"})
    return ColumnStatsBuild(time, groups_count, sum(len(v) for v in files.values()), tuple(columns), total)


__all__ = ["ColumnStatsBuild", "build", "columns_to_index"]
