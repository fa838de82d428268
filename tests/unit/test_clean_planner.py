"""The pure clean planner: which file versions each policy deletes, savepoints protected."""

from __future__ import annotations

from engine.data.file_group import BaseFile, FileGroup, FileSlice
from engine.data.file_names import base_file_name, parse_base_file_name
from engine.services.clean import KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, files_to_clean

T = [f"2026010100000{i}000" for i in range(1, 8)]  # T[0] < T[1] < ... 17-digit instants


def group(partition: str, fid: str, instants: list[str]) -> FileGroup:
    slices = []
    for t in instants:
        name = parse_base_file_name(base_file_name(fid, "0-1-2", t))
        assert name is not None
        slices.append(FileSlice(partition, fid, t, BaseFile(partition, name, 100)))
    return FileGroup(partition, fid, tuple(slices))


def path(partition: str, fid: str, t: str) -> str:
    return f"{partition}/{base_file_name(fid, '0-1-2', t)}"


def test_keep_latest_commits_keeps_every_snapshot_of_the_last_n_commits():
    # fg a rewritten by every commit; fg b written at T0 and T3 only
    a = group("p", "a-0", T[:6])
    b = group("p", "b-0", [T[0], T[3]])
    earliest, out = files_to_clean([a, b], T[:6], KEEP_LATEST_COMMITS, 2)
    assert earliest == T[4]  # the 2 newest commits: T4, T5
    # a: T0..T3 are superseded at or before T4 -> deleted; T4 (needed by the snapshot at T4) stays
    # b: T0 superseded by T3 <= T4 -> deleted; T3 is still the slice the T4 and T5 snapshots read
    assert out == {"p": sorted([path("p", "a-0", t) for t in T[:4]] + [path("p", "b-0", T[0])])}


def test_keep_latest_commits_keeps_an_old_slice_still_current_at_the_earliest_retained_commit():
    c = group("p", "c-0", [T[0], T[5]])  # T0 is what snapshots T1..T4 read
    earliest, out = files_to_clean([c], T[:6], KEEP_LATEST_COMMITS, 3)
    assert earliest == T[3]
    assert out == {}  # the T3 and T4 snapshots still read c@T0


def test_too_few_commits_cleans_nothing():
    a = group("p", "a-0", T[:3])
    assert files_to_clean([a], T[:3], KEEP_LATEST_COMMITS, 3) == (None, {})
    assert files_to_clean([a], T[:3], KEEP_LATEST_COMMITS, 5) == (None, {})


def test_keep_latest_file_versions():
    a = group("p", "a-0", T[:5])
    b = group("q", "b-0", T[:2])
    earliest, out = files_to_clean([a, b], T[:5], KEEP_LATEST_FILE_VERSIONS, 2)
    assert earliest is None
    assert out == {"p": [path("p", "a-0", t) for t in T[:3]]}


def test_savepointed_files_are_never_deleted():
    a = group("p", "a-0", T[:5])
    protected = frozenset({path("p", "a-0", T[1])})
    _e, out = files_to_clean([a], T[:5], KEEP_LATEST_FILE_VERSIONS, 1, protected)
    assert out == {"p": [path("p", "a-0", t) for t in (T[0], T[2], T[3])]}
    _e, out = files_to_clean([a], T[:5], KEEP_LATEST_COMMITS, 1, protected)
    assert out == {"p": [path("p", "a-0", t) for t in (T[0], T[2], T[3])]}


def test_the_latest_slice_is_never_deleted():
    a = group("p", "a-0", [T[0]])
    assert files_to_clean([a], T[:7], KEEP_LATEST_COMMITS, 1) == (T[6], {})
    assert files_to_clean([a], T[:7], KEEP_LATEST_FILE_VERSIONS, 1) == (None, {})


def test_replaced_file_groups_are_cleaned_whole_once_no_retained_snapshot_reads_them():
    from engine.services.clean import replaced_files_to_clean

    a = group("p", "a-0", [T[0], T[1]])  # replaced at T2
    b = group("q", "b-0", [T[0]])  # replaced at T4
    replaced = [(a, T[2]), (b, T[4])]
    # KEEP_LATEST_COMMITS: groups replaced before the earliest retained commit (T4) go, slices and all
    assert replaced_files_to_clean(replaced, KEEP_LATEST_COMMITS, T[4]) == {
        "p": [path("p", "a-0", T[0]), path("p", "a-0", T[1])]
    }
    assert replaced_files_to_clean(replaced, KEEP_LATEST_COMMITS, None) == {}
    # KEEP_LATEST_FILE_VERSIONS: every replaced group; a savepointed file keeps its whole group
    protected = frozenset({path("q", "b-0", T[0])})
    assert replaced_files_to_clean(replaced, KEEP_LATEST_FILE_VERSIONS, None, protected) == {
        "p": [path("p", "a-0", T[0]), path("p", "a-0", T[1])]
    }
