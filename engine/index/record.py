"""RECORD index (global): record key -> (partition, file id) entries stored inside the table.

The bucketed, sorted-file index of Apache Hudi's HFile index design (realised there as the
metadata table's record index), kept in `.hoodie/.record_index/` (file layout, validity rules
and lookups: `engine.index.record_files`; hashes: `engine.keygen.record_hash`).

- Buckets: `hoodie.record.index.buckets` (default 16), fixed at table creation in
  `hoodie.properties` with the hash function (`hoodie.record.index.hash.function`, default
  Java's `String.hashCode`, bucket `abs(h % N)` as in Apache Hudi).
- Writes (`update_location`, after the data files, before the commit completes): one file per
  bucket the write touches, named by its instant, holding entries for inserts (wherever they
  land: new file groups, small files, or a new partition after a partition-path change) and
  tombstones for deletes. Updates in place write nothing: their location did not change.
- Atomicity: a delta file counts only once its instant is completed on the timeline, so index
  and data become visible together. A failed write's files are ignored and deleted by the next
  write; `rollback_files` names an instant's files so a rollback deletes them with its data.
- Lookups: keys are grouped by bucket and each bucket's files are binary-searched, newest entry
  first; a tombstone means absent. On Spark (`tag_location` of big batches) one task searches a
  group of buckets; small batches (`hoodie.record.index.lookup=auto`, up to
  `hoodie.record.index.driver.max.keys`, default 1,000,000 keys, shipped to the driver anyway by
  the write's summary) are searched on the driver with pyarrow/numpy in a thread pool, which
  avoids a Spark job (~100+ ms by itself). `driver` / `spark` force one path.
- Compaction: at the start of a write's `update_location`, every bucket holding more than
  `hoodie.record.index.compaction.max.files` (default 4) files is merged into one base file
  (tombstones and superseded entries dropped), in Spark tasks. It is recorded in the index
  folder, not on the Hudi timeline (a new action in `.hoodie/` would be an unknown instant to
  Hudi readers): `<C>.compaction.requested` holds the plan, `<C>.compaction` is written once
  every base file exists, with `C` a fresh instant time. Lookups use a base file only once its
  completed marker exists, so a crash midway leaves the old files valid; the next write deletes
  the orphans (and the inputs of completed compactions).
- Rollback after compaction: a base file's plan records the newest instant it covers. Rolling
  back an instant at or before that (a restore) would lose the entries the compaction dropped,
  so `rollback_commit` rebuilds those buckets from the data files (the table's latest base
  files, after the rollback deleted the instant's files) as a new compaction that supersedes all
  of the bucket's files. This reads the key columns of the whole table on the driver: rare, slow
  on big tables, and always exact. Instants newer than every base's coverage need nothing: their
  delta files were deleted by the rollback (`rollback_files`).
- Failed writes: a write's delta files are written, and orphans deleted, only while it holds the
  table lock (a single writer for its whole write; under optimistic concurrency control from its
  commit check on), so the files of an uncompleted instant that a writer finds are a failed
  write's, never those of a concurrent writer still at work.

Write options (`hoodie.record.index.*`): `compaction.max.files`, `lookup` (auto|driver|spark),
`driver.max.keys`, `lookup.threads` (driver-path threads, default 2).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.columns import FILE_ID_COL, KEY_COL, OP_COL, OP_DELETE, OP_UPSERT, PART_COL, PREV_FILE_ID_COL
from engine.data.keys import ANY_PARTITION, KEYS_SCHEMA
from engine.errors import IndexChangedError
from engine.index import record_service
from engine.index.base import Index, RollbackChange, TagContext, wanted_keys
from engine.index.record_files import (
    INDEX_FOLDER,
    IndexFile,
    entries_table,
    list_index,
    lookup,
    plan_write_entries,
    resolve_state,
    write_entries,
)
from engine.index.record_service import (
    RecordIndexSettings,
    clean_orphans,
    fresh_instant,
    load_state,
    plan_compaction,
    run_compaction,
    validity,
)
from engine.keygen.record_hash import DEFAULT_BUCKETS, buckets_of, hash_function
from engine.storage import Storage
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["DEFAULT_BUCKETS", "RecordIndex", "load_state"]

BUCKET_COL = "__hoodie_index_bucket"

DELTA_STATS_SCHEMA = pa.schema(
    [("bucket", pa.int32()), ("entries", pa.int64()), ("tombstones", pa.int64()), ("bytes", pa.int64())]
)


def _bucket_task(buckets: int, hash_name: str, key_index: int = 0):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        hasher = hash_function(hash_name)
        for batch in batches:
            b = buckets_of(batch.column(key_index), buckets, hasher)
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(b, pa.int32())], names=[*batch.schema.names, BUCKET_COL]
            )

    return run


def _lookup_task(storage: Storage, shared: Any, buckets: int, hash_name: str):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = [b.column(0) for b in batches]
        if not received:
            return
        keys = pc.unique(pa.chunked_array(received, pa.string()).combine_chunks())
        found = lookup(storage, shared.value, keys, buckets, hash_function(hash_name))
        if found.num_rows:
            yield from found.rename_columns(KEYS_SCHEMA.names).cast(KEYS_SCHEMA).to_batches()

    return run


def _write_delta_task(storage: Storage, instant: str, hash_name: str, has_prev: bool):
    def run(table: pa.Table) -> pa.Table:
        return write_bucket_delta(storage, instant, hash_name, has_prev, table.column(BUCKET_COL)[0].as_py(), table)

    return run


def write_bucket_delta(
    storage: Storage, instant: str, hash_name: str, has_prev: bool, bucket: int, table: pa.Table
) -> pa.Table:
    """Write one bucket's delta file of `instant` from its located rows; its DELTA_STATS_SCHEMA row."""
    prev = table.column(PREV_FILE_ID_COL).combine_chunks() if has_prev else None
    keys, parts, fids, deleted = plan_write_entries(
        table.column(KEY_COL).combine_chunks(),
        table.column(PART_COL).combine_chunks(),
        table.column(FILE_ID_COL).combine_chunks(),
        table.column(OP_COL).combine_chunks(),
        prev,
        OP_UPSERT,
        OP_DELETE,
    )
    size = 0
    tombstones = int(pc.sum(deleted).as_py() or 0)
    if len(keys):
        instants = pa.array([instant] * len(keys), pa.string())
        entries = entries_table(keys, parts, fids, instants, deleted, hash_function(hash_name))
        size = write_entries(storage, IndexFile(bucket, instant), entries)
    return pa.table(
        [[bucket], [len(keys) - tombstones], [tombstones], [size]], schema=DELTA_STATS_SCHEMA
    )


