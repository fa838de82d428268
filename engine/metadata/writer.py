"""Keeping Apache Hudi's metadata table in step with this engine's writes and table services
(tables of version 8 and 9), as Hudi's `HoodieBackedTableMetadataWriter` does.

At the start of a write (repair, under the table lock) `decide` looks at the metadata table:
kept when its `files` partition is in sync with the data timeline (`MetadataTableReader`);
removed whole (as before) for older versions, a metadata table behind the data table or one
that cannot be read. A kept one loses, alone, the partitions this engine does not keep yet
(`bloom_filters`, expression indexes, secondary indexes it cannot render, a partitioned record
index, column statistics of index version V1 and the partition statistics derived from them;
`keepable_partitions`): hoodie.properties stops naming them and the index definitions stop
defining them before their folders go, as when Hudi drops an index; a notice names them. Hudi's writers build
a dropped index again from the files.

Before every instant of the data table completes (`engine.table.lifecycle.before_complete`),
its changes to the file listing go to the metadata table as a deltacommit at the same instant:

- a commit, deltacommit or replacecommit (writes, compaction, clustering): the files its write
  stats name, with their sizes, per partition, and the partitions in the partition list;
- a clean: tombstones for the files it deleted (a deleted partition leaves the partition list);
- a rollback: tombstones for the files it deleted, the new sizes of log files it appended to;
- where the record index is kept, a commit, deltacommit or replacecommit (not a compaction)
  also writes where the keys it wrote went (`engine.metadata.record_index_updates`): the
  records in an HFILE block and the deleted keys in a DELETE block of the log file of each
  record-index file group it touches (`record_index_writes`);
- where the column statistics are kept, the ranges of the files an instant adds and tombstones
  for the files it deletes (`column_stats_records`, `engine.metadata.column_stats_updates`), to
  the `col-stats-` file groups their keys hash to (`engine.metadata.partition_writes`);
- where the partition statistics are kept too (a partitioned table), a write's partitions'
  ranges over their latest slices (`engine.metadata.partition_stats_updates`);
- where secondary indexes are kept, the (value, key) pairs a write adds and removes
  (`engine.metadata.secondary_index_updates`; all index partitions: `engine.metadata.index_writes`);
- a restore: each instant it rolls back loses its deltacommit as a rollback's does (`abandoned`),
  and the restore's deltacommit tombstones the files they deleted (`engine.services.restore`);
- savepoints and indexing instants change no file: no deltacommit (as in Hudi); an action this
  writer does not know removes the metadata table, so readers list storage.

The deltacommit is `T.deltacommit.requested`, `T.deltacommit.inflight`, one log file
`files/.files-0000-0_T.log.1_0-0-0` holding an HFILE block (the records, keyed and sorted, Avro
in the metadata table's own `HoodieMetadataRecord` schema), and the completed deltacommit naming
it: written before the data instant completes, so a reader never sees the data instant without
it; one an earlier attempt of the same instant left is replaced. A write abandoned before
completing, a rollback of an instant and a reverted compaction (`engine.table.lifecycle.abandoned`)
take its deltacommit away again, completed file first; a crash between the two leaves a pending data
instant whose rollback tombstones its files (Hudi's valid-instant rules read both).
Every `hoodie.metadata.compact.max.delta.commits` (10) deltacommits the file groups with log files are compacted
into new base HFiles first (`engine.metadata.compaction`, which then deletes the slices no reader needs), unless
another data instant is pending (its archival runs with the data table's:
`engine.services.metadata_archive`). Not done yet (issue 35): bloom filters, expression
indexes, version 6 tables.
A rollback of a write whose deltacommit a compaction holds drops the record index and the
partition statistics (`abandoned`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from engine import failpoints
from engine.constants import METAFOLDER
from engine.data.file_names import name_of
from engine.data.hfile import HFileReader
from engine.data.log_block import BlockType, HeaderKey, encode_delete_block, encode_log_block
from engine.data.log_file import read_log_blocks, write_log_file
from engine.errors import CorruptTableError, StorageError, UnsupportedFeatureError
from engine.metadata import (
    column_stats_updates,
    compaction,
    hfiles,
    index_defs,
    index_writes,
)
from engine.metadata import records as mdr
from engine.metadata import secondary_index as si
from engine.metadata import secondary_index_updates as siu
from engine.metadata.file_changes import NO_FILE_CHANGE, file_changes, files_records
from engine.metadata.partition_writes import (
    GroupWrite,
    numbered_groups,
    record_index_writes,
    well_numbered,
)
from engine.metadata.reader import MetadataTableReader, MetadataTableUnavailable
from engine.storage import storage_for
from engine.table import lifecycle, metadata_table
from engine.table.meta_client import MetaClient
from engine.table.metadata_table import FOLDER
from engine.table.metadata_table import PARTITIONS as PARTITIONS_PROPERTY
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

_log = logging.getLogger(__name__)

KEPT = (mdr.FILES, mdr.RECORD_INDEX, mdr.COLUMN_STATS, mdr.PARTITION_STATS)  # and secondary indexes (`siu.indexes`)
LOG_TOKEN = "0-0-0"
OPERATION = "UPSERT_PREPPED"  # what Hudi records for a metadata deltacommit


def is_metadata_table(meta: MetaClient) -> bool:
    return meta.storage.base_uri.rstrip("/").endswith(f"/{FOLDER}")


def _open(meta: MetaClient) -> MetaClient | None:
    if is_metadata_table(meta) or not meta.storage.exists(f"{FOLDER}/{METAFOLDER}/hoodie.properties"):
        return None
    return MetaClient.open(storage_for(meta.storage.uri(FOLDER), meta.storage.options))


def open_metadata_table(meta: MetaClient) -> MetaClient | None:
    """The metadata table of the data table `meta` (None: it has none)."""
    return _open(meta)


def has_metadata_table(meta: MetaClient) -> bool:
    return _open(meta) is not None


@dataclass
class Decision:
    """What a write does with the table's metadata table: keep it (dropping `dropped`), or remove it
    (`reason` says why)."""

    keep: bool
    dropped: list[str] = field(default_factory=list)
    reason: str = ""
    orphans: list[str] = field(default_factory=list)

    kept: list[str] = field(default_factory=lambda: [mdr.FILES])

    def notice(self, base_uri: str) -> str | None:
        if self.keep and self.dropped and self.reason:
            return (f"{base_uri}: dropped the metadata table partitions {', '.join(self.dropped)} ({self.reason}); "
                    "Apache Hudi's writers build them again")
        if self.keep and self.dropped:
            return (
                f"{base_uri}: dropped the metadata table partitions {', '.join(self.dropped)} (this engine does not "
                f"keep them yet; Apache Hudi's writers build them again); kept {', '.join(self.kept)}, which this "
                "engine keeps up to date"
            )
        return None


def decide(meta: MetaClient, timeline: Timeline, enable: bool | None = None) -> Decision:
    """Keep or remove the metadata table of the table at `meta` (which has one); `enable` is the
    writer's hoodie.metadata.enable (false: removed, as Apache Hudi's writers do)."""
    if enable is False:
        return Decision(False, reason="hoodie.metadata.enable=false")
    meta.reload_config()  # the partitions another process built or dropped since `meta` was opened
    if meta.config.version < 8:
        return Decision(False, reason=f"table version {meta.config.version}: kept from version 8")
    try:
        mdt = _open(meta)
        if mdt is None:
            return Decision(False, reason="its properties are missing")
        orphans = orphan_deltacommits(mdt, meta, timeline)
        reader = MetadataTableReader(meta, timeline)
        if orphans:  # read without them: they are removed before anything is written
            reader.valid = reader.valid - set(orphans)
        reader.check_in_sync()
        schema_of(reader)
        kept = keepable_partitions(meta, reader)
    except (MetadataTableUnavailable, CorruptTableError, UnsupportedFeatureError, StorageError) as exc:
        return Decision(False, reason=str(exc))
    return Decision(True, sorted(set(present_partitions(meta)) - set(kept)), orphans=orphans, kept=kept)


def record_index_groups(reader: MetadataTableReader) -> list[str]:
    """The file ids of the record index's file groups, in order."""
    return numbered_groups(reader, mdr.RECORD_INDEX)


