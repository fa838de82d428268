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
import pyarrow.compute as pc

from engine import failpoints
from engine.constants import COMMIT_TIME_COL, METAFOLDER, PARTITION_METADATA_FILE, RECORD_KEY_COL
from engine.data.file_names import file_instant, parse_base_file_name, parse_log_file_name
from engine.errors import InstantNotFoundError, InvalidInputError
from engine.index.base import Index, RollbackChange
from engine.serial import Documented
from engine.services.rollback_checks import check_rollback_allowed, read_keys
from engine.table import schema_history
from engine.table.lifecycle import (
    claim_instant,
    ensure_file,
    heartbeat_path,
    read_avro,
    remove_instant,
    write_avro,
)
from engine.table.meta_client import MetaClient
from engine.table.ownership import FileOwnership
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

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
        return sorted({_parent(f) for f in self.files})

    def to_record(self, base_uri: str) -> dict:
        by_part: dict[str, list[str]] = {}
        for f in self.files:
            by_part.setdefault(_parent(f), []).append(_uri(base_uri, f))
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
def instant_files(
    meta: MetaClient,
    time: str,
    index: Index | None,
    groups: set[tuple[str, str]] | None = None,
    logs: bool = True,
) -> list[str]:
    """Every file written by instant `time`: base files named with it, log files whose blocks it
    wrote (merge-on-read: a log file is named after its slice's base instant, so its blocks'
    headers tell; only the groups `time` wrote when they are known), plus the index's own files.

    A log file holding blocks of `time` and of other instants (Apache Hudi appending on HDFS)
    cannot be deleted without losing the others: InvalidInputError."""
    from engine.data.log_file import log_block_instants

    found = []
    for df in meta.list_data_files():
        if parse_base_file_name(df.name) is not None:
            if file_instant(df.name) == time:
                found.append(df.path)
            continue
        if not logs:
            continue
        log = parse_log_file_name(df.name)
        # a log file `time` wrote belongs to a slice based at or before it
        if log is None or log.base_instant > time or (groups is not None and (df.partition, log.file_id) not in groups):
            continue
        instants = log_block_instants(meta.storage, df.path)
        if time not in instants:
            continue
        if any(i != time for i in instants):
            raise InvalidInputError(
                f"log file {df.path} holds blocks of {time} and of other instants ({', '.join(sorted(set(instants)))}); "
                f"rolling {time} back would need a rollback command block, which this version does not write"
            )
        found.append(df.path)
    if index is not None:
        found.extend(index.rollback_files(meta, time))
    return sorted(set(found))


def plan_rollback(meta: MetaClient, timeline: Timeline, target_time: str, index: Index | None) -> RollbackPlan:
    """The plan to roll back `target_time` (checked; nothing written)."""
    target = timeline.get(target_time)
    if target is None:
        raise InstantNotFoundError(f"instant {target_time} is not on the active timeline of {meta.storage.base_uri}")
    check_rollback_allowed(meta, timeline, target)
    _parts, groups, exact = _planned_groups(meta, target.time, target.action)
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
    _parts, groups, _exact = _planned_groups(meta, time, plan.target.action)
    groups |= replaced_groups(meta, time, plan.target.action)
    change = _index_change(meta, index, time, list(plan.files), groups, without)
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


