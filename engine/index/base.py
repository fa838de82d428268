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
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.columns import EXISTING_PART_COL, FILE_ID_COL, PREV_FILE_ID_COL  # noqa: F401  (re-exported)
from engine.data.keys import ANY_PARTITION, ScanFile, SliceMerge
from engine.table.fs_view import FileSystemView
from engine.table.meta_client import MetaClient

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class TagContext:
    """What `tag_location` may use: the session, the table, its file-system view and the batch's keys."""

    spark: SparkSession
    meta: MetaClient
    view: FileSystemView
    partitions: Sequence[str]  # the partitions the incoming batch touches
    # partition -> the incoming keys (as an Arrow array), when the batch is small enough to ship
    # to the scan tasks; None for batches too big for that (then indexes join instead)
    incoming_keys: Mapping[str, pa.Array] | None = None
    # merge-on-read: how lookups that read the data files merge slices with log files (a key
    # deleted in a log is not there); None for tables whose slices are base files
    merge: SliceMerge | None = None


def candidate_files(ctx: TagContext, is_global: bool) -> list[ScanFile]:
    """Latest slices a lookup must consider: the touched partitions, or all for a global index."""
    return [ScanFile.of_slice(s) for s in ctx.view.latest_slices(None if is_global else ctx.partitions)]


def wanted_keys(ctx: TagContext, is_global: bool) -> Mapping[str, pa.Array] | None:
    """The incoming keys per partition (non-global) or all of them, distinct, under ANY_PARTITION
    (global); None when the batch's keys are not on the driver."""
    incoming = ctx.incoming_keys
    if incoming is None or not is_global:
        return incoming
    arrays = [a for a in incoming.values() if len(a)]
    every = pa.chunked_array(arrays, pa.string()).combine_chunks() if arrays else pa.array([], pa.string())
    return {ANY_PARTITION: pc.unique(every)}


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

    def locate_batch(self, ctx: TagContext) -> pa.Table | None:
        """The driver-side lookup of a batch held on the driver (`ctx.incoming_keys`, never None
        here): KEYS_SCHEMA rows (key, partition where it lives, file id) of the keys the table
        holds, with `tagging_stats` set as `tag_location` sets them. None: this index looks keys
        up only on Spark, and the write takes the distributed path."""
        return None

    # indexes that store locations themselves (HBase) get the written records' locations
    wants_locations: bool = False
    # whether update_location accepts an Arrow table of located rows (the one-job write's, on the driver)
    updates_on_driver: bool = False
    # Apache Hudi's canIndexLogFiles: the index finds keys whose only copy is in a log file (it
    # stores locations), so merge-on-read inserts may go to logs (HBASE, RECORD; not BLOOM/SIMPLE)
    can_index_log_files: bool = False

    def check_available(self) -> None:  # noqa: B027
        """Fail early (before any file is written) when the index's backing service is unreachable."""

    def update_location(self, ctx: TagContext, instant: str, located: DataFrame | pa.Table) -> None:  # noqa: B027
        """Record the locations of a write's records, after its data files are written and before
        it completes. `located` has the key, partition, file id and op ("U"/"D") columns: a
        DataFrame, or an Arrow table on the driver when the write ran as one job and the index
        `updates_on_driver`. Only called when `wants_locations`; a failure here leaves the commit
        uncompleted."""

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
