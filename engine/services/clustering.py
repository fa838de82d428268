"""Clustering: rewrite small file slices into fewer, larger file groups, laid out by sort columns.

Planner + executor, as Apache Hudi's (`ClusteringPlanActionExecutor`,
`SparkSortAndSizeExecutionStrategy`):

- `plan_clustering` hands the latest slices (not held by a pending compaction or clustering, nor by
  `exclude`) to the size-based planner (`engine.table.clustering_plan`); `schedule_clustering` stores
  the plan (`T.replacecommit.requested` on version 6, `T.clustering.requested` on 8/9).
- `execute_clustering` moves T to inflight and runs each input group as one task (a Spark task when
  a session is given: one job for the plan): its slices are read merged (base and log files, as
  readers see them), ordered (record key; or the sort columns, linearly or on a Z-order or Hilbert
  curve, `engine.data.space_curve`), and written as new file groups `<uuid>-0` of about
  `target.file.max.bytes` each (at least the group's planned count). Every record keeps its commit
  time and sequence number (Hudi's preserveHoodieMetadata), so incremental reads see no change. T
  completes as `T.replacecommit` (operation CLUSTER) naming the input groups in
  `partitionToReplaceFileIds`: from then on readers see the new groups only, and clean deletes the
  replaced ones once retention allows.
- A crashed run leaves T inflight with base files named with T; running the plan again (or repair,
  once its heartbeat expired) deletes them first. Rolling T back (pending or completed) removes the
  new groups and the replaced ones become current again.

Writers that update or delete records of a group a pending clustering holds are refused
(`engine.write.tagging.check_pending_clustering`, Hudi's SparkRejectUpdateStrategy).
"""

from __future__ import annotations

import math
import os
import time as _time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine import failpoints
from engine.config.clustering_config import ClusteringConfig
from engine.constants import FILE_NAME_COL, RECORD_KEY_COL
from engine.data import space_curve
from engine.data.batch import repeated
from engine.data.file_names import base_file_name, join_path, parse_base_file_name
from engine.data.slice_reader import SliceFiles, merge_mode_for, read_slice
from engine.errors import InstantNotFoundError, InvalidInputError
from engine.schema.avro import arrow_to_avro, avro_to_json, with_meta_fields
from engine.serial import Documented
from engine.table import lifecycle
from engine.table.clustering import pending_clustering
from engine.table.clustering_plan import (
    SORT_COLUMNS_PARAM,
    ClusteringGroup,
    ClusteringPlan,
    SliceInput,
    plan_groups,
    read_plan,
    requested_action,
)
from engine.table.lifecycle import claim_instant, complete_instant
from engine.table.meta_client import MetaClient
from engine.table.ownership import FileOwnership
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import CommittedInstants, Timeline
from engine.transaction.heartbeat import Heartbeat, heartbeat_file
from engine.write.file_writer import WriteContext, write_base_file
from engine.write.outcome import WriteOutcome

Fence = Callable[[], None] | None
OPERATION_TYPE = "CLUSTER"


