"""RECORD index (global): record key -> (partition, file id) entries stored inside the table.

The bucketed, sorted-file index of Apache Hudi's HFile index design (realised there as the
metadata table's record index), kept in `.hoodie/.record_index/` (file layout, validity rules
and lookups: `engine.index.record_files`; hashes: `engine.index.record_hash`).

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
- Single writer: like Apache Hudi's eager clean-up of failed writes, deleting a failed write's
  files at the next write assumes no other writer is in flight.

Write options (`hoodie.record.index.*`): `compaction.max.files`, `lookup` (auto|driver|spark),
`driver.max.keys`, `lookup.threads` (driver-path threads, default 2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from engine.config.table_config import TableConfig
from engine.errors import InvalidConfigError
from engine.index import FILE_ID_COL
from engine.index.base import PREV_FILE_ID_COL, Index, RollbackChange, TagContext, join_existing, untagged
from engine.index.record_files import (
    COMPLETED_SUFFIX,
    INDEX_FOLDER,
    REQUESTED_SUFFIX,
    CompactionPlan,
    IndexFile,
    IndexState,
    entries_table,
    list_index,
    lookup,
    merge_entries,
    plan_write_entries,
    read_entries,
    resolve_state,
    write_entries,
)
from engine.index.record_hash import (
    BUCKETS_PROPERTY,
    DEFAULT_BUCKETS,
    HASH_PROPERTY,
    JAVA_STRING_HASH,
    buckets_of,
    hash_function,
)
from engine.read.scan import KEYS_SCHEMA, scan_parallelism
from engine.storage import Storage
from engine.table.meta_client import MetaClient
from engine.timeline.instant import next_instant_time
from engine.timeline.timeline import Timeline
from engine.write.file_writer import KEY_COL, OP_COL, OP_DELETE, OP_UPSERT, PART_COL

OPTION_PREFIX = "hoodie.record.index."
LOOKUP_MODES = ("auto", "driver", "spark")
BUCKET_COL = "__hoodie_index_bucket"

DELTA_STATS_SCHEMA = pa.schema(
    [("bucket", pa.int32()), ("entries", pa.int64()), ("tombstones", pa.int64()), ("bytes", pa.int64())]
)


@dataclass(frozen=True)
class RecordIndexSettings:
    """Table properties (buckets, hash) and write options of the index; picklable."""

    buckets: int = DEFAULT_BUCKETS
    hash_name: str = JAVA_STRING_HASH
    max_files: int = 4
    lookup_mode: str = "auto"
    driver_max_keys: int = 1_000_000
    threads: int = 2

    @classmethod
    def from_config(cls, config: TableConfig, options: Mapping[str, str] | None = None) -> RecordIndexSettings:
        props = dict(config.extra)
        opts = dict(options or {})
        try:
            buckets = int(props.get(BUCKETS_PROPERTY, DEFAULT_BUCKETS))
        except ValueError as exc:
            raise InvalidConfigError(f"{BUCKETS_PROPERTY} must be an integer, got {props[BUCKETS_PROPERTY]!r}") from exc
        if buckets < 1:
            raise InvalidConfigError(f"{BUCKETS_PROPERTY} must be >= 1, got {buckets}")
        mode = str(opts.get(OPTION_PREFIX + "lookup", "auto")).strip().lower()
        if mode not in LOOKUP_MODES:
            raise InvalidConfigError(f"{OPTION_PREFIX}lookup must be one of {', '.join(LOOKUP_MODES)}, got {mode!r}")
        return cls(
            buckets=buckets,
            hash_name=props.get(HASH_PROPERTY, JAVA_STRING_HASH),
            max_files=_int_option(opts, "compaction.max.files", 4),
            lookup_mode=mode,
            driver_max_keys=_int_option(opts, "driver.max.keys", 1_000_000),
            threads=_int_option(opts, "lookup.threads", 2),
        )

    def hasher(self) -> Callable[[pa.Array], np.ndarray]:
        return hash_function(self.hash_name)


def _int_option(opts: Mapping[str, str], name: str, default: int) -> int:
    raw = opts.get(OPTION_PREFIX + name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError as exc:
        raise InvalidConfigError(f"{OPTION_PREFIX}{name} must be an integer, got {raw!r}") from exc
    if value < 1:
        raise InvalidConfigError(f"{OPTION_PREFIX}{name} must be >= 1, got {value}")
    return value


def validity(timeline: Timeline) -> Callable[[str], bool]:
    """Whether entries of a write instant count: it completed, or predates an archived timeline."""
    completed = timeline.completed_times
    first = timeline.first_time if timeline.has_archive else None
    return lambda t: t in completed or (first is not None and t < first)


def load_state(meta: MetaClient, timeline: Timeline | None = None, before: str | None = None) -> IndexState:
    """The index's valid files per bucket (and its orphans), from one listing of its folder."""
    names, completed = list_index(meta.storage)
    return resolve_state(names, completed, validity(timeline or meta.timeline()), before)


