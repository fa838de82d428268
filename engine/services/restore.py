"""Restore: return the table to a savepoint or any completed commit by rolling back everything
after it, newest first, as one recoverable operation.

`X.restore.requested` holds the plan (Avro `HoodieRestorePlan`: the instants to roll back),
then `X.restore.inflight`; each instant is undone like a rollback (made invisible first, then its
files, index entries and timeline files removed); savepoints of rolled-back commits are removed;
`X.restore` (Avro `HoodieRestoreMetadata`) completes it. After a crash the table shows the
snapshot of the newest commit still completed (never a torn one), and `repair` (or the next
write) resumes the restore from its plan.

Refused (table unchanged) when the snapshot at the target is no longer complete (a clean
deleted some of its file versions: savepoints prevent that).
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field
from datetime import datetime

from engine import failpoints
from engine.errors import InstantNotFoundError, InvalidInputError, RollbackRefusedError
from engine.index.base import Index
from engine.serial import Documented
from engine.services import rollback as rb
from engine.services.rollback_checks import undoable
from engine.services.savepoint import missing_snapshot_files, remove_savepoint_files
from engine.table.lifecycle import claim_instant, ensure_file, read_avro, write_avro
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

PLAN_MODEL = "HoodieRestorePlan"
METADATA_MODEL = "HoodieRestoreMetadata"


@dataclass(frozen=True)
class RestorePlan(Documented):
    """Restore to `target`: roll back `instants` (newest first). `instant` is the restore's time."""

    target: str
    instants: tuple[Instant, ...]
    instant: str | None = None

    def to_record(self) -> dict:
        return {
            "instantsToRollback": [{"commitTime": i.time, "action": i.action.value} for i in self.instants],
            "version": 1,
        }

    @classmethod
    def from_record(cls, record: dict, instant: str) -> RestorePlan:
        insts = tuple(
            Instant(i["commitTime"], Action(i["action"]), State.INFLIGHT) for i in record.get("instantsToRollback") or []
        )
        # Hudi's plan does not name the target: it is whatever precedes the oldest rolled-back instant
        return cls("", insts, instant)


@dataclass
class RestoreResult(Documented):
    instant: str | None
    target: str
    rolled_back: list[str] = field(default_factory=list)
    deleted: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)  # found for an instant, but not its own: kept


def plan_restore(meta: MetaClient, timeline: Timeline, target: str) -> RestorePlan:
    inst = timeline.get(target)
    if inst is None or not inst.is_completed or not inst.action.is_write:
        raise InstantNotFoundError(
            f"{target} is not a completed commit on the active timeline of {meta.storage.base_uri}"
        )
    later = [i for i in timeline.writes.instants if i.time > target]
    odd = [i for i in later if not undoable(i)]
    if odd:
        raise InvalidInputError(f"cannot restore over {odd[0].action.value} instant {odd[0].time}")
    _check_snapshot_intact(meta, timeline, target)
    _check_replaced_versions(meta, later)
    return RestorePlan(target, tuple(sorted(later, reverse=True)))


def _check_replaced_versions(meta: MetaClient, later: list[Instant]) -> None:
    """The version each rolled-back file group returns to must exist: for every file group, the
    oldest rolled-back write that touched it names it (prevCommit). Catches versions written by
    archived commits and cleaned since, which the active timeline alone cannot show."""
    from engine.errors import CorruptTableError
    from engine.timeline.commit_metadata import CommitMetadata

    names = {df.name for df in meta.list_data_files()}
    first_touch: dict[tuple[str, str], str] = {}
    for inst in sorted(later):
        state = State.COMPLETED if inst.is_completed else State.INFLIGHT
        try:
            body = meta.storage.read_bytes(meta.instant_path(Instant(inst.time, inst.action, state)))
            stats = CommitMetadata.from_json(body).write_stats if body.strip() else []
        except (FileNotFoundError, CorruptTableError):
            stats = []
        for st in stats:
            key = (st.partitionPath, st.fileId)
            if key not in first_touch:
                # an appended log file leaves its slice's base file as it was: nothing to return to
                first_touch[key] = "null" if st.logVersion is not None else (st.prevCommit or "null")
    missing = []
    for (part, fid), prev in sorted(first_touch.items()):
        if prev == "null":
            continue
        if not any(n.startswith(f"{fid}_") and n.endswith(f"_{prev}.parquet") for n in names):
            missing.append(f"{part}/{fid} @ {prev}")
    if missing:
        raise RollbackRefusedError(
            f"cannot restore: {len(missing)} file version(s) it would return to were cleaned "
            f"(e.g. {missing[0]}); savepoint a commit to keep it restorable"
        )


