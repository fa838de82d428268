"""RECORD index services without Spark: settings, the index state of a table, clean-up of orphans,
compaction (plan + execution) and rebuilding buckets from the data files (rollback, `hoodie index
build`). Spark is optional here (compactions of many buckets run as Spark tasks when given one);
see `engine.index.record` for the design.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from engine.config.table_config import TableConfig
from engine.errors import InvalidConfigError
from engine.index.record_files import (
    COMPLETED_SUFFIX,
    INDEX_FOLDER,
    REQUESTED_SUFFIX,
    CompactionPlan,
    IndexFile,
    IndexState,
    entries_table,
    list_index,
    merge_entries,
    read_entries,
    resolve_state,
    write_entries,
)
from engine.keygen.record_hash import (
    BUCKETS_PROPERTY,
    DEFAULT_BUCKETS,
    HASH_PROPERTY,
    JAVA_STRING_HASH,
    hash_function,
)
from engine.storage import Storage
from engine.table.meta_client import MetaClient
from engine.timeline.instant import format_instant_time, next_instant_time
from engine.timeline.timeline import Timeline

OPTION_PREFIX = "hoodie.record.index."
LOOKUP_MODES = ("auto", "driver", "spark")


@dataclass(frozen=True)
class RecordIndexSettings:
    """Table properties (buckets, hash) and write options of the index; picklable."""

    buckets: int = DEFAULT_BUCKETS
    hash_name: str = JAVA_STRING_HASH
    max_files: int = 4
    lookup_mode: str = "auto"
    driver_max_keys: int = 1_000_000
    threads: int = 2
    retain_seconds: int = 600  # superseded files outlive the compaction that merged them this long

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
            retain_seconds=_int_option(opts, "superseded.retain.seconds", 600, minimum=0),
        )

    def hasher(self) -> Callable[[pa.Array], np.ndarray]:
        return hash_function(self.hash_name)


def _int_option(opts: Mapping[str, str], name: str, default: int, minimum: int = 1) -> int:
    raw = opts.get(OPTION_PREFIX + name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError as exc:
        raise InvalidConfigError(f"{OPTION_PREFIX}{name} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise InvalidConfigError(f"{OPTION_PREFIX}{name} must be >= {minimum}, got {value}")
    return value


def validity(timeline: Timeline) -> Callable[[str], bool]:
    """Whether entries of a write instant count: it completed, or predates an archived timeline."""
    completed = timeline.completed_write_times
    first = timeline.archived_before
    return lambda t: t in completed or (first is not None and t < first)


def load_state(meta: MetaClient, timeline: Timeline | None = None, before: str | None = None) -> IndexState:
    """The index's valid files per bucket (and its orphans), from one listing of its folder."""
    names, completed = list_index(meta.storage)
    return resolve_state(names, completed, validity(timeline or meta.timeline()), before)


def clean_orphans(
    storage: Storage, state: IndexState, retain_seconds: float = 0, now: datetime | None = None
) -> list[str]:
    """Delete the orphan files, then the markers that vouch for nothing any more (in that order,
    so that a crash midway leaves every remaining file's status unchanged).

    Files a completed compaction merged less than `retain_seconds` ago stay (a lookup that
    listed the folder before that compaction may still open them), and so does the completed
    marker that keeps them superseded."""
    cutoff = format_instant_time((now or datetime.now(UTC)) - timedelta(seconds=retain_seconds))
    kept = {n for n, by in state.superseded_by.items() if retain_seconds > 0 and by > cutoff}
    removed = []
    for name in state.orphan_files:
        if name in kept:
            continue
        storage.delete(f"{INDEX_FOLDER}/{name}")
        removed.append(name)
    for name in sorted(state.orphan_markers, key=lambda n: n.endswith(COMPLETED_SUFFIX)):
        if state.marker_files.get(name, set()) & kept:
            continue
        storage.delete(f"{INDEX_FOLDER}/{name}")
        removed.append(name)
    return removed


def fresh_instant(meta: MetaClient, timeline: Timeline, names: Sequence[str]) -> str:
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
    meta: MetaClient, plan: CompactionPlan, spark: Any = None,
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
        rdd = spark.sparkContext.parallelize(buckets, max(1, min(len(buckets), 2 * spark.sparkContext.defaultParallelism)))
        done = rdd.map(lambda b: _compact_bucket(storage, plan, b)).collect()
    else:
        done = [_compact_bucket(storage, plan, b) for b in sorted(plan.inputs)]
    storage.create_exclusive(f"{INDEX_FOLDER}/{plan.instant}{COMPLETED_SUFFIX}", plan.to_bytes())
    return {
        "compacted_buckets": len(done),
        "compacted_entries": sum(d[1] for d in done),
        "compacted_bytes": sum(d[2] for d in done),
    }


