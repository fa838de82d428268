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

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.constants import FOOTER_MAX_RECORD_KEY, FOOTER_MIN_RECORD_KEY
from engine.data.base_file import read_footer
from engine.data.keys import ANY_PARTITION, KEYS_SCHEMA, SliceMerge, keys_batch, live_keys
from engine.index.base import Index, TagContext
from engine.index.bloom_filter import bloom_filter_from_footer
from engine.index.murmur import hash_chain_arrow
from engine.index.simple import GlobalSimpleIndex, SimpleIndex
from engine.storage import Storage

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator
    from pyspark.broadcast import Broadcast
    from pyspark.sql import DataFrame

STAT_NAMES = ("files", "range_pruned", "bloom_pruned", "files_read", "candidates", "false_positives")


def range_bounds(sorted_keys: np.ndarray, low: str | None, high: str | None) -> tuple[int, int]:
    """[start, end) of the keys of `sorted_keys` inside [low, high] (binary search; all of them when
    the footer has no range)."""
    if low is None or high is None:
        return 0, len(sorted_keys)
    return (
        int(np.searchsorted(sorted_keys, low, side="left")),
        int(np.searchsorted(sorted_keys, high, side="right")),
    )


def candidates_in_range(sorted_keys: np.ndarray, low: str | None, high: str | None) -> np.ndarray:
    start, end = range_bounds(sorted_keys, low, high)
    return sorted_keys[start:end]


class _Chains:
    """Per task: each partition's candidate keys hashed once, reused for every file's filter."""

    def __init__(self, lookup: Mapping[str, np.ndarray]) -> None:
        self.lookup = lookup
        self.cache: dict[tuple[str, int], np.ndarray] = {}

    def get(self, partition: str, num_hashes: int) -> np.ndarray:
        key = (partition, num_hashes)
        if key not in self.cache:
            keys = self.lookup.get(partition, self.lookup.get(ANY_PARTITION))
            assert keys is not None  # the caller found keys for this partition
            self.cache[key] = hash_chain_arrow(pa.array(keys, pa.string()), num_hashes)
        return self.cache[key]


def _lookup_task(storage: Storage, wanted: Broadcast, counts: Accumulator, merge: SliceMerge | None):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from engine.read.scan import scan_files_of

        lookup: dict[str, np.ndarray] = wanted.value
        chains = _Chains(lookup)
        local = dict.fromkeys(STAT_NAMES, 0)
        for file in scan_files_of(batches):
            partition = file.partition
            keys = lookup.get(partition, lookup.get(ANY_PARTITION))
            if keys is None or len(keys) == 0:
                continue
            local["files"] += 1
            start, end, bloom = 0, len(keys), None
            if file.path is not None:  # a log-only slice has no footer to prune with
                footer = read_footer(storage, file.path)
                low = footer.get(FOOTER_MIN_RECORD_KEY.encode())
                high = footer.get(FOOTER_MAX_RECORD_KEY.encode())
                start, end = range_bounds(keys, low.decode() if low else None, high.decode() if high else None)
                bloom = bloom_filter_from_footer(footer)
            if start >= end:
                local["range_pruned"] += 1
                continue
            candidates = keys[start:end]
            if bloom is not None:
                chain = chains.get(partition, bloom.num_hashes)[start:end]
                candidates = candidates[bloom.contains_chain(chain)]
            if len(candidates) == 0:
                local["bloom_pruned"] += 1
                continue
            local["files_read"] += 1
            local["candidates"] += len(candidates)
            # the slice's live keys (merge-on-read: a key deleted in a log file is gone)
            stored = live_keys(storage, file, pa.array(candidates, pa.string()), merge)
            matched = pc.unique(stored)
            local["false_positives"] += len(candidates) - len(matched)
            if len(matched):
                yield keys_batch(matched, partition, file.file_id)
        counts.add(local)

    return run


class BloomIndex(Index):
    """Non-global: a key is looked up in its own partition's files only."""

    name = "BLOOM"
    is_global = False

    def __init__(self) -> None:
        self.last_stats: dict[str, int] = {}

    def tag_location(self, ctx: TagContext, records: DataFrame) -> DataFrame:
        from pyspark.sql.pandas.types import from_arrow_schema

        from engine.index.spark_tagging import (
            CountsParam,
            candidate_files,
            join_existing,
            untagged,
            wanted_keys,
        )
        from engine.read.scan import file_frame

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
        shared = sc.broadcast(_sorted_keys(wanted))
        self._counts = sc.accumulator(dict.fromkeys(STAT_NAMES, 0), CountsParam())
        existing = file_frame(ctx.spark, files).mapInArrow(
            _lookup_task(ctx.meta.storage, shared, self._counts, ctx.merge), from_arrow_schema(KEYS_SCHEMA)
        )
        return join_existing(records, existing, self.is_global, small=True)

    def tagging_stats(self) -> dict[str, int]:
        """Counts from the last tagging (available once the tagged records were computed)."""
        counts = getattr(self, "_counts", None)
        return dict(counts.value) if counts is not None else dict(self.last_stats)


class GlobalBloomIndex(BloomIndex):
    """Every partition's files are candidates; a key is found wherever it lives."""

    name = "GLOBAL_BLOOM"
    is_global = True


def _sorted_keys(incoming: Mapping[str, pa.Array]) -> dict[str, np.ndarray]:
    return {part: np.sort(np.asarray(keys.to_pylist(), dtype=object)) for part, keys in incoming.items()}
