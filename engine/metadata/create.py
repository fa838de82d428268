"""Creating a metadata table with its `files` partition, as Apache Hudi 1.x initializes one
(`HoodieBackedTableMetadataWriter.initializeFromFilesystem`), for a table of version 8 or 9 whose
writer asks for it (`hoodie.metadata.enable=true`) and that has none.

Under the table lock, at the start of the write (`engine.services.repair`):

1. `.hoodie/metadata/.hoodie/hoodie.properties`: a merge-on-read table of HFiles named
   `<table>_metadata`, keyed by `key`, merged by `HoodieMetadataPayload`, the data table's version
   and timeline layout;
2. the initializing deltacommit `00000000000000000` (Hudi's SOLO_COMMIT_TIMESTAMP + "000"): the
   `files` partition's partition metadata, its base HFile
   `files-0000-0_0-0-0_00000000000000000.hfile` listing every committed data file (files of
   instants that are not completed, or pending, are left out, as Hudi leaves them out) and the
   partition list, and the completed deltacommit;
3. only then `hoodie.table.metadata.partitions=files` in the data table's properties: readers use
   it from here on. A crash before leaves a folder no reader uses, which the next write removes.

The records use the fields of Hudi's `HoodieMetadataRecord` that the files partition needs (its
meta fields, `key`, `type`, `filesystemMetadata`, as Hudi writes them); readers resolve the
others to their defaults (null), as Avro schema resolution does.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import javaproperties

from engine.config.table_config import IndexType, TableConfig, table_checksum
from engine.constants import METAFOLDER
from engine.data.file_names import parse_base_file_name, parse_log_file_name
from engine.errors import InvalidConfigError
from engine.metadata import hfiles
from engine.metadata import records as mdr
from engine.storage import Storage, storage_for
from engine.table import lifecycle
from engine.table.meta_client import MetaClient
from engine.table.metadata_table import FOLDER
from engine.table.metadata_table import PARTITIONS as PARTITIONS_PROPERTY
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

INIT_INSTANT = "00000000000000000"
FILE_ID = "files-0000-0"


def _meta_field(name: str) -> dict:
    return {"name": name, "type": ["null", "string"], "doc": "", "default": None}


# the fields of Hudi's HoodieMetadataRecord the files partition writes, as Hudi's writer stores them
FILES_SCHEMA = {
    "type": "record", "name": "HoodieMetadataRecord", "namespace": "org.apache.hudi.avro.model",
    "doc": "A record saved within the Metadata Table",
    "fields": [
        *(_meta_field(n) for n in ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                   "_hoodie_partition_path", "_hoodie_file_name")),
        {"name": "key", "type": {"type": "string", "avro.java.string": "String"}},
        {"name": "type", "type": "int", "doc": "Type of the metadata record"},
        {"name": "filesystemMetadata", "type": ["null", {
            "type": "map", "values": {"type": "record", "name": "HoodieMetadataFileInfo", "fields": [
                {"name": "size", "type": "long", "doc": "Size of the file"},
                {"name": "isDeleted", "type": "boolean", "doc": "True if this file has been deleted"},
            ]}, "avro.java.string": "String"}],
         "doc": "Contains information about partitions and files within the dataset"},
    ],
}
FILES_SCHEMA_JSON = json.dumps(FILES_SCHEMA, separators=(",", ":"))


def properties(data: MetaClient) -> dict[str, str]:
    """hoodie.properties of the metadata table of the table at `data`, as Hudi 1.x writes them."""
    name = f"{data.config.name}_metadata"
    return {
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.table.initial.version": str(data.config.version),
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.archivelog.folder": "history",
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.history.path": "history",
        "hoodie.table.checksum": str(table_checksum("", name)),
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.table.name": name,
        "hoodie.timeline.path": "timeline",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.table.version": str(data.config.version),
    }


def committed_files(data: MetaClient, timeline: Timeline) -> dict[str, dict[str, int]]:
    """Partition -> {file name: size} of the data files written by completed instants (or older
    than the active timeline: archived)."""
    completed = timeline.completed_times
    first = timeline.first_time
    out: dict[str, dict[str, int]] = {}
    for df in data.list_data_files():
        base, log = parse_base_file_name(df.name), parse_log_file_name(df.name)
        instant = base.instant if base else (log.base_instant if log else None)
        if instant is None:
            continue
        if instant in completed or (first is not None and instant < first):
            out.setdefault(df.partition, {})[df.name] = df.size
    return out


def initialize(data: MetaClient, timeline: Timeline, now: datetime | None = None) -> None:
    """Create the metadata table of the table at `data` (which has none) with its files partition."""
    if data.config.version < 8:
        raise ValueError("metadata tables are created for tables of version 8 and 9")
    storage = storage_for(data.storage.uri(FOLDER), data.storage.options)
    props = javaproperties.dumps(properties(data), timestamp=False, sort_keys=False)
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    storage.makedirs(f"{METAFOLDER}/timeline/history")
    storage.create_exclusive(f"{METAFOLDER}/hoodie.properties", f"#Properties saved on {stamp}\n{props}".encode())
    mdt = MetaClient.open(storage)
    requested = Instant(INIT_INSTANT, Action.DELTA_COMMIT, State.REQUESTED)
    lifecycle.ensure_file(mdt, requested)
    lifecycle.ensure_file(mdt, requested.with_state(State.INFLIGHT),
                          mdt.encode_commit_metadata(CommitMetadata({}, "BULK_INSERT")))
    listing = committed_files(data, timeline)
    records: list[mdr.Record] = [{"key": mdr.ALL_PARTITIONS_KEY, "type": mdr.TYPE_PARTITION_LIST, "filesystemMetadata": {
        mdr.partition_key(p): {"size": 0, "isDeleted": False} for p in sorted(listing)}}]
    records += [{"key": mdr.partition_key(p), "type": mdr.TYPE_FILE_LIST, "filesystemMetadata": {
        n: {"size": s, "isDeleted": False} for n, s in sorted(files.items())}} for p, files in sorted(listing.items())]
    base_name = f"{FILE_ID}_0-0-0_{INIT_INSTANT}.hfile"
    data_bytes, count = hfiles.base_file(records, FILES_SCHEMA_JSON, base_name)
    storage.write_bytes(f"{mdr.FILES}/.hoodie_partition_metadata",
                        f"#partition metadata\ncommitTime={INIT_INSTANT}\npartitionDepth=1\n".encode())
    path = f"{mdr.FILES}/{base_name}"
    storage.create_exclusive(path, data_bytes)
    stat = WriteStat(fileId=FILE_ID, path=path, partitionPath=mdr.FILES, prevCommit="null", numWrites=count,
                     numInserts=count, totalWriteBytes=len(data_bytes), fileSizeInBytes=len(data_bytes))
    lifecycle.complete_instant(mdt, INIT_INSTANT, Action.DELTA_COMMIT,
                               mdt.encode_commit_metadata(CommitMetadata({mdr.FILES: [stat]}, "BULK_INSERT")))
    data.remove_properties(("hoodie.table.metadata.partitions.inflight",), "Metadata table created",
                           {PARTITIONS_PROPERTY: mdr.FILES})


def wanted(version: int, metadata: bool | None) -> bool:
    """Whether a new table of `version` gets a metadata table: `metadata` (a writer's
    hoodie.metadata.enable) where given, else yes from version 8 (Apache Hudi 1.x's default). A
    version 6 table cannot have one written by this engine: asking is refused."""
    if metadata and version < 8:
        raise InvalidConfigError(
            f"hoodie.metadata.enable=true: this engine writes metadata tables on tables of version 8 and 9, "
            f"not {version} (create the table with table_version 8 or 9)")
    return version >= 8 if metadata is None else metadata


def refuse_own_index_shape(with_metadata: bool, shaped: bool, names: str, keep: str) -> None:
    """Refuse options that shape this engine's own record index (`names`, given when `shaped`) on
    a table that gets a metadata table, whose RECORD index is its `record_index`; `keep` says how
    to keep this engine's index instead."""
    if with_metadata and shaped:
        raise InvalidConfigError(
            f"{names} shape this engine's own record index, which a table with a metadata table does not use "
            f"(its RECORD index is the metadata table's record_index): {keep} to keep it")


def for_new_table(data: MetaClient) -> None:
    """Give a table just created (no instant yet) its metadata table, as Apache Hudi 1.x's first
    write initializes it: the `files` partition at `00000000000000000`, and with the RECORD index
    (on a table with meta fields) an empty `record_index` of Hudi's minimum ten file groups at
    `00000000000000001`, so RECORD looks keys up in the metadata table from the first write."""
    from engine.metadata import build_record_index

    initialize(data, data.timeline())
    data.reload_config()
    if data.config.index_type is IndexType.RECORD and data.config.populate_meta_fields:
        build_record_index.build(data, data.timeline())
        data.reload_config()


def create_table(storage: Storage, config: TableConfig, metadata: bool | None = None) -> MetaClient:
    """Create a table (`MetaClient.create`) with its metadata table where `wanted`."""
    with_metadata = wanted(config.version, metadata)
    meta = MetaClient.create(storage, config)
    if with_metadata:
        for_new_table(meta)
    return meta


__all__ = ["FILES_SCHEMA", "FILES_SCHEMA_JSON", "INIT_INSTANT", "committed_files", "create_table", "for_new_table", "initialize",
           "properties", "refuse_own_index_shape", "wanted"]
