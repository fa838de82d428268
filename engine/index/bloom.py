"""BLOOM index (Apache Hudi's default): key ranges and bloom filters in base-file footers.

For each latest base file of the touched partitions, a scan task
1. reads only the footer and keeps the incoming keys inside the file's [min, max] record-key
   range (binary search over the sorted incoming keys of that partition: O(log n) per file);
2. checks those candidates against the file's bloom filter;
3. reads the record-key column only when candidates survive, and keeps the exact matches, so a
   bloom false positive never tags a record to the wrong file.
Counts of files pruned by range, by bloom filter, and of false positives go into the commit's
extra metadata (`engine.index.*`).

Batches too big to ship their keys to the tasks fall back to the SIMPLE join.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from engine.data.keys import KEYS_SCHEMA
from engine.index.base import Index, TagContext, candidate_files, wanted_keys
from engine.index.simple import GlobalSimpleIndex, SimpleIndex

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

from engine.index.key_lookup import STAT_NAMES, locate_slices, lookup_task, sorted_keys


class BloomIndex(Index):
    """Non-global: a key is looked up in its own partition's files only."""

    name = "BLOOM"
    is_global = False

    def __init__(self) -> None:
        self.last_stats: dict[str, int] = {}

    def tag_location(self, ctx: TagContext, records: DataFrame) -> DataFrame:
        from pyspark.sql.pandas.types import from_arrow_schema

        from engine.data.scan import file_frame
        from engine.index.spark_tagging import CountsParam, join_existing, untagged

        self._counts = None
        files = candidate_files(ctx, self.is_global)
        if not files:
            self.last_stats = dict.fromkeys(STAT_NAMES, 0)
            return untagged(records, self.is_global)
        wanted = wanted_keys(ctx, self.is_global)
        if wanted is None:
            self.last_stats = {}
            return (GlobalSimpleIndex() if self.is_global else SimpleIndex()).tag_location(ctx, records)
        sc = ctx.spark.sparkContext
        shared = sc.broadcast(sorted_keys(wanted))
        self._counts = sc.accumulator(dict.fromkeys(STAT_NAMES, 0), CountsParam())
        existing = file_frame(ctx.spark, files).mapInArrow(
            lookup_task(ctx.meta.storage, shared, self._counts, ctx.merge), from_arrow_schema(KEYS_SCHEMA)
        )
        return join_existing(records, existing, self.is_global, small=True)

    def locate_batch(self, ctx: TagContext) -> pa.Table:
        """Footers (cached per file), bloom filters and the candidates' key columns read on the
        driver, in a few threads: no Spark job."""
        self._counts = None
        found, self.last_stats = locate_slices(ctx, self.is_global, prune=True)
        return found

    def tagging_stats(self) -> dict[str, int]:
        """Counts from the last tagging (available once the tagged records were computed)."""
        counts = getattr(self, "_counts", None)
        return dict(counts.value) if counts is not None else dict(self.last_stats)


class GlobalBloomIndex(BloomIndex):
    """Every partition's files are candidates; a key is found wherever it lives."""

    name = "GLOBAL_BLOOM"
    is_global = True
