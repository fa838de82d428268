"""Hudi's Avro timeline metadata: rollback, clean, savepoint and restore plans/metadata as bytes.

Apache Hudi (0.14, table version 6) writes these timeline files as Avro object container files
holding exactly one record, with the record's schema embedded and no codec
(`TimelineMetadataUtils.serializeAvroMetadata`). `serialize` / `deserialize` do the same; the
builders below turn plain values into records the way Hudi's executors fill them:

| file                          | model                   | builder              |
|-------------------------------|-------------------------|----------------------|
| `T.rollback.requested`        | HoodieRollbackPlan      | `rollback_plan`      |
| `T.rollback`                  | HoodieRollbackMetadata  | `rollback_metadata`  |
| `T.clean.requested/.inflight` | HoodieCleanerPlan       | `cleaner_plan`       |
| `T.clean`                     | HoodieCleanMetadata     | `clean_metadata`     |
| `T.savepoint(.inflight)`      | HoodieSavepointMetadata | `savepoint_metadata` |
| `T.restore.requested`         | HoodieRestorePlan       | `restore_plan`       |
| `T.restore`                   | HoodieRestoreMetadata   | `restore_metadata`   |

`commit_metadata_to_avro` converts our JSON commit metadata to the Avro HoodieCommitMetadata that
Hudi's archiver stores (`MetadataConversionUtils.convertCommitMetadata`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import fastavro
from fastavro.validation import ValidationError, validate

from engine.errors import CorruptTableError, InvalidInputError
from engine.timeline.avro_schemas import SCHEMAS, full_name, self_contained
from engine.timeline.commit_metadata import CommitMetadata, WriteStat

Record = dict[str, Any]
Schema = dict[str, Any]

# Versions Hudi 0.14 writes: clean plan/metadata are at version 2 (CleanPlanV2MigrationHandler,
# CleanMetadataV2MigrationHandler); the others at TimelineMetadataUtils.DEFAULT_VERSION = 1.
CLEAN_VERSION = 2
DEFAULT_VERSION = 1

# HoodieCleaningPolicy names.
KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"
CLEANING_POLICIES = (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, KEEP_LATEST_BY_HOURS)

# HoodieRollingStatMetadata.ROLLING_STAT_METADATA_KEY: the archiver blanks it.
ROLLING_STAT_METADATA_KEY = "ROLLING_STAT"


@cache
def schema_json(model: str) -> Schema:
    """The self-contained schema of `model` (short Hudi record name, e.g. "HoodieCleanMetadata")."""
    if model not in SCHEMAS:
        raise InvalidInputError(f"unknown Hudi Avro model {model!r}")
    return self_contained(model)


@cache
def parsed_schema(model: str) -> Any:
    """The fastavro-parsed schema of `model`."""
    return fastavro.parse_schema(schema_json(model))


def validate_record(model: str, record: Mapping[str, Any]) -> None:
    """Raise InvalidInputError naming the offending field(s) when `record` does not fit `model`."""
    try:
        validate(record, parsed_schema(model), raise_errors=True)
    except ValidationError as exc:
        fields = "; ".join(str(e) for e in exc.errors) or str(exc)
        raise InvalidInputError(f"{model} record does not fit its schema: {fields}") from exc


def serialize(model: str, record: Mapping[str, Any]) -> bytes:
    """One-record Avro container file (schema embedded, no codec), as Hudi writes timeline files."""
    validate_record(model, record)
    buf = io.BytesIO()
    fastavro.writer(buf, parsed_schema(model), [dict(record)], codec="null", validator=False)
    return buf.getvalue()


def deserialize(model: str, data: bytes) -> Record:
    """Read the single record of a container file written with `model`'s schema.

    Raises CorruptTableError for empty, truncated or garbled bytes and for files whose writer
    schema is another record.
    """
    if not data:
        raise CorruptTableError(f"empty {model} file")
    if not data.startswith(b"Obj\x01"):
        raise CorruptTableError(f"not an Avro container file (expected {model}): bad magic {data[:4]!r}")
    try:
        reader = fastavro.reader(io.BytesIO(data), reader_schema=parsed_schema(model))
        writer_schema = reader.writer_schema
        writer_name = writer_schema.get("name") if isinstance(writer_schema, dict) else None
        if writer_name not in (model, full_name(model)):
            raise CorruptTableError(f"expected a {model} file, found a {writer_name} file")
        records = list(reader)
    except CorruptTableError:
        raise
    except Exception as exc:  # fastavro raises many types (EOFError, ValueError, SchemaResolutionError...)
        raise CorruptTableError(f"unreadable {model} file: {type(exc).__name__}: {exc}") from exc
    if len(records) != 1:
        raise CorruptTableError(f"{model} file holds {len(records)} records, expected 1")
    record = records[0]
    if not isinstance(record, dict):
        raise CorruptTableError(f"{model} file holds a {type(record).__name__}, expected a record")
    return record


def embedded_schema(data: bytes) -> dict[str, Any]:
    """The writer schema stored in a container file's header (`avro.schema`)."""
    try:
        reader = fastavro.reader(io.BytesIO(data))
        meta = reader.metadata.get("avro.schema")
    except Exception as exc:
        raise CorruptTableError(f"not an Avro container file: {exc}") from exc
    if meta is None:
        raise CorruptTableError("Avro container file without avro.schema")
    result: dict[str, Any] = json.loads(meta)
    return result


