"""Conflict detection between concurrent writes (`engine.transaction.conflicts`), case by case against
Apache Hudi's SimpleConcurrentFileWritesConflictResolutionStrategy."""

from __future__ import annotations

from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline
from engine.transaction.conflicts import ConcurrentOperation, candidate_instants, find_conflict

T0, T1, T2, T3, T4, T5 = (f"2026112612000000{i}" for i in range(6))


def _meta(groups: list[tuple[str, str]], operation: str = "UPSERT", replaced: dict | None = None) -> CommitMetadata:
    stats: dict[str, list[WriteStat]] = {}
    for p, f in groups:
        stats.setdefault(p, []).append(WriteStat(fileId=f, path=f"{p}/{f}_0-1-2_x.parquet", partitionPath=p))
    return CommitMetadata(stats, operation, partition_to_replace_file_ids=replaced)


def _write(time: str, groups, action=Action.COMMIT, state=State.COMPLETED, **kw) -> ConcurrentOperation:
    return ConcurrentOperation.of_commit(Instant(time, action, state), _meta(groups, **kw))


def test_candidates_are_writes_completed_since_the_start_and_later_pending_services() -> None:
    tl = Timeline.from_instants([
        Instant(T0, Action.COMMIT, State.COMPLETED),
        Instant(T1, Action.COMMIT, State.COMPLETED),     # started before us, completed after our start
        Instant(T2, Action.DELTA_COMMIT, State.INFLIGHT),  # us
        Instant(T3, Action.REPLACE_COMMIT, State.COMPLETED),
        Instant(T4, Action.COMPACTION, State.REQUESTED),
        Instant(T5, Action.CLEAN, State.COMPLETED),
    ])
    seen = frozenset({T0})  # when we started, only T0 was complete
    assert [i.time for i in candidate_instants(tl, seen, T2)] == [T1, T3, T4]
    # a compaction scheduled before us is not a candidate (our slices were planned around it)
    tl2 = Timeline.from_instants([Instant(T1, Action.COMPACTION, State.INFLIGHT), Instant(T2, Action.COMMIT, State.INFLIGHT)])
    assert candidate_instants(tl2, frozenset(), T2) == []


def test_disjoint_file_groups_both_commit() -> None:
    mine = _write(T2, [("p1", "a-0")], state=State.INFLIGHT)
    assert find_conflict(mine, [_write(T1, [("p1", "b-0"), ("p2", "a-0")])]) is None


def test_a_common_file_group_fails_the_later_writer() -> None:
    mine = _write(T2, [("p1", "a-0"), ("p1", "c-0")], state=State.INFLIGHT)
    other = _write(T1, [("p1", "a-0")])
    found = find_conflict(mine, [_write(T3, [("p9", "z-0")]), other])
    assert found is not None and found[0] == other and found[1] == frozenset({("p1", "a-0")})
    assert other.describe() == f"upsert {T1} (commit, completed)"


def test_replaced_groups_count_as_mutated() -> None:
    mine = _write(T2, [("p1", "a-0")], state=State.INFLIGHT)
    overwrite = _write(T1, [("p1", "n-0")], action=Action.REPLACE_COMMIT, operation="INSERT_OVERWRITE", replaced={"p1": ["a-0"]})
    assert find_conflict(mine, [overwrite]) is not None


def test_compaction_earlier_than_us_resolves_later_does_not() -> None:
    mine = _write(T2, [("p1", "a-0")], action=Action.DELTA_COMMIT, state=State.INFLIGHT)
    earlier = ConcurrentOperation.of_compaction(Instant(T1, Action.COMPACTION, State.REQUESTED), [("p1", "a-0")])
    later = ConcurrentOperation.of_compaction(Instant(T3, Action.COMPACTION, State.REQUESTED), [("p1", "a-0")])
    assert find_conflict(mine, [earlier]) is None
    assert find_conflict(mine, [later]) == (later, frozenset({("p1", "a-0")}))
    # a completed compaction is a commit whose metadata says compacted / COMPACT
    done = ConcurrentOperation.of_commit(Instant(T1, Action.COMMIT, State.COMPLETED), CommitMetadata(
        _meta([("p1", "a-0")]).partition_to_write_stats, "UNKNOWN", compacted=True))
    assert done.operation == "COMPACT" and find_conflict(mine, [done]) is None


