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

import time as _time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine import failpoints
from engine.config.table_config import TableType
from engine.constants import COMMIT_TIME_COL, PARTITION_METADATA_FILE, PARTITION_PATH_COL, RECORD_KEY_COL
from engine.errors import InstantNotFoundError, InvalidInputError, RollbackRefusedError
from engine.index.base import Index, RollbackChange
from engine.services.serial import Documented
from engine.table.file_names import file_instant, join_path, parse_base_file_name
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant, State
from engine.timeline.lifecycle import (
    claim_instant,
    ensure_file,
    heartbeat_path,
    read_avro,
    remove_instant,
    write_avro,
)
from engine.timeline.timeline import Timeline

PLAN_MODEL = "HoodieRollbackPlan"
METADATA_MODEL = "HoodieRollbackMetadata"
ROLLBACK_ACTIONS = (Action.COMMIT,)
# pending instants whose files can simply go: failed writes, and a clustering (or insert_overwrite)
# Apache Hudi scheduled or started, which replaces nothing until it completes
PENDING_ROLLBACK_ACTIONS = (Action.COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING)
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


# ---- planning ---------------------------------------------------------------------------------
def instant_files(meta: MetaClient, time: str, index: Index | None) -> list[str]:
    """Every file written by instant `time`: base and log files anywhere under the table, plus
    the index's own files."""
    found = [df.path for df in meta.list_data_files() if file_instant(df.name) == time]
    if index is not None:
        found.extend(index.rollback_files(meta, time))
    return sorted(set(found))


def undoable(inst: Instant) -> bool:
    """Whether rollback (and restore) can undo this instant: a commit, or a pending instant that
    was never visible (PENDING_ROLLBACK_ACTIONS)."""
    return inst.action in ROLLBACK_ACTIONS or (not inst.is_completed and inst.action in PENDING_ROLLBACK_ACTIONS)


def check_rollback_allowed(meta: MetaClient, timeline: Timeline, target: Instant) -> None:
    """Refuse (RollbackRefusedError) a rollback of a completed instant that would lose data."""
    if meta.config.table_type is not TableType.COPY_ON_WRITE:
        raise InvalidInputError("rollback is implemented for COPY_ON_WRITE tables only")
    if not undoable(target):
        state = "completed " if target.is_completed else ""
        raise InvalidInputError(
            f"cannot roll back a {state}{target.action.value} instant ({target.time}): only commits "
            f"and pending replacecommits can be rolled back"
        )
    if not target.is_completed:
        return
    guarded = [sp.time for sp in timeline.savepoints if sp.time >= target.time]
    if guarded:
        raise RollbackRefusedError(
            f"cannot roll back {target.time}: savepoint(s) {', '.join(guarded)} protect it; "
            f"delete them or restore to an instant before it",
            tuple(guarded),
        )
    stats = meta.commit_metadata(target).write_stats
    mine = {(s.partitionPath, s.fileId) for s in stats}
    dependents = []
    for later in timeline.completed_writes.instants:
        if later.time <= target.time:
            continue
        if any((s.partitionPath, s.fileId) in mine for s in meta.commit_metadata(later).write_stats):
            dependents.append(later.time)
    if dependents:
        raise RollbackRefusedError(
            f"cannot roll back {target.time}: later commit(s) {', '.join(dependents)} rewrote file groups it "
            f"wrote; roll those back first (newest first) or restore to an instant before {target.time}",
            tuple(dependents),
        )
    present = {df.path for df in meta.list_data_files()}
    existing_names = {p.rpartition("/")[2] for p in present}
    missing = []
    previous: list[tuple[str, str]] = []  # (T's version, the version it replaced) per group
    for s in stats:
        if s.prevCommit and s.prevCommit != "null":
            prefix = f"{s.fileId}_"
            suffix = f"_{s.prevCommit}.parquet"
            found = sorted(n for n in existing_names if n.startswith(prefix) and n.endswith(suffix))
            if not found:
                missing.append(f"{s.partitionPath}/{s.fileId} @ {s.prevCommit}")
            else:
                previous.append((s.path or "", join_path(s.partitionPath, found[0])))
    if missing:
        raise RollbackRefusedError(
            f"cannot roll back {target.time}: the file versions it replaced were cleaned "
            f"({', '.join(sorted(missing)[:5])}{' ...' if len(missing) > 5 else ''}); the records would be lost"
        )
    rewritten = _rewritten_removed_keys(meta, timeline, target.time, mine, previous, present)
    if rewritten:
        writers = tuple(sorted(rewritten))
        keys = sorted({k for ks in rewritten.values() for k in ks})
        raise RollbackRefusedError(
            f"cannot roll back {target.time}: it deleted or moved record(s) that later commit(s) "
            f"{', '.join(writers)} wrote again ({', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''}); "
            f"rolling it back would keep them twice. Roll those back first (newest first) or restore "
            f"to an instant before {target.time}",
            writers,
        )