@dataclass
class ClusteringResult(Documented):
    """A finished clustering: its instant, the file groups it replaced and the files it wrote."""

    instant: str
    replaced: dict[str, list[str]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    records: int = 0
    groups: int = 0
    seconds: float = 0.0

    @property
    def files_replaced(self) -> int:
        return sum(len(v) for v in self.replaced.values())


# ---- planning ---------------------------------------------------------------------------------
def check_sort_columns(meta: MetaClient, columns: Sequence[str], timeline: Timeline | None = None) -> None:
    """Refuse (InvalidInputError) sort columns the table does not have, before anything is written."""
    schema = meta.latest_schema(timeline or meta.timeline())
    names = set(schema.names) if schema is not None else set()
    missing = [c for c in columns if c not in names]
    if missing:
        raise InvalidInputError(
            f"sort columns {missing} are not columns of {meta.storage.base_uri} (columns: {', '.join(sorted(names))})"
        )


def plan_clustering(
    meta: MetaClient,
    timeline: Timeline,
    config: ClusteringConfig,
    max_file_size: int,
    exclude: frozenset[tuple[str, str]] = frozenset(),
    now: datetime | None = None,
) -> ClusteringPlan:
    """What to cluster now (no instant yet); a plan without groups when nothing qualifies."""
    columns = config.sort_column_list
    if columns:
        check_sort_columns(meta, columns, timeline)
    view = meta.file_system_view(timeline)
    busy = set(view.pending_compaction) | {g for c in pending_clustering(meta, timeline) for g in c.groups} | exclude
    by_partition: dict[str, list[SliceInput]] = {}
    for g in view.groups:
        s = g.latest_slice
        if s is None or (g.partition, g.file_id) in busy:
            continue
        by_partition.setdefault(g.partition, []).append(
            SliceInput(
                g.partition,
                g.file_id,
                s.base_file.file_name if s.base_file is not None else None,
                tuple(lf.file_name for lf in s.log_files),
                s.base_file.size if s.base_file is not None else 0,
                tuple(lf.size for lf in s.log_files),
            )
        )
    groups = plan_groups(by_partition, config, max_file_size, now)
    params = {SORT_COLUMNS_PARAM: ",".join(columns)} if columns else {}
    return ClusteringPlan("", tuple(groups), params, config.execution_strategy_class)


def schedule_clustering(
    meta: MetaClient,
    timeline: Timeline,
    config: ClusteringConfig,
    max_file_size: int,
    *,
    fence: Fence = None,
    exclude: frozenset[tuple[str, str]] = frozenset(),
    now: datetime | None = None,
) -> ClusteringPlan | None:
    """Plan and store the plan as the requested clustering instant (None: nothing to cluster)."""
    from engine.table.clustering_plan import MODEL
    from engine.timeline import avro_models

    plan = plan_clustering(meta, timeline, config, max_file_size, exclude, now)
    if not plan.groups:
        return None
    _fence(fence)
    body = avro_models.serialize(MODEL, plan.to_record(meta.storage.uri))
    instant = claim_instant(meta, timeline, requested_action(meta.config.version), body, now)
    return ClusteringPlan(instant, plan.groups, plan.params, plan.strategy_class, plan.extra)


def pending_plans(meta: MetaClient, timeline: Timeline) -> list[ClusteringPlan]:
    """The table's pending clustering plans, oldest first."""
    out = []
    for c in pending_clustering(meta, timeline):
        try:
            out.append(read_plan(meta, c.instant.time, _requested_action(c.instant.action)))
        except FileNotFoundError:
            continue
    return out


def _requested_action(action: Action) -> Action:
    return Action.CLUSTERING if action is Action.CLUSTERING else Action.REPLACE_COMMIT


def show(meta: MetaClient, instant: str) -> ClusteringPlan:
    """The plan of clustering `instant` (pending, or completed while its requested file exists)."""
    timeline = meta.timeline()
    inst = timeline.get(instant)
    actions = [Action.CLUSTERING, Action.REPLACE_COMMIT] if meta.layout.version >= 2 else [Action.REPLACE_COMMIT]
    if inst is not None:
        for action in actions:
            try:
                return read_plan(meta, instant, action)
            except FileNotFoundError:
                continue
    raise InstantNotFoundError(f"no clustering plan {instant} in {meta.storage.base_uri}")


# ---- execution --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Job:
    """Everything one group needs (picklable: it may run in a Spark task)."""

    storage: Any
    instant: str
    schema: pa.Schema
    ordering_field: str | None
    mode: Any
    committed: Callable[[str], bool]
    compression: str
    bloom: tuple[int, float, int]
    sort_columns: tuple[str, ...]
    strategy: str
    method: str
    sample_size: int
    target_bytes: int
    virtual: Any = None


def _base_instant(s: SliceInput) -> str:
    from engine.data.file_names import parse_log_file_name

    if s.base_file:
        bn = parse_base_file_name(s.base_file)
        if bn is not None:
            return bn.instant
    log = parse_log_file_name(s.log_files[0]) if s.log_files else None
    return log.base_instant if log is not None else ""


def _read_group(job: _Job, group: ClusteringGroup) -> tuple[pa.Table, int]:
    """The group's live records (each slice merged as readers merge it; slices read side by side
    in threads, Parquet decoding releases the GIL) and an estimate of their bytes once written:
    the base files' row groups (their footers, mostly bloom filters, are written anew) plus the
    log files."""
    from concurrent.futures import ThreadPoolExecutor

    def read(s: SliceInput) -> tuple[pa.Table, int]:
        files = SliceFiles(s.partition, s.file_id, _base_instant(s), s.base_path, s.log_paths)
        rows = read_slice(job.storage, files, job.schema, ordering_field=job.ordering_field, mode=job.mode,
                          is_committed=job.committed)
        size = sum(job.storage.size(p) for p in s.log_paths)
        if s.base_path:
            with job.storage.open_input_file(s.base_path) as f:
                footer = pq.ParquetFile(f).metadata.serialized_size
            size += job.storage.size(s.base_path) - footer
        return rows, size

    with ThreadPoolExecutor(max(1, min(len(group.slices), os.cpu_count() or 1))) as pool:
        parts = list(pool.map(read, group.slices))
    rows = pa.concat_tables([t for t, _ in parts]) if parts else job.schema.empty_table()
    return rows, sum(n for _, n in parts)


def _run_group(job: _Job, group: ClusteringGroup, token: str) -> list[WriteOutcome]:
    """Read a group's slices merged, order them, write them as new file groups of about the
    target size each (sized by the data: a file group's bloom filter and footer come on top)."""
    rows, data_bytes = _read_group(job, group)
    if rows.num_rows == 0:
        return []
    if job.sort_columns:
        indexes = [job.schema.get_field_index(c) for c in job.sort_columns]
        order = space_curve.order(rows, job.sort_columns, job.strategy, field_indexes=indexes,
                                  method=job.method, sample_size=job.sample_size)
    else:  # Hudi's bulk insert sort: by key, so that the files hold disjoint key ranges
        order = pc.sort_indices(rows.column(RECORD_KEY_COL)).to_numpy()
    count = max(1, min(math.ceil(data_bytes / job.target_bytes), rows.num_rows))
    ctx = WriteContext(
        storage=job.storage,
        instant=job.instant,
        schema=job.schema,
        precombine_field=job.ordering_field,
        compression=job.compression,
        bloom=job.bloom,
        sort_by_key=False,
        virtual=job.virtual,
    )
    per_file = math.ceil(rows.num_rows / count)
    name_at = rows.schema.get_field_index(FILE_NAME_COL)

    def write(start: int) -> WriteOutcome:  # each file's rows taken in its own thread
        chunk = rows.take(pa.array(order[start:start + per_file]))
        file_id = f"{uuid.uuid4()}-0"
        name = base_file_name(file_id, token, job.instant)
        path = join_path(group.partition, name)
        chunk = chunk.set_column(name_at, rows.schema.field(name_at), repeated(name, chunk.num_rows))
        written = write_base_file(ctx, path, chunk)
        return WriteOutcome(path=path, file_id=file_id, partition=group.partition, prev_instant=None,
                            num_writes=written.rows, num_inserts=written.rows, num_updates=0, num_deletes=0,
                            num_stale=0, file_size=written.size, min_key=written.min_key, max_key=written.max_key)

    starts = range(0, rows.num_rows, per_file)
    if len(starts) == 1:
        return [write(0)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(len(starts), os.cpu_count() or 1)) as pool:  # encoding releases the GIL
        out = list(pool.map(write, starts))
    return out


def _run_all(job: _Job, groups: Sequence[ClusteringGroup], spark: Any, say: Callable[[str], None]) -> list[WriteOutcome]:
    if spark is None or len(groups) <= 1:
        outs: list[WriteOutcome] = []
        for i, g in enumerate(groups):
            outs.extend(_run_group(job, g, f"{i}-0-0"))
            say(f"clustering {job.instant}: group {i + 1}/{len(groups)} ({g.partition or 'table root'}) written")
        return outs
    from engine.data.scan import scan_parallelism
    from engine.runtime.jobs import job_group

    def task(index_and_group):
        from pyspark.taskcontext import TaskContext

        from engine.data.file_names import write_token

        tc = TaskContext.get()
        i, g = index_and_group
        token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId()) if tc else f"{i}-0-0"
        return _run_group(job, g, token)

    sc = spark.sparkContext
    sc.setJobGroup(job_group(job.instant), f"hoodie clustering {job.instant}", interruptOnCancel=True)
    try:
        rdd = sc.parallelize(list(enumerate(groups)), scan_parallelism(spark, len(groups)))
        outs = [o for part in rdd.map(task).collect() for o in part]
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    say(f"clustering {job.instant}: {len(groups)} group(s) written in one Spark job")
    # a retried task may have left files of its first attempt: keep the reported ones
    _remove_stray(job.storage, job.instant, {g.partition for g in groups}, {o.path for o in outs})
    return outs


