"""Compaction (merge-on-read): merge each file slice's base file and log files into a new base file.

Planner + executor, as every table service (Apache Hudi's ScheduleCompactionActionExecutor and
RunCompactionActionExecutor):

- `plan_compaction` picks the latest slices that have log files (not in a pending compaction or
  clustering) and `schedule_compaction` writes the plan as `C.compaction.requested` (Avro
  `HoodieCompactionPlan`, `engine.table.compaction_plan`). From then on writers append to a new
  slice at C, and readers merge it with the planned slice.
- `execute_compaction` moves C to inflight, writes one base file per operation
  (`<fileId>_<token>_C.parquet`: the slice merged as readers merge it, each record keeping its
  commit time and sequence number) and completes C as `C.commit` (`compacted: true`, operation
  `COMPACT`, Hudi's compaction counters). Re-running a compaction that was interrupted first
  deletes the base files its earlier attempt left (Hudi's rollbackInflightCompaction), so a
  crash at any point leaves either the old slices or the new base files, never both visible.
- A plan Apache Hudi scheduled runs the same way.

No SparkSession is needed; with one (inline compaction inside a write, or a caller passing it)
the operations run as Spark tasks, else one after another on this process.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine import failpoints
from engine.config.table_config import TableType
from engine.constants import FILE_NAME_COL
from engine.data.batch import repeated
from engine.data.file_names import base_file_name, join_path
from engine.data.log_block import BlockType
from engine.data.log_file import read_log_blocks
from engine.data.slice_reader import SliceFiles, merge_mode_for, read_slice
from engine.errors import InstantNotFoundError, InvalidInputError
from engine.schema import internal as internal_schema
from engine.schema.avro import arrow_to_avro, avro_to_json, with_meta_fields
from engine.serial import Documented
from engine.table import lifecycle
from engine.table.compaction_plan import (
    PLAN_MODEL,
    CompactionOperation,
    CompactionPlan,
    pending_compactions,
    read_plan,
)
from engine.table.lifecycle import claim_instant, complete_instant
from engine.table.meta_client import MetaClient
from engine.table.ownership import remove_instant_base_files
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import CommittedInstants, Timeline
from engine.transaction.heartbeat import Heartbeat, heartbeat_file
from engine.write.file_writer import WriteContext, write_base_file
from engine.write.outcome import CompactionCounts, WriteOutcome

Fence = Callable[[], None] | None
OPERATION_TYPE = "COMPACT"


@dataclass
class CompactionResult(Documented):
    """A finished compaction: its instant, the base files written and what they merged."""

    instant: str
    files: list[str] = field(default_factory=list)
    records: int = 0
    log_files_compacted: int = 0
    log_records_compacted: int = 0
    seconds: float = 0.0


# ---- planning ---------------------------------------------------------------------------------
def plan_compaction(
    meta: MetaClient, timeline: Timeline, instant: str = "", exclude: frozenset[tuple[str, str]] = frozenset()
) -> CompactionPlan:
    """The slices to compact now: every latest slice with log files whose group no pending
    compaction or clustering holds, and not in `exclude` (the groups of writes in flight, under
    optimistic concurrency control); empty when there is nothing to compact."""
    if meta.config.table_type is not TableType.MERGE_ON_READ:
        raise InvalidInputError("compaction applies to MERGE_ON_READ tables only")
    from engine.table.clustering import held_by_services

    view = meta.file_system_view(timeline)
    busy = held_by_services(meta, timeline, view) | exclude
    ops = []
    for g in view.groups:
        s = g.latest_slice
        if s is None or not s.log_files or (g.partition, g.file_id) in busy:
            continue
        log_size = sum(lf.size for lf in s.log_files)
        base_size = s.base_file.size if s.base_file is not None else 0
        mb = 1024 * 1024
        metrics = {
            "TOTAL_LOG_FILES_SIZE": float(log_size),
            "TOTAL_IO_READ_MB": float((base_size + log_size) // mb),
            "TOTAL_IO_WRITE_MB": float(base_size // mb),
            "TOTAL_IO_MB": float((2 * base_size + log_size) // mb),
            "TOTAL_LOG_FILES": float(len(s.log_files)),
        }
        ops.append(
            CompactionOperation(
                g.partition,
                g.file_id,
                s.base_instant,
                s.base_file.file_name if s.base_file is not None else None,
                tuple(lf.file_name for lf in s.log_files),
                metrics,
            )
        )
    return CompactionPlan(instant, tuple(ops))


def schedule_compaction(
    meta: MetaClient,
    timeline: Timeline,
    now: datetime | None = None,
    fence: Fence = None,
    exclude: frozenset[tuple[str, str]] = frozenset(),
) -> CompactionPlan | None:
    """Plan and write `C.compaction.requested` (None when no slice has log files)."""
    from engine.timeline import avro_models

    plan = plan_compaction(meta, timeline, exclude=exclude)
    if not plan.operations:
        return None
    _fence(fence)
    body = avro_models.serialize(PLAN_MODEL, plan.to_record())
    instant = claim_instant(meta, timeline, Action.COMPACTION, body, now)
    return CompactionPlan(instant, plan.operations, plan.extra)


def plan_beside_writers(
    meta: MetaClient, heartbeat_interval_ms: int, tolerable_misses: int, instant: str | None = None
) -> CompactionPlan | None:
    """Optimistic concurrency control (the caller holds the table lock and starts the plan's
    heartbeat before releasing it): `instant`'s plan, or the oldest pending plan, unless a live
    process runs it (its heartbeat); else a new plan of the slices that no pending write (its
    inflight file), compaction or clustering holds. None: nothing to do.

    A pending write's log file is visible in the view (it is named with its slice's base instant)
    but its blocks are not committed: a plan holding its group would merge the slice without them
    and supersede the file, losing the write."""
    from engine.errors import ConcurrentWriteError
    from engine.transaction.heartbeat import is_running
    from engine.transaction.occ import pending_write_groups

    storage = meta.storage

    def running(time: str) -> bool:
        return is_running(storage, time, heartbeat_interval_ms, tolerable_misses)

    timeline = meta.timeline()
    if instant is not None:
        try:
            plan = read_plan(meta, instant)
        except FileNotFoundError as exc:
            raise InstantNotFoundError(f"no compaction plan {instant} in {storage.base_uri}") from exc
        if running(instant):
            raise ConcurrentWriteError(f"compaction {instant} of {storage.base_uri} is being run by another process")
        return plan
    free = [p for p in pending_compactions(meta, timeline) if not running(p.instant)]
    if free:
        return free[0]
    return schedule_compaction(meta, timeline, exclude=pending_write_groups(meta, timeline))


def deltacommits_since_compaction(timeline: Timeline) -> int:
    """Completed deltacommits after the last completed compaction (Hudi's NUM_COMMITS trigger)."""
    last = None
    for inst in timeline.completed.instants:
        if inst.action is Action.COMMIT:
            last = inst.time  # on a merge-on-read table, completed commits are compactions
    return sum(
        1
        for i in timeline.completed_writes.instants
        if i.action is Action.DELTA_COMMIT and (last is None or i.time > last)
    )


# ---- execution --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Job:
    """Everything one operation needs (picklable: it may run in a Spark task)."""

    storage: Any
    instant: str
    schema: pa.Schema
    ordering_field: str | None
    mode: Any
    committed: Callable[[str], bool]
    compression: str
    bloom: tuple[int, float, int]


def _run_operation(job: _Job, op: CompactionOperation, token: str) -> Compacted:
    """Merge one slice into `<fileId>_<token>_<instant>.parquet`: the file written and what it read."""
    files = SliceFiles(op.partition, op.file_id, op.base_instant, op.base_path, op.log_paths)
    merged = read_slice(
        job.storage, files, job.schema, ordering_field=job.ordering_field, mode=job.mode, is_committed=job.committed
    )
    name = base_file_name(op.file_id, token, job.instant)
    path = join_path(op.partition, name)
    merged = merged.set_column(
        merged.schema.get_field_index(FILE_NAME_COL),
        job.schema.field(FILE_NAME_COL),
        repeated(name, merged.num_rows),
    )
    ctx = WriteContext(
        storage=job.storage,
        instant=job.instant,
        schema=job.schema,
        precombine_field=job.ordering_field,
        compression=job.compression,
        bloom=job.bloom,
    )
    written = write_base_file(ctx, path, merged)
    log_records = log_blocks = rollback_blocks = 0
    log_size = 0
    for rel in op.log_paths:
        log_size += job.storage.size(rel)
        for block in read_log_blocks(job.storage, rel):
            log_blocks += 1
            if block.block_type == BlockType.COMMAND:
                rollback_blocks += 1
            elif block.block_type in (BlockType.PARQUET_DATA, BlockType.AVRO_DATA, BlockType.HFILE_DATA,
                                      BlockType.DELETE):
                log_records += _block_records(block)
    # records whose latest version came from a log block (Hudi's totalUpdatedRecordsCompacted)
    updated = int(pc.sum(pc.not_equal(merged.column("_hoodie_commit_time"), op.base_instant).cast(pa.int64())).as_py() or 0)
    outcome = WriteOutcome(
        path=path,
        file_id=op.file_id,
        partition=op.partition,
        prev_instant=op.base_instant,
        num_writes=written.rows,
        num_inserts=0,
        num_updates=updated,
        num_deletes=0,
        num_stale=0,
        file_size=written.size,
        min_key=None,
        max_key=None,
    )
    return Compacted(outcome, CompactionCounts(len(op.log_paths), log_size, log_records, log_blocks, rollback_blocks))


@dataclass(frozen=True)
class Compacted:
    """One compacted slice: the base file written, and what was read from its log files."""

    outcome: WriteOutcome
    counts: CompactionCounts

    def write_stat(self) -> WriteStat:
        return self.outcome.write_stat(self.counts)


def _block_records(block) -> int:
    """Records in a data or delete block, from its content's own counters (no full decode)."""
    import io
    import struct

    import pyarrow.parquet as pq

    if block.block_type == BlockType.PARQUET_DATA:
        return pq.ParquetFile(io.BytesIO(block.content)).metadata.num_rows
    if block.block_type == BlockType.AVRO_DATA:
        return int(struct.unpack(">i", block.content[4:8])[0]) if len(block.content) >= 8 else 0
    if block.block_type == BlockType.HFILE_DATA:
        from engine.data.hfile import read_trailer

        return read_trailer(block.content).entry_count
    from engine.data.log_block import decode_delete_block

    return decode_delete_block(block).num_rows


def remove_partial_files(meta: MetaClient, plan: CompactionPlan) -> list[str]:
    """Delete the base files an interrupted attempt of `plan` left (named with its instant)."""
    return remove_instant_base_files(meta.storage, plan.instant, _groups(plan.operations), "compaction revert")


def _groups(ops: Sequence[CompactionOperation]) -> dict[str, set[str] | None]:
    """partition -> the file ids the operations compact."""
    out: dict[str, set[str]] = {}
    for op in ops:
        out.setdefault(op.partition, set()).add(op.file_id)
    return {p: ids for p, ids in out.items()}


def revert_to_requested(meta: MetaClient, instant: str, fence: Fence = None) -> list[str]:
    """Undo an interrupted attempt of compaction `instant`: delete the base files it left and its
    inflight file, so that the plan runs again from the start (Apache Hudi's
    rollbackInflightCompaction). Returns the files deleted."""
    plan = read_plan(meta, instant)
    _fence(fence)
    lifecycle.abandoned(meta, instant)  # a metadata deltacommit of the attempt names its files
    removed = remove_partial_files(meta, plan)
    meta.storage.delete(meta.instant_path(Instant(instant, Action.COMPACTION, State.INFLIGHT)))
    meta.storage.delete(heartbeat_file(instant))
    return removed


def execute_compaction(
    meta: MetaClient,
    plan: CompactionPlan,
    *,
    spark: Any = None,
    fence: Fence = None,
    progress: Callable[[str], None] | None = None,
    compression: str = "snappy",
    bloom: tuple[int, float, int] = (60_000, 1e-9, 100_000),
    heartbeat_interval: float | None = 60.0,
    before_complete: Fence = None,
    local_max_bytes: int = 0,
) -> CompactionResult:
    """Run a scheduled (or interrupted) compaction to completion (the caller holds the table lock,
    or, under optimistic concurrency control, takes it in `before_complete`).

    While it runs, the compaction keeps a heartbeat (`.hoodie/.heartbeat/<instant>`; None: the
    caller keeps it): a runner that dies leaves an inflight compaction whose heartbeat expires (or
    names a dead process), which `repair` reverts."""
    heartbeat = Heartbeat.start(meta.storage, plan.instant, heartbeat_interval) if heartbeat_interval else None
    try:
        return _execute(meta, plan, spark, fence, progress, compression, bloom, before_complete, local_max_bytes)
    finally:
        if heartbeat is not None:
            heartbeat.stop()


def _execute(meta, plan, spark, fence, progress, compression, bloom, before_complete=None,
             local_max_bytes: int = 0) -> CompactionResult:
    from engine.timeline import avro_models
    from engine.transaction.occ import avro_columns, schema_columns

    started = _time.monotonic()
    say = progress or (lambda _m: None)
    timeline = meta.timeline()
    inst = timeline.get(plan.instant)
    if inst is None or inst.action is not Action.COMPACTION:
        if inst is not None and inst.is_completed:
            raise InvalidInputError(f"compaction {plan.instant} is already completed")
        raise InstantNotFoundError(f"{plan.instant} is not a pending compaction of {meta.storage.base_uri}")
    _fence(fence)
    if inst.is_inflight:
        removed = remove_partial_files(meta, plan)
        if removed:
            say(f"compaction {plan.instant}: removed {len(removed)} file(s) of an interrupted attempt")
    else:
        body = avro_models.serialize(PLAN_MODEL, plan.to_record())
        meta.storage.create_exclusive(meta.instant_path(Instant(plan.instant, Action.COMPACTION, State.INFLIGHT)), body)
    failpoints.hit("compaction.after_inflight")
    versions = meta.schema_versions(timeline)  # schema on read: read once, for the merge and the commit
    data_schema = meta.latest_schema(timeline, versions=versions)
    if data_schema is None:
        raise InvalidInputError(f"{meta.storage.base_uri} has no schema to compact with")
    job = _Job(
        meta.storage,
        plan.instant,
        with_meta_fields(data_schema),
        meta.config.precombine_field,
        merge_mode_for(meta.config),
        CommittedInstants(timeline.completed_write_times, timeline.archived_before),
        compression,
        bloom,
    )
    say(f"compacting {len(plan.operations)} file slice(s) into instant {plan.instant}")
    outs = _run_all(job, plan.operations, spark, local_max_bytes)
    failpoints.hit("compaction.before_complete")
    _fence(before_complete)
    _fence(fence)
    stats: dict[str, list[WriteStat]] = {}
    for out in sorted(outs, key=lambda o: (o.outcome.partition, o.outcome.file_id)):
        stats.setdefault(out.outcome.partition, []).append(out.write_stat())
    # the schema read under the commit lock: a write that completed beside this compaction (under
    # optimistic concurrency) may have added columns, which the compacted files read as nulls; a
    # compaction never takes them away (Apache Hudi's schema resolution at commit)
    now = meta.timeline()
    table_avro = meta.latest_avro_schema(now)
    changed = table_avro is not None and avro_columns(table_avro) != schema_columns(data_schema)
    extra = {"schema": table_avro if changed else avro_to_json(arrow_to_avro(data_schema, meta.config.name))}
    if versions:  # schema on read: the version in force at the compaction's instant
        versions = meta.schema_versions(now)
        extra[internal_schema.LATEST_SCHEMA_KEY] = (internal_schema.search(versions, plan.instant) or versions[-1]).to_json()
    metadata = CommitMetadata(stats, OPERATION_TYPE, extra, compacted=True)
    complete_instant(meta, plan.instant, Action.COMMIT, meta.encode_commit_metadata(metadata))
    return CompactionResult(
        plan.instant,
        sorted(o.outcome.path for o in outs),
        sum(o.outcome.num_writes for o in outs),
        sum(o.counts.log_files for o in outs),
        sum(o.counts.log_records for o in outs),
        round(_time.monotonic() - started, 3),
    )


def _run_all(job: _Job, ops: Sequence[CompactionOperation], spark: Any, local_max_bytes: int = 0) -> list[Compacted]:
    """Every operation: on the driver's threads when there is no session, one operation, or the
    slices read fit `local_max_bytes` (`hoodie.write.local.max.bytes`); else as Spark tasks."""
    from engine.data.scan import read_bytes, run_local, run_tasks

    if spark is None or len(ops) <= 1 or 0 < local_max_bytes and read_bytes([op.metrics for op in ops]) <= local_max_bytes:
        return run_local(ops, lambda op, token: _run_operation(job, op, token))

    outs = run_tasks(spark, job.instant, f"hoodie compaction {job.instant}", ops,
                     lambda op, token: _run_operation(job, op, token))
    # a retried task may have left a second base file for the same operation: keep the reported one
    remove_instant_base_files(job.storage, job.instant, _groups(ops), "compaction",
                              keep={o.outcome.path for o in outs})
    return outs


def compact(
    meta: MetaClient, *, spark: Any = None, fence: Fence = None, progress: Callable[[str], None] | None = None,
    **options: Any,
) -> CompactionResult | None:
    """Run the pending compactions (oldest first), else schedule one and run it; None when no
    slice has log files."""
    timeline = meta.timeline()
    pending = pending_compactions(meta, timeline)
    result = None
    for plan in pending:
        result = execute_compaction(meta, plan, spark=spark, fence=fence, progress=progress, **options)
    if pending:
        return result
    scheduled = schedule_compaction(meta, timeline, fence=fence)
    if scheduled is None:
        return None
    return execute_compaction(meta, scheduled, spark=spark, fence=fence, progress=progress, **options)


def show(meta: MetaClient, instant: str) -> CompactionPlan:
    """The plan of a compaction (pending or completed, while its requested file exists)."""
    try:
        return read_plan(meta, instant)
    except FileNotFoundError as exc:
        raise InstantNotFoundError(f"no compaction plan {instant} in {meta.storage.base_uri}") from exc


def _fence(fence: Fence) -> None:
    if fence is not None:
        fence()


__all__ = [
    "CompactionResult",
    "compact",
    "deltacommits_since_compaction",
    "execute_compaction",
    "plan_compaction",
    "remove_partial_files",
    "revert_to_requested",
    "schedule_compaction",
    "show",
]