def undo_instant(
    meta: MetaClient,
    time: str,
    action: Action,
    planned: Iterable[str],
    index: Index | None,
    final: bool = True,
    skipped: list[str] | None = None,
    replaced: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
) -> list[str]:
    """Make instant `time` vanish: invisible first, then its files, index entries and timeline files.

    Returns the files deleted by this call. Used by rollback and restore; idempotent. Files that
    are not this instant's own (`owned_instant_files`) are kept and appended to `skipped`.
    `replaced`: file groups a replacecommit replaces, besides those its metadata names (a
    failed write undoing itself knows them before any metadata does).
    """
    storage = meta.storage
    # the file groups the instant wrote, from its metadata (read before the revert removes the
    # completed file): a resumed undo whose files are already gone still knows them
    planned_parts, planned_groups, exact = _planned_groups(meta, time, action)
    # a replacecommit's replaced groups become current again: their keys go back into the index
    replaced = set(replaced) | replaced_groups(meta, time, action)
    completed = Instant(time, action, State.COMPLETED)
    if storage.exists(meta.instant_path(completed)):
        # revert to inflight: the instant stops being visible before any of its files goes
        ensure_file(meta, completed.with_state(State.INFLIGHT))
        storage.delete(meta.instant_path(completed))
    failpoints.hit("rollback.after_revert")
    logs = action is not Action.COMPACTION
    found = sorted(set(planned) | set(instant_files(meta, time, index, planned_groups or None, logs)))
    files, foreign = owned_instant_files(meta, time, found, planned_groups if exact else None, "rollback")
    if skipped is not None:
        skipped.extend(foreign)
    if index is not None:
        # the index is reverted before any file goes: the change is read from the instant's
        # files, so a resumed run (after a crash among the deletions below) would see only part
        # of it. Reverting first is safe (the instant is invisible already) and idempotent: a
        # resumed run recomputes the same change, or a part of one already applied.
        change = _index_change(meta, index, time, files, planned_groups | replaced)
        index.rollback_commit(meta, time, change, final=final)
    deleted = []
    for i, rel in enumerate(files):
        if storage.exists(rel):
            storage.delete(rel)
            deleted.append(rel)
        if i == 0:
            failpoints.hit("rollback.files_deleted")
    touched = {_parent(f) for f in files if not f.startswith(".hoodie")} | planned_parts
    if not planned_groups:  # a write that named no file groups (a one-pass bulk_insert) may have
        touched |= set(meta.partitions_with_metadata())  # created partitions it wrote no file in
    _remove_created_partitions(meta, touched, time)
    storage.delete(heartbeat_path(time))
    schema_history.remove(storage, time)  # schema on read: the version it recorded goes with it
    remove_instant(meta, time, action)
    if action is Action.COMMIT:
        remove_instant(meta, time, Action.COMPACTION)  # a completed compaction is a commit
    return deleted


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
        parts.setdefault(_parent(f), [])
    for f in deleted:
        parts.setdefault(_parent(f), []).append(_uri(base, f))
    for f in sorted(set(kept)):
        parts.setdefault(_parent(f), [])
        failed.setdefault(_parent(f), []).append(_uri(base, f))
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
def _parent(rel: str) -> str:
    return rel.rpartition("/")[0]


def _uri(base: str, rel: str) -> str:
    return f"{base.rstrip('/')}/{rel}"


def _index_change(
    meta: MetaClient,
    index: Index,
    time: str,
    files: list[str],
    groups: set[tuple[str, str]],
    timeline: Timeline | None = None,
) -> RollbackChange:
    """How rolling back `time` moves record locations (from its `files`, before any is deleted),
    for an index that stores them; empty for one that derives them from the data files."""
    if not index.wants_locations:
        return RollbackChange(CHANGE_SCHEMA_REMOVED.empty_table(), CHANGE_SCHEMA_RESTORED.empty_table())
    return RollbackChange(_written_keys(meta, files, time), _restored_locations(meta, files, groups, timeline))


def _written_keys(meta: MetaClient, files: list[str], time: str) -> pa.Table:
    """(key, partition, file id) of records the instant wrote itself (commit time == instant)."""
    parts = []
    for rel in files:
        bn = parse_base_file_name(rel.rpartition("/")[2])
        if bn is None or not meta.storage.exists(rel):
            continue
        t = read_keys(meta, rel)
        t = t.filter(pc.equal(t.column(COMMIT_TIME_COL), time))
        parts.append(
            pa.table(
                {
                    "key": t.column(RECORD_KEY_COL),
                    "partition": pa.array([_parent(rel)] * t.num_rows, pa.string()),
                    "file_id": pa.array([bn.file_id] * t.num_rows, pa.string()),
                },
                schema=CHANGE_SCHEMA_REMOVED,
            )
        )
    return pa.concat_tables(parts) if parts else CHANGE_SCHEMA_REMOVED.empty_table()


def _restored_locations(
    meta: MetaClient,
    files: list[str],
    planned: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
    timeline: Timeline | None = None,
) -> pa.Table:
    """Locations of every record in the slices that become current again (the file groups the
    rolled-back instant wrote, at their now-latest visible slice; `timeline`: the table without
    the instant, when it is still completed)."""
    groups = set(planned)
    for rel in files:
        bn = parse_base_file_name(rel.rpartition("/")[2])
        if bn is not None:
            groups.add((_parent(rel), bn.file_id))
    if not groups:
        return CHANGE_SCHEMA_RESTORED.empty_table()
    view = meta.file_system_view(timeline)
    parts = []
    for part, fid in sorted(groups):
        g = view.group(part, fid)
        base = g.latest_slice.base_file if g is not None and g.latest_slice is not None else None
        if base is None:
            continue
        t = read_keys(meta, base.path)
        parts.append(
            pa.table(
                {
                    "key": t.column(RECORD_KEY_COL),
                    "partition": pa.array([part] * t.num_rows, pa.string()),
                    "file_id": pa.array([fid] * t.num_rows, pa.string()),
                    "commit_time": t.column(COMMIT_TIME_COL),
                },
                schema=CHANGE_SCHEMA_RESTORED,
            )
        )
    return pa.concat_tables(parts) if parts else CHANGE_SCHEMA_RESTORED.empty_table()