def _check_snapshot_intact(meta: MetaClient, timeline: Timeline, target: str) -> None:
    """Every file of the snapshot at `target` must still exist (clean may have deleted some)."""
    missing = missing_snapshot_files(meta, timeline, target)
    if missing:
        raise RollbackRefusedError(
            f"cannot restore to {target}: {len(missing)} file(s) of its snapshot were cleaned "
            f"(e.g. {missing[0]}); savepoint a commit to keep it restorable"
        )


def schedule_restore(meta: MetaClient, timeline: Timeline, plan: RestorePlan, now: datetime | None = None) -> RestorePlan:
    from engine.timeline import avro_models

    body = avro_models.serialize(PLAN_MODEL, plan.to_record())
    time = claim_instant(meta, timeline, Action.RESTORE, body, now)
    return RestorePlan(plan.target, plan.instants, time)


def execute_restore(meta: MetaClient, plan: RestorePlan, index: Index | None, fence: rb.Fence = None) -> RestoreResult:
    assert plan.instant is not None, "schedule the plan first"
    started = _time.monotonic()
    inflight = Instant(plan.instant, Action.RESTORE, State.INFLIGHT)
    ensure_file(meta, inflight)
    result = RestoreResult(plan.instant, plan.target)
    per_instant: dict[str, list[dict]] = {}
    # savepoints of the instants to roll back go first (pending ones too): a savepoint must never
    # outlive, even for a moment, the commit it protects
    oldest = min((i.time for i in plan.instants), default=None)
    rb._fence(fence)  # a restore that lost its lock deletes nothing, savepoints included
    for sp in meta.timeline().instants:
        if sp.action is Action.SAVEPOINT and oldest is not None and sp.time >= oldest:
            remove_savepoint_files(meta, sp.time)
    for n, inst in enumerate(plan.instants):
        rb._fence(fence)
        t0 = _time.monotonic()
        kept: list[str] = []
        deleted = rb.undo_instant(
            meta, inst.time, inst.action, (), index, final=n == len(plan.instants) - 1, skipped=kept
        )
        result.rolled_back.append(inst.time)
        result.deleted[inst.time] = deleted
        result.skipped.extend(f for f in kept if f not in result.skipped)
        sub = rb.RollbackPlan(inst, tuple(deleted), plan.instant)
        millis = int((_time.monotonic() - t0) * 1000)
        per_instant[inst.time] = [rb.rollback_metadata(meta, sub, deleted, millis, kept)]
        if n == 0:
            failpoints.hit("restore.after_first")
    record = {
        "startRestoreTime": plan.instant,
        "timeTakenInMillis": int((_time.monotonic() - started) * 1000),
        "instantsToRollback": [i.time for i in plan.instants],
        "hoodieRestoreMetadata": per_instant,
        "version": 1,
        "restoreInstantInfo": [{"commitTime": i.time, "action": i.action.value} for i in plan.instants],
    }
    rb._fence(fence)
    write_avro(meta, inflight.with_state(State.COMPLETED), METADATA_MODEL, record)
    result.seconds = round(_time.monotonic() - started, 3)
    return result


def resume(meta: MetaClient, instant: Instant, index: Index | None, fence: rb.Fence = None) -> RestoreResult:
    record = read_avro(meta, instant.with_state(State.REQUESTED), PLAN_MODEL)
    return execute_restore(meta, RestorePlan.from_record(record, instant.time), index, fence)


def restore(
    meta: MetaClient,
    target: str,
    index: Index | None,
    dry_run: bool = False,
    now: datetime | None = None,
    fence: rb.Fence = None,
) -> RestoreResult | RestorePlan:
    """Plan and execute a restore (the caller holds the table lock). Dry run: the plan only."""
    timeline = meta.timeline()
    plan = plan_restore(meta, timeline, target)
    if dry_run:
        return plan
    plan = schedule_restore(meta, timeline, plan, now)
    return execute_restore(meta, plan, index, fence)