# --- builders --------------------------------------------------------------------------------


def instant_info(instant_time: str, action: str) -> Record:
    """HoodieInstantInfo: an instant's time and action."""
    return {"commitTime": instant_time, "action": action}


@dataclass(frozen=True)
class RollbackRequest:
    """One HoodieRollbackRequest: what a rollback undoes in one partition (or one file group).

    `files_to_delete` are full paths (Hudi's ListingBased/MarkerBased rollback strategies store
    `Path.toString()` of each base or log file); `log_blocks_to_delete` maps a log file path to
    its size, for MOR rollbacks that append a rollback command block instead of deleting.
    """

    partition_path: str
    file_id: str = ""
    latest_base_instant: str = ""
    files_to_delete: tuple[str, ...] = ()
    log_blocks_to_delete: Mapping[str, int] = field(default_factory=dict)

    def to_record(self) -> Record:
        return {
            "partitionPath": self.partition_path,
            "fileId": self.file_id,
            "latestBaseInstant": self.latest_base_instant,
            "filesToBeDeleted": list(self.files_to_delete),
            "logBlocksToBeDeleted": dict(self.log_blocks_to_delete),
        }


def rollback_plan(instant_time: str, action: str, requests: Iterable[RollbackRequest]) -> Record:
    """HoodieRollbackPlan for rolling back instant (`instant_time`, `action`)."""
    return {
        "instantToRollback": instant_info(instant_time, action),
        "RollbackRequests": [r.to_record() for r in requests],
        "version": DEFAULT_VERSION,
    }


@dataclass(frozen=True)
class RollbackPartitionStat:
    """What a rollback did in one partition (Hudi's HoodieRollbackStat).

    `deleted` / `failed` are full paths, as Hudi's BaseRollbackHelper records them;
    `log_files` maps a log file that received a rollback command block to its size.
    """

    partition_path: str
    deleted: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    log_files: Mapping[str, int] = field(default_factory=dict)


def rollback_metadata(
    start_rollback_time: str,
    time_taken_ms: int,
    rolled_back: Sequence[tuple[str, str]],
    stats: Iterable[RollbackPartitionStat],
) -> Record:
    """HoodieRollbackMetadata as `TimelineMetadataUtils.convertRollbackMetadata` builds it.

    `rolled_back` lists (instant time, action) of the instants undone; `totalFilesDeleted` counts
    the successful deletes; `rollbackLogFiles` is absent (null) when no log file was touched.
    """
    stats = list(stats)
    partitions: dict[str, Record] = {
        s.partition_path: {
            "partitionPath": s.partition_path,
            "successDeleteFiles": list(s.deleted),
            "failedDeleteFiles": list(s.failed),
            "rollbackLogFiles": dict(s.log_files) if s.log_files else None,
        }
        for s in stats
    }
    return {
        "startRollbackTime": start_rollback_time,
        "timeTakenInMillis": time_taken_ms,
        "totalFilesDeleted": sum(len(s.deleted) for s in stats),
        "commitsRollback": [t for t, _ in rolled_back],
        "partitionMetadata": partitions,
        "version": DEFAULT_VERSION,
        "instantsRollback": [instant_info(t, a) for t, a in rolled_back],
    }


