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

from engine.errors import WriteConflictError
from engine.table.clustering import pending_clustering
from engine.table.compaction_plan import read_plan
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, State
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


def seen(timeline: Timeline) -> frozenset[str]:
    """The completed instant times of the timeline a writer based its write on."""
    return frozenset(i.time for i in timeline.instants if i.is_completed)


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
    seen_completed: frozenset[str],
) -> CheckResult:
    """Raise WriteConflictError if write `instant` may not commit (see the module docstring)."""
    timeline = meta.timeline()
    mine = ConcurrentOperation(instant, action, State.INFLIGHT, operation.upper(), frozenset(groups))
    candidates = candidate_instants(timeline, seen_completed, instant)
    clustering = {c.instant.time: c.groups for c in pending_clustering(meta, timeline)} if candidates else {}
    others = []
    for inst in candidates:
        if inst.is_completed:
            others.append(ConcurrentOperation.of_commit(inst, meta.commit_metadata(inst)))
        elif inst.action is Action.COMPACTION:
            others.append(ConcurrentOperation.of_compaction(inst, read_plan(meta, inst.time).groups))
        elif inst.time in clustering:
            others.append(ConcurrentOperation.of_clustering(inst, clustering[inst.time]))
    hit = find_conflict(mine, others)
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


def _verb(other: ConcurrentOperation) -> str:
    return "completed" if other.state is State.COMPLETED else "was scheduled"


__all__ = ["CheckResult", "check", "seen"]
