"""What writing one file produced: `WriteOutcome`, the row a Spark task returns for it
(`OUTCOME_SCHEMA`), and the commit metadata's write stat built from it. Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from engine.timeline.commit_metadata import WriteStat

OUTCOME_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("file_id", pa.string()),
        ("partition", pa.string()),
        ("prev_instant", pa.string()),
        ("num_writes", pa.int64()),
        ("num_inserts", pa.int64()),
        ("num_updates", pa.int64()),
        ("num_deletes", pa.int64()),
        ("num_stale", pa.int64()),
        ("file_size", pa.int64()),
        ("min_key", pa.string()),
        ("max_key", pa.string()),
        ("log_version", pa.int64()),
        ("base_file", pa.string()),
        ("log_files", pa.list_(pa.string())),
        ("cdc_file", pa.string()),
        ("cdc_size", pa.int64()),
    ]
)


@dataclass(frozen=True)
class CompactionCounts:
    """What a compaction read from a slice's log files (Hudi's compaction counters of the write stat)."""

    log_files: int
    log_size: int
    log_records: int
    log_blocks: int
    rollback_blocks: int


@dataclass
class WriteOutcome:
    path: str
    file_id: str
    partition: str
    prev_instant: str | None
    num_writes: int
    num_inserts: int
    num_updates: int
    num_deletes: int
    num_stale: int
    file_size: int
    min_key: str | None
    max_key: str | None
    # log files (merge-on-read appends): the version written, the slice's base file name ("" for
    # none) and the slice's log file names including the new one
    log_version: int | None = None
    base_file: str | None = None
    log_files: list[str] | None = None
    # the CDC log file written beside it (table-relative path) and its size
    cdc_file: str | None = None
    cdc_size: int | None = None

    def as_row(self) -> dict[str, Any]:
        """The outcome as a row of OUTCOME_SCHEMA (what a Spark task returns)."""
        return dict(self.__dict__)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> WriteOutcome:
        """An outcome from a row of OUTCOME_SCHEMA (or one with more columns, which are left out)."""
        return cls(
            path=row["path"],
            file_id=row["file_id"],
            partition=row["partition"],
            prev_instant=row["prev_instant"],
            num_writes=row["num_writes"],
            num_inserts=row["num_inserts"],
            num_updates=row["num_updates"],
            num_deletes=row["num_deletes"],
            num_stale=row["num_stale"],
            file_size=row["file_size"],
            min_key=row["min_key"],
            max_key=row["max_key"],
            log_version=row.get("log_version"),
            base_file=row.get("base_file"),
            log_files=list(row["log_files"]) if row.get("log_files") is not None else None,
            cdc_file=row.get("cdc_file"),
            cdc_size=row.get("cdc_size"),
        )

    @property
    def is_log(self) -> bool:
        """A log file (merge-on-read append): Hudi's HoodieDeltaWriteStat."""
        return self.log_version is not None

    def write_stat(self, compaction: CompactionCounts | None = None) -> WriteStat:
        """The commit metadata's write stat of this file: the one place a write stat is built
        (writes, one-pass bulk inserts and compactions; `compaction`: the counts only a compaction
        has, e.g. totalLogRecords)."""
        log = self.is_log
        stat = WriteStat(
            fileId=self.file_id,
            path=self.path,
            partitionPath=self.partition,
            prevCommit=self.prev_instant or "null",
            numWrites=self.num_writes,
            numDeletes=self.num_deletes,
            numUpdateWrites=self.num_updates,
            numInserts=self.num_inserts,
            totalWriteBytes=self.file_size,
            fileSizeInBytes=self.file_size,
            # a log file: the slice's base file name, its log files with the new one, the version
            # written and where this commit's blocks start (a new file)
            baseFile=(self.base_file or "") if log else None,
            logFiles=list(self.log_files or []) if log else None,
            logVersion=self.log_version if log else None,
            logOffset=0 if log else None,
            cdcStats={self.cdc_file: int(self.cdc_size or 0)} if self.cdc_file else None,
        )
        if compaction is None:
            return stat
        return replace(
            stat,
            totalLogRecords=compaction.log_records,
            totalLogFilesCompacted=compaction.log_files,
            totalLogSizeCompacted=compaction.log_size,
            totalUpdatedRecordsCompacted=self.num_updates,
            totalLogBlocks=compaction.log_blocks,
            totalRollbackBlocks=compaction.rollback_blocks,
        )


def totals(outcomes: list[WriteOutcome]) -> dict[str, int]:
    """Counts over `outcomes`: records inserted, updated, deleted and found stale."""
    return {
        "inserts": sum(o.num_inserts for o in outcomes),
        "updates": sum(o.num_updates for o in outcomes),
        "deletes": sum(o.num_deletes for o in outcomes),
        "stale": sum(o.num_stale for o in outcomes),
    }


__all__ = ["OUTCOME_SCHEMA", "CompactionCounts", "WriteOutcome", "totals"]