def keepable_partitions(meta: MetaClient, reader: MetadataTableReader) -> list[str]:
    """The partitions of the metadata table this engine keeps: `files`; the record index when it
    is built (not being built by Hudi's indexer), global (Hudi 1.1's partitioned one is not kept
    yet), its file groups are `record-index-0000-0` onwards, and the table stores its record keys
    (meta fields); the column statistics when built, of index version V2 over named top-level
    columns (`column_stats_updates.indexed_columns`), in groups `col-stats-0000-0` onwards."""
    kept = [mdr.FILES]
    built = metadata_table.partitions_in(meta.config)
    if mdr.RECORD_INDEX in built and meta.config.populate_meta_fields:
        options = (index_defs.definitions(meta).get(mdr.RECORD_INDEX) or {}).get("indexOptions") or {}
        if (str(options.get("isPartitioned", "false")).lower() != "true"
                and well_numbered(mdr.RECORD_INDEX, numbered_groups(reader, mdr.RECORD_INDEX))):
            kept.append(mdr.RECORD_INDEX)
    if (mdr.COLUMN_STATS in built and column_stats_updates.indexed_columns(meta)[0] is not None
            and well_numbered(mdr.COLUMN_STATS, numbered_groups(reader, mdr.COLUMN_STATS))):
        kept.append(mdr.COLUMN_STATS)
        if (mdr.PARTITION_STATS in built and meta.config.partition_fields
                and well_numbered(mdr.PARTITION_STATS, numbered_groups(reader, mdr.PARTITION_STATS))):
            kept.append(mdr.PARTITION_STATS)  # over the column statistics' columns; never without them
    for secondary in siu.indexes(meta)[0]:
        if well_numbered(secondary.partition, numbered_groups(reader, secondary.partition)):
            kept.append(secondary.partition)
    return kept