def _remove_stray(storage: Any, instant: str, partitions: set[str], keep: set[str]) -> list[str]:
    """Delete base files named with the clustering instant in its partitions, except `keep`."""
    removed = []
    ownership = FileOwnership(storage)
    for partition in sorted(partitions):
        for info in storage.list_dir(partition):
            bn = parse_base_file_name(info.name)
            if bn is not None and bn.instant == instant and info.path not in keep:
                if ownership.owned([info.path], "clustering"):
                    storage.delete(info.path)
                    removed.append(info.path)
    return removed


def remove_partial_files(meta: MetaClient, plan: ClusteringPlan) -> list[str]:
    """Delete the base files an interrupted attempt of `plan` left (named with its instant)."""
    return _remove_stray(meta.storage, plan.instant, {g.partition for g in plan.groups}, set())


def revert_to_requested(meta: MetaClient, instant: str, fence: Fence = None) -> list[str]:
    """Undo an interrupted attempt of clustering `instant`: the files it left and its inflight
    file go, so the plan runs again from the start. Returns the files deleted."""
    inst = meta.timeline().get(instant)
    if inst is None or inst.is_completed:
        raise InstantNotFoundError(f"{instant} is not a pending clustering of {meta.storage.base_uri}")
    action = _requested_action(inst.action)
    plan = read_plan(meta, instant, action)
    _fence(fence)
    lifecycle.abandoned(meta, instant)  # a metadata deltacommit of the attempt names its files
    removed = remove_partial_files(meta, plan)
    meta.storage.delete(meta.instant_path(Instant(instant, action, State.INFLIGHT)))
    meta.storage.delete(heartbeat_file(instant))
    return removed