def clean_orphans(storage: Storage, state: IndexState) -> list[str]:
    """Delete the orphan files, then the markers that vouch for nothing any more (in that order,
    so that a crash midway leaves every remaining file's status unchanged)."""
    removed = []
    for name in state.orphan_files:
        storage.delete(f"{INDEX_FOLDER}/{name}")
        removed.append(name)
    for name in sorted(state.orphan_markers, key=lambda n: n.endswith(COMPLETED_SUFFIX)):
        storage.delete(f"{INDEX_FOLDER}/{name}")
        removed.append(name)
    return removed


def _fresh_instant(meta: MetaClient, timeline: Timeline, names: Sequence[str]) -> str:
    known = [timeline.last_time or ""] + [n[:17] for n in names if n[:17].isdigit()]
    return next_instant_time(datetime.now(UTC), max(known) or None)


def plan_compaction(state: IndexState, max_files: int, instant: str, only: Sequence[int] | None = None) -> CompactionPlan:
    """Merge every bucket holding more than `max_files` files (or exactly the `only` buckets)."""
    inputs: dict[int, tuple[str, ...]] = {}
    covers: dict[int, str] = {}
    for b, s in sorted(state.buckets.items()):
        if (only is None and s.file_count > max_files) or (only is not None and b in only and s.sources):
            inputs[b] = tuple(f.name for f in s.sources)
            covers[b] = max([f.instant for f in s.deltas] + ([s.covers] if s.covers else []))
    return CompactionPlan(instant, inputs, covers)


def _compact_bucket(storage: Storage, plan: CompactionPlan, bucket: int) -> tuple[int, int, int]:
    sources = [read_entries(storage, IndexFile.parse(n)) for n in plan.inputs[bucket]]  # type: ignore[arg-type]
    merged = merge_entries(sources, keep_tombstones=False)
    size = write_entries(storage, plan.base(bucket), merged)
    return bucket, merged.num_rows, size


def run_compaction(
    meta: MetaClient, plan: CompactionPlan, spark: SparkSession | None = None,
    bases: Mapping[int, pa.Table] | None = None,
) -> dict[str, int]:
    """Carry out `plan`: requested marker, base files (Spark tasks, or the given `bases`), completed
    marker. Until the completed marker exists no lookup uses the new files."""
    storage = meta.storage
    if not plan.inputs and not bases:
        return {}
    storage.create_exclusive(f"{INDEX_FOLDER}/{plan.instant}{REQUESTED_SUFFIX}", plan.to_bytes())
    if bases is not None:
        done = [(b, t.num_rows, write_entries(storage, plan.base(b), t)) for b, t in sorted(bases.items())]
    elif spark is not None:
        buckets = sorted(plan.inputs)
        rdd = spark.sparkContext.parallelize(buckets, scan_parallelism(spark, len(buckets)))
        done = rdd.map(lambda b: _compact_bucket(storage, plan, b)).collect()
    else:
        done = [_compact_bucket(storage, plan, b) for b in sorted(plan.inputs)]
    storage.create_exclusive(f"{INDEX_FOLDER}/{plan.instant}{COMPLETED_SUFFIX}", plan.to_bytes())
    return {
        "compacted_buckets": len(done),
        "compacted_entries": sum(d[1] for d in done),
        "compacted_bytes": sum(d[2] for d in done),
    }


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
        bucket = table.column(BUCKET_COL)[0].as_py()
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

    return run