def present_partitions(meta: MetaClient) -> list[str]:
    """The metadata partitions the properties name (built or being built) or storage holds."""
    mdt = _open(meta)
    present = set(metadata_table.named_partitions(meta.config))
    if mdt is not None:
        present |= set(_partition_folders(mdt))
    return sorted(present)


def orphan_deltacommits(mdt: MetaClient, meta: MetaClient, timeline: Timeline) -> list[str]:
    """Metadata deltacommits of data instants that are gone without a rollback naming them (a
    write abandoned while its deltacommit was being removed)."""
    first = timeline.first_time
    if first is None:
        return []
    known = {i.time for i in timeline.instants}
    undone = lifecycle.rolled_back_instants(meta, timeline)
    return sorted({
        i.time for i in mdt.timeline().filter(actions=[Action.DELTA_COMMIT]).instants
        if i.time > first and i.time not in known and i.time not in undone
    })


def apply(meta: MetaClient, decision: Decision) -> None:
    """Carry out a keep decision (the caller holds the table lock): orphaned deltacommits go, then
    the dropped partitions: properties first, index definitions, folders last."""
    mdt = _open(meta)
    if mdt is None:
        return
    for time in decision.orphans:
        remove_deltacommit(mdt, time)
    if not decision.dropped:
        return
    kept = [p for p in metadata_table.partitions_in(meta.config) if p not in decision.dropped]
    meta.remove_properties((metadata_table.PARTITIONS_INFLIGHT,), "Metadata table partitions dropped",
                           {PARTITIONS_PROPERTY: ",".join(kept)})
    index_defs.drop(meta, decision.dropped)
    for partition in decision.dropped:
        mdt.storage.delete_dir(partition)
    _log.warning("%s", decision.notice(meta.storage.base_uri))


# ---- the deltacommit of a data instant -----------------------------------------------------------------

def schema_of(reader: MetadataTableReader, partition: str = mdr.FILES) -> str:
    """The metadata table's record schema (JSON), as partition `partition` holds it (Hudi writes one
    schema for all; this engine's `files`-only metadata tables hold the files fields only)."""
    for sl in reader.slices(partition):
        if sl.base is not None:
            info = HFileReader(reader.meta.storage.read_bytes(sl.base)).file_info
            if b"schema" in info:
                return info[b"schema"].decode("utf-8")
        for path in sl.logs:
            for block in read_log_blocks(reader.meta.storage, path):
                if block.block_type in (BlockType.HFILE_DATA, BlockType.DELETE) and HeaderKey.SCHEMA in block.header:
                    return block.header[HeaderKey.SCHEMA]
    raise MetadataTableUnavailable(f"its {partition} partition holds no record schema")


def _has_field(schema_json: str, name: str) -> bool:
    try:
        return any(f.get("name") == name for f in json.loads(schema_json).get("fields") or [])
    except (ValueError, AttributeError):
        return False


