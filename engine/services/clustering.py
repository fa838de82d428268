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

import time as _time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engine import failpoints
from engine.config.clustering_config import ClusteringConfig
from engine.data.slice_reader import merge_mode_for
from engine.errors import CommitConflictError, ConcurrentWriteError, InstantNotFoundError, InvalidInputError
from engine.schema.avro import arrow_to_avro, avro_to_json, with_meta_fields
from engine.serial import Documented
from engine.services.clustering_groups import GroupJob, run_groups, update_index
from engine.table import lifecycle
from engine.table.clustering import held_by_services, pending_clustering
from engine.table.clustering_plan import (
    SORT_COLUMNS_PARAM,
    ClusteringPlan,
    SliceInput,
    plan_groups,
    read_plan,
    requested_action,
)
from engine.table.lifecycle import claim_instant, complete_instant
from engine.table.meta_client import MetaClient
from engine.table.ownership import remove_instant_base_files
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import CommittedInstants, Timeline
from engine.transaction.heartbeat import Heartbeat, heartbeat_file

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
def check_sort_columns(meta: MetaClient, columns: Sequence[str], timeline: Timeline | None = None,
                       schema: Any = None) -> None:
    """Refuse (InvalidInputError) sort columns the table (`schema`, else its latest) does not have,
    before anything is written."""
    schema = schema if schema is not None else meta.latest_schema(timeline or meta.timeline())
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
    busy = held_by_services(meta, timeline, view) | exclude
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
def check_plan_current(meta: MetaClient, timeline: Timeline, plan: ClusteringPlan) -> None:
    """Refuse (CommitConflictError, nothing written) a plan whose file slices are no longer the
    latest of their groups: a write updated them after it was planned (Apache Hudi's
    SparkAllowUpdateStrategy lets such writes in), and rewriting the planned slices would drop it."""
    view = meta.file_system_view(timeline)
    changed = []
    for g in plan.groups:
        for s in g.slices:
            group = view.group(s.partition, s.file_id)
            latest = group.latest_slice if group is not None else None
            base = latest.base_file.file_name if latest is not None and latest.base_file is not None else None
            logs = tuple(lf.file_name for lf in latest.log_files) if latest is not None else ()
            if latest is None or base != s.base_file or logs != s.log_files:
                changed.append(f"{s.partition}/{s.file_id}" if s.partition else s.file_id)
    if changed:
        shown = ", ".join(changed[:3]) + (" ..." if len(changed) > 3 else "")
        raise CommitConflictError(
            f"clustering {plan.instant} is stale: writes after it was planned changed {len(changed)} of its file "
            f"group(s) ({shown}), and rewriting the planned slices would drop them; nothing was written. Remove it "
            f"with `hoodie rollback PATH {plan.instant}` and cluster again"
        )


def remove_partial_files(meta: MetaClient, plan: ClusteringPlan) -> list[str]:
    """Delete the base files an interrupted attempt of `plan` left (named with its instant)."""
    return remove_instant_base_files(meta.storage, plan.instant, dict.fromkeys((g.partition for g in plan.groups), None),
                                     "clustering revert")


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
    key_order: bool = True,
    local_max_bytes: int = 0,
) -> ClusteringResult:
    """Run a scheduled (or interrupted) clustering to completion (the caller holds the table lock,
    or takes it in `before_complete`). The run keeps a heartbeat; a runner that dies leaves an
    inflight clustering that repair reverts once the heartbeat expired."""
    heartbeat = Heartbeat.start(meta.storage, plan.instant, heartbeat_interval) if heartbeat_interval else None
    try:
        return _execute(meta, plan, config, spark, index, fence, progress, compression, bloom, before_complete,
                        key_order, local_max_bytes)
    finally:
        if heartbeat is not None:
            heartbeat.stop()