def execute_clustering(
    meta: MetaClient,
    plan: ClusteringPlan,
    config: ClusteringConfig,
    *,
    spark: Any = None,
    index: Any = None,
    fence: Fence = None,
    progress: Callable[[str], None] | None = None,
    compression: str = "snappy",
    bloom: tuple[int, float, int] = (60_000, 1e-9, 100_000),
    heartbeat_interval: float | None = 60.0,
    before_complete: Fence = None,
) -> ClusteringResult:
    """Run a scheduled (or interrupted) clustering to completion (the caller holds the table lock,
    or takes it in `before_complete`). The run keeps a heartbeat; a runner that dies leaves an
    inflight clustering that repair reverts once the heartbeat expired."""
    heartbeat = Heartbeat.start(meta.storage, plan.instant, heartbeat_interval) if heartbeat_interval else None
    try:
        return _execute(meta, plan, config, spark, index, fence, progress, compression, bloom, before_complete)
    finally:
        if heartbeat is not None:
            heartbeat.stop()


def _execute(meta, plan, config, spark, index, fence, progress, compression, bloom, before_complete) -> ClusteringResult:
    from engine.keygen.keys import KeySpec

    started = _time.monotonic()
    say = progress or (lambda _m: None)
    timeline = meta.timeline()
    inst = timeline.get(plan.instant)
    if inst is None or inst.is_completed or inst.time not in {c.instant.time for c in pending_clustering(meta, timeline)}:
        if inst is not None and inst.is_completed:
            raise InvalidInputError(f"clustering {plan.instant} is already completed")
        raise InstantNotFoundError(f"{plan.instant} is not a pending clustering of {meta.storage.base_uri}")
    if plan.sort_columns:
        check_sort_columns(meta, plan.sort_columns, timeline)
    action = _requested_action(inst.action)
    _fence(fence)
    if inst.is_inflight:
        removed = remove_partial_files(meta, plan)
        if removed:
            say(f"clustering {plan.instant}: removed {len(removed)} file(s) of an interrupted attempt")
    else:
        meta.storage.create_exclusive(meta.instant_path(Instant(plan.instant, action, State.INFLIGHT)), b"")
    failpoints.hit("clustering.after_inflight")
    data_schema = meta.latest_schema(timeline)
    if data_schema is None:
        raise InvalidInputError(f"{meta.storage.base_uri} has no schema to cluster with")
    job = _Job(
        meta.storage,
        plan.instant,
        with_meta_fields(data_schema),
        meta.config.precombine_field,
        merge_mode_for(meta.config),
        CommittedInstants(timeline.completed_write_times, timeline.archived_before),
        compression,
        bloom,
        tuple(plan.sort_columns),
        config.layout_strategy,
        config.curve_build_method,
        config.curve_sample_size,
        config.target_file_max_bytes,
        None if meta.config.populate_meta_fields else KeySpec.from_config(meta.config),
    )
    slices = sum(len(g.slices) for g in plan.groups)
    order = f"sorted by {', '.join(plan.sort_columns)} ({config.layout_strategy})" if plan.sort_columns else "by record key"
    say(f"clustering {plan.instant}: {slices} file slice(s) in {len(plan.groups)} group(s), {order}")
    outs = _run_all(job, plan.groups, spark, say)
    failpoints.hit("clustering.before_complete")
    replaced: dict[str, list[str]] = {}
    for g in plan.groups:
        for s in g.slices:
            replaced.setdefault(s.partition, []).append(s.file_id)
    if index is not None and getattr(index, "wants_locations", False):
        _update_index(meta, index, plan.instant, outs, spark)
    _fence(before_complete)
    _fence(fence)
    stats: dict[str, list[WriteStat]] = {p: [] for p in replaced}
    for o in sorted(outs, key=lambda o: (o.partition, o.file_id)):
        stats.setdefault(o.partition, []).append(o.write_stat())
    extra = {"schema": meta.latest_avro_schema(meta.timeline()) or avro_to_json(arrow_to_avro(data_schema, meta.config.name))}
    metadata = CommitMetadata(stats, OPERATION_TYPE, extra, partition_to_replace_file_ids=replaced)
    complete_instant(meta, plan.instant, Action.REPLACE_COMMIT, meta.encode_commit_metadata(metadata))
    result = ClusteringResult(
        plan.instant,
        replaced,
        sorted(o.path for o in outs),
        sum(o.num_writes for o in outs),
        len(plan.groups),
        round(_time.monotonic() - started, 3),
    )
    say(f"clustering {plan.instant}: {result.files_replaced} file group(s) replaced by {len(result.files)}, "
        f"{result.records} record(s)")
    return result