def _rewritten_removed_keys(
    meta: MetaClient,
    timeline: Timeline,
    time: str,
    mine: set[tuple[str, str]],
    previous: list[tuple[str, str]],
    present: set[str],
) -> dict[str, set[str]]:
    """Later commit -> keys it wrote that instant `time` had taken out of its file groups.

    Rolling `time` back makes the versions it replaced current again, so a key it deleted or
    moved to another partition comes back where it was. If a later commit wrote that key again
    elsewhere (an insert after the delete, a global index placing it in another partition,
    bulk_insert), the table would hold it twice: that commit depends on `time`."""
    removed: set[str] = set()
    for current, prev in previous:
        before = set(_read_keys(meta, prev).column(RECORD_KEY_COL).to_pylist())
        after = set(_read_keys(meta, current).column(RECORD_KEY_COL).to_pylist()) if current in present else set()
        removed |= before - after
    if not removed:
        return {}
    wanted = pa.array(sorted(removed), pa.string())
    out: dict[str, set[str]] = {}
    for b in meta.file_system_view(timeline).latest_base_files():
        if (b.partition, b.file_id) in mine or b.instant <= time:
            continue  # a record written after `time` lives in a file version written after it
        t = _read_keys(meta, b.path)
        hit = t.filter(
            pc.and_(pc.is_in(t.column(RECORD_KEY_COL).cast(pa.string()), value_set=wanted),
                    pc.greater(t.column(COMMIT_TIME_COL).cast(pa.string()), time))
        )
        for key, commit in zip(hit.column(RECORD_KEY_COL).to_pylist(), hit.column(COMMIT_TIME_COL).to_pylist(), strict=True):
            out.setdefault(commit, set()).add(key)
    return out


def plan_rollback(meta: MetaClient, timeline: Timeline, target_time: str, index: Index | None) -> RollbackPlan:
    """The plan to roll back `target_time` (checked; nothing written)."""
    target = timeline.get(target_time)
    if target is None:
        raise InstantNotFoundError(f"instant {target_time} is not on the active timeline of {meta.storage.base_uri}")
    check_rollback_allowed(meta, timeline, target)
    return RollbackPlan(target, tuple(instant_files(meta, target.time, index)))


def describe_index_revert(meta: MetaClient, timeline: Timeline, plan: RollbackPlan, index: Index | None) -> RollbackPlan:
    """`plan` with the index entries its execution would revert (for a dry run), computed as
    `undo_instant` computes them, from the files and a view of the table without the instant."""
    if index is None or not index.wants_locations:
        return plan
    time = plan.target.time
    without = Timeline(tuple(i for i in timeline.instants if i.time != time), timeline.has_archive)
    _parts, groups = _planned_groups(meta, time, plan.target.action)
    change = _index_change(meta, index, time, list(plan.files), groups, without)
    put = sorted(set(change.restored.column("key").to_pylist()))
    deleted = sorted(set(change.removed.column("key").to_pylist()) - set(put))
    revert = IndexRevert(index.name, len(put), len(deleted), tuple(deleted[:20]), tuple(put[:20]))
    return RollbackPlan(plan.target, plan.files, plan.instant, revert)


def schedule_rollback(meta: MetaClient, timeline: Timeline, plan: RollbackPlan, now: datetime | None = None) -> RollbackPlan:
    """Claim the rollback instant R and write `R.rollback.requested` holding the plan."""
    from engine.timeline import avro_models

    body = avro_models.serialize(PLAN_MODEL, plan.to_record(meta.storage.base_uri))
    time = claim_instant(meta, timeline, Action.ROLLBACK, body, now)
    return RollbackPlan(plan.target, plan.files, time)


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
    deleted = undo_instant(meta, plan.target.time, plan.target.action, plan.files, index)
    # after a resumed run, files an earlier run deleted count as deleted too
    gone = sorted(set(deleted) | {f for f in plan.files if not meta.storage.exists(f)})
    record = rollback_metadata(meta, plan, gone, int((_time.monotonic() - started) * 1000))
    _fence(fence)
    write_avro(meta, rb.with_state(State.COMPLETED), METADATA_MODEL, record)
    return RollbackResult(plan.instant, plan.target.time, deleted, round(_time.monotonic() - started, 3))


