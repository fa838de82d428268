"""Rollback: undo one write instant, completed or pending, planned first and executed idempotently.

On the timeline (R is the rollback's own time, T the rolled-back instant):

1. `R.rollback.requested`: the plan (Avro `HoodieRollbackPlan`: T, and the files to delete per
   partition, the index's own files included).
2. `R.rollback.inflight`.
3. If T is completed, `T.commit` is removed first (T.inflight kept): from here on T is pending,
   invisible to every reader, and the snapshot is the one before T.
4. The index reverts T's locations (computed from T's files, so before any of them goes), then
   T's files are deleted (the plan's, plus any file of T found by a fresh listing) and partition
   folders T created and left empty are removed.
5. T's remaining timeline files and its heartbeat are removed.
6. `R.rollback` (Avro `HoodieRollbackMetadata`: what was deleted).

A crash at any step leaves `R.rollback.requested`/`.inflight`; `resume` (run by `repair` and at
the start of every write) re-executes the plan: every step tolerates its own earlier partial run.

Rolling back a completed instant is refused (table unchanged) when it would lose data: a later
completed write rewrote one of its file groups (restore is the way out), the file versions it
replaced were cleaned, or a savepoint at or after it protects it.
"""

from __future__ import annotations

import logging
import time as _time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa

from engine.errors import InstantNotFoundError
from engine.index.base import Index
from engine.serial import Documented
from engine.services.rollback_checks import check_rollback_allowed
from engine.table.lifecycle import (
    claim_instant,
    ensure_file,
    read_avro,
    write_avro,
)
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline
from engine.transaction.undo import (
    file_uri,
    index_change,
    instant_files,
    instant_groups,
    owned_instant_files,
    parent_folder,
    replaced_groups,
    undo_instant,
)

_log = logging.getLogger(__name__)
PLAN_MODEL = "HoodieRollbackPlan"
METADATA_MODEL = "HoodieRollbackMetadata"
Fence = Callable[[], None] | None  # the table lock's check(): raises ConcurrentWriteError once lost