def _check_policy(policy: str) -> None:
    if policy not in CLEANING_POLICIES:
        raise InvalidInputError(f"unknown cleaning policy {policy!r}; expected one of {CLEANING_POLICIES}")


def cleaner_plan(
    earliest_instant_to_retain: tuple[str, str, str] | None,
    last_completed_commit: str,
    policy: str,
    file_paths_per_partition: Mapping[str, Sequence[str]],
    partitions_to_delete: Sequence[str] = (),
    bootstrap_base_files: frozenset[str] = frozenset(),
) -> Record:
    """HoodieCleanerPlan (version 2) as Hudi's CleanPlanActionExecutor requests it.

    `earliest_instant_to_retain` is (time, action, state name e.g. "COMPLETED") of the oldest
    commit the clean keeps (KEEP_LATEST_COMMITS only; None otherwise). `last_completed_commit` is
    the latest completed write instant when the plan was made. `file_paths_per_partition` holds
    the **full paths** of files to delete (`CleanFileInfo.getFilePath`). The deprecated
    `filesToBeDeletedPerPartition` is written as an empty map, as Hudi does.
    """
    _check_policy(policy)
    earliest = None
    if earliest_instant_to_retain is not None:
        ts, action, state = earliest_instant_to_retain
        earliest = {"timestamp": ts, "action": action, "state": state}
    return {
        "earliestInstantToRetain": earliest,
        "lastCompletedCommitTimestamp": last_completed_commit,
        "policy": policy,
        "filesToBeDeletedPerPartition": {},
        "version": CLEAN_VERSION,
        "filePathsToBeDeletedPerPartition": {
            p: [{"filePath": f, "isBootstrapBaseFile": f in bootstrap_base_files} for f in files]
            for p, files in file_paths_per_partition.items()
        },
        "partitionsToBeDeleted": list(partitions_to_delete),
    }


@dataclass(frozen=True)
class CleanPartitionStat:
    """What a clean did in one partition (Hudi's HoodieCleanStat).

    All three lists hold **file names**, not paths: Hudi's CleanActionExecutor records
    `Path.getName()`, and clean metadata version 2 (CleanMetadataV2MigrationHandler) is defined
    by that conversion. `delete_patterns` are the files it tried to delete.
    """

    partition_path: str
    delete_patterns: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    is_partition_deleted: bool = False


def clean_metadata(
    start_clean_time: str,
    time_taken_ms: int,
    earliest_commit_to_retain: str,
    last_completed_commit: str,
    policy: str,
    stats: Iterable[CleanPartitionStat],
) -> Record:
    """HoodieCleanMetadata (version 2) as `CleanerUtils.convertCleanMetadata` builds it.

    `start_clean_time` is the clean instant's time; `earliest_commit_to_retain` the timestamp of
    the plan's earliest instant to retain ("" when the plan had none, e.g. KEEP_LATEST_FILE_VERSIONS);
    `last_completed_commit` the plan's lastCompletedCommitTimestamp. `totalFilesDeleted` counts
    successful deletes. `bootstrapPartitionMetadata` is an empty map (no bootstrap tables here).
    """
    _check_policy(policy)
    stats = list(stats)
    partitions: dict[str, Record] = {
        s.partition_path: {
            "partitionPath": s.partition_path,
            "policy": policy,
            "deletePathPatterns": list(s.delete_patterns),
            "successDeleteFiles": list(s.deleted),
            "failedDeleteFiles": list(s.failed),
            "isPartitionDeleted": s.is_partition_deleted,
        }
        for s in stats
    }
    return {
        "startCleanTime": start_clean_time,
        "timeTakenInMillis": time_taken_ms,
        "totalFilesDeleted": sum(len(s.deleted) for s in stats),
        "earliestCommitToRetain": earliest_commit_to_retain,
        "lastCompletedCommitTimestamp": last_completed_commit,
        "partitionMetadata": partitions,
        "version": CLEAN_VERSION,
        "bootstrapPartitionMetadata": {},
    }


