"""Finding keys in base files through their footers: the key-range and bloom-filter pruning of the
BLOOM index (`engine.index.bloom`), in Spark tasks (`lookup_files`) or on the driver in a few
threads (`locate_on_driver`: the one-job path's lookups of BLOOM, and of SIMPLE without pruning).

For each candidate base file:
1. the footer only, keeping the incoming keys inside the file's [min, max] record-key range
   (binary search over the sorted incoming keys of that partition: O(log n) per file);
2. those candidates against the file's bloom filter;
3. the record-key column only when candidates survive, keeping the exact matches, so a bloom
   false positive never tags a record to the wrong file.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.constants import FOOTER_MAX_RECORD_KEY, FOOTER_MIN_RECORD_KEY
from engine.data.base_file import read_footer
from engine.data.keys import ANY_PARTITION, KEYS_SCHEMA, ScanFile, SliceMerge, keys_batch, live_keys
from engine.index.base import TagContext, candidate_files, wanted_keys
from engine.index.bloom_filter import BloomFilter, bloom_filter_from_footer
from engine.keygen.murmur import hash_chain_arrow
from engine.storage import Storage

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator
    from pyspark.broadcast import Broadcast

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
    """Each partition's candidate keys hashed once, reused for every file's filter.

    `eager`: the first request for a hash count hashes every partition's keys in one call (few
    numpy calls on long arrays instead of many on short ones: the driver looks up all of them);
    otherwise partition by partition (a Spark task sees only some partitions' files). Thread-safe."""

    def __init__(self, lookup: Mapping[str, np.ndarray], eager: bool = False) -> None:
        self.lookup = lookup
        self.eager = eager
        self.cache: dict[tuple[str, int], np.ndarray] = {}
        self._lock = threading.Lock()

    def get(self, partition: str, num_hashes: int) -> np.ndarray:
        """The hash chain of the keys `lookup_files` takes for a file of `partition`: the
        partition's own, else a global lookup's any-partition keys."""
        key = (partition if partition in self.lookup else ANY_PARTITION, num_hashes)
        with self._lock:
            if key not in self.cache:
                if self.eager:
                    self._hash_all(num_hashes)
                else:
                    keys = self.lookup.get(key[0])
                    assert keys is not None  # the caller found keys for this partition
                    self.cache[key] = hash_chain_arrow(pa.array(keys, pa.string()), num_hashes)
            return self.cache[key]

    def _hash_all(self, num_hashes: int) -> None:
        parts = [p for p, keys in self.lookup.items() if len(keys)]
        if not parts:
            return
        chain = hash_chain_arrow(
            pa.array(np.concatenate([self.lookup[p] for p in parts]), pa.string()), num_hashes
        )
        start = 0
        for p in parts:
            end = start + len(self.lookup[p])
            self.cache[(p, num_hashes)] = chain[start:end]
            start = end


def lookup_files(
    storage: Storage,
    files: Iterable[ScanFile],
    lookup: Mapping[str, np.ndarray],
    merge: SliceMerge | None,
    stats: dict[str, int],
    footers: Callable[[Storage, str], dict[bytes, bytes]] = read_footer,
    chains: _Chains | None = None,
) -> Iterator[pa.RecordBatch]:
    """KEYS_SCHEMA batches of the keys of `lookup` (partition -> sorted keys) that `files` hold:
    pruned by key range and bloom filter, then matched exactly; counts added to `stats`."""
    chains = chains or _Chains(lookup)
    for file in files:
        partition = file.partition
        keys = lookup.get(partition, lookup.get(ANY_PARTITION))
        if keys is None or len(keys) == 0:
            continue
        stats["files"] += 1
        start, end, bloom = 0, len(keys), None
        if file.path is not None:  # a log-only slice has no footer to prune with
            footer = footers(storage, file.path)
            low = footer.get(FOOTER_MIN_RECORD_KEY.encode())
            high = footer.get(FOOTER_MAX_RECORD_KEY.encode())
            start, end = range_bounds(keys, low.decode() if low else None, high.decode() if high else None)
            bloom = cached_bloom(storage, file.path, footer)
        if start >= end:
            stats["range_pruned"] += 1
            continue
        candidates = keys[start:end]
        if bloom is not None:
            chain = chains.get(partition, bloom.num_hashes)[start:end]
            candidates = candidates[bloom.contains_chain(chain)]
        if len(candidates) == 0:
            stats["bloom_pruned"] += 1
            continue
        stats["files_read"] += 1
        stats["candidates"] += len(candidates)
        # the slice's live keys (merge-on-read: a key deleted in a log file is gone)
        stored = live_keys(storage, file, pa.array(candidates, pa.string()), merge)
        matched = pc.unique(stored)
        stats["false_positives"] += len(candidates) - len(matched)
        if len(matched):
            yield keys_batch(matched, partition, file.file_id)


def lookup_task(storage: Storage, wanted: Broadcast, counts: Accumulator, merge: SliceMerge | None):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from engine.data.scan import scan_files_of

        local = dict.fromkeys(STAT_NAMES, 0)
        yield from lookup_files(storage, scan_files_of(batches), wanted.value, merge, local)
        counts.add(local)

    return run


def locate_on_driver(
    storage: Storage,
    files: Sequence[ScanFile],
    incoming: Mapping[str, pa.Array],
    merge: SliceMerge | None,
    threads: int,
    prune: bool = True,
) -> tuple[pa.Table, dict[str, int]]:
    """The BLOOM (prune=True) or SIMPLE lookup of `incoming` (partition -> keys) in `files`, on
    the driver: KEYS_SCHEMA rows of the keys found, and the lookup's counts. Footers come from a
    per-process cache (file names are unique per write, so a path never changes content)."""
    from concurrent.futures import ThreadPoolExecutor

    # only the keys of partitions that have files to look in (new partitions: nothing to sort or hash)
    held = {f.partition for f in files}
    lookup = sorted_keys({p: k for p, k in incoming.items() if p in held or p == ANY_PARTITION})
    footers = cached_footer if prune else _no_footer
    chains = _Chains(lookup, eager=True)
    chunks = [list(files[i :: max(1, threads)]) for i in range(max(1, threads))]

    def run(chunk: list[ScanFile]) -> tuple[list[pa.RecordBatch], dict[str, int]]:
        stats = dict.fromkeys(STAT_NAMES, 0)
        return list(lookup_files(storage, chunk, lookup, merge, stats, footers, chains)), stats

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        results = list(pool.map(run, chunks))
    batches = [b for found, _s in results for b in found]
    totals = dict.fromkeys(STAT_NAMES, 0)
    for _found, stats in results:
        for k, v in stats.items():
            totals[k] += v
    return pa.Table.from_batches(batches, schema=KEYS_SCHEMA), totals


DRIVER_THREADS = 4  # footer and key-column reads on the driver overlap their I/O


def locate_slices(ctx: TagContext, is_global: bool, prune: bool) -> tuple[pa.Table, dict[str, int]]:
    """`locate_on_driver` over the lookup's candidate slices with the batch's keys (`Index.locate_batch`
    of BLOOM, prune=True, and SIMPLE)."""
    files = candidate_files(ctx, is_global)
    keys = wanted_keys(ctx, is_global)
    assert keys is not None, "a driver-side lookup needs the batch's keys"
    if not files:
        return KEYS_SCHEMA.empty_table(), dict.fromkeys(STAT_NAMES, 0)
    return locate_on_driver(ctx.meta.storage, files, keys, ctx.merge, DRIVER_THREADS, prune)


def _no_footer(storage: Storage, path: str) -> dict[bytes, bytes]:
    return {}


_BLOOMS_LOCK = threading.Lock()
FOOTER_CACHE_FILES = 512  # parsed bloom filters kept: ~0.3 MB each at Hudi's default sizing


def cached_footer(storage: Storage, path: str) -> dict[bytes, bytes]:
    """`read_footer`, its parsed footer remembered by this process (`read_parquet_metadata` with
    `remember`), so that the key and row reads of the file that follow do not parse it again."""
    return read_footer(storage, path, remember=True)


_BLOOMS: OrderedDict[tuple[str, str], BloomFilter | None] = OrderedDict()


def cached_bloom(storage: Storage, path: str, footer: Mapping[bytes, bytes]) -> BloomFilter | None:
    """The bloom filter of base file `path` (whose footer is `footer`), parsed once per process for
    the last FOOTER_CACHE_FILES files: a local write parses the filters it tagged with only once,
    then extends them. Filters are never changed in place (`extended_for_keys` copies)."""
    key = (storage.base_uri, path)
    with _BLOOMS_LOCK:
        if key in _BLOOMS:
            _BLOOMS.move_to_end(key)
            return _BLOOMS[key]
    bloom = bloom_filter_from_footer(footer)
    with _BLOOMS_LOCK:
        _BLOOMS[key] = bloom
        while len(_BLOOMS) > FOOTER_CACHE_FILES:
            _BLOOMS.popitem(last=False)
    return bloom


def sorted_keys(incoming: Mapping[str, pa.Array]) -> dict[str, np.ndarray]:
    """partition -> its keys sorted (Arrow's byte order of UTF-8 is Python's code-point order)."""
    return {
        part: keys.take(pc.array_sort_indices(keys)).to_numpy(zero_copy_only=False)
        for part, keys in incoming.items()
    }
