"""Write conflicts between concurrent writers, as Apache Hudi's default strategy decides them
(`SimpleConcurrentFileWritesConflictResolutionStrategy` with `ConcurrentOperation`), for optimistic
concurrency control (called at commit by `engine.transaction.occ`).

Pure: instants, commit metadata and plans in, a decision out; no Spark, no I/O.

- **Candidates** (`candidate_instants`): the writes (commit, deltacommit, replacecommit) completed
  since this writer started (not completed in its starting timeline), and the compaction and
  clustering plans still pending that were scheduled after this writer's instant.
- **Mutated file groups** (`ConcurrentOperation`): a completed write's (partition, file id) of
  every write stat, plus the groups a replacecommit replaces; a pending compaction's plan
  operations; a pending clustering's input slices.
- **Conflict** (`find_conflict`): the two sets intersect. Resolved (no conflict) when the other
  is a compaction this write saw pending when it started (Hudi: one with an earlier instant),
  whose new slices this write appended to, or when this write is a log compaction; otherwise the
  write must fail. This engine's writers read the table before they claim their instant, so
  "scheduled after the writer started" is judged by the instants on the timeline it read.
- **Rolled-back reads** (`rolled_back_reads`, ours: Hudi has no such check): a rollback or restore
  completed since this writer started that undid a commit this writer saw completed. The writer
  may have merged that commit's records into its files, which would bring them back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

Group = tuple[str, str]  # (partition path, file id)
COMPACT = "COMPACT"
CLUSTER = "CLUSTER"
_WRITES = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
_SERVICES = (Action.COMPACTION, Action.CLUSTERING, Action.REPLACE_COMMIT)


@dataclass(frozen=True)
class ConcurrentOperation:
    """One instant as the conflict check sees it."""

    instant: str
    action: Action
    state: State
    operation: str  # Hudi's WriteOperationType name: UPSERT, BULK_INSERT, COMPACT, CLUSTER, ...
    groups: frozenset[Group]

    @classmethod
    def of_commit(cls, instant: Instant, metadata: CommitMetadata) -> ConcurrentOperation:
        """A write's (completed or inflight) metadata: its write stats' groups and those it replaces."""
        groups = {(s.partitionPath, s.fileId) for s in metadata.write_stats if s.fileId}
        for partition, ids in (metadata.partition_to_replace_file_ids or {}).items():
            groups.update((partition, f) for f in ids)
        operation = COMPACT if metadata.compacted else str(metadata.operation_type).upper()
        return cls(instant.time, instant.action, instant.state, operation, frozenset(groups))

    @classmethod
    def of_compaction(cls, instant: Instant, groups: Iterable[Group]) -> ConcurrentOperation:
        """A pending compaction: the groups of its plan's operations."""
        return cls(instant.time, Action.COMPACTION, instant.state, COMPACT, frozenset(groups))

    @classmethod
    def of_clustering(cls, instant: Instant, groups: Iterable[Group]) -> ConcurrentOperation:
        """A pending clustering (a `clustering` or a clustering `replacecommit` plan): its input groups."""
        return cls(instant.time, instant.action, instant.state, CLUSTER, frozenset(groups))

    def describe(self) -> str:
        return f"{self.operation.lower()} {self.instant} ({self.action.value}, {self.state.value})"


ALTER_SCHEMA = "ALTER_SCHEMA"


def candidate_instants(
    timeline: Timeline, seen_completed: frozenset[str], current: str, seen_pending: frozenset[str] | None = None
) -> list[Instant]:
    """The instants a write `current` must be checked against when it commits: writes completed
    that were not completed when it started (`seen_completed`: the completed instant times of
    its starting timeline), and pending compaction / clustering scheduled after it started: not on
    its starting timeline (`seen_pending`: that timeline's pending instant times), or, without
    `seen_pending`, scheduled at a later instant than `current` (Apache Hudi's test, right where a
    writer claims its instant before reading the table). (A pending replacecommit may also be an
    insert_overwrite; the caller keeps only those whose plan is a clustering.)

    Apache Hudi's version-6 writers take the writes completed *after the last completed instant*
    they saw, by instant time; a write with an earlier instant time that completes later (it
    started first, finished last) slips past that test. Comparing against the set of instants seen
    completed catches it too."""
    out = []
    for i in timeline.instants:
        if i.time == current:
            continue
        if i.is_completed and i.action in _WRITES:
            if i.time not in seen_completed:
                out.append(i)
        elif not i.is_completed and i.action in _SERVICES:
            unseen = i.time not in seen_pending if seen_pending is not None else i.time > current
            if unseen:
                out.append(i)
    return out


def has_conflict(mine: ConcurrentOperation, other: ConcurrentOperation) -> bool:
    """Whether the two touched a common file group; a column change (`ALTER_SCHEMA`, no files)
    conflicts with every write: the writer read the table under the old column names."""
    return bool(mine.groups & other.groups) or ALTER_SCHEMA in (mine.operation, other.operation)


def is_resolved(mine: ConcurrentOperation, other: ConcurrentOperation, seen_pending: frozenset[str] | None = None) -> bool:
    """Whether an overlap between `mine` and `other` may still commit (Hudi's `resolveConflict`):
    the other is a compaction this write planned around — one it saw pending when it started
    (`seen_pending`), or, without that, one with an earlier instant (Hudi's test) — so its logs went
    to the slice the compaction starts; or this write is a log compaction."""
    if other.operation == COMPACT:
        return other.instant in seen_pending if seen_pending is not None else other.instant < mine.instant
    return mine.action is Action.LOG_COMPACTION


def find_conflict(
    mine: ConcurrentOperation, others: Iterable[ConcurrentOperation], seen_pending: frozenset[str] | None = None
) -> tuple[ConcurrentOperation, frozenset[Group]] | None:
    """The first operation (by instant) that conflicts with `mine` and the groups both touched;
    None when `mine` may commit."""
    for other in sorted(others, key=lambda o: o.instant):
        if other.instant == mine.instant or not has_conflict(mine, other) or is_resolved(mine, other, seen_pending):
            continue
        return other, mine.groups & other.groups
    return None


def rolled_back_reads(rolled_back: Iterable[str], seen_completed: frozenset[str]) -> list[str]:
    """Of the instants a rollback or restore (completed since this writer started) undid, those
    this writer saw completed when it started: it may have read them."""
    return sorted(t for t in rolled_back if t in seen_completed)


__all__ = [
    "ConcurrentOperation",
    "candidate_instants",
    "find_conflict",
    "has_conflict",
    "is_resolved",
    "rolled_back_reads",
]