def _planned_groups(meta: MetaClient, time: str, action: Action) -> tuple[set[str], set[tuple[str, str]], bool]:
    """Partitions and (partition, file id) groups the instant's completed (or inflight, planned)
    metadata names: a write killed before its first file in a new partition still created that
    partition's metadata file, and a resumed undo must still revert the index of its groups.
    The flag says the groups come from the completed metadata (every file the instant wrote)."""
    from engine.errors import CorruptTableError
    from engine.timeline.commit_metadata import CommitMetadata

    for state in (State.COMPLETED, State.INFLIGHT):
        try:
            body = meta.storage.read_bytes(meta.instant_path(Instant(time, action, state)))
        except FileNotFoundError:
            continue
        if not body.strip():
            continue
        try:
            cm = CommitMetadata.from_json(body)
        except CorruptTableError:
            return set(), set(), False
        groups = {(s.partitionPath, s.fileId) for s in cm.write_stats if s.fileId}
        return set(cm.partition_to_write_stats), groups, state is State.COMPLETED
    return set(), set(), False


def replaced_groups(meta: MetaClient, time: str, action: Action) -> set[tuple[str, str]]:
    """The (partition, file id) groups replacecommit `time` replaces, from its completed (or, in
    version 6, inflight) metadata; empty for other actions or when unreadable."""
    from engine.errors import CorruptTableError
    from engine.timeline.commit_metadata import CommitMetadata

    if action is not Action.REPLACE_COMMIT:
        return set()
    for state in (State.COMPLETED, State.INFLIGHT):
        try:
            body = meta.storage.read_bytes(meta.instant_path(Instant(time, action, state)))
        except FileNotFoundError:
            continue
        try:
            ids = CommitMetadata.from_bytes(body).partition_to_replace_file_ids if body.strip() else None
        except CorruptTableError:
            ids = None
        if ids:
            return {(p, f) for p, fids in ids.items() for f in fids}
    return set()


def owned_instant_files(
    meta: MetaClient, time: str, files: Iterable[str], groups: set[tuple[str, str]] | None, service: str
) -> tuple[list[str], list[str]]:
    """(files to delete, files kept) among `files`, candidates for undoing instant `time`.

    Kept, and logged: files that are not this table's (`FileOwnership`: another table's folder
    or partition, or not a Hudi file name); base files not named with `time`; and, when `groups`
    (the completed instant's file groups) is given, files of other file groups. The table's own
    metadata files (`.hoodie/...`, the index's) are not data files and pass."""
    ownership = FileOwnership(meta.storage)
    out = []
    for rel in ownership.owned(files, service):
        if rel.startswith(METAFOLDER + "/"):
            out.append(rel)
            continue
        partition, _, name = rel.rpartition("/")
        base = parse_base_file_name(name)
        log = parse_log_file_name(name) if base is None else None
        if base is not None and base.instant != time:
            reason = f"a base file of instant {base.instant}, not {time}"
        elif groups is not None and (partition, base.file_id if base else log.file_id if log else "") not in groups:
            reason = f"its file group is not one that {time} wrote"
        else:
            out.append(rel)
            continue
        ownership.skipped.append((rel, reason))
        _log.warning("%s of %s: not deleting %s: %s", service, meta.storage.base_uri, meta.storage.uri(rel), reason)
    return out, ownership.skipped_paths


def _remove_created_partitions(meta: MetaClient, partitions: set[str], time: str) -> None:
    """Remove partition folders the instant created (metadata commitTime == instant) and left empty.

    Only while no other write (or compaction, clustering) is pending: a rollback runs under the table lock, so no write can
    claim an instant meanwhile, but one that claimed earlier (an optimistic writer, which writes
    its files without the lock) may be about to put its first file into the folder. Apache
    Hudi's rollback never removes partition folders; we do only when nobody else can be in one."""
    storage = meta.storage
    writing = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.COMPACTION,
               Action.LOG_COMPACTION, Action.CLUSTERING)
    if any(i.time != time and i.action in writing for i in meta.timeline().pending.instants):
        return
    for part in sorted(partitions, reverse=True):
        if not part:
            continue
        rel = f"{part}/{PARTITION_METADATA_FILE}"
        try:
            text = storage.read_bytes(rel).decode("utf-8", "replace")
        except FileNotFoundError:
            continue
        if f"commitTime={time}" not in text.splitlines():
            continue
        if any(i.name != PARTITION_METADATA_FILE for i in storage.list_files_recursive(part)):
            continue
        storage.delete(rel)
        storage.delete_dir(part)
        parents = part.split("/")[:-1]
        while parents:
            p = "/".join(parents)
            if storage.list_dir(p):
                break
            storage.delete_dir(p)
            parents.pop()
