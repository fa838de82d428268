"""The partition_stats partition's share of a metadata deltacommit, as Apache Hudi 1.x derives it
(`HoodieMetadataWriteUtils.convertMetadataToPartitionStatRecords`; the record and its rules:
`engine.metadata.partition_stats`).

For a write (commit, deltacommit, replacecommit, compaction, clustering) of a partitioned table,
for each data partition its write stats name: the column ranges of the files it added (the
column_stats records this deltacommit carries) and the column_stats ranges the metadata table
holds for every other file of the partition's latest file slices, the slices taken with the
write's own files counted and the file groups it replaces not yet hidden, as Hudi's view sees
them while the write is inflight. The column types are those of the write's schema. A
`delete_partition` gives a deleted record per column of each partition it deletes. Cleans,
rollbacks and restores add nothing.

Kept only with the column statistics (Hudi requires them), over the same columns.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.constants import META_COLUMNS
from engine.errors import SchemaMismatchError
from engine.metadata import column_stats as cs
from engine.metadata import partition_stats as ps
from engine.metadata import records as mdr
from engine.metadata.reader import MetadataTableReader
from engine.schema.avro_types import avro_to_arrow
from engine.table.fs_view import DataFile
from engine.table.meta_client import MetaClient
from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

_LATEST = "99991231235959999"  # the completion of the write being made, after every other instant


def column_kinds(metadata: CommitMetadata, columns: Sequence[str]) -> dict[str, cs.ValueKind]:
    """Each indexed column's value type in the write's schema (meta fields are strings; a column
    the schema lacks, or of a type the statistics do not cover, is left out)."""
    try:
        schema = avro_to_arrow(metadata.schema) if metadata.schema else None
    except SchemaMismatchError:
        schema = None
    if schema is None:
        return {}
    out = {}
    for column in columns:
        if column in META_COLUMNS:
            out[column] = cs.ValueKind("STRING")
        elif column in schema.names:
            try:
                out[column] = cs.kind_of_arrow(schema.field(column).type)
            except cs.UnsupportedColumn:
                continue
    return out


def _as_written(timeline: Timeline, time: str) -> Timeline:
    """The timeline with instant `time` complete as a plain commit: its files count, the groups
    it replaces stay visible."""
    others = [i for i in timeline.instants if i.time != time or i.action is Action.SAVEPOINT]
    return Timeline.from_instants([*others, Instant(time, Action.COMMIT, State.COMPLETED, _LATEST)],
                                  timeline.has_archive)


def _partition_files(reader: MetadataTableReader, metadata: CommitMetadata, partitions: Sequence[str]) -> list[DataFile]:
    """The files of `partitions` as the files partition lists them before the write, and the
    write's own files (no storage listing)."""
    out = {f"{p}/{n}" if p else n: size for p, files in reader.file_listing(partitions).items() for n, size in files.items()}
    for stats in metadata.partition_to_write_stats.values():
        for stat in stats:
            if stat.path:
                out[stat.path] = int(stat.fileSizeInBytes or 0)
    return [DataFile(path, size) for path, size in sorted(out.items())]


def written_records(meta: MetaClient, reader: MetadataTableReader, timeline: Timeline, time: str,
                    metadata: CommitMetadata, columns: Sequence[str],
                    column_stats: Sequence[mdr.Record]) -> list[mdr.Record]:
    """The partition_stats records of write `time` (`column_stats`: the column_stats records of
    the files it added, as this deltacommit carries them)."""
    kinds = column_kinds(metadata, columns)
    if not kinds:
        return []
    if metadata.operation_type.upper() == "DELETE_PARTITION":
        return [ps.deleted(p, c) for p in sorted(metadata.partition_to_replace_file_ids or {}) for c in kinds]
    written = {p: {s.path.rsplit("/", 1)[-1] for s in stats if s.path}
               for p, stats in metadata.partition_to_write_stats.items() if stats}
    partitions = sorted(written)
    if not partitions:
        return []
    carried = {str(r.get("key")): r for r in column_stats}
    keys: dict[str, list[str]] = {p: [] for p in partitions}  # partition -> column_stats keys of its files
    wanted: list[str] = []
    view = meta.file_system_view(_as_written(timeline, time), files=_partition_files(reader, metadata, partitions))
    for sl in view.latest_slices(partitions):
        for path in sl.files:
            name = path.rsplit("/", 1)[-1]
            if name not in written[sl.partition]:
                found = [cs.column_stats_key(sl.partition, name, c) for c in kinds]
                keys[sl.partition] += found
                wanted += found
    held = reader.records(mdr.COLUMN_STATS, wanted) if wanted else {}
    out = []
    for partition in partitions:
        mine = [carried.get(cs.column_stats_key(partition, n, c)) for n in sorted(written[partition]) for c in kinds]
        others = [held.get(k) for k in keys[partition]]
        ranges = [rng for rec in [*mine, *others] if rec is not None and (rng := ps.range_of(rec)) is not None]
        out += ps.records_for(partition, kinds, ranges)
    return out


__all__ = ["column_kinds", "written_records"]
