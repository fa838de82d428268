"""The commit check of optimistic concurrency control (`hoodie.write.concurrency.mode=
optimistic_concurrency_control`), run under the table lock right before a write completes.

A writer under OCC remembers the instants it saw completed when it read the table (`seen`), writes
its files without the lock, then takes the lock and calls `check`: it reloads the timeline and
decides with `engine.transaction.conflicts` (Apache Hudi's `SimpleConcurrentFileWritesConflictResolutionStrategy`)
whether a write completed since, or a compaction or clustering scheduled since, touched one of its
file groups, and whether a rollback or restore completed since undid a commit it saw. Any of
these raises `WriteConflictError` naming the other instant; the caller rolls its own write back.

No Spark: the timeline, commit metadata and plans are small files read on the driver.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from engine.constants import META_COLUMNS
from engine.errors import ConcurrentWriteError, CorruptTableError, InstantNotFoundError, WriteConflictError
from engine.schema.avro import avro_to_arrow
from engine.table.clustering import pending_clustering
from engine.table.compaction_plan import read_plan
from engine.table.lifecycle import read_avro
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline
from engine.transaction.conflicts import (
    ConcurrentOperation,
    Group,
    candidate_instants,
    find_conflict,
    rolled_back_reads,
)

_SAMPLE = 5


@dataclass(frozen=True)
class Seen:
    """What a writer saw when it read the table: the completed and the pending instant times."""

    completed: frozenset[str]
    pending: frozenset[str]


def seen(timeline: Timeline) -> Seen:
    """The instants of the timeline a writer based its write on."""
    return Seen(
        frozenset(i.time for i in timeline.instants if i.is_completed),
        frozenset(i.time for i in timeline.instants if not i.is_completed),
    )


@dataclass(frozen=True)
class CheckResult:
    """What the check found besides conflicts: the writes that completed since the writer started
    (they touched other file groups), for the index's key check."""

    concurrent_writes: tuple[str, ...]


def check(
    meta: MetaClient,
    instant: str,
    action: Action,
    operation: str,
    groups: Iterable[Group],
    started: Seen,
) -> CheckResult:
    """Raise WriteConflictError if write `instant` may not commit (see the module docstring)."""
    timeline = meta.timeline()
    mine = ConcurrentOperation(instant, action, State.INFLIGHT, operation.upper(), frozenset(groups))
    seen_completed = started.completed
    candidates = candidate_instants(timeline, seen_completed, instant, started.pending)
    clustering = {c.instant.time: c.groups for c in pending_clustering(meta, timeline)} if candidates else {}
    others = []
    for inst in candidates:
        if inst.is_completed:
            others.append(ConcurrentOperation.of_commit(inst, meta.commit_metadata(inst)))
        elif inst.action is Action.COMPACTION:
            others.append(ConcurrentOperation.of_compaction(inst, read_plan(meta, inst.time).groups))
        elif inst.time in clustering:
            others.append(ConcurrentOperation.of_clustering(inst, clustering[inst.time]))
    hit = find_conflict(mine, others, started.pending)
    if hit is not None:
        other, both = hit
        sample = sorted(both)[:_SAMPLE]
        named = ", ".join(f"{p or '(root)'}/{f}" for p, f in sample) + (" ..." if len(both) > _SAMPLE else "")
        raise WriteConflictError(
            f"write {instant} conflicts with {other.describe()}, which {_verb(other)} since this write "
            f"started: both touched {len(both)} file group(s) ({named}). This write was rolled back; the "
            "table keeps the other one's. Retry it",
            instant=instant,
            other=other.instant,
            groups=tuple(sample),
        )
    for inst in timeline.filter(actions=[Action.ROLLBACK, Action.RESTORE], completed=True).instants:
        if inst.time in seen_completed:
            continue
        model = "HoodieRollbackMetadata" if inst.action is Action.ROLLBACK else "HoodieRestoreMetadata"
        record = read_avro(meta, inst, model)
        undone = rolled_back_reads(record.get("commitsRollback") or record.get("instantsToRollback") or [], seen_completed)
        if undone:
            raise WriteConflictError(
                f"write {instant} conflicts with {inst.action.value} {inst.time}, which completed since this "
                f"write started and undid {', '.join(undone)}, a commit this write read. This write was rolled "
                "back. Retry it",
                instant=instant,
                other=inst.time,
            )
    return CheckResult(tuple(o.instant for o in others if o.state is State.COMPLETED))


def check_still_ours(meta: MetaClient, instant: str, action: Action, interval_ms: int, misses: int) -> None:
    """Under the lock, right before a commit check: the instant is still inflight and its heartbeat
    has not expired. A writer (or compaction runner) that stalled past its heartbeat may have been
    rolled back by another writer's repair; it must not complete over deleted files (Apache Hudi
    aborts such a commit too). ConcurrentWriteError otherwise."""
    from engine.transaction.heartbeat import Heartbeat

    inflight = Instant(instant, action, State.INFLIGHT)
    if not meta.storage.exists(meta.instant_path(inflight)):
        raise ConcurrentWriteError(
            f"{action.value} {instant} of {meta.storage.base_uri} is no longer inflight: another process rolled "
            "it back (its heartbeat had expired). Nothing of it is committed; run it again"
        )
    if Heartbeat.is_expired(meta.storage, instant, interval_ms / 1000, misses):
        raise ConcurrentWriteError(
            f"the heartbeat of {action.value} {instant} of {meta.storage.base_uri} expired (beats stalled): another "
            "writer may be rolling it back, so it does not complete. Run it again"
        )


