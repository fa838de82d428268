"""Dry runs of building and dropping one partition of Apache Hudi's metadata table
(`Maintenance.plan_metadata_build`, `plan_metadata_drop`): what the operation would do, read from
the table as it is, with no lock taken and nothing written. The console shows them before an
admin confirms; the same refusals as the operation itself (an unknown partition, one built
already, a write in flight, a table version without a metadata table).

- drop: the partitions that go (`files`: the whole metadata table; `column_stats`: with the
  `partition_stats` derived from them) and the metadata files deleted with them;
- build: the data files it reads (`record_index`: every file of the latest slices; `files` and
  `column_stats`: every committed file),
  the columns (`column_stats`, Hudi's `getColumnsToIndex`), the file groups, and whether the
  metadata table itself is created first.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.errors import InvalidInputError, UnsupportedFeatureError
from engine.metadata import initialize
from engine.metadata import records as mdr
from engine.metadata import writer as metadata_writer
from engine.metadata.create import committed_files
from engine.table import metadata_table
from engine.table.fs_view import DataFile
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline

BUILDABLE = (mdr.FILES, mdr.RECORD_INDEX, mdr.COLUMN_STATS, mdr.PARTITION_STATS)


@dataclass(frozen=True)
class MetadataPartitionPlan:
    """A planned build or drop of metadata partition `partition`."""

    action: str  # "build" or "drop"
    partition: str
    partitions: list[str]  # the partitions built or dropped (drop: with those that go with it)
    files: list[tuple[str, int]] = field(default_factory=list)  # drop: deleted; build: read
    columns: list[str] = field(default_factory=list)  # column_stats: the columns indexed
    file_groups: int | None = None
    creates_metadata_table: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _metadata_files(meta: MetaClient, folders: list[str]) -> list[tuple[str, int]]:
    out = []
    for folder in folders:
        out += [(f.path, f.size) for f in meta.storage.list_files_recursive(folder)]
    return sorted(out)


def plan_drop(meta: MetaClient, partition: str) -> MetadataPartitionPlan:
    present = metadata_writer.present_partitions(meta)
    if partition not in present:
        raise InvalidInputError(
            f"{meta.storage.base_uri} has no metadata partition {partition!r}"
            + (f" (it has: {', '.join(present)})" if present else " (it has no metadata table)"))
    if partition == mdr.FILES:
        return MetadataPartitionPlan(
            "drop", partition, present, _metadata_files(meta, [metadata_table.FOLDER]), notes=[
                "The whole metadata table goes (as a writer with hoodie.metadata.enable=false removes it): reads "
                "list storage again, and every index in it is lost; Apache Hudi's writers build it again."])
    going = [partition] + ([mdr.PARTITION_STATS] if partition == mdr.COLUMN_STATS and mdr.PARTITION_STATS in present
                           else [])
    notes = ["hoodie.properties stops naming it first (readers stop using it), then its index definition goes, "
             "then its files. Apache Hudi's writers build a dropped index again when their configuration asks."]
    if mdr.PARTITION_STATS in going[1:]:
        notes.append("The partition statistics are derived from the column statistics: they go with them.")
    if partition == mdr.RECORD_INDEX:
        notes.append("Writes with the RECORD index then tag keys from the data files until it is built again.")
    return MetadataPartitionPlan(
        "drop", partition, going, _metadata_files(meta, [f"{metadata_table.FOLDER}/{p}" for p in going]), notes=notes)


def _latest_files(meta: MetaClient, timeline: Timeline, every: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """(path, size) of the files of the latest slices among the committed files `every`."""
    view = meta.file_system_view(timeline, files=[DataFile(path, size) for path, size in every])
    return sorted((path, size) for sl in view.latest_slices()
                  for path, size in ([(sl.base_file.path, sl.base_file.size)] if sl.base_file else [])
                  + [(lf.path, lf.size) for lf in sl.log_files])


def plan_build(meta: MetaClient, partition: str) -> MetadataPartitionPlan:
    if partition not in BUILDABLE:
        raise UnsupportedFeatureError(
            f"metadata partition {partition!r}: this engine builds the files, record_index, column_stats and "
            "partition_stats partitions only")
    if meta.config.version < 8:
        raise UnsupportedFeatureError(
            f"table version {meta.config.version}: this engine keeps a metadata table from version 8")
    named = metadata_table.named_partitions(meta.config)
    if partition in named:
        raise InvalidInputError(f"{meta.storage.base_uri} has {partition} already (drop it first to build it again)")
    timeline = meta.timeline()
    initialize.refuse_in_flight(meta, timeline)
    creates = mdr.FILES not in named
    # one storage listing: every committed file (what `files` lists and `column_stats` ranges)
    every = sorted((f"{p}/{n}" if p else n, size) for p, names in committed_files(meta, timeline).items()
                   for n, size in names.items())
    if partition == mdr.FILES:
        return MetadataPartitionPlan("build", partition, [mdr.FILES], every, creates_metadata_table=True, file_groups=1,
                                     notes=["Creates the metadata table with its files partition: one initializing "
                                            "deltacommit whose base file lists every committed file; every write "
                                            "keeps it from then on and reads list files through it."])
    notes = ["Creates the metadata table (files partition) first."] if creates else []
    if partition == mdr.PARTITION_STATS:
        from engine.metadata import column_stats_updates
        from engine.metadata.build_partition_stats import DEFAULT_FILE_GROUPS as PARTITION_GROUPS

        indexed, _ = column_stats_updates.indexed_columns(meta)
        if not meta.config.partition_fields:
            raise InvalidInputError(f"{meta.storage.base_uri} is not partitioned: it has no partition statistics to build")
        if mdr.COLUMN_STATS not in named or not indexed:
            raise InvalidInputError(
                f"{meta.storage.base_uri}: partition statistics are derived from the column statistics, which this "
                "table's metadata table does not have in a form this engine keeps (build them first)")
        latest = _latest_files(meta, timeline, every)
        notes.append("Aggregates, per partition and column, the column statistics of the files of its latest slices "
                     "(no data file is read); filtered reads of the latest snapshot then skip whole partitions.")
        return MetadataPartitionPlan("build", partition, [partition], latest, columns=list(indexed),
                                     file_groups=PARTITION_GROUPS, notes=notes)
    if partition == mdr.RECORD_INDEX:
        from engine.metadata.build_record_index import MIN_FILE_GROUPS

        latest = _latest_files(meta, timeline, every)
        notes.append("Reads the live keys of every latest file slice; each key goes to the file group its hash names "
                     f"(Hudi's count: {MIN_FILE_GROUPS} up to ~110M keys). Writes with hoodie.index.type=RECORD then "
                     "tag from it, and every write keeps it.")
        return MetadataPartitionPlan("build", partition, [partition], latest, file_groups=MIN_FILE_GROUPS,
                                     creates_metadata_table=creates, notes=notes)
    from engine.metadata.build_column_stats import DEFAULT_FILE_GROUPS, columns_to_index

    schema = meta.latest_schema(timeline)
    if schema is None:
        raise InvalidInputError(f"{meta.storage.base_uri} has no committed schema yet: nothing to index")
    columns = columns_to_index(schema, meta.config.populate_meta_fields)
    notes.append("Ranges every indexed column in every committed file, older file versions too, as Hudi does (base "
                 "files from their footers, log files from their records); filtered reads then skip the file slices "
                 "they rule out.")
    return MetadataPartitionPlan("build", partition, [partition], every, columns=columns,
                                 file_groups=DEFAULT_FILE_GROUPS, creates_metadata_table=creates, notes=notes)


__all__ = ["BUILDABLE", "MetadataPartitionPlan", "plan_build", "plan_drop"]
