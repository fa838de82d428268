"""Building Apache Hudi's partition statistics (`partition_stats`) in a table's metadata table, as
Hudi 1.x initializes the partition (`HoodieBackedTableMetadataWriter.initializePartitionStatsIndex`,
`HoodieTableMetadataUtil.convertFilesToPartitionStatsRecords`), for a partitioned table of
version 8 or 9 whose column statistics this engine keeps (`hoodie index build PATH --partition
partition_stats`, `Maintenance.build_metadata_partition_stats`).

Under the table lock, with no other write of the data table in flight (its files would be missed):

1. the columns: those of the column statistics (Hudi derives one index from the other), each of
   its type in the table's schema (meta fields as strings; `engine.metadata.partition_stats_updates.
   column_kinds`);
2. for every data partition, the ranges of its latest file slices' files (base and log files),
   as the column statistics hold them, aggregated into one tight-bound record per column
   (`engine.metadata.partition_stats`: min of minimums, max of maximums, counts summed);
3. `hoodie.metadata.index.partition.stats.file.group.count` (1) file groups
   `partition-stats-0000-0` ..., each record in the group its key hashes to, base HFiles at the
   next initializing instant, then `hoodie.table.metadata.partitions` names it (Hudi defines no
   index for it: it follows the column statistics' definition).

Every write keeps the statistics from then on, and filtered reads of the latest snapshot skip
partitions by them (`engine.read.data_skipping.load_partitions`).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import InvalidInputError, UnsupportedFeatureError
from engine.metadata import column_stats as cs
from engine.metadata import column_stats_updates, initialize
from engine.metadata import partition_stats as ps
from engine.metadata import record_index as ri
from engine.metadata import records as mdr
from engine.metadata.avro_fields import COLUMN_STATS_FIELD
from engine.metadata.partition_stats_updates import column_kinds
from engine.metadata.partition_writes import group_id
from engine.metadata.reader import MetadataTableReader, MetadataTableUnavailable
from engine.metadata.writer import keepable_partitions, schema_of
from engine.table import metadata_table
from engine.table.fs_view import DataFile
from engine.table.meta_client import MetaClient
from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.timeline import Timeline

FILE_GROUP_COUNT = "hoodie.metadata.index.partition.stats.file.group.count"
DEFAULT_FILE_GROUPS = 1


@dataclass(frozen=True)
class PartitionStatsBuild:
    """What a build wrote."""

    instant: str
    file_groups: int
    partitions: int
    columns: tuple[str, ...]
    records: int
    bytes: int


def build(meta: MetaClient, timeline: Timeline, file_groups: int = DEFAULT_FILE_GROUPS) -> PartitionStatsBuild:
    """Build the partition statistics of the table at `meta` (the caller holds the table lock)."""
    base = meta.storage.base_uri
    if meta.config.version < 8:
        raise UnsupportedFeatureError(
            f"table version {meta.config.version}: partition statistics are built from version 8")
    if not meta.config.partition_fields:
        raise InvalidInputError(f"{base} is not partitioned: it has no partition statistics to build")
    if file_groups < 1:
        raise InvalidInputError(f"{FILE_GROUP_COUNT} must be at least 1, got {file_groups}")
    if mdr.PARTITION_STATS in metadata_table.named_partitions(meta.config):
        raise InvalidInputError(f"{base} has partition statistics already (drop them first to build them again)")
    initialize.refuse_in_flight(meta, timeline, "the partition statistics")
    derived = (f"{base}: partition statistics are derived from the column statistics, which this table's "
               "metadata table does not have in a form this engine keeps (build them first: --partition column_stats)")
    try:
        reader = MetadataTableReader(meta, timeline)
        reader.check_in_sync()
    except MetadataTableUnavailable as exc:
        raise InvalidInputError(f"{derived}: {exc}") from None
    columns, _ = column_stats_updates.indexed_columns(meta)
    if mdr.COLUMN_STATS not in keepable_partitions(meta, reader) or not columns:
        raise InvalidInputError(derived)
    schema = meta.latest_avro_schema(timeline)
    kinds = column_kinds(CommitMetadata({}, "UPSERT", {"schema": schema} if schema else {}), columns)
    if not kinds:
        raise InvalidInputError(f"{base} has no committed schema yet: nothing to index")
    listing = reader.file_listing()
    files = [DataFile(f"{p}/{n}" if p else n, size) for p, names in listing.items() for n, size in names.items()]
    view = meta.file_system_view(timeline, files=files)
    keys: dict[str, list[str]] = {}
    for sl in view.latest_slices():
        for path in sl.files:
            name = path.rsplit("/", 1)[-1]
            keys.setdefault(sl.partition, []).extend(cs.column_stats_key(sl.partition, name, c) for c in kinds)
    held = reader.records(mdr.COLUMN_STATS, [k for found in keys.values() for k in found])
    records: list[mdr.Record] = []
    for partition in sorted(keys):
        ranges = [rng for k in keys[partition] if (rec := held.get(k)) is not None
                  and (rng := ps.range_of(rec)) is not None]
        records += ps.records_for(partition, kinds, ranges)
    groups: list[list[mdr.Record]] = [[] for _ in range(file_groups)]
    hashed = ri.file_groups_of([str(r["key"]) for r in records], file_groups).tolist() if records else []
    for rec, group in zip(records, hashed, strict=True):
        groups[group].append(rec)
    schema_json = initialize.with_field(schema_of(reader), COLUMN_STATS_FIELD)
    time, total = initialize.write_partition(
        meta, reader.meta, mdr.PARTITION_STATS,
        [(group_id(mdr.PARTITION_STATS, i), g) for i, g in enumerate(groups)], schema_json)
    initialize.define_and_name(meta, mdr.PARTITION_STATS, None)
    return PartitionStatsBuild(time, file_groups, len(keys), tuple(kinds), len(records), total)


__all__ = ["DEFAULT_FILE_GROUPS", "FILE_GROUP_COUNT", "PartitionStatsBuild", "build"]
