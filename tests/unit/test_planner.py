"""engine.write.planner: bin-packing of inserts and updates into buckets, with exact assignments."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.data.file_names import join_path
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.write.planner import (
    Bucket,
    BucketType,
    ExistingFile,
    InsertRange,
    PartitionWorkload,
    WritePlan,
    bucket_for_insert,
    estimate_record_size,
    plan_writes,
)
from tests.support.samples import sample_table

I0 = "20240101000000000"
I1 = "20240101000000001"


def counter_ids() -> Callable[[], str]:
    """A deterministic `new_file_id`: new-0, new-1, ..."""
    counter = itertools.count()
    return lambda: f"new-{next(counter)}"


def existing(partition: str, file_id: str, size: int, instant: str = I0) -> ExistingFile:
    return ExistingFile(
        partition, file_id, instant, join_path(partition, f"{file_id}_0-1-2_{instant}.parquet"), size
    )


def check_ranges(plan: WritePlan, partition: str, n: int) -> None:
    """Insert ranges of `partition` are contiguous, cover 0..n-1 exactly, and match planned inserts."""
    ranges = plan.insert_ranges[partition]
    assert ranges[0].start == 0
    assert ranges[-1].end == n
    for a, b in itertools.pairwise(ranges):
        assert a.end == b.start
    for r in ranges:
        assert r.end > r.start
        assert plan.buckets[r.bucket].planned_inserts == r.end - r.start
        assert plan.buckets[r.bucket].partition == partition
    assert sum(b.planned_inserts for b in plan.buckets if b.partition == partition) == n
    for i in range(n):
        bucket = bucket_for_insert(ranges, i)
        r = next(r for r in ranges if r.start <= i < r.end)
        assert bucket == r.bucket


# ---- new file groups ---------------------------------------------------------------------------------


def test_new_file_groups_spread_evenly() -> None:
    # capacity = 400 // 100 = 4 records per new file; 10 inserts -> 3 files of 4, 3, 3
    plan = plan_writes(
        [PartitionWorkload("p", inserts=10)],
        {},
        max_file_size=400,
        small_file_limit=300,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert plan.buckets == (
        Bucket(0, BucketType.INSERT, "p", "new-0", planned_inserts=4),
        Bucket(1, BucketType.INSERT, "p", "new-1", planned_inserts=3),
        Bucket(2, BucketType.INSERT, "p", "new-2", planned_inserts=3),
    )
    assert plan.insert_ranges == {"p": (InsertRange(0, 4, 0), InsertRange(4, 7, 1), InsertRange(7, 10, 2))}
    assert plan.record_size == 100
    assert [bucket_for_insert(plan.insert_ranges["p"], i) for i in range(10)] == [
        0,
        0,
        0,
        0,
        1,
        1,
        1,
        2,
        2,
        2,
    ]
    check_ranges(plan, "p", 10)


@pytest.mark.parametrize(
    ("inserts", "capacity", "expected"),
    [
        (1, 4, [1]),
        (4, 4, [4]),
        (5, 4, [3, 2]),
        (8, 4, [4, 4]),
        (9, 4, [3, 3, 3]),
        (10, 4, [4, 3, 3]),
        (11, 4, [4, 4, 3]),
        (100, 7, [7] * 10 + [6] * 5),
    ],
)
def test_new_file_group_sizes(inserts: int, capacity: int, expected: list[int]) -> None:
    plan = plan_writes(
        [PartitionWorkload("p", inserts=inserts)],
        {},
        max_file_size=capacity * 10,
        small_file_limit=0,
        record_size=10,
        new_file_id=counter_ids(),
    )
    sizes = [b.planned_inserts for b in plan.buckets]
    assert sizes == expected
    assert all(b.kind is BucketType.INSERT for b in plan.buckets)
    assert [b.file_id for b in plan.buckets] == [f"new-{i}" for i in range(len(expected))]
    check_ranges(plan, "p", inserts)


def test_record_size_larger_than_max_file_gives_one_record_per_file() -> None:
    plan = plan_writes(
        [PartitionWorkload("p", inserts=3)],
        {},
        max_file_size=10,
        small_file_limit=0,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert [b.planned_inserts for b in plan.buckets] == [1, 1, 1]
    # a record size of 0 is treated as 1 byte
    plan = plan_writes(
        [PartitionWorkload("p", inserts=3)],
        {},
        max_file_size=2,
        small_file_limit=0,
        record_size=0,
        new_file_id=counter_ids(),
    )
    assert plan.record_size == 1
    assert [b.planned_inserts for b in plan.buckets] == [2, 1]


# ---- small files -------------------------------------------------------------------------------------


def test_small_files_filled_up_to_max_size_smallest_first() -> None:
    files = {
        "p": [
            existing("p", "f-big", 900),  # above the small file limit: not used
            existing("p", "f-300", 300),  # room for (1000 - 300) // 100 = 7
            existing("p", "f-100", 100),  # room for 9
        ]
    }
    plan = plan_writes(
        [PartitionWorkload("p", inserts=20)],
        files,
        max_file_size=1000,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert plan.buckets == (
        Bucket(
            0,
            BucketType.UPDATE,
            "p",
            "f-100",
            prev_instant=I0,
            base_path=f"p/f-100_0-1-2_{I0}.parquet",
            planned_inserts=9,
        ),
        Bucket(
            1,
            BucketType.UPDATE,
            "p",
            "f-300",
            prev_instant=I0,
            base_path=f"p/f-300_0-1-2_{I0}.parquet",
            planned_inserts=7,
        ),
        Bucket(2, BucketType.INSERT, "p", "new-0", planned_inserts=4),
    )
    assert plan.insert_ranges == {"p": (InsertRange(0, 9, 0), InsertRange(9, 16, 1), InsertRange(16, 20, 2))}
    check_ranges(plan, "p", 20)


def test_small_files_absorb_all_inserts_without_new_files() -> None:
    files = {"p": [existing("p", "f-a", 500), existing("p", "f-b", 500)]}
    plan = plan_writes(
        [PartitionWorkload("p", inserts=6)],
        files,
        max_file_size=1000,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
    )
    # equal sizes: ties broken by file id; f-a takes its 5, f-b the last one
    assert [(b.file_id, b.kind, b.planned_inserts) for b in plan.buckets] == [
        ("f-a", BucketType.UPDATE, 5),
        ("f-b", BucketType.UPDATE, 1),
    ]
    assert plan.insert_ranges == {"p": (InsertRange(0, 5, 0), InsertRange(5, 6, 1))}


def test_small_file_without_room_is_skipped() -> None:
    # 950 < limit 960 but only 50 bytes left: no whole record fits
    files = {"p": [existing("p", "f-full", 950)]}
    plan = plan_writes(
        [PartitionWorkload("p", inserts=2)],
        files,
        max_file_size=1000,
        small_file_limit=960,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert plan.buckets == (Bucket(0, BucketType.INSERT, "p", "new-0", planned_inserts=2),)


def test_file_at_small_file_limit_is_not_small() -> None:
    files = {"p": [existing("p", "f-edge", 800)]}
    plan = plan_writes(
        [PartitionWorkload("p", inserts=1)],
        files,
        max_file_size=1000,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert [(b.file_id, b.kind) for b in plan.buckets] == [("new-0", BucketType.INSERT)]


def test_bulk_insert_does_not_use_small_files() -> None:
    files = {"p": [existing("p", "f-100", 100)]}
    plan = plan_writes(
        [PartitionWorkload("p", inserts=5)],
        files,
        max_file_size=400,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
        use_small_files=False,
    )
    assert plan.buckets == (
        Bucket(0, BucketType.INSERT, "p", "new-0", planned_inserts=3),
        Bucket(1, BucketType.INSERT, "p", "new-1", planned_inserts=2),
    )
    assert plan.insert_ranges == {"p": (InsertRange(0, 3, 0), InsertRange(3, 5, 1))}


def test_small_files_of_other_partitions_are_not_used() -> None:
    files = {"q": [existing("q", "f-q", 100)]}
    plan = plan_writes(
        [PartitionWorkload("p", inserts=2)],
        files,
        max_file_size=1000,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert [(b.partition, b.file_id, b.kind, b.planned_inserts) for b in plan.buckets] == [
        ("p", "new-0", BucketType.INSERT, 2)
    ]


# ---- updates and deletes -----------------------------------------------------------------------------


def test_update_and_delete_buckets() -> None:
    files = {"p": [existing("p", "f-big", 5000), existing("p", "f-other", 6000, I1)]}
    plan = plan_writes(
        [PartitionWorkload("p", updates={"f-big": 3}, deletes={"f-other": 2})],
        files,
        max_file_size=1000,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert plan.buckets == (
        Bucket(
            0,
            BucketType.UPDATE,
            "p",
            "f-big",
            prev_instant=I0,
            base_path=f"p/f-big_0-1-2_{I0}.parquet",
            planned_updates=3,
        ),
        Bucket(
            1,
            BucketType.UPDATE,
            "p",
            "f-other",
            prev_instant=I1,
            base_path=f"p/f-other_0-1-2_{I1}.parquet",
            planned_deletes=2,
        ),
    )
    assert plan.insert_ranges == {}
    assert plan.update_bucket("p", "f-big") == 0
    assert plan.update_bucket("p", "f-other") == 1
    with pytest.raises(KeyError):
        plan.update_bucket("p", "f-missing")
    update_index, ranges = plan.lookup_tables()
    assert update_index == {("p", "f-big"): 0, ("p", "f-other"): 1}
    assert ranges == {}


def test_updates_and_deletes_to_one_file_share_a_bucket() -> None:
    files = {"p": [existing("p", "f-1", 5000)]}
    plan = plan_writes(
        [PartitionWorkload("p", updates={"f-1": 4}, deletes={"f-1": 1})],
        files,
        max_file_size=1000,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert plan.buckets == (
        Bucket(
            0,
            BucketType.UPDATE,
            "p",
            "f-1",
            prev_instant=I0,
            base_path=f"p/f-1_0-1-2_{I0}.parquet",
            planned_updates=4,
            planned_deletes=1,
        ),
    )


def test_small_file_with_updates_also_absorbs_inserts_in_one_bucket() -> None:
    files = {"p": [existing("p", "f-small", 200), existing("p", "f-big", 5000)]}
    plan = plan_writes(
        [PartitionWorkload("p", inserts=10, updates={"f-small": 2, "f-big": 1})],
        files,
        max_file_size=1000,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert plan.buckets == (
        Bucket(
            0,
            BucketType.UPDATE,
            "p",
            "f-big",
            prev_instant=I0,
            base_path=f"p/f-big_0-1-2_{I0}.parquet",
            planned_updates=1,
        ),
        Bucket(
            1,
            BucketType.UPDATE,
            "p",
            "f-small",
            prev_instant=I0,
            base_path=f"p/f-small_0-1-2_{I0}.parquet",
            planned_inserts=8,
            planned_updates=2,
        ),
        Bucket(2, BucketType.INSERT, "p", "new-0", planned_inserts=2),
    )
    assert [b.file_id for b in plan.buckets].count("f-small") == 1
    assert plan.insert_ranges == {"p": (InsertRange(0, 8, 1), InsertRange(8, 10, 2))}
    check_ranges(plan, "p", 10)


def test_update_to_unknown_file_has_no_previous_slice() -> None:
    plan = plan_writes(
        [PartitionWorkload("p", updates={"f-gone": 1})],
        {},
        max_file_size=1000,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert plan.buckets == (Bucket(0, BucketType.UPDATE, "p", "f-gone", planned_updates=1),)


# ---- several partitions ------------------------------------------------------------------------------


def test_partitions_sorted_with_global_bucket_indexes_and_local_insert_numbers() -> None:
    files = {"b": [existing("b", "f-b", 700)], "a": [existing("a", "f-a", 5000)]}
    plan = plan_writes(
        [
            PartitionWorkload("b", inserts=5),
            PartitionWorkload("a", inserts=3, updates={"f-a": 1}),
            PartitionWorkload("c"),  # nothing to do
        ],
        files,
        max_file_size=1000,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert [
        (b.index, b.partition, b.file_id, b.kind, b.planned_inserts, b.planned_updates) for b in plan.buckets
    ] == [
        (0, "a", "f-a", BucketType.UPDATE, 0, 1),
        (1, "a", "new-0", BucketType.INSERT, 3, 0),
        (2, "b", "f-b", BucketType.UPDATE, 3, 0),
        (3, "b", "new-1", BucketType.INSERT, 2, 0),
    ]
    assert plan.insert_ranges == {
        "a": (InsertRange(0, 3, 1),),
        "b": (InsertRange(0, 3, 2), InsertRange(3, 5, 3)),
    }
    check_ranges(plan, "a", 3)
    check_ranges(plan, "b", 5)
    update_index, ranges = plan.lookup_tables()
    assert update_index == {("a", "f-a"): 0, ("b", "f-b"): 2}
    assert ranges == dict(plan.insert_ranges)


def test_non_partitioned_table_uses_empty_partition() -> None:
    files = {"": [existing("", "f-0", 100)]}
    plan = plan_writes(
        [PartitionWorkload("", inserts=2)],
        files,
        max_file_size=1000,
        small_file_limit=800,
        record_size=100,
        new_file_id=counter_ids(),
    )
    assert plan.buckets == (
        Bucket(
            0,
            BucketType.UPDATE,
            "",
            "f-0",
            prev_instant=I0,
            base_path=f"f-0_0-1-2_{I0}.parquet",
            planned_inserts=2,
        ),
    )
    assert plan.insert_ranges == {"": (InsertRange(0, 2, 0),)}


# ---- bucket_for_insert -------------------------------------------------------------------------------


def test_bucket_for_insert_every_number() -> None:
    ranges = (InsertRange(0, 3, 5), InsertRange(3, 4, 2), InsertRange(4, 9, 7))
    assert [bucket_for_insert(ranges, i) for i in range(9)] == [5, 5, 5, 2, 7, 7, 7, 7, 7]
    for outside in (-1, 9, 100):
        with pytest.raises(IndexError):
            bucket_for_insert(ranges, outside)
    with pytest.raises(IndexError):
        bucket_for_insert((), 0)


# ---- estimate_record_size ----------------------------------------------------------------------------


def meta(writes: int, bytes_: int) -> CommitMetadata:
    stat = WriteStat(
        fileId="f-0", path="p/f.parquet", partitionPath="p", numWrites=writes, totalWriteBytes=bytes_
    )
    return CommitMetadata({"p": [stat]}, operation_type="UPSERT")


def test_estimate_record_size_newest_commit_with_writes_wins() -> None:
    newest_first = [CommitMetadata(), meta(0, 0), meta(10, 1000), meta(10, 5000)]
    assert estimate_record_size(newest_first, default=1024) == 100
    assert estimate_record_size(iter(newest_first), default=1024) == 100  # any iterable
    # min_bytes: a commit must have written more than that to count
    assert estimate_record_size(newest_first, default=1024, min_bytes=1000) == 500
    assert estimate_record_size(newest_first, default=1024, min_bytes=5000) == 1024


def test_estimate_record_size_default_and_floor() -> None:
    assert estimate_record_size([], default=1024) == 1024
    assert estimate_record_size([CommitMetadata(), meta(0, 0)], default=77) == 77
    assert estimate_record_size([meta(3, 10)], default=1024) == 3  # integer division
    assert estimate_record_size([meta(30, 10)], default=1024) == 1  # never 0


def test_estimate_record_size_from_sample_commits(tmp_path: Path) -> None:
    table = sample_table("cow_v6_nonpartitioned", tmp_path)
    hoodie = table / ".hoodie"
    newest_first = [
        CommitMetadata.from_json((hoodie / f"{t}.commit").read_bytes())
        for t in ("20240418173551906", "20240418173550988")
    ]
    assert estimate_record_size(newest_first, default=1024) == 441520 // 4  # 110380
    assert estimate_record_size(newest_first[1:], default=1024) == 441382 // 3  # 147127