def undo_instant(
    meta: MetaClient, time: str, action: Action, planned: Iterable[str], index: Index | None, final: bool = True
) -> list[str]:
    """Make instant `time` vanish: invisible first, then its files, index entries and timeline files.

    Returns the files deleted by this call. Used by rollback and restore; idempotent.
    """
    storage = meta.storage
    # the file groups the instant wrote, from its metadata (read before the revert removes the
    # completed file): a resumed undo whose files are already gone still knows them
    planned_parts, planned_groups = _planned_groups(meta, time, action)
    completed = Instant(time, action, State.COMPLETED)
    if storage.exists(meta.instant_path(completed)):
        # revert to inflight: the instant stops being visible before any of its files goes
        ensure_file(meta, completed.with_state(State.INFLIGHT))
        storage.delete(meta.instant_path(completed))
    failpoints.hit("rollback.after_revert")
    files = sorted(set(planned) | set(instant_files(meta, time, index)))
    if index is not None:
        # the index is reverted before any file goes: the change is read from the instant's
        # files, so a resumed run (after a crash among the deletions below) would see only part
        # of it. Reverting first is safe (the instant is invisible already) and idempotent: a
        # resumed run recomputes the same change, or a part of one already applied.
        index.rollback_commit(meta, time, _index_change(meta, index, time, files, planned_groups), final=final)
    deleted = []
    for i, rel in enumerate(files):
        if storage.exists(rel):
            storage.delete(rel)
            deleted.append(rel)
        if i == 0:
            failpoints.hit("rollback.files_deleted")
    touched = {_parent(f) for f in files if not f.startswith(".hoodie")} | planned_parts
    _remove_created_partitions(meta, touched, time)
    storage.delete(heartbeat_path(time))
    remove_instant(meta, time, action)
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


def rollback_metadata(meta: MetaClient, plan: RollbackPlan, deleted: list[str], millis: int) -> dict:
    """Avro `HoodieRollbackMetadata` for a finished rollback (full paths, as Apache Hudi writes)."""
    base = meta.storage.base_uri
    parts: dict[str, list[str]] = {}
    for f in plan.files:
        parts.setdefault(_parent(f), [])
    for f in deleted:
        parts.setdefault(_parent(f), []).append(_uri(base, f))
    return {
        "startRollbackTime": plan.instant,
        "timeTakenInMillis": millis,
        "totalFilesDeleted": len(deleted),
        "commitsRollback": [plan.target.time],
        "partitionMetadata": {
            p: {
                "partitionPath": p,
                "successDeleteFiles": sorted(paths),
                "failedDeleteFiles": [],
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


def _read_keys(meta: MetaClient, rel: str) -> pa.Table:
    with meta.storage.open_input_file(rel) as f:
        return pq.read_table(f, columns=[RECORD_KEY_COL, PARTITION_PATH_COL, COMMIT_TIME_COL])


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
        t = _read_keys(meta, rel)
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
        t = _read_keys(meta, base.path)
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


def _planned_groups(meta: MetaClient, time: str, action: Action) -> tuple[set[str], set[tuple[str, str]]]:
    """Partitions and (partition, file id) groups the instant's completed (or inflight, planned)
    metadata names: a write killed before its first file in a new partition still created that
    partition's metadata file, and a resumed undo must still revert the index of its groups."""
    from engine.errors import CorruptTableError
    from engine.table.commit_metadata import CommitMetadata

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
            return set(), set()
        return set(cm.partition_to_write_stats), {(s.partitionPath, s.fileId) for s in cm.write_stats if s.fileId}
    return set(), set()


def _remove_created_partitions(meta: MetaClient, partitions: set[str], time: str) -> None:
    """Remove partition folders the instant created (metadata commitTime == instant) and left empty."""
    storage = meta.storage
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
