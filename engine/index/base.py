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

    def update_location(self, ctx: TagContext, instant: str, written: Sequence[dict]) -> None:  # noqa: B027
        """Record new locations after a write (no-op for indexes that read the data files)."""

    def rollback_commit(self, meta: MetaClient, instant: str) -> None:  # noqa: B027
        """Undo `update_location` for a rolled-back instant (no-op for file-based indexes)."""