def _update_index(meta: MetaClient, index: Any, instant: str, outs: list[WriteOutcome], spark: Any) -> None:
    """An index that stores locations (HBase, this engine's RECORD) learns each record's new file
    group before the clustering completes."""
    from engine.columns import FILE_ID_COL, KEY_COL, OP_COL, PART_COL
    from engine.constants import RECORD_KEY_COL
    from engine.index.base import TagContext
    from engine.transaction.undo import read_keys

    parts = []
    for o in outs:
        keys = read_keys(meta, o.path).column(RECORD_KEY_COL)
        n = len(keys)
        parts.append(pa.table({KEY_COL: keys.cast(pa.string()), PART_COL: pa.array([o.partition] * n, pa.string()),
                               FILE_ID_COL: pa.array([o.file_id] * n, pa.string()), OP_COL: pa.array(["U"] * n, pa.string())}))
    located = pa.concat_tables(parts) if parts else pa.table({c: pa.array([], pa.string()) for c in (KEY_COL, PART_COL, FILE_ID_COL, OP_COL)})
    view = meta.file_system_view(meta.timeline())
    ctx = TagContext(spark, meta, view, sorted({o.partition for o in outs}))
    if getattr(index, "updates_on_driver", False) or spark is None:
        if spark is None and not getattr(index, "updates_on_driver", False):
            raise InvalidInputError(
                f"the {index.name} index keeps record locations and updates them in Spark: run the clustering with a SparkSession"
            )
        index.update_location(ctx, instant, located)
    else:
        index.update_location(ctx, instant, spark.createDataFrame(located.to_pandas()))


def cluster(
    meta: MetaClient, config: ClusteringConfig, max_file_size: int, *, spark: Any = None, index: Any = None,
    fence: Fence = None, progress: Callable[[str], None] | None = None, **options: Any,
) -> ClusteringResult | None:
    """Run the pending clusterings (oldest first), else schedule one and run it; None when
    nothing qualifies."""
    timeline = meta.timeline()
    pending = pending_plans(meta, timeline)
    result = None
    for plan in pending:
        result = execute_clustering(meta, plan, config, spark=spark, index=index, fence=fence, progress=progress, **options)
    if pending:
        return result
    scheduled = schedule_clustering(meta, timeline, config, max_file_size, fence=fence)
    if scheduled is None:
        return None
    return execute_clustering(meta, scheduled, config, spark=spark, index=index, fence=fence, progress=progress, **options)


def commits_since_clustering(meta: MetaClient, timeline: Timeline) -> int:
    """Completed writes after the last completed clustering (Hudi's `inline.max.commits` trigger)."""
    writes = [i for i in timeline.completed_writes.instants]
    last = None
    for inst in reversed(writes):
        if inst.action is Action.REPLACE_COMMIT and meta.commit_metadata(inst, timeline).operation_type == OPERATION_TYPE:
            last = inst.time
            break
    return sum(1 for i in writes if last is None or i.time > last)


def _fence(fence: Fence) -> None:
    if fence is not None:
        fence()


__all__ = [
    "ClusteringResult",
    "check_sort_columns",
    "cluster",
    "commits_since_clustering",
    "execute_clustering",
    "pending_plans",
    "plan_clustering",
    "remove_partial_files",
    "revert_to_requested",
    "schedule_clustering",
    "show",
]