def _write_deltas_on_driver(
    storage: Storage, instant: str, s: RecordIndexSettings, has_prev: bool, located: pa.Table
) -> list[dict]:
    """`update_location`'s delta files written on the driver, one per bucket, in threads."""
    from concurrent.futures import ThreadPoolExecutor

    from engine.data.batch import split_by_bucket

    located = located.combine_chunks()
    buckets = pa.array(buckets_of(located.column(KEY_COL), s.buckets, s.hasher()), pa.int32())
    parts = split_by_bucket(located, buckets)
    with ThreadPoolExecutor(max_workers=max(1, s.threads)) as pool:
        tables = list(
            pool.map(lambda item: write_bucket_delta(storage, instant, s.hash_name, has_prev, *item), parts.items())
        )
    return [row for t in tables for row in t.to_pylist()]


class RecordIndex(Index):
    """Global index of sorted, bucketed entry files stored in the table (see the module docstring)."""

    name = "RECORD"
    is_global = True
    wants_locations = True
    updates_on_driver = True
    can_index_log_files = True

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        self.options = dict(options or {})
        self._tag_stats: dict[str, int] = {}
        self._update_stats: dict[str, int] = {}

    def settings(self, meta: MetaClient) -> RecordIndexSettings:
        return RecordIndexSettings.from_config(meta.config, self.options)

    # ---- lookups -------------------------------------------------------------------------
    def locate(self, meta: MetaClient, keys: pa.Array, timeline: Timeline | None = None) -> pa.Table:
        """(key, partition, file id) of the distinct `keys` the index holds, searched on the driver.

        With `timeline`, the answer is the index as of that timeline; if a file it needs was
        deleted meanwhile (a rollback), IndexChangedError tells the caller to take a newer
        timeline. Without one, the latest timeline is used and such a lookup is retried."""
        s = self.settings(meta)
        return _retrying(meta, timeline, lambda state: lookup(meta.storage, state, keys, s.buckets, s.hasher(), s.threads))

    def tag_location(self, ctx: TagContext, records: DataFrame) -> DataFrame:
        """`records` + FILE_ID_COL and EXISTING_PART_COL of the keys the index holds."""
        from pyspark.sql.pandas.types import from_arrow_schema

        from engine.data.scan import scan_parallelism
        from engine.index.spark_tagging import join_existing, untagged

        s = self.settings(ctx.meta)
        state = load_state(ctx.meta)
        files = sum(b.file_count for b in state.buckets.values())
        if state.is_empty:
            self._tag_stats = {"files": 0, "keys": 0, "found": 0}
            return untagged(records, True)
        keys = _incoming_keys(ctx)
        driver = s.lookup_mode == "driver" or (
            s.lookup_mode == "auto" and keys is not None and len(keys) <= s.driver_max_keys
        )
        if driver:
            if keys is None:
                keys = pc.unique(records.select(KEY_COL).toArrow().column(0).combine_chunks())
            existing = ctx.spark.createDataFrame(self._locate(ctx, s, state, keys))
            return join_existing(records, existing, True, small=True)
        spark = ctx.spark
        shared = spark.sparkContext.broadcast(state)
        with_bucket = records.select(KEY_COL).mapInArrow(
            _bucket_task(s.buckets, s.hash_name),
            from_arrow_schema(pa.schema([(KEY_COL, pa.string()), (BUCKET_COL, pa.int32())])),
        )
        grouped = with_bucket.repartition(scan_parallelism(spark, s.buckets), BUCKET_COL)
        existing = grouped.mapInArrow(
            _lookup_task(ctx.meta.storage, shared, s.buckets, s.hash_name), from_arrow_schema(KEYS_SCHEMA)
        )
        self._tag_stats = {"files": files, "driver": 0}
        return join_existing(records, existing, True, small=ctx.incoming_keys is not None)

    def locate_batch(self, ctx: TagContext) -> pa.Table:
        """The incoming keys searched in the index files on the driver (`lookup`, its threads)."""
        state = load_state(ctx.meta)
        if state.is_empty:
            self._tag_stats = {"files": 0, "keys": 0, "found": 0}
            return KEYS_SCHEMA.empty_table()
        keys = _incoming_keys(ctx)
        assert keys is not None, "a driver-side lookup needs the batch's keys"
        return self._locate(ctx, self.settings(ctx.meta), state, keys)

    def _locate(self, ctx: TagContext, s: RecordIndexSettings, state: Any, keys: pa.Array) -> pa.Table:
        """KEYS_SCHEMA rows of `keys` found in the index `state` (reloaded if a rollback changed
        it), searched on the driver; sets the driver path's tagging stats."""
        found = _retrying(
            ctx.meta, None, lambda st: lookup(ctx.meta.storage, st, keys, s.buckets, s.hasher(), s.threads), state
        )
        files = sum(b.file_count for b in state.buckets.values())
        self._tag_stats = {"files": files, "keys": len(keys), "found": found.num_rows, "driver": 1}
        return found.rename_columns(KEYS_SCHEMA.names).cast(KEYS_SCHEMA)

    def tagging_stats(self) -> dict[str, int]:
        """Index files searched, keys looked up and found (driver path), last tagging."""
        return dict(self._tag_stats)

    # ---- writes --------------------------------------------------------------------------
    def update_location(self, ctx: TagContext, instant: str, located: DataFrame | pa.Table) -> None:
        """Clean orphans, compact over-full buckets, then write `instant`'s entries, one file per
        bucket it touches (Spark tasks). `located`: KEY_COL, PART_COL, FILE_ID_COL, OP_COL and
        optionally PREV_FILE_ID_COL (without it every upsert row gets an entry)."""
        from pyspark.sql.pandas.types import from_arrow_schema

        meta, spark = ctx.meta, ctx.spark
        s = self.settings(meta)
        stats: dict[str, int] = {}
        timeline = meta.timeline()
        names, completed = list_index(meta.storage)
        state = resolve_state(names, completed, validity(timeline), before=instant)
        stats["orphans_removed"] = len(clean_orphans(meta.storage, state, s.retain_seconds))
        plan = plan_compaction(state, s.max_files, fresh_instant(meta, timeline, names))
        if plan.inputs:
            stats.update(run_compaction(meta, plan, spark))
            stats["orphans_removed"] += len(
                clean_orphans(meta.storage, load_state(meta, timeline, before=instant), s.retain_seconds)
            )
        has_prev = PREV_FILE_ID_COL in (located.column_names if isinstance(located, pa.Table) else located.columns)
        cols = [KEY_COL, PART_COL, FILE_ID_COL, OP_COL] + ([PREV_FILE_ID_COL] if has_prev else [])
        if isinstance(located, pa.Table):  # a one-job write's rows, on the driver: no Spark job
            written = _write_deltas_on_driver(meta.storage, instant, s, has_prev, located.select(cols))
        else:
            schema = pa.schema([(c, pa.string()) for c in cols] + [(BUCKET_COL, pa.int32())])
            with_bucket = located.select(*cols).mapInArrow(
                _bucket_task(s.buckets, s.hash_name), from_arrow_schema(schema)
            )
            written = [
                r.asDict()
                for r in with_bucket.groupBy(BUCKET_COL)
                .applyInArrow(
                    _write_delta_task(meta.storage, instant, s.hash_name, has_prev), from_arrow_schema(DELTA_STATS_SCHEMA)
                )
                .collect()
            ]
        stats["files"] = sum(1 for r in written if r["bytes"])
        stats["entries"] = sum(r["entries"] for r in written)
        stats["tombstones"] = sum(r["tombstones"] for r in written)
        stats["bytes"] = sum(r["bytes"] for r in written)
        self._update_stats = stats

    def update_stats(self) -> dict[str, int]:
        """Files, entries, tombstones and bytes written by the last `update_location` (and what its
        clean-up and compaction did)."""
        return dict(self._update_stats)

    # ---- rollback ------------------------------------------------------------------------
    def rollback_files(self, meta: MetaClient, instant: str) -> list[str]:
        """The delta files `instant` wrote (paths relative to the table root)."""
        names = [f.name for f in meta.storage.list_dir(INDEX_FOLDER) if not f.is_dir]
        files = [f for f in (IndexFile.parse(n) for n in names) if f is not None]
        return sorted(f.path for f in files if not f.is_base and f.instant == instant)

    def rollback_commit(
        self, meta: MetaClient, instant: str, change: RollbackChange | None = None, final: bool = True
    ) -> None:
        """Rebuild the buckets that a completed compaction merged `instant` into (see the module
        docstring). The instant's own delta files no longer count (it is not completed) and are
        deleted by the rollback (`rollback_files`) or by the rebuild's clean-up. `change` is not
        needed. A restore passes `final=False` for every instant but its last (oldest), so that
        the buckets are rebuilt once, after the last one."""
        if not final:
            return
        _names, completed = list_index(meta.storage)
        affected = sorted({b for plan in completed.values() for b, c in plan.covers.items() if c and c >= instant})
        if affected:
            record_service.rebuild(meta, affected, self.options)


LOOKUP_ATTEMPTS = 3


def _retrying(meta: MetaClient, timeline: Timeline | None, run, state: Any = None) -> pa.Table:
    """`run(state)` with the index state of `timeline` (None: the latest), reloading the state
    when a file it listed vanished (a rollback deleted it, or a compaction's retention ended)."""
    for attempt in range(LOOKUP_ATTEMPTS):
        if state is None or attempt:
            state = load_state(meta, timeline)
        try:
            return run(state)
        except FileNotFoundError as exc:
            if timeline is not None:
                raise IndexChangedError(
                    f"the RECORD index of {meta.storage.base_uri} changed while it was read ({exc}); "
                    "read again with a newer timeline"
                ) from exc
            last = exc
    raise IndexChangedError(
        f"the RECORD index of {meta.storage.base_uri} kept changing while it was read "
        f"({LOOKUP_ATTEMPTS} attempts): {last}"
    ) from last


def _incoming_keys(ctx: TagContext) -> pa.Array | None:
    """The batch's distinct keys (None when they are not on the driver)."""
    wanted = wanted_keys(ctx, True)
    return None if wanted is None else wanted[ANY_PARTITION]

