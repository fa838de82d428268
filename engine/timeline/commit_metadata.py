"""`CommitMetadata` and `WriteStat`: the JSON inside completed commit / deltacommit / replacecommit files."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.errors import CorruptTableError


@dataclass
class WriteStat:
    """Statistics of one file written by a commit (field names as Apache Hudi writes them)."""

    fileId: str
    path: str | None
    partitionPath: str
    prevCommit: str = "null"
    numWrites: int = 0
    numDeletes: int = 0
    numUpdateWrites: int = 0
    numInserts: int = 0
    totalWriteBytes: int = 0
    totalWriteErrors: int = 0
    fileSizeInBytes: int = 0
    totalLogRecords: int = 0
    totalLogFilesCompacted: int = 0
    totalLogSizeCompacted: int = 0
    totalUpdatedRecordsCompacted: int = 0
    totalLogBlocks: int = 0
    totalCorruptLogBlock: int = 0
    totalRollbackBlocks: int = 0
    minEventTime: int | None = None
    maxEventTime: int | None = None
    # merge-on-read only
    baseFile: str | None = None
    logFiles: list[str] | None = None
    logVersion: int | None = None
    logOffset: int | None = None
    runtimeStats: dict[str, int] | None = None
    # CDC log files written beside the file (relative path -> size), tables with CDC logging
    cdcStats: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        # what dataclasses.asdict gives (copies of the lists and dicts), without its deep recursion:
        # a commit of a few hundred file groups encodes its stats twice (inflight and completed)
        d: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            d[name] = dict(value) if isinstance(value, dict) else list(value) if isinstance(value, list) else value
        d["tempPath"] = None
        for key in ("baseFile", "logFiles", "logVersion", "logOffset"):
            if d[key] is None:
                del d[key]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WriteStat:
        # (Avro metadata of versions 8 and 9 carries every field, null where unset: defaults then)
        known = {k: d[k] for k in cls.__dataclass_fields__ if d.get(k) is not None}
        known.setdefault("fileId", "")
        known.setdefault("path", None)
        known.setdefault("partitionPath", "")
        if known["partitionPath"] is None:
            known["partitionPath"] = ""
        if known.get("prevCommit") is None:
            known["prevCommit"] = "null"
        return cls(**known)


@dataclass
class CommitMetadata:
    """What a write instant wrote: per-partition write stats, the schema, and extra metadata."""

    partition_to_write_stats: dict[str, list[WriteStat]] = field(default_factory=dict)
    operation_type: str = "UNKNOWN"
    extra_metadata: dict[str, str] = field(default_factory=dict)
    compacted: bool = False
    partition_to_replace_file_ids: dict[str, list[str]] | None = None

    @property
    def schema(self) -> str | None:
        return self.extra_metadata.get("schema")

    @property
    def write_stats(self) -> list[WriteStat]:
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    @property
    def written_paths(self) -> list[str]:
        return [s.path for s in self.write_stats if s.path]

    def totals(self) -> dict[str, int]:
        stats = self.write_stats
        return {
            "files": len([s for s in stats if s.path]),
            "partitions": len(self.partition_to_write_stats),
            "writes": sum(s.numWrites for s in stats),
            "inserts": sum(s.numInserts for s in stats),
            "updates": sum(s.numUpdateWrites for s in stats),
            "deletes": sum(s.numDeletes for s in stats),
            "bytes": sum(s.totalWriteBytes for s in stats),
        }

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [s.to_dict() for s in stats] for p, stats in self.partition_to_write_stats.items()
            },
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra_metadata),
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            d["partitionToReplaceFileIds"] = self.partition_to_replace_file_ids
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_bytes(self) -> bytes:
        return self.to_json().encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> CommitMetadata:
        """Commit metadata as a timeline file holds it: JSON (table version 6), or an Avro object
        container file with one `HoodieCommitMetadata`/`HoodieReplaceCommitMetadata` record
        (versions 8 and 9). Empty bytes are empty metadata."""
        if data[:4] == AVRO_MAGIC:
            return cls.from_dict(_one_avro_record(data))
        return cls.from_json(data)

    @classmethod
    def from_json(cls, data: bytes | str) -> CommitMetadata:
        if isinstance(data, bytes):
            try:
                data = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptTableError(f"commit metadata is neither JSON nor Avro: {exc}") from exc
        if not data.strip():
            return cls()
        try:
            d = json.loads(data)
        except json.JSONDecodeError as exc:
            raise CorruptTableError(f"commit metadata is not valid JSON: {exc}") from exc
        if not isinstance(d, dict):
            raise CorruptTableError("commit metadata is not a JSON object")
        return cls.from_dict(d)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CommitMetadata:
        stats = {
            (p or ""): [WriteStat.from_dict(s) for s in (lst or [])]
            for p, lst in (d.get("partitionToWriteStats") or {}).items()
        }
        return cls(
            partition_to_write_stats=stats,
            operation_type=d.get("operationType") or "UNKNOWN",
            extra_metadata={k: v for k, v in (d.get("extraMetadata") or {}).items() if v is not None},
            compacted=bool(d.get("compacted", False)),
            partition_to_replace_file_ids=d.get("partitionToReplaceFileIds"),
        )


AVRO_MAGIC = b"Obj\x01"


def _one_avro_record(data: bytes) -> dict[str, Any]:
    """The single record of an Avro object container file (the writer schema is embedded)."""
    import io

    import fastavro

    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except Exception as exc:  # fastavro raises EOFError, ValueError, SchemaParseException...
        raise CorruptTableError(f"commit metadata is not a readable Avro file: {exc!r}") from exc
    if len(records) != 1 or not isinstance(records[0], dict):
        raise CorruptTableError(f"commit metadata holds {len(records)} Avro records, not one")
    return records[0]