def schemas_for(reader: MetadataTableReader, partitions: Iterable[str]) -> dict[str, str]:
    """Partition -> the record schema its records are written with (a partition holding none yet,
    as a record index of empty file groups: the files partition's)."""
    files = schema_of(reader, mdr.FILES)
    out = {}
    for p in partitions:
        try:
            out[p] = files if p == mdr.FILES else schema_of(reader, p)
        except MetadataTableUnavailable:
            out[p] = files
    return out


def _files_group(mdt: MetaClient) -> str:
    for info in mdt.storage.list_dir(mdr.FILES):
        name = info.name.lstrip(".")
        if name.startswith("files-"):
            return name.split("_", 1)[0]
    return "files-0000-0"


def log_path(partition: str, file_id: str, time: str) -> str:
    return f"{partition}/.{file_id}_{time}.log.1_{LOG_TOKEN}"


def write_deltacommit(mdt: MetaClient, time: str, writes: list[GroupWrite], schemas: Mapping[str, str] | str) -> None:
    """The metadata deltacommit at `time` writing `writes` (completed when this returns), each
    partition's records in its schema (`schemas`: partition -> schema JSON, or one for all)."""
    requested = Instant(time, Action.DELTA_COMMIT, State.REQUESTED)
    lifecycle.ensure_file(mdt, requested)
    inflight_body = mdt.encode_commit_metadata(CommitMetadata({}, OPERATION))
    lifecycle.ensure_file(mdt, requested.with_state(State.INFLIGHT), inflight_body)
    stats: dict[str, list[WriteStat]] = {}
    for write in writes:
        if not (write.written or write.deleted):
            continue
        schema_json = schemas if isinstance(schemas, str) else schemas[write.partition]
        path = log_path(write.partition, write.file_id, time)
        if mdt.storage.exists(path):  # an earlier attempt of this instant that never completed
            mdt.storage.delete(path)
        blocks = []
        if write.written:
            cells = (hfiles.location_cells(write.located, time, schema_json) if write.located
                     else hfiles.cells(write.records, schema_json))
            blocks.append(encode_log_block(
                BlockType.HFILE_DATA, {HeaderKey.SCHEMA: schema_json, HeaderKey.INSTANT_TIME: time},
                hfiles.log_block_from_cells(cells, schema_json),
            ))
        if write.deleted:
            blocks.append(encode_delete_block(time, write.deleted, [write.partition] * len(write.deleted), schema_json))
        size = write_log_file(mdt.storage, path, blocks)
        count = write.written + len(write.deleted)
        stats.setdefault(write.partition, []).append(WriteStat(
            fileId=write.file_id, path=path, partitionPath=write.partition, prevCommit=time,
            numWrites=count, numUpdateWrites=write.written, numDeletes=len(write.deleted),
            totalWriteBytes=size, fileSizeInBytes=size, baseFile="", logFiles=[name_of(path)], logVersion=1, logOffset=0,
        ))
    lifecycle.complete_instant(mdt, time, Action.DELTA_COMMIT, mdt.encode_commit_metadata(CommitMetadata(stats, OPERATION)))


def _partition_folders(mdt: MetaClient) -> list[str]:
    return [i.name for i in mdt.storage.list_dir("") if i.is_dir and not i.name.startswith(".")]


def remove_deltacommit(mdt: MetaClient, time: str) -> None:
    """Take the metadata deltacommit at `time` away: completed file first, then its logs, then the rest."""
    for state in (State.COMPLETED, State.INFLIGHT, State.REQUESTED):
        instant = Instant(time, Action.DELTA_COMMIT, state)
        if state is State.COMPLETED:
            name = mdt.completed_file_name(time, Action.DELTA_COMMIT)
            if name is not None:
                mdt.storage.delete(f"{mdt.layout.folder}/{name}")
            for folder in _partition_folders(mdt):
                for info in mdt.storage.list_dir(folder):
                    if info.name.startswith(".") and f"_{time}.log." in info.name:
                        mdt.storage.delete(info.path)
            continue
        if mdt.storage.exists(mdt.instant_path(instant)):
            mdt.storage.delete(mdt.instant_path(instant))