def test_clustering_conflicts_and_log_compaction_resolves() -> None:
    cluster = ConcurrentOperation.of_clustering(Instant(T3, Action.REPLACE_COMMIT, State.REQUESTED), [("p1", "a-0")])
    mine = _write(T2, [("p1", "a-0")], state=State.INFLIGHT)
    assert find_conflict(mine, [cluster]) == (cluster, frozenset({("p1", "a-0")}))
    log_compaction = ConcurrentOperation(T2, Action.LOG_COMPACTION, State.INFLIGHT, "LOG_COMPACT", frozenset({("p1", "a-0")}))
    assert find_conflict(log_compaction, [_write(T1, [("p1", "a-0")], action=Action.DELTA_COMMIT)]) is None


def test_services_are_judged_by_the_timeline_the_writer_read() -> None:
    """Our writers read the table before they claim their instant: a compaction scheduled in
    between has an earlier instant than the write, yet the write did not plan around it."""
    tl = Timeline.from_instants([
        Instant(T1, Action.COMPACTION, State.REQUESTED),  # pending when we read the table
        Instant(T2, Action.COMPACTION, State.REQUESTED),  # scheduled after we read, before our claim
        Instant(T3, Action.DELTA_COMMIT, State.INFLIGHT),  # us
    ])
    assert [i.time for i in candidate_instants(tl, frozenset(), T3, frozenset({T1}))] == [T2]
    assert candidate_instants(tl, frozenset(), T3) == []  # Hudi's instant-time test misses T2
    mine = _write(T3, [("p1", "a-0")], action=Action.DELTA_COMMIT, state=State.INFLIGHT)
    planned_around = ConcurrentOperation.of_compaction(Instant(T1, Action.COMPACTION, State.REQUESTED), [("p1", "a-0")])
    unseen = ConcurrentOperation.of_compaction(Instant(T2, Action.COMPACTION, State.REQUESTED), [("p1", "a-0")])
    assert find_conflict(mine, [planned_around], frozenset({T1})) is None
    assert find_conflict(mine, [unseen], frozenset({T1})) == (unseen, frozenset({("p1", "a-0")}))
    # completed since we started: resolved only if we saw it pending (our logs went to its new slices)
    done = ConcurrentOperation.of_commit(Instant(T2, Action.COMMIT, State.COMPLETED), CommitMetadata(
        _meta([("p1", "a-0")]).partition_to_write_stats, "UNKNOWN", compacted=True))
    assert find_conflict(mine, [done], frozenset({T2})) is None
    assert find_conflict(mine, [done], frozenset({T1})) is not None


def test_a_column_change_completed_meanwhile_conflicts_with_every_write():
    """An `alter_schema` commit writes no file, yet a write that read the table under the old column
    names must not commit after it (its files would carry the old names under the new version)."""
    mine = ConcurrentOperation("20260101000000300", Action.COMMIT, State.INFLIGHT, "UPSERT", frozenset({("p1", "a-0")}))
    alter = ConcurrentOperation.of_commit(Instant("20260101000000200", Action.COMMIT, State.COMPLETED),
                                          CommitMetadata({}, "ALTER_SCHEMA", {}))
    other = ConcurrentOperation("20260101000000100", Action.COMMIT, State.COMPLETED, "UPSERT", frozenset({("p2", "b-0")}))
    assert find_conflict(mine, [other, alter]) == (alter, frozenset())
    assert find_conflict(mine, [other]) is None