class RecordIndex(Index):
    """Global index of sorted, bucketed entry files stored in the table (see the module docstring)."""

    name = "RECORD"
    is_global = True
    wants_locations = True

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        self.options = dict(options or {})
        self._tag_stats: dict[str, int] = {}
        self._update_stats: dict[str, int] = {}

    def settings(self, meta: MetaClient) -> RecordIndexSettings:
        return RecordIndexSettings.from_config(meta.config, self.options)

    # ---- lookups -------------------------------------------------------------------------
    def locate(self, meta: MetaClient, keys: pa.Array, timeline: Timeline | None = None) -> pa.Table:
        """(key, partition, file id) of the distinct `keys` the index holds, searched on the driver."""
        s = self.settings(meta)
        state = load_state(meta, timeline)
        return lookup(meta.storage, state, keys, s.buckets, s.hasher(), s.threads)

    def tag_location(self, ctx: TagContext, records: DataFrame) -> DataFrame:
        """`records` + FILE_ID_COL and EXISTING_PART_COL of the keys the index holds."""
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
            found = lookup(ctx.meta.storage, state, keys, s.buckets, s.hasher(), s.threads)
            self._tag_stats = {"files": files, "keys": len(keys), "found": found.num_rows, "driver": 1}
            existing = ctx.spark.createDataFrame(found.rename_columns(KEYS_SCHEMA.names).cast(KEYS_SCHEMA))
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

    def tagging_stats(self) -> dict[str, int]:
        """Index files searched, keys looked up and found (driver path), last tagging."""
        return dict(self._tag_stats)

    # ---- writes --------------------------------------------------------------------------
    def update_location(self, ctx: TagContext, instant: str, located: DataFrame) -> None:
        """Clean orphans, compact over-full buckets, then write `instant`'s entries, one file per
        bucket it touches (Spark tasks). `located`: KEY_COL, PART_COL, FILE_ID_COL, OP_COL and
        optionally PREV_FILE_ID_COL (without it every upsert row gets an entry)."""
        meta, spark = ctx.meta, ctx.spark
        s = self.settings(meta)
        stats: dict[str, int] = {}
        timeline = meta.timeline()
        names, completed = list_index(meta.storage)
        state = resolve_state(names, completed, validity(timeline), before=instant)
        stats["orphans_removed"] = len(clean_orphans(meta.storage, state))
        plan = plan_compaction(state, s.max_files, _fresh_instant(meta, timeline, names))
        if plan.inputs:
            stats.update(run_compaction(meta, plan, spark))
            stats["orphans_removed"] += len(clean_orphans(meta.storage, load_state(meta, timeline, before=instant)))
        has_prev = PREV_FILE_ID_COL in located.columns
        cols = [KEY_COL, PART_COL, FILE_ID_COL, OP_COL] + ([PREV_FILE_ID_COL] if has_prev else [])
        schema = pa.schema(
            [(c, pa.string()) for c in cols] + [(BUCKET_COL, pa.int32())]
        )
        with_bucket = located.select(*cols).mapInArrow(_bucket_task(s.buckets, s.hash_name), from_arrow_schema(schema))
        written = (
            with_bucket.groupBy(BUCKET_COL)
            .applyInArrow(_write_delta_task(meta.storage, instant, s.hash_name, has_prev),
                          from_arrow_schema(DELTA_STATS_SCHEMA))
            .collect()
        )
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

    def rollback_commit(self, meta: MetaClient, instant: str, change: RollbackChange | None = None) -> None:
        """Rebuild the buckets whose base file covers `instant` (see the module docstring); the
        instant's delta files are gone already (`rollback_files`). `change` is not needed."""
        state = load_state(meta)
        affected = sorted(b for b, s in state.buckets.items() if s.base is not None and (s.covers or "") >= instant)
        if affected:
            rebuild(meta, affected)


def _incoming_keys(ctx: TagContext) -> pa.Array | None:
    if ctx.incoming_keys is None:
        return None
    arrays = [a.cast(pa.string()) for a in ctx.incoming_keys.values()]
    if not arrays:
        return pa.array([], pa.string())
    return pc.unique(pa.concat_arrays(arrays))


def _table_keys(meta: MetaClient, threads: int = 4) -> pa.Table:
    """(key, partition, file id, commit time) of every record in the table's latest base files."""
    from engine.constants import COMMIT_TIME_COL, RECORD_KEY_COL
    from engine.write.file_writer import read_base_file

    view = meta.file_system_view()
    files = list(view.latest_base_files())

    def read(b: Any) -> pa.Table:
        t = read_base_file(meta.storage, b.path, columns=[RECORD_KEY_COL, COMMIT_TIME_COL])
        n = t.num_rows
        return pa.table(
            {
                "key": t.column(RECORD_KEY_COL).cast(pa.string()),
                "partition": pa.array([b.partition] * n, pa.string()),
                "file_id": pa.array([b.file_id] * n, pa.string()),
                "instant": t.column(COMMIT_TIME_COL).cast(pa.string()),
            }
        )

    with ThreadPoolExecutor(max_workers=threads) as pool:
        parts = list(pool.map(read, files))
    schema = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string()), ("instant", pa.string())])
    return pa.concat_tables(parts).combine_chunks() if parts else schema.empty_table()


def rebuild(meta: MetaClient, buckets: Sequence[int] | None = None) -> dict[str, int]:
    """Rebuild the index's `buckets` (None: all) from the table's data files, as one compaction
    whose base files supersede every current file of those buckets. Runs on the driver."""
    s = RecordIndexSettings.from_config(meta.config)
    wanted = sorted(range(s.buckets) if buckets is None else set(buckets))
    timeline = meta.timeline()
    names, completed = list_index(meta.storage)
    state = resolve_state(names, completed, validity(timeline))
    data = _table_keys(meta, s.threads)
    hasher = s.hasher()
    hashes = np.asarray(hasher(data.column("key").combine_chunks()), dtype=np.int64) if data.num_rows else np.empty(0, np.int64)
    bucket_of = (np.abs(hashes) % s.buckets).astype(np.int32)
    instant = _fresh_instant(meta, timeline, names)
    covers = max([timeline.last_time or ""] + [i for i in data.column("instant").to_pylist() if i]) or instant
    bases: dict[int, pa.Table] = {}
    for b in wanted:
        mask = bucket_of == b
        sub = data.filter(pa.array(mask))
        bases[b] = entries_table(
            sub.column("key").combine_chunks(), sub.column("partition").combine_chunks(),
            sub.column("file_id").combine_chunks(), sub.column("instant").combine_chunks(),
            pa.array(np.zeros(sub.num_rows, bool)), hashes=hashes[mask],
        )
    plan = CompactionPlan(
        instant,
        {b: tuple(f.name for f in state.bucket(b).sources) for b in wanted},
        dict.fromkeys(wanted, covers),
    )
    stats = run_compaction(meta, plan, bases=bases)
    clean_orphans(meta.storage, load_state(meta))
    return stats