def before_complete(meta: MetaClient, instant: Instant, body: bytes) -> None:
    """The hook: the deltacommit of `instant` on the metadata table, before `instant` completes."""
    mdt = _open(meta) if meta.config.version >= 8 else None
    if mdt is None or instant.action in NO_FILE_CHANGE:
        return
    if meta.completed_file_name(instant.time, instant.action) is not None:
        return  # the data instant is complete already (a retried completion): its deltacommit stands
    changes = file_changes(instant, body)  # the commit metadata, parsed once
    if changes is None:
        metadata_table.remove(meta, f"{instant.action.value} {instant.time} is not kept in it by this engine yet")
        return
    # an earlier attempt of this instant (a compaction run again after a crash writes other files)
    # may have left a deltacommit: the data instant is not complete, so it is replaced
    remove_deltacommit(mdt, instant.time)
    timeline = meta.timeline()
    reader = MetadataTableReader(meta, timeline)
    kept = keepable_partitions(meta, reader)
    schemas = schemas_for(reader, kept)
    if mdr.RECORD_INDEX in kept and not _has_field(schemas[mdr.RECORD_INDEX], "recordIndexMetadata"):
        kept.remove(mdr.RECORD_INDEX)  # never written in a schema that would drop its locations
    for stats in (mdr.COLUMN_STATS, mdr.PARTITION_STATS):
        if stats in kept and not _has_field(schemas[stats], "ColumnStatsMetadata"):
            kept.remove(stats)
    if mdr.COLUMN_STATS not in kept and mdr.PARTITION_STATS in kept:
        kept.remove(mdr.PARTITION_STATS)
    for secondary in [p for p in kept if p.startswith(si.PREFIX)]:
        if not _has_field(schemas[secondary], "SecondaryIndexMetadata"):
            kept.remove(secondary)
    stale = [p for p in metadata_table.partitions_in(meta.config)
             if p in (mdr.RECORD_INDEX, mdr.COLUMN_STATS, mdr.PARTITION_STATS) or p.startswith(si.PREFIX)]
    stale = [p for p in stale if p not in kept]
    if stale:
        # kept when the write began (`decide`), no longer (another writer changed it): never left stale
        apply(meta, Decision(True, stale, reason=f"it could not be kept by {instant.time}"))
    writes = [GroupWrite(mdr.FILES, _files_group(mdt), files_records(changes))]
    writes += index_writes.of_instant(meta, reader, timeline, instant, changes, kept)
    others_pending = [i.time for i in timeline.pending.instants if i.time != instant.time]
    if not others_pending and compaction.deltacommits_since_compaction(mdt) >= compaction.max_delta_commits():
        # as Hudi's compactIfNecessary: never while another data instant is pending (its records
        # would be left out of the base and then read below it)
        compaction.compact(reader, schemas, partitions=kept)
    write_deltacommit(mdt, instant.time, writes, schemas)
    failpoints.hit("metadata.written")


def abandoned(meta: MetaClient, time: str) -> None:
    """The hook: an unfinished write at `time` is removed (or a completed one rolled back), and so is
    its metadata deltacommit. When a compaction of the metadata table holds that deltacommit
    already, the files partition is put right by the rollback's tombstones, but nothing says where
    the keys the instant moved were before, nor the values they had, nor the partition statistics
    before it: the record index, the secondary indexes and the partition statistics are dropped
    (Hudi's writers build them again) rather than left wrong."""
    mdt = _open(meta)
    if mdt is None:
        return
    held = [p for p in metadata_table.partitions_in(meta.config)
            if p in (mdr.RECORD_INDEX, mdr.PARTITION_STATS) or p.startswith(si.PREFIX)]
    if held and compaction.holds_deltacommit(mdt, time):
        apply(meta, Decision(True, held, reason=(
            f"the write {time} being rolled back is in its compacted base files, and where the keys it moved "
            "were before, the values they had and the partition ranges before it are not kept")))
    remove_deltacommit(mdt, time)


def register() -> None:
    """Have every instant completion and abandoned write of this process pass through here."""
    lifecycle.on_before_complete(before_complete)
    lifecycle.on_abandoned(abandoned)


register()

__all__ = [
    "Decision", "GroupWrite", "apply", "decide",
    "has_metadata_table", "keepable_partitions", "open_metadata_table", "present_partitions", "record_index_writes",
    "register", "write_deltacommit",
]
