"""The commit check of optimistic concurrency control (`hoodie.write.concurrency.mode=
optimistic_concurrency_control`), run under the table lock right before a write completes.

A writer under OCC remembers the instants it saw completed when it read the table (`seen`), writes
its files without the lock, then takes the lock and calls `check`: it reloads the timeline and
decides with `engine.write.conflicts` (Apache Hudi's `SimpleConcurrentFileWritesConflictResolutionStrategy`)
whether a write completed since, or a compaction or clustering scheduled since, touched one of its
file groups, and whether a rollback or restore completed since undid a commit it saw. Any of
these raises `WriteConflictError` naming the other instant; the caller rolls its own write back.

No Spark: the timeline, commit metadata and plans are small files read on the driver.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.errors import ConcurrentWriteError, CorruptTableError, InstantNotFoundError, WriteConflictError
from engine.table.clustering import pending_clustering
from engine.table.compaction_plan import read_plan
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant, State
from engine.timeline.lifecycle import read_avro
from engine.timeline.timeline import Timeline
from engine.write.conflicts import (
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
    from engine.table.heartbeat import Heartbeat

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
    from engine.table.commit_metadata import CommitMetadata

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