def _table_keys(meta: MetaClient, threads: int = 4) -> pa.Table:
    """(key, partition, file id, commit time) of every live record in the table's latest slices
    (merge-on-read: base files merged with their log files)."""
    from engine.constants import COMMIT_TIME_COL, RECORD_KEY_COL
    from engine.data.base_file import read_base_file
    from engine.data.slice_reader import SliceFiles, merge_mode_for, read_slice
    from engine.timeline.timeline import CommittedInstants

    timeline = meta.timeline()
    view = meta.file_system_view(timeline)
    files = list(view.latest_slices())
    committed = CommittedInstants(timeline.completed_write_times, timeline.archived_before)
    precombine = meta.config.precombine_field
    latest = meta.latest_schema(timeline)
    ordering = [latest.field(precombine)] if precombine and latest is not None and precombine in latest.names else []
    key_schema = pa.schema([pa.field(RECORD_KEY_COL, pa.string()), pa.field(COMMIT_TIME_COL, pa.string()), *ordering])

    def read(b: Any) -> pa.Table:
        if b.log_files:
            t = read_slice(
                meta.storage, SliceFiles.from_slice(b), key_schema, ordering_field=precombine if ordering else None,
                mode=merge_mode_for(meta.config), is_committed=committed,
            )
        elif b.base_file is not None:
            t = read_base_file(meta.storage, b.base_file.path, columns=[RECORD_KEY_COL, COMMIT_TIME_COL])
        else:
            t = key_schema.empty_table()
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


def rebuild(
    meta: MetaClient, buckets: Sequence[int] | None = None, options: Mapping[str, str] | None = None
) -> dict[str, int]:
    """Rebuild the index's `buckets` (None: all) from the table's data files, as one compaction
    whose base files supersede every current file of those buckets. Runs on the driver."""
    s = RecordIndexSettings.from_config(meta.config, options)
    wanted = sorted(range(s.buckets) if buckets is None else set(buckets))
    timeline = meta.timeline()
    names, completed = list_index(meta.storage)
    state = resolve_state(names, completed, validity(timeline))
    data = _table_keys(meta, s.threads)
    hasher = s.hasher()
    hashes = np.asarray(hasher(data.column("key").combine_chunks()), dtype=np.int64) if data.num_rows else np.empty(0, np.int64)
    bucket_of = (np.abs(hashes) % s.buckets).astype(np.int32)
    instant = fresh_instant(meta, timeline, names)
    # the newest write the rebuilt entries reflect: a valid instant for every reader whose
    # timeline has it (not the timeline's last instant, which may be this rollback's own)
    covers = timeline.completed_writes.last_time or ""
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
    clean_orphans(meta.storage, load_state(meta), s.retain_seconds)
    return stats


def build_index(meta: MetaClient, buckets: int | None = None, hash_name: str | None = None) -> tuple[MetaClient, dict[str, int]]:
    """Build (or rebuild) the RECORD index of a table written with any index, from its data files,
    then make RECORD the table's index in hoodie.properties (written last: until then the table
    keeps its old index and the new files are unused). Returns the updated MetaClient and stats.

    A table already using RECORD keeps its bucket count and hash (rebuilding them in place).
    The caller holds the table lock (`Maintenance.build_record_index`): a commit completing
    meanwhile would miss its entries, and a running write's index files would count as orphans.
    """
    from engine.config.table_config import IndexType
    from engine.keygen.record_hash import record_index_properties
    config = meta.config
    if config.index_type is IndexType.RECORD:
        if buckets is not None or hash_name is not None:
            current = RecordIndexSettings.from_config(config)
            if (buckets or current.buckets) != current.buckets or (hash_name or current.hash_name) != current.hash_name:
                raise InvalidConfigError("the bucket count and hash of a RECORD table are fixed at creation")
        return meta, rebuild(meta)
    extra = dict(config.extra)
    extra.update(record_index_properties(buckets, hash_name))
    updated = MetaClient(meta.storage, config.with_updates(index_type=IndexType.RECORD, extra=tuple(sorted(extra.items()))))
    stats = rebuild(updated)
    updated.update_config(updated.config, "Updated")
    return updated, stats