CHANGE_SCHEMA_REMOVED = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string())])
CHANGE_SCHEMA_RESTORED = pa.schema(
    [("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string()), ("commit_time", pa.string())]
)


@dataclass(frozen=True)
class IndexRevert(Documented):
    """What a rollback does to an index that stores locations: entries put back (the records of
    the slices that become current again) and entries deleted (keys the instant inserted)."""

    index: str
    entries_put: int
    entries_deleted: int
    deleted_keys: tuple[str, ...]  # the first 20
    put_keys: tuple[str, ...]  # the first 20


@dataclass(frozen=True)
class RollbackPlan(Documented):
    """What rolling back `target` deletes; `instant` is the rollback's own time (None in a dry run)."""

    target: Instant
    files: tuple[str, ...]  # paths relative to the table root
    instant: str | None = None
    # dry runs, for indexes that store locations (HBASE): the entries the rollback would revert
    index_revert: IndexRevert | None = None
    # files found for the instant but not its own (another table's, another instant's): kept
    skipped: tuple[str, ...] = ()

    @property
    def partitions(self) -> list[str]:
        return sorted({parent_folder(f) for f in self.files})

    def to_record(self, base_uri: str) -> dict:
        by_part: dict[str, list[str]] = {}
        for f in self.files:
            by_part.setdefault(parent_folder(f), []).append(file_uri(base_uri, f))
        return {
            "instantToRollback": {"commitTime": self.target.time, "action": self.target.action.value},
            "RollbackRequests": [
                {
                    "partitionPath": part,
                    "fileId": None,
                    "latestBaseInstant": None,
                    "filesToBeDeleted": sorted(paths),
                    "logBlocksToBeDeleted": None,
                }
                for part, paths in sorted(by_part.items())
            ],
            "version": 1,
        }

    @classmethod
    def from_record(cls, record: dict, instant: str) -> RollbackPlan:
        info = record.get("instantToRollback") or {}
        target = Instant(info["commitTime"], Action(info["action"]), State.INFLIGHT)
        files = []
        for req in record.get("RollbackRequests") or []:
            part = req["partitionPath"]
            for full in req.get("filesToBeDeleted") or []:
                name = full.rstrip("/").rpartition("/")[2]
                files.append(f"{part}/{name}" if part else name)
        return cls(target, tuple(sorted(files)), instant)


@dataclass
class RollbackResult(Documented):
    """A finished rollback: its instant, the instant undone and the files deleted."""

    instant: str | None
    target: str
    deleted: list[str] = field(default_factory=list)
    seconds: float = 0.0
    dry_run: bool = False
    skipped: list[str] = field(default_factory=list)  # not the instant's own files: kept


# ---- planning ---------------------------------------------------------------------------------


def plan_rollback(meta: MetaClient, timeline: Timeline, target_time: str, index: Index | None) -> RollbackPlan:
    """The plan to roll back `target_time` (checked; nothing written)."""
    target = timeline.get(target_time)
    if target is None:
        raise InstantNotFoundError(f"instant {target_time} is not on the active timeline of {meta.storage.base_uri}")
    check_rollback_allowed(meta, timeline, target)
    _parts, groups, exact = instant_groups(meta, target.time, target.action)
    logs = target.action is not Action.COMPACTION  # a compaction writes base files only
    found = instant_files(meta, target.time, index, groups or None, logs)
    files, skipped = owned_instant_files(meta, target.time, found, groups if exact else None, "rollback")
    return RollbackPlan(target, tuple(files), skipped=tuple(skipped))


def describe_index_revert(meta: MetaClient, timeline: Timeline, plan: RollbackPlan, index: Index | None) -> RollbackPlan:
    """`plan` with the index entries its execution would revert (for a dry run), computed as
    `undo_instant` computes them, from the files and a view of the table without the instant."""
    if index is None or not index.wants_locations:
        return plan
    time = plan.target.time
    without = Timeline(tuple(i for i in timeline.instants if i.time != time), timeline.has_archive)
    _parts, groups, _exact = instant_groups(meta, time, plan.target.action)
    groups |= replaced_groups(meta, time, plan.target.action)
    change = index_change(meta, index, time, list(plan.files), groups, without)
    put = sorted(set(change.restored.column("key").to_pylist()))
    deleted = sorted(set(change.removed.column("key").to_pylist()) - set(put))
    revert = IndexRevert(index.name, len(put), len(deleted), tuple(deleted[:20]), tuple(put[:20]))
    return RollbackPlan(plan.target, plan.files, plan.instant, revert, plan.skipped)


def schedule_rollback(meta: MetaClient, timeline: Timeline, plan: RollbackPlan, now: datetime | None = None) -> RollbackPlan:
    """Claim the rollback instant R and write `R.rollback.requested` holding the plan."""
    from engine.timeline import avro_models

    body = avro_models.serialize(PLAN_MODEL, plan.to_record(meta.storage.base_uri))
    time = claim_instant(meta, timeline, Action.ROLLBACK, body, now)
    return RollbackPlan(plan.target, plan.files, time, skipped=plan.skipped)


# ---- execution --------------------------------------------------------------------------------
def execute_rollback(meta: MetaClient, plan: RollbackPlan, index: Index | None, fence: Fence = None) -> RollbackResult:
    """Carry out a scheduled plan (idempotent: safe to re-run after a crash at any point).

    `fence` (the table lock's check) runs before anything is deleted and before completion: a
    service that lost its lock stops."""
    assert plan.instant is not None, "schedule the plan first"
    started = _time.monotonic()
    rb = Instant(plan.instant, Action.ROLLBACK, State.INFLIGHT)
    _fence(fence)
    ensure_file(meta, rb)
    skipped: list[str] = []
    deleted = undo_instant(meta, plan.target.time, plan.target.action, plan.files, index, skipped=skipped)
    # after a resumed run, files an earlier run deleted count as deleted too
    gone = sorted(set(deleted) | {f for f in plan.files if f not in skipped and not meta.storage.exists(f)})
    record = rollback_metadata(meta, plan, gone, int((_time.monotonic() - started) * 1000), skipped)
    _fence(fence)
    write_avro(meta, rb.with_state(State.COMPLETED), METADATA_MODEL, record)
    return RollbackResult(plan.instant, plan.target.time, deleted, round(_time.monotonic() - started, 3),
                          skipped=sorted(set(skipped)))


def resume(meta: MetaClient, instant: Instant, index: Index | None, fence: Fence = None) -> RollbackResult:
    """Finish a pending rollback from its plan."""
    record = read_avro(meta, instant.with_state(State.REQUESTED), PLAN_MODEL)
    plan = RollbackPlan.from_record(record, instant.time)
    return execute_rollback(meta, plan, index, fence)


def rollback(
    meta: MetaClient,
    target_time: str,
    index: Index | None,
    dry_run: bool = False,
    now: datetime | None = None,
    fence: Fence = None,
) -> RollbackResult | RollbackPlan:
    """Plan and execute a rollback (the caller holds the table lock). Dry run: the plan only."""
    timeline = meta.timeline()
    plan = plan_rollback(meta, timeline, target_time, index)
    if dry_run:
        return plan
    plan = schedule_rollback(meta, timeline, plan, now)
    return execute_rollback(meta, plan, index, fence)


def _fence(fence: Fence) -> None:
    if fence is not None:
        fence()


def rollback_metadata(
    meta: MetaClient, plan: RollbackPlan, deleted: list[str], millis: int, kept: Iterable[str] = ()
) -> dict:
    """Avro `HoodieRollbackMetadata` for a finished rollback (full paths, as Apache Hudi writes);
    `kept`: planned files left because they are not the instant's own (`failedDeleteFiles`)."""
    base = meta.storage.base_uri
    parts: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    for f in plan.files:
        parts.setdefault(parent_folder(f), [])
    for f in deleted:
        parts.setdefault(parent_folder(f), []).append(file_uri(base, f))
    for f in sorted(set(kept)):
        parts.setdefault(parent_folder(f), [])
        failed.setdefault(parent_folder(f), []).append(file_uri(base, f))
    return {
        "startRollbackTime": plan.instant,
        "timeTakenInMillis": millis,
        "totalFilesDeleted": len(deleted),
        "commitsRollback": [plan.target.time],
        "partitionMetadata": {
            p: {
                "partitionPath": p,
                "successDeleteFiles": sorted(paths),
                "failedDeleteFiles": failed.get(p, []),
                "rollbackLogFiles": None,
                "writtenLogFiles": None,
            }
            for p, paths in sorted(parts.items())
        },
        "version": 1,
        "instantsRollback": [{"commitTime": plan.target.time, "action": plan.target.action.value}],
    }


# ---- helpers ----------------------------------------------------------------------------------


