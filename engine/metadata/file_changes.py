"""What a data instant about to complete does to the data files, and the `files` partition's
records of it (Hudi's `HoodieTableMetadataUtil.convertMetadataToFilesPartitionRecords`): for a
write, the files its write stats name with their sizes and its partitions in the partition list;
for a clean, tombstones for the files it deleted and the partitions it removed; for a rollback,
tombstones for the files it deleted and the new size of the log files it appended to; for a
restore, the same for each instant it rolled back. The
table's own folders (this engine's RECORD index under `.hoodie/`) are no data partitions."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.data.file_names import name_of
from engine.metadata import records as mdr
from engine.timeline import avro_models
from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.instant import Action, Instant

NO_FILE_CHANGE = (Action.SAVEPOINT, Action.INDEXING)
FILE_WRITES = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION,
               Action.CLUSTERING, Action.LOG_COMPACTION)


def _file_list(partition: str, entries: dict[str, tuple[int, bool]]) -> mdr.Record:
    return {"key": mdr.partition_key(partition), "type": mdr.TYPE_FILE_LIST,
            "filesystemMetadata": {n: {"size": s, "isDeleted": d} for n, (s, d) in sorted(entries.items())}}


def _partition_list(partitions: dict[str, bool]) -> mdr.Record:
    return {"key": mdr.ALL_PARTITIONS_KEY, "type": mdr.TYPE_PARTITION_LIST,
            "filesystemMetadata": {mdr.partition_key(p): {"size": 0, "isDeleted": d} for p, d in sorted(partitions.items())}}


@dataclass
class FileChanges:
    """The data files an instant adds (size, False) or deletes (0, True) per partition, and the
    partitions it adds (False) or deletes (True); `commit`: a write's commit metadata."""

    files: dict[str, dict[str, tuple[int, bool]]] = field(default_factory=dict)
    partitions: dict[str, bool] = field(default_factory=dict)
    commit: CommitMetadata | None = None

    def named(self, deleted: bool) -> dict[str, list[str]]:
        return {p: sorted(n for n, (_, d) in entries.items() if d is deleted) for p, entries in self.files.items()}


def file_changes(instant: Instant, body: bytes) -> FileChanges | None:
    """What a data instant about to complete does to the file listing (None: an action this
    writer does not keep, which removes the metadata table)."""
    files: dict[str, dict[str, tuple[int, bool]]] = {}
    partitions: dict[str, bool] = {}
    metadata = None
    if instant.action in NO_FILE_CHANGE:
        return FileChanges()
    if instant.action in FILE_WRITES:
        metadata = CommitMetadata.from_bytes(body)
        for partition, stats in metadata.partition_to_write_stats.items():
            partitions[partition] = False
            for stat in stats:
                if stat.path:
                    files.setdefault(partition, {})[name_of(stat.path)] = (int(stat.fileSizeInBytes or 0), False)
    elif instant.action is Action.CLEAN:
        record = avro_models.deserialize("HoodieCleanMetadata", body)
        for partition, pm in (record.get("partitionMetadata") or {}).items():
            for path in pm.get("successDeleteFiles") or []:
                files.setdefault(partition, {})[name_of(path)] = (0, True)
            if pm.get("isPartitionDeleted"):
                partitions[partition] = True
    elif instant.action is Action.ROLLBACK:
        _rolled_back(avro_models.deserialize("HoodieRollbackMetadata", body), files)
    elif instant.action is Action.RESTORE:
        # each instant the restore rolled back, as a rollback (newest first, as they were undone)
        record = avro_models.deserialize("HoodieRestoreMetadata", body)
        for _, rollbacks in sorted((record.get("hoodieRestoreMetadata") or {}).items(), reverse=True):
            for rollback in rollbacks or []:
                _rolled_back(rollback, files)
    else:
        return None
    # the table's own folders (this engine's RECORD index files under .hoodie/) are no data partitions
    return FileChanges({p: e for p, e in files.items() if not p.startswith(".hoodie")},
                       {p: d for p, d in partitions.items() if not p.startswith(".hoodie")}, metadata)


def _rolled_back(record: dict, files: dict[str, dict[str, tuple[int, bool]]]) -> None:
    """A rollback's file changes (`HoodieRollbackMetadata`): tombstones for the files it deleted,
    the new sizes of the log files it appended to."""
    for partition, pm in (record.get("partitionMetadata") or {}).items():
        for path in pm.get("successDeleteFiles") or []:
            files.setdefault(partition, {})[name_of(path)] = (0, True)
        for path, size in (pm.get("rollbackLogFiles") or {}).items():
            files.setdefault(partition, {})[name_of(path)] = (int(size), False)


def records_for(instant: Instant, body: bytes) -> list[mdr.Record] | None:
    """The files-partition records of a data instant about to complete (None: an action this
    writer does not keep, which removes the metadata table)."""
    changes = file_changes(instant, body)
    return None if changes is None else files_records(changes)


def files_records(changes: FileChanges) -> list[mdr.Record]:
    """The files-partition records of an instant's file changes, in key order."""
    out = [_file_list(p, entries) for p, entries in changes.files.items()]
    if changes.partitions:
        out.append(_partition_list(changes.partitions))
    return sorted(out, key=lambda r: r["key"])


__all__ = ["FILE_WRITES", "NO_FILE_CHANGE", "FileChanges", "file_changes", "files_records", "records_for"]