def savepoint_metadata(
    user: str, savepointed_at_ms: int, comments: str, files_per_partition: Mapping[str, Sequence[str]]
) -> Record:
    """HoodieSavepointMetadata as `TimelineMetadataUtils.convertSavepointMetadata` builds it.

    `savepointed_at_ms` is epoch milliseconds (Hudi uses `System.currentTimeMillis()`);
    `files_per_partition` lists the **base file names** of the latest slices kept.
    """
    return {
        "savepointedBy": user,
        "savepointedAt": savepointed_at_ms,
        "comments": comments,
        "partitionMetadata": {
            p: {"partitionPath": p, "savepointDataFile": list(files)} for p, files in files_per_partition.items()
        },
        "version": DEFAULT_VERSION,
    }


def restore_plan(instants_to_rollback: Sequence[tuple[str, str]]) -> Record:
    """HoodieRestorePlan: (time, action) of the instants the restore rolls back, newest first."""
    return {
        "instantsToRollback": [instant_info(t, a) for t, a in instants_to_rollback],
        "version": DEFAULT_VERSION,
    }


def restore_metadata(
    start_restore_time: str,
    time_taken_ms: int,
    rolled_back: Sequence[tuple[str, str]],
    rollbacks: Mapping[str, Sequence[Record]],
) -> Record:
    """HoodieRestoreMetadata as `TimelineMetadataUtils.convertRestoreMetadata` builds it.

    `rollbacks` maps each rolled-back instant time to the HoodieRollbackMetadata records of
    its rollback (`rollback_metadata(...)`).
    """
    return {
        "startRestoreTime": start_restore_time,
        "timeTakenInMillis": time_taken_ms,
        "instantsToRollback": [t for t, _ in rolled_back],
        "hoodieRestoreMetadata": {t: list(ms) for t, ms in rollbacks.items()},
        "version": DEFAULT_VERSION,
        "restoreInstantInfo": [instant_info(t, a) for t, a in rolled_back],
    }


def _write_stat_to_avro(stat: WriteStat) -> Record:
    """Jackson's bean-to-bean copy in convertCommitMetadata: same-named properties, others null."""
    return {
        "fileId": stat.fileId,
        "path": stat.path,
        "prevCommit": stat.prevCommit,
        "numWrites": stat.numWrites,
        "numDeletes": stat.numDeletes,
        "numUpdateWrites": stat.numUpdateWrites,
        "totalWriteBytes": stat.totalWriteBytes,
        "totalWriteErrors": stat.totalWriteErrors,
        "partitionPath": stat.partitionPath,
        "totalLogRecords": stat.totalLogRecords,
        "totalLogFiles": None,  # no such property on Hudi's Java HoodieWriteStat
        "totalUpdatedRecordsCompacted": stat.totalUpdatedRecordsCompacted,
        "numInserts": stat.numInserts,
        "totalLogBlocks": stat.totalLogBlocks,
        "totalCorruptLogBlock": stat.totalCorruptLogBlock,
        "totalRollbackBlocks": stat.totalRollbackBlocks,
        "fileSizeInBytes": stat.fileSizeInBytes,
        "logVersion": stat.logVersion,
        "logOffset": stat.logOffset,
        "baseFile": stat.baseFile,
        "logFiles": list(stat.logFiles) if stat.logFiles is not None else None,
        "cdcStats": dict(stat.cdcStats) if stat.cdcStats else None,
    }


def commit_metadata_to_avro(metadata: CommitMetadata) -> Record:
    """Avro HoodieCommitMetadata for archiving, as `MetadataConversionUtils.convertCommitMetadata`.

    Hudi copies the JSON bean into the Avro class with Jackson, so: `version` stays null (the Avro
    no-arg constructor does not apply schema defaults), a compacted commit gets operationType
    "COMPACT", and extraMetadata gains `ROLLING_STAT` -> "" (rolling stats are not archived).
    """
    extra = dict(metadata.extra_metadata)
    extra[ROLLING_STAT_METADATA_KEY] = ""
    return {
        "partitionToWriteStats": {
            p: [_write_stat_to_avro(s) for s in stats] for p, stats in metadata.partition_to_write_stats.items()
        },
        "extraMetadata": extra,
        "version": None,
        "operationType": "COMPACT" if metadata.compacted else metadata.operation_type,
    }
