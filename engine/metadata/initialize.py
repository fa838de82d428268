"""Initializing one partition of Apache Hudi's metadata table from the data files, as Hudi 1.x's
`HoodieBackedTableMetadataWriter.initializeFromFilesystem` does for each partition it builds
(`engine.metadata.build_record_index`, `engine.metadata.build_column_stats`):

1. what an interrupted build left is removed (its pending initializing instants, the folder);
2. an initializing deltacommit at the next `0000000000000000N` instant of the metadata table
   (Hudi's are 00000000000000000 for `files`, then one more per partition it initializes): the
   partition metadata and one base HFile per file group, `<file id>_0-0-0_<instant>.hfile`;
3. only then the index definitions (`hoodie.table.index.defs.path`, created where missing) define
   the partition and `hoodie.table.metadata.partitions` names it. A crash before leaves files no
   reader uses; building again replaces them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import InvalidInputError
from engine.metadata import hfiles
from engine.metadata import records as mdr
from engine.metadata.index_defs import INDEX_DEFS_PATH, document
from engine.metadata.reader import INIT_PREFIX
from engine.storage import storage_for
from engine.table import lifecycle, metadata_table
from engine.table.meta_client import MetaClient
from engine.table.metadata_table import FOLDER
from engine.table.metadata_table import PARTITIONS as PARTITIONS_PROPERTY
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

DEFS_FILE = ".hoodie/.index_defs/index.json"


def with_field(schema_json: str, field: Mapping[str, Any]) -> str:
    """The record schema with `field` (unchanged when it has a field of that name)."""
    schema = json.loads(schema_json)
    if any(f.get("name") == field["name"] for f in schema.get("fields") or []):
        return schema_json
    schema["fields"] = [*schema["fields"], dict(field)]
    return json.dumps(schema, separators=(",", ":"))


def refuse_in_flight(meta: MetaClient, timeline: Timeline, what: str = "", missed: str = "files") -> None:
    """Refuse a build while instants of the data table are in flight: their `missed` would be left
    out (`what`: what is built, for the message)."""
    pending = [i.time for i in timeline.pending.instants]
    if pending:
        build = f"build {what}" if what else "build"
        raise InvalidInputError(
            f"{meta.storage.base_uri}: instants {', '.join(pending)} are in flight; their {missed} would be missed "
            f"({build} when no write runs, or after they are rolled back)")


def next_init_instant(mdt: MetaClient) -> str:
    used = [int(i.time) for i in mdt.timeline().instants if i.time.startswith(INIT_PREFIX)]
    return f"{max(used, default=-1) + 1:017d}"


def write_partition(meta: MetaClient, mdt: MetaClient, partition: str,
                    groups: Sequence[tuple[str, list[mdr.Record]]], schema_json: str) -> tuple[str, int]:
    """Write `partition` of the metadata table `mdt` as an initializing deltacommit, one base HFile
    per (file id, records) of `groups`; returns the instant and the bytes written."""
    for inst in mdt.timeline().pending.instants:  # what an interrupted build left: timeline files...
        if inst.time.startswith(INIT_PREFIX):
            for state in (State.INFLIGHT, State.REQUESTED):
                path = mdt.instant_path(Instant(inst.time, inst.action, state))
                if mdt.storage.exists(path):
                    mdt.storage.delete(path)
    mdt.storage.delete_dir(partition)  # ...and files
    time = next_init_instant(mdt)
    requested = Instant(time, Action.DELTA_COMMIT, State.REQUESTED)
    lifecycle.ensure_file(mdt, requested)
    lifecycle.ensure_file(mdt, requested.with_state(State.INFLIGHT),
                          mdt.encode_commit_metadata(CommitMetadata({}, "BULK_INSERT")))
    storage = storage_for(meta.storage.uri(FOLDER), meta.storage.options)
    storage.write_bytes(f"{partition}/.hoodie_partition_metadata",
                        f"#partition metadata\ncommitTime={time}\npartitionDepth=1\n".encode())
    stats, total = [], 0
    for file_id, records in groups:
        name = f"{file_id}_0-0-0_{time}.hfile"
        data, n = hfiles.base_file(records, schema_json, name)
        path = f"{partition}/{name}"
        storage.create_exclusive(path, data)
        total += len(data)
        stats.append(WriteStat(fileId=file_id, path=path, partitionPath=partition, prevCommit="null",
                               numWrites=n, numInserts=n, totalWriteBytes=len(data), fileSizeInBytes=len(data)))
    lifecycle.complete_instant(mdt, time, Action.DELTA_COMMIT,
                               mdt.encode_commit_metadata(CommitMetadata({partition: stats}, "BULK_INSERT")))
    return time, total


def define_and_name(meta: MetaClient, partition: str, definition: Mapping[str, Any] | None) -> None:
    """The partition in the table's index definitions (the file and its property made where
    missing; `definition` None: none, as Hudi defines no `partition_stats` index), then in
    `hoodie.table.metadata.partitions`."""
    if definition is not None:
        found = document(meta)
        path, doc = found if found is not None else (DEFS_FILE, {"indexDefinitions": {}})
        doc.setdefault("indexDefinitions", {})[partition] = dict(definition)
        meta.storage.write_bytes(path, json.dumps(doc, indent=2).encode("utf-8"))
        if found is None:
            meta.remove_properties((), "Index definitions", {INDEX_DEFS_PATH: path})
    built = sorted({*metadata_table.partitions_in(meta.config), partition})
    meta.remove_properties((), f"Metadata table {partition} built", {PARTITIONS_PROPERTY: ",".join(built)})


__all__ = ["DEFS_FILE", "define_and_name", "next_init_instant", "refuse_in_flight", "with_field", "write_partition"]
