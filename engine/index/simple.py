"""SIMPLE and GLOBAL_SIMPLE indexes: join incoming keys with the keys read from the latest base files.

SIMPLE reads the touched partitions' files and matches (key, partition); GLOBAL_SIMPLE reads every
partition's files and matches the key alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from engine.index.base import Index, TagContext, candidate_files, wanted_keys

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class SimpleIndex(Index):
    name = "SIMPLE"
    is_global = False

    def tag_location(self, ctx: TagContext, records: DataFrame) -> DataFrame:
        from engine.data.scan import scan_keys
        from engine.index.spark_tagging import join_existing, untagged

        files = candidate_files(ctx, self.is_global)
        if not files:
            return untagged(records, self.is_global)
        wanted = wanted_keys(ctx, self.is_global)
        existing = scan_keys(ctx.spark, ctx.meta.storage, files, wanted, ctx.merge)
        return join_existing(records, existing, self.is_global, small=wanted is not None)

    def locate_batch(self, ctx: TagContext) -> pa.Table:
        """The touched (global: all) partitions' keys read on the driver, only the incoming ones kept."""
        from engine.index.key_lookup import locate_slices

        return locate_slices(ctx, self.is_global, prune=False)[0]


class GlobalSimpleIndex(SimpleIndex):
    """A key is found in whichever partition holds it."""

    name = "GLOBAL_SIMPLE"
    is_global = True
