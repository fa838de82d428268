"""Workload profile and bin-packing (pure): which file group each incoming record goes to.

Following Apache Hudi's UpsertPartitioner:
- every existing file group that receives updates or deletes gets an UPDATE bucket (it is
  rewritten once, merged with its incoming records);
- inserts first fill the partition's small files (latest base file smaller than
  `small_file_limit`) up to `max_file_size`, estimated with the average record size;
- the remaining inserts open new file groups (INSERT buckets) of at most
  `max_file_size / record_size` records each, spread evenly.

Insert records of a partition are numbered 0..n-1 by the executor; `InsertRange`s map those
numbers to buckets exactly, so no file exceeds its planned record count.

Merge-on-read (`MergeOnReadRules`), following Apache Hudi's SparkUpsertDeltaCommitPartitioner and
BaseSparkDeltaCommitActionExecutor: updates and deletes are appended to the log of the file
group's latest slice (an APPEND bucket), and inserts go to new base files, or to small files:
- an index that cannot index log files (BLOOM, SIMPLE): only slices without log files whose base
  file is under `small_file_limit`, the smallest `candidates_limit` of them, receive inserts; such
  a group is merged into a new base file version (its updates too), as on copy-on-write;
- an index that can (HBASE, RECORD): any latest slice whose size (base + logs x
  `log_to_parquet_ratio`) is under `max_file_size` takes inserts into its log.
Groups under a pending compaction are never small files; their appends start a new slice at the
compaction instant (`ExistingFile.log_base_instant`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from engine.timeline.commit_metadata import CommitMetadata


class BucketType(StrEnum):
    UPDATE = "UPDATE"  # rewrite an existing file group (merge)
    INSERT = "INSERT"  # create a new file group


@dataclass(frozen=True)
class ExistingFile:
    """The latest slice of a file group, as the planner needs it: its base file (copy-on-write:
    always one) and, on merge-on-read, its log files."""

    partition: str
    file_id: str
    instant: str  # the slice's base instant
    path: str | None  # the base file (None: a log-only slice)
    size: int  # the base file's size
    log_size: int = 0
    # the log file names of the slice the group's next log file goes to (while a compaction is
    # pending: the slice it started), in order
    log_names: tuple[str, ...] = ()
    # the instant the group's next log file is based on: the pending compaction's, else `instant`
    log_base_instant: str | None = None
    pending_compaction: bool = False


@dataclass(frozen=True)
class MergeOnReadRules:
    """How a merge-on-read write places records (see the module doc); Apache Hudi's defaults."""

    can_index_log_files: bool
    candidates_limit: int = 1  # hoodie.merge.small.file.group.candidates.limit
    log_to_parquet_ratio: float = 0.35  # hoodie.logfile.to.parquet.compression.ratio


@dataclass(frozen=True)
class PartitionWorkload:
    """What the incoming batch does to one partition."""

    partition: str
    inserts: int = 0
    updates: Mapping[str, int] = field(default_factory=dict)  # file id -> records tagged to it
    deletes: Mapping[str, int] = field(default_factory=dict)  # file id -> delete records found in it


@dataclass(frozen=True)
class Bucket:
    index: int
    kind: BucketType
    partition: str
    file_id: str
    prev_instant: str | None = None
    base_path: str | None = None
    planned_inserts: int = 0
    planned_updates: int = 0
    planned_deletes: int = 0
    # merge-on-read: append log blocks to the group's slice instead of writing a new base file
    append: bool = False
    log_base_instant: str | None = None  # the base instant of the log file an APPEND bucket writes
    log_names: tuple[str, ...] = ()  # the slice's existing log files (an APPEND bucket's next version follows them)


@dataclass(frozen=True)
class InsertRange:
    """Insert records number `start` (inclusive) to `end` (exclusive) of a partition go to `bucket`."""

    start: int
    end: int
    bucket: int


@dataclass(frozen=True)
class WritePlan:
    buckets: tuple[Bucket, ...]
    insert_ranges: Mapping[str, tuple[InsertRange, ...]]
    record_size: int

    def update_bucket(self, partition: str, file_id: str) -> int:
        return self._update_index[(partition, file_id)]

    @property
    def _update_index(self) -> dict[tuple[str, str], int]:
        return {(b.partition, b.file_id): b.index for b in self.buckets if b.kind is BucketType.UPDATE}

    def lookup_tables(self) -> tuple[dict[tuple[str, str], int], dict[str, tuple[InsertRange, ...]]]:
        """Plain dicts for the executor's tasks."""
        return self._update_index, dict(self.insert_ranges)


