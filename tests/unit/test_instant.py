"""engine.timeline.instant and engine.timeline.timeline: file names, ordering, collapsing, visibility."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from engine.errors import InvalidInputError
from engine.timeline.instant import (
    Action,
    Instant,
    State,
    format_instant_time,
    is_valid_instant_time,
    next_instant_time,
    parse_instant_time,
)
from engine.timeline.timeline import Timeline
from tests.support.samples import list_samples, require_samples_dir, sample_table

T = "20240418173213674"
T1 = "20240101000000000"
T2 = "20240101000000001"
T3 = "20240101000000002"
T4 = "20240101000000003"

# every (action, state) and the exact v6 file name it is stored under
FILE_NAMES = [
    (Action.COMMIT, State.REQUESTED, f"{T}.commit.requested"),
    (Action.COMMIT, State.INFLIGHT, f"{T}.inflight"),
    (Action.COMMIT, State.COMPLETED, f"{T}.commit"),
    (Action.DELTA_COMMIT, State.REQUESTED, f"{T}.deltacommit.requested"),
    (Action.DELTA_COMMIT, State.INFLIGHT, f"{T}.deltacommit.inflight"),
    (Action.DELTA_COMMIT, State.COMPLETED, f"{T}.deltacommit"),
    (Action.REPLACE_COMMIT, State.REQUESTED, f"{T}.replacecommit.requested"),
    (Action.REPLACE_COMMIT, State.INFLIGHT, f"{T}.replacecommit.inflight"),
    (Action.REPLACE_COMMIT, State.COMPLETED, f"{T}.replacecommit"),
    (Action.COMPACTION, State.REQUESTED, f"{T}.compaction.requested"),
    (Action.COMPACTION, State.INFLIGHT, f"{T}.compaction.inflight"),
    (Action.COMPACTION, State.COMPLETED, f"{T}.compaction"),
    (Action.LOG_COMPACTION, State.REQUESTED, f"{T}.logcompaction.requested"),
    (Action.LOG_COMPACTION, State.INFLIGHT, f"{T}.logcompaction.inflight"),
    (Action.LOG_COMPACTION, State.COMPLETED, f"{T}.logcompaction"),
    (Action.CLUSTERING, State.REQUESTED, f"{T}.clustering.requested"),
    (Action.CLUSTERING, State.INFLIGHT, f"{T}.clustering.inflight"),
    (Action.CLUSTERING, State.COMPLETED, f"{T}.clustering"),
    (Action.ROLLBACK, State.REQUESTED, f"{T}.rollback.requested"),
    (Action.ROLLBACK, State.INFLIGHT, f"{T}.rollback.inflight"),
    (Action.ROLLBACK, State.COMPLETED, f"{T}.rollback"),
    (Action.CLEAN, State.REQUESTED, f"{T}.clean.requested"),
    (Action.CLEAN, State.INFLIGHT, f"{T}.clean.inflight"),
    (Action.CLEAN, State.COMPLETED, f"{T}.clean"),
    (Action.SAVEPOINT, State.REQUESTED, f"{T}.savepoint.requested"),
    (Action.SAVEPOINT, State.INFLIGHT, f"{T}.savepoint.inflight"),
    (Action.SAVEPOINT, State.COMPLETED, f"{T}.savepoint"),
    (Action.RESTORE, State.REQUESTED, f"{T}.restore.requested"),
    (Action.RESTORE, State.INFLIGHT, f"{T}.restore.inflight"),
    (Action.RESTORE, State.COMPLETED, f"{T}.restore"),
    (Action.INDEXING, State.REQUESTED, f"{T}.indexing.requested"),
    (Action.INDEXING, State.INFLIGHT, f"{T}.indexing.inflight"),
    (Action.INDEXING, State.COMPLETED, f"{T}.indexing"),
]


def test_file_name_table_covers_every_action_and_state() -> None:
    assert {(a, s) for a, s, _ in FILE_NAMES} == {(a, s) for a in Action for s in State}


@pytest.mark.parametrize(("action", "state", "name"), FILE_NAMES, ids=[n for _, _, n in FILE_NAMES])
def test_instant_file_name_round_trip(action: Action, state: State, name: str) -> None:
    inst = Instant(T, action, state)
    assert inst.file_name == name
    assert Instant.parse_file_name(name) == inst
    assert Instant.parse_file_name(inst.file_name).file_name == name


@pytest.mark.parametrize(
    "name",
    [
        "hoodie.properties",
        ".aux",
        ".temp",
        ".schema",
        ".heartbeat",
        ".lock",
        "archived",
        ".20240101.tmp",
        f".{T}.commit",
        "20240101.commit",  # too short
        f"{T}0.commit",  # too long
        T,  # no action
        f"{T}.",
        f"{T}.unknownaction",
        f"{T}.commit.completed",  # completed has no suffix
        f"{T}.commit.unknown",
        f"{T}.commit.requested.tmp",
        f"{T}.deltacommit.inflight.crc",
        "2024041817321367x.commit",
        "",
    ],
)
def test_non_instant_names_parse_to_none(name: str) -> None:
    assert Instant.parse_file_name(name) is None


def test_instant_rejects_bad_time() -> None:
    with pytest.raises(InvalidInputError):
        Instant("2024", Action.COMMIT, State.COMPLETED)
    with pytest.raises(InvalidInputError):
        Instant("2024041817321367a", Action.COMMIT, State.COMPLETED)


def test_instant_state_predicates_and_with_state() -> None:
    req = Instant(T, Action.DELTA_COMMIT, State.REQUESTED)
    assert (req.is_requested, req.is_inflight, req.is_completed) == (True, False, False)
    inf = req.with_state(State.INFLIGHT)
    assert inf == Instant(T, Action.DELTA_COMMIT, State.INFLIGHT)
    assert (inf.is_requested, inf.is_inflight, inf.is_completed) == (False, True, False)
    done = inf.with_state(State.COMPLETED)
    assert (done.is_requested, done.is_inflight, done.is_completed) == (False, False, True)
    assert done.file_name == f"{T}.deltacommit"
    assert str(done) == f"[{T}__deltacommit__COMPLETED]"
    assert req == Instant(T, Action.DELTA_COMMIT, State.REQUESTED)  # immutable value object
    assert Action.COMMIT.is_write and Action.DELTA_COMMIT.is_write and Action.REPLACE_COMMIT.is_write
    assert not any(
        a.is_write for a in Action if a not in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
    )


def test_instant_ordering_time_then_state() -> None:
    c1_req = Instant(T1, Action.COMMIT, State.REQUESTED)
    c1_inf = Instant(T1, Action.COMMIT, State.INFLIGHT)
    c1_done = Instant(T1, Action.COMMIT, State.COMPLETED)
    c2_req = Instant(T2, Action.COMMIT, State.REQUESTED)
    r3 = Instant(T3, Action.ROLLBACK, State.COMPLETED)
    shuffled = [r3, c1_done, c2_req, c1_req, c1_inf]
    assert sorted(shuffled) == [c1_req, c1_inf, c1_done, c2_req, r3]
    assert c1_req < c1_inf < c1_done < c2_req
    assert not c1_done < c1_req
    # an earlier time sorts first whatever its state
    assert Instant(T1, Action.CLEAN, State.COMPLETED) < Instant(T2, Action.COMMIT, State.REQUESTED)


# ---- Timeline -------------------------------------------------------------------------------


def test_from_file_names_collapses_to_one_instant_per_time() -> None:
    names = [
        f"{T1}.commit.requested",
        f"{T1}.inflight",
        f"{T1}.commit",
        f"{T2}.deltacommit.requested",
        f"{T2}.deltacommit.inflight",
        f"{T3}.rollback.requested",
        f"{T3}.rollback.inflight",
        f"{T3}.rollback",
        f"{T4}.commit.requested",
        "hoodie.properties",
        ".aux",
        "archived",
        ".temp",
    ]
    tl = Timeline.from_file_names(reversed(names))
    assert tl.instants == (
        Instant(T1, Action.COMMIT, State.COMPLETED),
        Instant(T2, Action.DELTA_COMMIT, State.INFLIGHT),
        Instant(T3, Action.ROLLBACK, State.COMPLETED),
        Instant(T4, Action.COMMIT, State.REQUESTED),
    )
    assert len(tl) == 4
    assert list(tl) == list(tl.instants)
    assert tl.first_time == T1
    assert tl.last_time == T4
    assert tl.last == Instant(T4, Action.COMMIT, State.REQUESTED)
    assert tl.completed.instants == (
        Instant(T1, Action.COMMIT, State.COMPLETED),
        Instant(T3, Action.ROLLBACK, State.COMPLETED),
    )
    assert tl.pending.instants == (
        Instant(T2, Action.DELTA_COMMIT, State.INFLIGHT),
        Instant(T4, Action.COMMIT, State.REQUESTED),
    )
    assert tl.completed_times == frozenset({T1, T3})
    assert tl.get(T2) == Instant(T2, Action.DELTA_COMMIT, State.INFLIGHT)
    assert tl.get("20990101000000000") is None
    assert tl.is_completed(T1) and tl.is_completed(T3)
    assert not tl.is_completed(T2) and not tl.is_completed(T4)
    assert not tl.is_completed("20990101000000000")


def test_completed_compaction_collapses_to_completed_commit() -> None:
    for order in (1, -1):
        names = [f"{T1}.compaction.requested", f"{T1}.compaction.inflight", f"{T1}.commit"][::order]
        tl = Timeline.from_file_names(names)
        assert tl.instants == (Instant(T1, Action.COMMIT, State.COMPLETED),)
        assert tl.completed_writes.instants == (Instant(T1, Action.COMMIT, State.COMPLETED),)


def test_pending_compaction_stays_pending_compaction() -> None:
    tl = Timeline.from_file_names([f"{T1}.compaction.requested", f"{T1}.compaction.inflight"])
    assert tl.instants == (Instant(T1, Action.COMPACTION, State.INFLIGHT),)
    assert tl.writes.instants == (Instant(T1, Action.COMPACTION, State.INFLIGHT),)
    assert tl.completed_writes.instants == ()
    assert not tl.is_visible(T1)


def test_empty_timeline() -> None:
    tl = Timeline.from_file_names(["hoodie.properties", ".aux", "archived"])
    assert tl.instants == ()
    assert len(tl) == 0
    assert tl.last is None and tl.last_time is None and tl.first_time is None
    assert not tl.is_visible(T1)


def _mixed_timeline() -> Timeline:
    return Timeline.from_file_names(
        [
            f"{T1}.commit",
            f"{T2}.deltacommit",
            f"{T3}.clean",
            f"{T4}.replacecommit",
            "20240101000000004.inflight",
            "20240101000000005.rollback",
            "20240101000000006.compaction.requested",
            "20240101000000007.savepoint",
        ]
    )


def test_completed_writes_and_writes_filters() -> None:
    tl = _mixed_timeline()
    assert [i.time for i in tl.completed_writes] == [T1, T2, T4]
    assert [(i.time, i.action) for i in tl.writes] == [
        (T1, Action.COMMIT),
        (T2, Action.DELTA_COMMIT),
        (T4, Action.REPLACE_COMMIT),
        ("20240101000000004", Action.COMMIT),
        ("20240101000000006", Action.COMPACTION),
    ]
    assert [i.time for i in tl.filter(actions=[Action.CLEAN, Action.ROLLBACK])] == [T3, "20240101000000005"]
    assert [i.time for i in tl.filter(actions=[Action.COMMIT], completed=False)] == ["20240101000000004"]
    assert [i.time for i in tl.filter(actions=[Action.COMMIT], completed=True)] == [T1]


def test_between_is_half_open() -> None:
    tl = _mixed_timeline()
    assert [i.time for i in tl.between(T1, T4)] == [T2, T3, T4]
    assert [i.time for i in tl.between(T1, T1)] == []
    assert [i.time for i in tl.between(None, T2)] == [T1, T2]
    assert [i.time for i in tl.between("20240101000000005", None)] == [
        "20240101000000006",
        "20240101000000007",
    ]
    assert [i.time for i in tl.between(None, None)] == [i.time for i in tl]
    assert [i.time for i in tl.completed_writes.between(T1, "20240101000000007")] == [T2, T4]


def test_up_to_includes_the_instant() -> None:
    tl = _mixed_timeline()
    assert [i.time for i in tl.up_to(T3)] == [T1, T2, T3]
    assert [i.time for i in tl.up_to(T1)] == [T1]
    assert [i.time for i in tl.up_to("20231231235959999")] == []
    assert [i.time for i in tl.completed_writes.up_to("20240101000000009")] == [T1, T2, T4]


def test_is_visible() -> None:
    tl = Timeline.from_file_names(
        [
            f"{T2}.commit.requested",
            f"{T2}.inflight",
            f"{T2}.commit",
            f"{T3}.commit.requested",
            f"{T3}.inflight",
            f"{T4}.deltacommit.requested",
        ]
    )
    assert tl.is_visible(T2)  # completed
    assert not tl.is_visible(T3)  # inflight
    assert not tl.is_visible(T4)  # requested
    assert tl.is_visible(T1)  # older than the first instant: archived
    assert tl.is_visible("20231231235959999")
    assert not tl.is_visible("20240101000000009")  # newer and not on the timeline
    # an instant between two known ones but absent (e.g. rolled back and removed) is not visible
    gap = Timeline.from_file_names([f"{T1}.commit", f"{T3}.commit"])
    assert not gap.is_visible(T2)


# ---- instant times -----------------------------------------------------------------------------


def test_format_and_parse_instant_time_round_trip() -> None:
    moment = datetime(2024, 4, 18, 17, 32, 13, 674000, tzinfo=UTC)
    assert format_instant_time(moment) == "20240418173213674"
    assert parse_instant_time("20240418173213674") == moment
    assert parse_instant_time("20240418173213674").tzinfo is not None
    for text in ("20240418173213674", "20000101000000000", "20241231235959999", "20240229120000001"):
        assert format_instant_time(parse_instant_time(text)) == text


def test_format_instant_time_truncates_microseconds_and_converts_to_utc() -> None:
    assert format_instant_time(datetime(2024, 4, 18, 17, 32, 13, 674999, tzinfo=UTC)) == "20240418173213674"
    plus2 = timezone(timedelta(hours=2))
    assert format_instant_time(datetime(2024, 4, 18, 19, 32, 13, 5000, tzinfo=plus2)) == "20240418173213005"
    # a naive datetime is taken as UTC
    assert format_instant_time(datetime(2024, 1, 2, 3, 4, 5, 6000)) == "20240102030405006"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "2024",
        "2024041817321367",
        "202404181732136740",
        "2024041817321367a",
        "20241301000000000",
        "20240230000000000",
        "20240418253213674",
        " 20240418173213674",
        "2024-04-18T17:32",
    ],
)
def test_parse_instant_time_rejects_bad_input(bad: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_instant_time(bad)


def test_is_valid_instant_time() -> None:
    assert is_valid_instant_time("20240418173213674")
    assert not is_valid_instant_time("2024041817321367")
    assert not is_valid_instant_time("")
    assert not is_valid_instant_time(None)  # type: ignore[arg-type]


def test_next_instant_time() -> None:
    now = datetime(2024, 4, 18, 17, 32, 13, 674000, tzinfo=UTC)
    assert next_instant_time(now, None) == "20240418173213674"
    assert next_instant_time(now, "20240418173213673") == "20240418173213674"  # already later
    assert next_instant_time(now, "20240418173213674") == "20240418173213675"  # equal: bump 1 ms
    assert next_instant_time(now, "20240418173213900") == "20240418173213901"  # after is ahead
    # across the second, minute, hour, day and year boundaries
    assert next_instant_time(now, "20240418173259999") == "20240418173300000"
    assert next_instant_time(now, "20240418173213999") == "20240418173214000"
    assert next_instant_time(now, "20240418235959999") == "20240419000000000"
    assert next_instant_time(now, "20241231235959999") == "20250101000000000"
    with pytest.raises(InvalidInputError):
        next_instant_time(datetime(2024, 1, 1, tzinfo=UTC), "2099")


# ---- the timelines of the Spark-written samples -------------------------------------------------

SAMPLE_TIMELINES: dict[str, tuple[tuple[str, Action], ...]] = {
    "cow_v6_complexkeygen_hivestyle": (
        ("20240418173213674", Action.COMMIT),
        ("20240418173235694", Action.COMMIT),
    ),
    "cow_v6_empty": (),
    "cow_v6_nonpartitioned": (
        ("20240418173550988", Action.COMMIT),
        ("20240418173551906", Action.COMMIT),
    ),
    "cow_v6_simplekeygen_nonhivestyle": (
        ("20240418172802262", Action.COMMIT),
        ("20240418172804498", Action.COMMIT),
    ),
    "mor_parquet_v6_nonpartitioned": (
        ("20250117083125837", Action.DELTA_COMMIT),
        ("20250117083136333", Action.DELTA_COMMIT),
    ),
    "mor_parquet_v6_simplekeygen_nonhivestyle": (
        ("20250121000547796", Action.DELTA_COMMIT),
        ("20250121000557095", Action.DELTA_COMMIT),
    ),
    "trips_mor_avro_v6_trips_8i1u": (
        ("20250331030642808", Action.DELTA_COMMIT),
        ("20250331030645735", Action.DELTA_COMMIT),
    ),
}


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hudi-samples-timeline")


def test_sample_list_is_known() -> None:
    require_samples_dir()
    assert list_samples() == sorted(SAMPLE_TIMELINES)


@pytest.mark.parametrize("name", sorted(SAMPLE_TIMELINES))
def test_sample_timeline(name: str, unpacked: Path) -> None:
    table = sample_table(name, unpacked)
    listing = os.listdir(table / ".hoodie")
    tl = Timeline.from_file_names(listing)
    expected = tuple(Instant(t, a, State.COMPLETED) for t, a in SAMPLE_TIMELINES[name])
    # every instant of these samples completed: the requested/inflight files collapse away
    assert tl.instants == expected
    assert tl.completed_writes.instants == expected
    assert tl.pending.instants == ()
    for t, _ in SAMPLE_TIMELINES[name]:
        assert tl.is_visible(t)
    # each completed write left requested (+ inflight) files that all parse to the same time
    parsed = [i for i in (Instant.parse_file_name(n) for n in listing) if i is not None]
    assert {i.time for i in parsed} == {t for t, _ in SAMPLE_TIMELINES[name]}
    assert {i.state for i in parsed} == (
        {State.REQUESTED, State.INFLIGHT, State.COMPLETED} if expected else set()
    )


def test_archived_range_and_savepoints_in_visibility() -> None:
    # archived commits older than the first active write stay visible even behind an old restore
    tl = Timeline.from_file_names(
        ["20240101000000000.restore", "20240301000000000.commit", "20240301000000000.savepoint",
         "20240401000000000.inflight", "20240401000000000.savepoint"],
        has_archive=True,
    )
    assert tl.archived_before == "20240301000000000"
    assert tl.is_visible("20240201000000000")  # archived, newer than the kept restore
    assert tl.is_visible("20240301000000000")
    # a savepoint of a commit being rolled back (restore in progress) does not make its files visible
    assert not tl.is_visible("20240401000000000")
    assert tl.completed_write_times == frozenset({"20240301000000000"})
    # every active write rolled back: the remaining rollback instant bounds the archived range
    rb = Timeline.from_file_names(["20240501000000000.rollback"], has_archive=True)
    assert rb.archived_before == "20240501000000000" and rb.is_visible("20240301000000000")
    assert Timeline.from_file_names(["20240501000000000.rollback"], has_archive=False).archived_before is None