def pending_write_groups(meta: MetaClient, timeline: Timeline) -> frozenset[Group]:
    """The file groups the pending writes name in their inflight files (their planned buckets):
    what a compaction scheduled beside them must leave out. A bulk_insert's inflight names none
    (it writes new file groups only)."""
    from engine.timeline.commit_metadata import CommitMetadata

    groups: set[Group] = set()
    for inst in timeline.pending.instants:
        if inst.action not in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT) or not inst.is_inflight:
            continue
        try:
            metadata = CommitMetadata.from_bytes(meta.read_instant(inst))
        except InstantNotFoundError:
            continue  # completed or rolled back meanwhile
        except CorruptTableError:
            continue  # not a write's metadata (a clustering Apache Hudi runs: its plan's groups count elsewhere)
        groups.update(ConcurrentOperation.of_commit(inst, metadata).groups)
    return frozenset(groups)


def _verb(other: ConcurrentOperation) -> str:
    return "completed" if other.state is State.COMPLETED else "was scheduled"


__all__ = ["CheckResult", "Seen", "check", "check_still_ours", "pending_write_groups", "seen"]


# ---- schemas (Apache Hudi's SimpleSchemaConflictResolutionStrategy, RFC-82) ------------------


def schema_columns(schema: pa.Schema | None) -> tuple[tuple[str, str, bool], ...] | None:
    """A schema's data columns as compared for conflicts: name, type and nullability, in order
    (no meta columns, no field metadata or column ids)."""
    if schema is None:
        return None
    return tuple((f.name, str(f.type), f.nullable) for f in schema if f.name not in META_COLUMNS)


def avro_columns(avro: str | None) -> tuple[tuple[str, str, bool], ...] | None:
    return schema_columns(avro_to_arrow(avro)) if avro else None


def _differences(mine: tuple, other: tuple) -> str:
    theirs = {c[0]: c for c in other}
    ours = {c[0]: c for c in mine}
    parts = []
    added = [n for n in ours if n not in theirs]
    lacking = [n for n in theirs if n not in ours]
    changed = [n for n in ours if n in theirs and ours[n] != theirs[n]]
    if added:
        parts.append(f"this write has column(s) {', '.join(added)} that it lacks")
    if lacking:
        parts.append(f"it has column(s) {', '.join(lacking)} that this write lacks")
    if changed:
        parts.append("column(s) " + ", ".join(f"{n} ({ours[n][1]} here, {theirs[n][1]} there)" for n in changed)
                     + " differ")
    return "; ".join(parts) or "their column order differs"


def resolve_schema(meta: MetaClient, instant: str, started: Seen, write_schema: pa.Schema) -> str | None:
    """Under the commit lock: the Avro schema write `instant` must record, when it is not the
    write's own (None: record the write's schema). Apache Hudi's schema conflict resolution:

    - no write completed since this one started, or the table's schema is (again) the write's, or
      the table's schema did not change since the start: the write's own schema;
    - the write did not evolve the schema (its schema is the one it read) but another write did
      meanwhile: the table's evolved schema (the rows written read the new columns as nulls);
    - both evolved it, differently: WriteConflictError naming the columns.

    The table's schema is the newest completed write's, by instant time (as readers resolve it).
    So one more refusal, which Apache Hudi's completion-time order does not need: a write started
    after this one that completed first stays the newest, so if this write's schema is not its
    schema, the table would not show this write's columns (WriteConflictError; a retry is newer)."""
    timeline = meta.timeline()
    mine = schema_columns(write_schema)
    news = [i for i in timeline.completed_writes.instants if i.time not in started.completed]
    if not news:
        return None  # nothing completed meanwhile
    now_avro = meta.latest_avro_schema(timeline)
    now = avro_columns(now_avro)
    resolved: str | None = None
    if now is None or now == mine:
        resolved = None
    else:
        at_start = avro_columns(meta.latest_avro_schema(timeline.filter_times(started.completed)))
        other = news[-1].time
        if at_start is None:
            raise _schema_conflict(instant, other, mine, now)
        if at_start == now:
            resolved = None  # the table's schema is as this write found it
        elif at_start == mine:
            resolved = now_avro  # only the other write evolved it: carry that forward
        else:
            raise _schema_conflict(instant, other, mine, now)
    newest = timeline.completed_writes.instants[-1]
    if newest.time > instant:
        recorded = now if resolved is None else avro_columns(resolved)
        final = mine if resolved is None else recorded
        if final != now:
            raise WriteConflictError(
                f"write {instant} conflicts with {newest.time}, a write that started after it and completed first "
                f"with another schema ({_differences(final or (), now or ())}): the table's schema is the newest "
                "write's, so this write's would not be the table's. This write was rolled back. Retry it",
                instant=instant, other=newest.time)
    return resolved


def _schema_conflict(instant: str, other: str, mine: tuple | None, now: tuple | None) -> WriteConflictError:
    return WriteConflictError(
        f"write {instant} conflicts with {other}, which completed since this write started and changed the "
        f"table's schema in another way ({_differences(mine or (), now or ())}). This write was rolled back; "
        "the table keeps the other one's schema. Retry it (with the other write's columns)",
        instant=instant, other=other)