def estimate_record_size(commits: Iterable[CommitMetadata], default: int, min_bytes: int = 0) -> int:
    """Average bytes per record of the newest commit that wrote enough, else `default`.

    `commits` must be ordered newest first.
    """
    for meta in commits:
        totals = meta.totals()
        if totals["writes"] > 0 and totals["bytes"] > min_bytes:
            return max(1, totals["bytes"] // totals["writes"])
    return default


def plan_writes(
    workloads: Iterable[PartitionWorkload],
    existing: Mapping[str, Iterable[ExistingFile]],
    *,
    max_file_size: int,
    small_file_limit: int,
    record_size: int,
    new_file_id: Callable[[], str],
    use_small_files: bool = True,
    mor: MergeOnReadRules | None = None,
) -> WritePlan:
    """Assign each partition's updates and inserts to buckets (see module doc); `mor`: the table
    is merge-on-read, with these rules."""
    record_size = max(1, record_size)
    per_new_file = max(1, max_file_size // record_size)
    buckets: list[Bucket] = []
    ranges: dict[str, tuple[InsertRange, ...]] = {}
    for wl in sorted(workloads, key=lambda w: w.partition):
        files = {f.file_id: f for f in existing.get(wl.partition, ())}
        update_slots: dict[str, dict] = {}
        for fid in sorted(set(wl.updates) | set(wl.deletes)):
            update_slots[fid] = {
                "updates": wl.updates.get(fid, 0),
                "deletes": wl.deletes.get(fid, 0),
                "inserts": 0,
                "merge": mor is None,
            }
        remaining = wl.inserts
        if use_small_files and remaining > 0:
            for small, size, merge in _small_files(files.values(), small_file_limit, max_file_size, mor):
                if remaining == 0:
                    break
                capacity = (max_file_size - size) // record_size
                if capacity <= 0:
                    continue
                take = min(capacity, remaining)
                slot = update_slots.setdefault(small.file_id, {"updates": 0, "deletes": 0, "inserts": 0, "merge": merge})
                slot["merge"] = slot["merge"] or merge
                slot["inserts"] += take
                remaining -= take
        start = len(buckets)
        for fid, slot in update_slots.items():
            f = files.get(fid)
            append = not slot["merge"]
            buckets.append(
                Bucket(
                    index=len(buckets),
                    kind=BucketType.UPDATE,
                    partition=wl.partition,
                    file_id=fid,
                    prev_instant=f.instant if f else None,
                    base_path=f.path if f else None,
                    planned_inserts=slot["inserts"],
                    planned_updates=slot["updates"],
                    planned_deletes=slot["deletes"],
                    append=append,
                    log_base_instant=(f.log_base_instant or f.instant) if (append and f) else None,
                    log_names=f.log_names if (append and f) else (),
                )
            )
        part_ranges: list[InsertRange] = []
        cursor = 0
        for b in buckets[start:]:
            if b.planned_inserts:
                part_ranges.append(InsertRange(cursor, cursor + b.planned_inserts, b.index))
                cursor += b.planned_inserts
        if remaining > 0:
            n_new = -(-remaining // per_new_file)
            base, extra = divmod(remaining, n_new)
            for i in range(n_new):
                count = base + (1 if i < extra else 0)
                b = Bucket(
                    index=len(buckets),
                    kind=BucketType.INSERT,
                    partition=wl.partition,
                    file_id=new_file_id(),
                    planned_inserts=count,
                )
                buckets.append(b)
                part_ranges.append(InsertRange(cursor, cursor + count, b.index))
                cursor += count
        if part_ranges:
            ranges[wl.partition] = tuple(part_ranges)
    return WritePlan(tuple(buckets), ranges, record_size)


def _small_files(
    files: Iterable[ExistingFile], small_file_limit: int, max_file_size: int, mor: MergeOnReadRules | None
) -> list[tuple[ExistingFile, int, bool]]:
    """(file, size counted against max_file_size, merge into a new base file?) of the small files
    that take inserts, in the order they are filled."""
    if mor is None:
        small = sorted((f for f in files if f.size < small_file_limit), key=lambda f: (f.size, f.file_id))
        return [(f, f.size, True) for f in small]
    eligible = [f for f in files if not f.pending_compaction]
    if mor.can_index_log_files:
        sized = [(f, f.size + int(f.log_size * mor.log_to_parquet_ratio)) for f in eligible]
        return [(f, n, False) for f, n in sorted(sized, key=lambda t: (t[1], t[0].file_id)) if n < max_file_size]
    if small_file_limit <= 0:
        return []
    base_only = sorted(
        (f for f in eligible if not f.log_names and f.path is not None and f.size < small_file_limit),
        key=lambda f: (f.size, f.file_id),
    )
    return [(f, f.size, True) for f in base_only[: mor.candidates_limit]]


def bucket_for_insert(ranges: tuple[InsertRange, ...], number: int) -> int:
    """The bucket of insert record `number` of a partition."""
    pos = bisect.bisect_right([r.start for r in ranges], number) - 1
    if pos < 0 or number >= ranges[pos].end:
        raise IndexError(f"insert number {number} is outside the planned ranges")
    return ranges[pos].bucket
