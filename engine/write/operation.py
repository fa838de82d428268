"""Write operations and their result."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from engine.serial import Documented


class Operation(StrEnum):
    """Values are Apache Hudi's `operationType` strings."""

    UPSERT = "UPSERT"
    INSERT = "INSERT"
    BULK_INSERT = "BULK_INSERT"
    DELETE = "DELETE"
    # replacecommits: the records become new file groups replacing every existing one (TABLE) or
    # those of the partitions the input touches
    INSERT_OVERWRITE = "INSERT_OVERWRITE"
    INSERT_OVERWRITE_TABLE = "INSERT_OVERWRITE_TABLE"

    @property
    def tags(self) -> bool:
        """Operations that look records up in the index (insert and bulk insert do not)."""
        return self in (Operation.UPSERT, Operation.DELETE)

    @property
    def replaces(self) -> bool:
        """Operations that replace existing file groups (a `replacecommit`, not a commit)."""
        return self in (Operation.INSERT_OVERWRITE, Operation.INSERT_OVERWRITE_TABLE)


@dataclass(frozen=True)
class WriteResult(Documented):
    """What one write did. `instant` is None when the input was empty and nothing was committed."""

    instant: str | None
    operation: Operation
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    absent_deletes: int = 0  # delete keys that were not in the table (no-ops)
    stale_ignored: int = 0  # incoming records older (precombine) than the stored ones
    duplicates_dropped: int = 0  # incoming records that lost the in-batch dedupe
    input_records: int = 0
    files_written: int = 0
    partitions: tuple[str, ...] = field(default=())
    bytes_written: int = 0
    replaced_file_groups: int = 0  # insert_overwrite: the existing file groups it replaced
    seconds: float = 0.0
    index_stats: dict[str, int] = field(default_factory=dict)  # e.g. BLOOM: files pruned by range/bloom
    # automatic table services run after the commit (clean: instant + files deleted; archived: times)
    services: dict[str, object] = field(default_factory=dict)
    # what the repair before the write did (failed writes rolled back...), None if nothing
    repaired: object | None = None
    # how the files were written: "local" (the driver's threads, no Spark job), "one-job" (planned
    # on the driver, one Spark job), "distributed" (a Spark job per step), "bulk-stream"; "" if none
    write_path: str = ""

