"""The index contract: map incoming record keys to the file groups that hold them.

`tag_location` receives the deduplicated incoming records (columns `_hk`, `_hp` plus data)
and returns them with `_fid`: the file id holding the key, or null for a new record. A
global index may also rewrite `_hp` to the partition where the key lives.
`update_location` runs after the data files are written and before the commit completes;
`rollback_commit` undoes what `update_location` recorded for an instant.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame, SparkSession

from engine.index import FILE_ID_COL  # noqa: F401  (re-exported for implementations)
from engine.table.fs_view import FileSystemView
from engine.table.meta_client import MetaClient


@dataclass(frozen=True)
class TagContext:
    spark: SparkSession
    meta: MetaClient
    view: FileSystemView
    partitions: Sequence[str]  # the partitions the incoming batch touches
    # partition -> the incoming keys (as an Arrow array), when the batch is small enough to ship
    # to the scan tasks; None for batches too big for that (then indexes join instead)
    incoming_keys: Mapping[str, pa.Array] | None = None


class CountsParam(AccumulatorParam):
    """Spark accumulator of named counts (index statistics gathered in tasks)."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        return dict.fromkeys(value, 0)

    def addInPlace(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:  # noqa: N802 (Spark's name)
        for k, v in b.items():
            a[k] = a.get(k, 0) + v
        return a


EXISTING_PART_COL = "__hoodie_existing_partition"  # global indexes: where the key lives now
PREV_FILE_ID_COL = "__hoodie_prev_file_id"  # in `update_location`'s input: the file tagging found


def candidate_files(ctx: TagContext, is_global: bool) -> list:
    """Latest base files a lookup must consider: the touched partitions, or all for a global index."""
    from engine.read.scan import ScanFile

    parts = None if is_global else ctx.partitions
    return [ScanFile(b.path, b.partition, b.file_id) for b in ctx.view.latest_base_files(parts)]


def wanted_keys(ctx: TagContext, is_global: bool) -> Mapping[str, pa.Array] | None:
    """The incoming keys per partition (non-global) or all under ANY_PARTITION (global)."""
    from engine.read.scan import ANY_PARTITION

    if ctx.incoming_keys is None or not is_global:
        return ctx.incoming_keys
    keys = [k for arr in ctx.incoming_keys.values() for k in arr.to_pylist()]
    return {ANY_PARTITION: pa.array(sorted(set(keys)), pa.string())}


def untagged(records: DataFrame, is_global: bool) -> DataFrame:
    from pyspark.sql import functions as F

    out = records.withColumn(FILE_ID_COL, F.lit(None).cast("string"))
    return out.withColumn(EXISTING_PART_COL, F.lit(None).cast("string")) if is_global else out


def join_existing(records: DataFrame, existing: DataFrame, is_global: bool, small: bool) -> DataFrame:
    """Attach (file id[, existing partition]) of found keys; `existing` has KEYS_SCHEMA columns.

    Non-global indexes match (key, partition); global ones match the key alone and report the
    partition where it lives. `small`: `existing` was filtered to the batch's keys, so broadcast it.
    """
    from pyspark.sql import functions as F

    from engine.read.scan import KEYS_SCHEMA
    from engine.write.file_writer import KEY_COL, PART_COL

    key, part, fid = KEYS_SCHEMA.names
    if small:
        existing = F.broadcast(existing)
    cond = records[KEY_COL] == existing[key]
    if not is_global:
        cond = cond & (records[PART_COL] == existing[part])
    joined = records.join(existing, cond, "left").drop(key).withColumnRenamed(fid, FILE_ID_COL)
    return joined.withColumnRenamed(part, EXISTING_PART_COL) if is_global else joined.drop(part)


class Index(abc.ABC):
    """Maps record keys to file groups."""

    name: str = "INDEX"
    is_global: bool = False

    @abc.abstractmethod
    def tag_location(self, ctx: TagContext, records: DataFrame) -> DataFrame:
        """Return `records` with a `_fid` column (null where the key is new)."""

    def tagging_stats(self) -> dict[str, int]:
        """Counts describing the last `tag_location` (files pruned, read...); empty if none."""
        return {}

    # indexes that store locations themselves (HBase) get the written records' locations
    wants_locations: bool = False

    def check_available(self) -> None:  # noqa: B027
        """Fail early (before any file is written) when the index's backing service is unreachable."""

    def update_location(self, ctx: TagContext, instant: str, located: DataFrame) -> None:  # noqa: B027
        """Record the locations of a write's records, after its data files are written and before
        it completes. `located` has the key, partition, file id and op ("U"/"D") columns. Only
        called when `wants_locations`; a failure here leaves the commit uncompleted."""

    def update_stats(self) -> dict[str, int]:
        """Counts describing the last `update_location` (puts, deletes...); empty if none."""
        return {}

    def rollback_files(self, meta: MetaClient, instant: str) -> list[str]:
        """Index-owned files (paths relative to the table root) that `instant` wrote.

        A rollback plans them with the instant's data files and deletes them with those, so index
        and data vanish together. Empty for indexes that keep no files of their own.
        """
        return []

    def rollback_commit(  # noqa: B027
        self, meta: MetaClient, instant: str, change: RollbackChange, final: bool = True
    ) -> None:
        """Undo what `update_location` recorded for a rolled-back instant. Called once the instant
        is invisible (no longer completed) and before its data files (and `rollback_files`) are
        deleted; called again with the same or a smaller change when a crashed rollback resumes,
        so it must be idempotent. A restore rolls back several instants newest first and passes
        `final=True` with the last (oldest) only: work that covers them all (a rebuild) can wait
        for it. No-op for indexes that derive locations from the data files (SIMPLE, BLOOM)."""


@dataclass(frozen=True)
class RollbackChange:
    """How a rollback moves record locations back (computed from the data files, before deletion).

    `removed`: (key, partition, file_id) of records the rolled-back instant wrote (commit time ==
    instant) whose key does not exist in the slices it replaced: their index entries must go.
    `restored`: (key, partition, file_id, commit_time) of records in the replaced slices whose key
    the instant deleted or moved: their previous location becomes current again.
    Both tables are empty for a rollback that touched no file group.
    """

    removed: pa.Table
    restored: pa.Table