def _execute(meta, plan, config, spark, index, fence, progress, compression, bloom, before_complete,
             key_order=True, local_max_bytes: int = 0) -> ClusteringResult:
    from engine.keygen.keys import KeySpec

    started = _time.monotonic()
    say = progress or (lambda _m: None)
    timeline = meta.timeline()
    inst = timeline.get(plan.instant)
    if inst is None or inst.is_completed or inst.time not in {c.instant.time for c in pending_clustering(meta, timeline)}:
        if inst is not None and inst.is_completed:
            raise InvalidInputError(f"clustering {plan.instant} is already completed")
        raise InstantNotFoundError(f"{plan.instant} is not a pending clustering of {meta.storage.base_uri}")
    data_schema = meta.latest_schema(timeline)
    if data_schema is None:
        raise InvalidInputError(f"{meta.storage.base_uri} has no schema to cluster with")
    if plan.sort_columns:
        check_sort_columns(meta, plan.sort_columns, schema=data_schema)
    check_plan_current(meta, timeline, plan)
    action = _requested_action(inst.action)
    _fence(fence)
    if inst.is_inflight:
        removed = remove_partial_files(meta, plan)
        if removed:
            say(f"clustering {plan.instant}: removed {len(removed)} file(s) of an interrupted attempt")
    else:
        meta.storage.create_exclusive(meta.instant_path(Instant(plan.instant, action, State.INFLIGHT)), b"")
    failpoints.hit("clustering.after_inflight")
    job = GroupJob(
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
        key_order,
    )
    slices = sum(len(g.slices) for g in plan.groups)
    order = (f"sorted by {', '.join(plan.sort_columns)} ({config.layout_strategy})" if plan.sort_columns
             else "by record key" if key_order else "as read (hoodie.bulkinsert.sort.mode=NONE)")
    say(f"clustering {plan.instant}: {slices} file slice(s) in {len(plan.groups)} group(s), {order}")
    outs = run_groups(job, plan.groups, spark, say, local_max_bytes)
    failpoints.hit("clustering.before_complete")
    replaced: dict[str, list[str]] = {}
    for g in plan.groups:
        for s in g.slices:
            replaced.setdefault(s.partition, []).append(s.file_id)
    _fence(before_complete)
    _fence(fence)
    try:  # beside optimistic writers, one may have changed a planned group meanwhile (allowed updates)
        check_plan_current(meta, meta.timeline(), plan)
    except CommitConflictError:
        revert_to_requested(meta, plan.instant)
        raise
    if index is not None and getattr(index, "wants_locations", False):
        update_index(meta, index, plan.instant, outs, spark)
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

def plan_beside_writers(
    meta: MetaClient,
    config: ClusteringConfig,
    max_file_size: int,
    heartbeat_interval_ms: int,
    tolerable_misses: int,
    instant: str | None = None,
) -> ClusteringPlan | None:
    """Optimistic concurrency control (the caller holds the table lock and starts the plan's
    heartbeat before releasing it): `instant`'s plan, or the oldest pending plan no live process
    runs (its heartbeat), else a new plan of the slices no pending write (its inflight file),
    compaction or clustering holds. None: nothing to cluster."""
    from engine.transaction.heartbeat import is_running
    from engine.transaction.occ import pending_write_groups

    storage = meta.storage

    def running(time: str) -> bool:
        return is_running(storage, time, heartbeat_interval_ms, tolerable_misses)

    timeline = meta.timeline()
    if instant is not None:
        plan = show(meta, instant)
        if running(instant):
            raise ConcurrentWriteError(f"clustering {instant} of {storage.base_uri} is being run by another process")
        return plan
    free = [p for p in pending_plans(meta, timeline) if not running(p.instant)]
    if free:
        return free[0]
    return schedule_clustering(meta, timeline, config, max_file_size, exclude=pending_write_groups(meta, timeline))


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
    "plan_beside_writers",
    "plan_clustering",
    "remove_partial_files",
    "revert_to_requested",
    "schedule_clustering",
    "show",
]
