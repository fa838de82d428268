"""`read_slice` against hudi-rs (the oracle): the MOR samples Apache Hudi wrote, tables built by hand
for each merge rule, and random block sequences. Every read is compared with hudi-rs's as a multiset
of rows over all columns; the hand-built cases also spell out the rows they expect."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from engine.data import log_block as lb
from engine.table.meta_client import MetaClient
from tests.support.mor_tables import (
    DEFAULT_PAYLOAD,
    FID,
    FID2,
    OWL,
    I,
    MorTable,
    assert_reads_like_hudi_rs,
    read_rs,
    rows_of,
    values,
)
from tests.support.samples import sample_table

OWL_PROPS = {"hoodie.compaction.payload.class": OWL}

# ---- the MOR samples ----------------------------------------------------------------------

MOR_SAMPLES = ["mor_parquet_v6_nonpartitioned", "mor_parquet_v6_simplekeygen_nonhivestyle", "trips_mor_avro_v6_trips_8i1u"]


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mor-samples-reads")
    return {name: sample_table(name, root) for name in MOR_SAMPLES}


@pytest.mark.parametrize(
    ("name", "total", "second"),
    [(MOR_SAMPLES[0], 4, 2), (MOR_SAMPLES[1], 4, 2), (MOR_SAMPLES[2], 8, 1)],
    ids=MOR_SAMPLES,
)
def test_sample_snapshot_time_travel_and_read_optimized(samples: dict[str, Path], name: str, total: int,
                                                        second: int) -> None:
    table = samples[name]
    rows = assert_reads_like_hudi_rs(table)
    # the second deltacommit updated one record through the log (and the parquet samples inserted one
    # into a new base file)
    instants = [i.time for i in MetaClient.open(str(table)).timeline().completed_writes]
    assert len(instants) == 2 and len(rows) == total
    assert sum(r["_hoodie_commit_time"] == instants[1] for r in rows) == second
    assert len([r for r in rows if not r["_hoodie_file_name"].endswith(".parquet")]) == 1  # the log record
    for instant in instants:
        assert_reads_like_hudi_rs(table, as_of=instant)
    first = assert_reads_like_hudi_rs(table, as_of=instants[0])
    assert {r["_hoodie_commit_time"] for r in first} == {instants[0]}
    read_optimized = assert_reads_like_hudi_rs(table, read_optimized=True)
    assert len(read_optimized) == len(rows)  # the updated record's older version, from its base file
    assert all(r["_hoodie_file_name"].endswith(".parquet") for r in read_optimized)


# ---- hand-built tables, one merge rule each -----------------------------------------------


def _deletes_of_every_kind(t: MorTable) -> None:
    base = t.base_file(I[1], [(k, 10, "base") for k in "abcdefghij"])
    t.commit(I[1], [base])
    first = t.log_file([t.avro_block(I[2], [("a", 5, "T2"), ("b", 10, "T2"), ("c", 20, "T2")])], base_instant=I[1], version=1)
    t.commit(I[2], [first])
    second = t.log_file([t.parquet_block(I[3], [("c", 15, "T3"), ("d", 10, "T3")])], base_instant=I[1], version=2)
    t.commit(I[3], [second])
    third = t.log_file(
        [
            t.delete_block(I[4], ["e", "f", "c"], pa.array([5, 50, 17], pa.int64())),  # LongWrapper
            t.delete_block(I[4], ["g"]),  # IntWrapper(0): natural order
            t.delete_block(I[4], ["h"], pa.array([None], pa.int64())),  # null branch: natural order
            t.delete_block(I[4], ["i"], pa.array([0], pa.int64())),  # LongWrapper(0) is a real value
            t.delete_block(I[4], ["j"], pa.array([5], pa.int32())),  # IntWrapper(5) vs a long field
        ],
        base_instant=I[1], version=3,
    )
    t.commit(I[4], [third])


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, [("a", 10, "base"), ("b", 10, "T2"), ("c", 20, "T2"), ("d", 10, "T3"), ("e", 10, "base"),
              ("i", 10, "base"), ("j", 10, "base")]),
        ({"hoodie.compaction.payload.class": DEFAULT_PAYLOAD},
         [("a", 10, "base"), ("b", 10, "T2"), ("c", 20, "T2"), ("d", 10, "T3"), ("e", 10, "base"),
          ("i", 10, "base"), ("j", 10, "base")]),
        (OWL_PROPS, [("a", 5, "T2"), ("b", 10, "T2"), ("d", 10, "T3")]),
    ],
    ids=["event-time-inferred", "default-payload", "overwrite-with-latest"],
)
def test_avro_and_parquet_blocks_and_deletes_of_every_kind(tmp_path: Path, props: dict[str, str], expected: list) -> None:
    t = MorTable(tmp_path, props=props)
    _deletes_of_every_kind(t)
    assert values(assert_reads_like_hudi_rs(tmp_path), "id", "ts", "val") == expected
    assert values(assert_reads_like_hudi_rs(tmp_path, as_of=I[3]), "id", "ts", "val")[:4] == (
        [("a", 5, "T2"), ("b", 10, "T2"), ("c", 15, "T3"), ("d", 10, "T3")] if props == OWL_PROPS
        else [("a", 10, "base"), ("b", 10, "T2"), ("c", 20, "T2"), ("d", 10, "T3")]
    )


@pytest.mark.parametrize(
    ("props", "expected"),
    [({}, [("b", 10, "base"), ("c", 15, "T3")]), (OWL_PROPS, [("a", 20, "T3"), ("b", 5, "T3"), ("c", 15, "T3")])],
    ids=["event-time", "commit-time"],
)
def test_records_after_deletes(tmp_path: Path, props: dict[str, str], expected: list) -> None:
    # event time: a delete with a real ordering value (30) outlives a later, lower record (20);
    # after a natural-order delete the next record wins, yet loses to a higher base record
    t = MorTable(tmp_path, props=props)
    base = t.base_file(I[1], [("a", 10, "base"), ("b", 10, "base"), ("c", 10, "base")])
    t.commit(I[1], [base])
    first = t.log_file([t.delete_block(I[2], ["a"], pa.array([30], pa.int64())), t.delete_block(I[2], ["b", "c"])],
                       base_instant=I[1], version=1)
    t.commit(I[2], [first])
    second = t.log_file([t.avro_block(I[3], [("a", 20, "T3"), ("b", 5, "T3"), ("c", 15, "T3")])], base_instant=I[1], version=2)
    t.commit(I[3], [second])
    assert values(assert_reads_like_hudi_rs(tmp_path), "id", "ts", "val") == expected


@pytest.mark.parametrize("props", [{}, OWL_PROPS], ids=["event-time", "commit-time"])
def test_long_sequences_of_one_key(tmp_path: Path, props: dict[str, str]) -> None:
    t = MorTable(tmp_path, props=props)
    base = t.base_file(I[1], [("a", 10, "base"), ("b", 10, "base")])
    t.commit(I[1], [base])
    first = t.log_file(
        [
            t.avro_block(I[2], [("a", 20, "T2"), ("b", 20, "T2")]),
            t.delete_block(I[2], ["a", "b"], pa.array([15, 25], pa.int64())),
            t.avro_block(I[2], [("a", 18, "T2b"), ("b", 22, "T2b")]),
        ],
        base_instant=I[1], version=1,
    )
    t.commit(I[2], [first])
    second = t.log_file(
        [
            t.delete_block(I[3], ["a"]),
            t.delete_block(I[3], ["b"], pa.array([30], pa.int64())),
            t.delete_block(I[3], ["a"], pa.array([50], pa.int64())),
            t.parquet_block(I[3], [("a", 1, "T3"), ("b", 29, "T3")]),
        ],
        base_instant=I[1], version=2,
    )
    t.commit(I[3], [second])
    rows = assert_reads_like_hudi_rs(tmp_path)
    # event time: a's natural-order delete let T3's record in, which then loses to the base (10 > 1);
    # b's delete at 30 beats the record at 29
    assert values(rows, "id", "ts", "val") == ([("a", 10, "base")] if not props else [("a", 1, "T3"), ("b", 29, "T3")])


@pytest.mark.parametrize(
    ("props", "expected"),
    [({}, [("a", 10, "T3"), ("b", 10, "base"), ("c", 5, "T3")]), (OWL_PROPS, [("a", 10, "T3"), ("b", 9, "T3"), ("c", 5, "T3")])],
    ids=["event-time", "commit-time"],
)
def test_ties_go_to_the_later_record(tmp_path: Path, props: dict[str, str], expected: list) -> None:
    t = MorTable(tmp_path, props=props)
    base = t.base_file(I[1], [("a", 10, "base"), ("b", 10, "base")])
    t.commit(I[1], [base])
    first = t.log_file([t.avro_block(I[2], [("a", 10, "T2"), ("c", 5, "T2")])], base_instant=I[1], version=1)
    t.commit(I[2], [first])
    second = t.log_file([t.parquet_block(I[3], [("a", 10, "T3"), ("c", 5, "T3"), ("b", 9, "T3")])], base_instant=I[1], version=2)
    t.commit(I[3], [second])
    assert values(assert_reads_like_hudi_rs(tmp_path), "id", "ts", "val") == expected


def test_rollback_command_blocks(tmp_path: Path) -> None:
    t = MorTable(tmp_path)
    base = t.base_file(I[1], [("a", 10, "base"), ("b", 10, "base"), ("c", 10, "base")])
    t.commit(I[1], [base])
    first = t.log_file([t.avro_block(I[2], [("a", 20, "T2")])], base_instant=I[1], version=1)
    t.commit(I[2], [first])
    second = t.log_file([t.avro_block(I[3], [("b", 20, "T3")])], base_instant=I[1], version=2)
    t.commit(I[3], [second])  # left completed: the rollback block alone undoes it
    t.log_file([lb.encode_rollback_block(I[4], I[3])], base_instant=I[1], version=3, token="1-0-1")
    # a rollback removes the blocks before it only: T5's block after it stays
    fourth = t.log_file([t.avro_block(I[5], [("c", 20, "T5")]), lb.encode_rollback_block(I[6], I[5]),
                         t.avro_block(I[5], [("a", 30, "T5 after the rollback")])], base_instant=I[1], version=4)
    t.commit(I[5], [fourth])
    assert values(assert_reads_like_hudi_rs(tmp_path), "id", "ts", "val") == [
        ("a", 30, "T5 after the rollback"), ("b", 10, "base"), ("c", 10, "base")
    ]
    for as_of in (I[2], I[3], I[4]):  # rollback blocks count at every as-of instant
        assert values(assert_reads_like_hudi_rs(tmp_path, as_of=as_of), "id", "ts", "val") == [
            ("a", 20, "T2"), ("b", 10, "base"), ("c", 10, "base")
        ]
    assert values(assert_reads_like_hudi_rs(tmp_path, as_of=I[5]), "id", "val")[0] == ("a", "T5 after the rollback")


def test_rollback_of_an_instant_that_never_completed(tmp_path: Path) -> None:
    # what Hudi's rollback of a failed deltacommit leaves: the failed instant's timeline files are
    # gone, its log file stays, and a new log file (token 1-0-1) holds the command block
    t = MorTable(tmp_path)
    base = t.base_file(I[1], [("a", 10, "base")])
    t.commit(I[1], [base])
    t.log_file([t.parquet_block(I[2], [("a", 20, "failed")])], base_instant=I[1], version=1, token="0-33-43")
    t.log_file([lb.encode_rollback_block(I[3], I[2])], base_instant=I[1], version=2, token="1-0-1")
    third = t.log_file([t.parquet_block(I[4], [("a", 15, "T4")])], base_instant=I[1], version=3, token="0-13-9")
    t.commit(I[4], [third])
    assert values(assert_reads_like_hudi_rs(tmp_path), "id", "ts", "val") == [("a", 15, "T4")]


def test_blocks_of_uncommitted_instants_are_skipped(tmp_path: Path) -> None:
    t = MorTable(tmp_path)
    base = t.base_file(I[1], [("a", 10, "base"), ("b", 10, "base"), ("c", 10, "base"), ("d", 10, "base")])
    t.commit(I[1], [base])
    log = t.log_file(
        [
            t.avro_block(I[2], [("a", 20, "T2")]),
            t.avro_block(I[3], [("b", 20, "T3 inflight")]),
            t.parquet_block(I[4], [("c", 20, "T4 requested")]),
            t.delete_block(I[5], ["d"]),  # T5 is not on the timeline at all
            t.avro_block(I[6], [("a", 30, "T6")]),
        ],
        base_instant=I[1], version=1,
    )
    t.commit(I[2], [log])
    t.commit(I[3], state="inflight")
    t.commit(I[4], state="requested")
    t.commit(I[6], [log])
    assert values(assert_reads_like_hudi_rs(tmp_path), "id", "val") == [
        ("a", "T6"), ("b", "base"), ("c", "base"), ("d", "base")
    ]
    # blocks after the as-of instant are skipped, also inside a log file whose first block counts
    assert values(assert_reads_like_hudi_rs(tmp_path, as_of=I[2]), "id", "val")[0] == ("a", "T2")
    assert values(assert_reads_like_hudi_rs(tmp_path, as_of=I[1]), "id", "val")[0] == ("a", "base")


def test_log_only_file_groups(tmp_path: Path) -> None:
    t = MorTable(tmp_path)
    first = t.log_file([t.avro_block(I[1], [("x", 1, "T1")], file_id=FID2)], base_instant=I[1], version=1, file_id=FID2)
    t.commit(I[1], [first])
    second = t.log_file([t.parquet_block(I[2], [("x", 2, "T2"), ("y", 1, "T2")], file_id=FID2), t.delete_block(I[2], ["x"])],
                        base_instant=I[1], version=2, file_id=FID2)
    t.commit(I[2], [second])
    base = t.base_file(I[3], [("z", 1, "base")])
    t.commit(I[3], [base])
    assert values(assert_reads_like_hudi_rs(tmp_path), "id", "ts", "val") == [("y", 1, "T2"), ("z", 1, "base")]
    assert values(assert_reads_like_hudi_rs(tmp_path, as_of=I[1]), "id", "_hoodie_file_name") == [("x", FID2)]
    assert values(assert_reads_like_hudi_rs(tmp_path, read_optimized=True), "id") == [("z",)]


def test_a_key_twice_in_the_base_file(tmp_path: Path) -> None:
    # only the first base record of a key meets the log record (Hudi and hudi-rs take it out of
    # their map); the duplicate stays as written
    t = MorTable(tmp_path)
    base = t.base_file(I[1], [("a", 10, "base 1"), ("a", 11, "base 2"), ("b", 10, "base")])
    t.commit(I[1], [base])
    log = t.log_file([t.avro_block(I[2], [("a", 12, "T2"), ("b", 12, "T2 first"), ("b", 11, "T2 second")])],
                     base_instant=I[1], version=1)
    t.commit(I[2], [log])
    assert values(assert_reads_like_hudi_rs(tmp_path), "id", "ts", "val") == [
        ("a", 11, "base 2"), ("a", 12, "T2"), ("b", 12, "T2 first")
    ]


def test_hoodie_is_deleted_in_log_records(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("val", pa.string()), ("_hoodie_is_deleted", pa.bool_())])
    t = MorTable(tmp_path, data_schema=schema)
    base = t.base_file(I[1], [{"id": k, "ts": 10, "val": "base", "_hoodie_is_deleted": k == "z"} for k in "abcz"])
    t.commit(I[1], [base])
    log = t.log_file([t.avro_block(I[2], [{"id": "a", "ts": 20, "val": "T2", "_hoodie_is_deleted": True},
                                          {"id": "b", "ts": 5, "val": "T2", "_hoodie_is_deleted": True},
                                          {"id": "c", "ts": 20, "val": "T2", "_hoodie_is_deleted": None}])],
                     base_instant=I[1], version=1)
    t.commit(I[2], [log])
    assert values(assert_reads_like_hudi_rs(tmp_path), "id", "val", "_hoodie_is_deleted") == [
        ("b", "base", False), ("c", "T2", None), ("z", "base", True)
    ]


UTC = __import__("datetime").UTC
_dt = __import__("datetime")
ORDERING_TYPES = [
    ("string", pa.string(), "m", ["a", "z"], pa.array(["n"])),
    ("double", pa.float64(), 1.5, [1.0, 2.0], pa.array([1.7])),
    ("double-vs-long-delete", pa.float64(), 1.5, [1.0, 2.0], pa.array([1], pa.int64())),
    ("decimal", pa.decimal128(10, 2), Decimal("1.50"), [Decimal("1.00"), Decimal("2.00")],
     pa.array([Decimal("1.70")], pa.decimal128(10, 2))),
    ("timestamp", pa.timestamp("us", tz="UTC"), _dt.datetime(2024, 1, 1, tzinfo=UTC),
     [_dt.datetime(2023, 1, 1, tzinfo=UTC), _dt.datetime(2025, 1, 1, tzinfo=UTC)],
     pa.array([_dt.datetime(2024, 6, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))),
    ("int", pa.int32(), 10, [5, 20], pa.array([15], pa.int64())),
    ("boolean", pa.bool_(), True, [False, True], pa.array([True])),
    ("date", pa.date32(), _dt.date(2024, 1, 1), [_dt.date(2023, 1, 1), _dt.date(2025, 1, 1)],
     pa.array([_dt.date(2024, 6, 1)], pa.date32())),
]


@pytest.mark.parametrize(("label", "typ", "base_value", "log_values", "delete_value"), ORDERING_TYPES,
                         ids=[o[0] for o in ORDERING_TYPES])
def test_ordering_fields_of_each_type(tmp_path: Path, label: str, typ: pa.DataType, base_value: object,
                                      log_values: list, delete_value: pa.Array) -> None:
    schema = pa.schema([("id", pa.string()), ("ts", typ), ("val", pa.string())])
    t = MorTable(tmp_path, data_schema=schema)
    base = t.base_file(I[1], [{"id": k, "ts": base_value, "val": "base"} for k in "abcd"])
    t.commit(I[1], [base])
    log = t.log_file(
        [
            t.avro_block(I[2], [{"id": "a", "ts": log_values[0], "val": "lower"}, {"id": "b", "ts": log_values[1], "val": "higher"}]),
            t.delete_block(I[2], ["c"], delete_value),  # higher than the base, or not comparable: deletes
            t.delete_block(I[2], ["d"], pa.array([None], delete_value.type)),
        ],
        base_instant=I[1], version=1,
    )
    t.commit(I[2], [log])
    assert values(assert_reads_like_hudi_rs(tmp_path), "id", "val") == [("a", "base"), ("b", "higher")]


def test_partitioned_table_with_two_file_groups(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("val", pa.string()), ("part", pa.string())])
    t = MorTable(tmp_path, partition="part=x", data_schema=schema)

    def rows(*items: tuple[str, int, str]) -> list[dict]:
        return [{"id": k, "ts": ts, "val": v, "part": "x"} for k, ts, v in items]

    one = t.base_file(I[1], rows(("a", 1, "base"), ("b", 1, "base")))
    two = t.base_file(I[1], rows(("c", 1, "base")), file_id=FID2)
    t.commit(I[1], [one, two])
    log1 = t.log_file([t.parquet_block(I[2], rows(("a", 2, "T2")))], base_instant=I[1], version=1)
    log2 = t.log_file([t.delete_block(I[2], ["c"]), t.avro_block(I[2], rows(("d", 1, "T2")), file_id=FID2)],
                      base_instant=I[1], version=1, file_id=FID2)
    t.commit(I[2], [log1, log2])
    assert values(assert_reads_like_hudi_rs(tmp_path), "_hoodie_partition_path", "id", "val", "_hoodie_file_name") == [
        ("part=x", "a", "T2", FID), ("part=x", "b", "base", f"{FID}_0-1-0_{I[1]}.parquet"), ("part=x", "d", "T2", FID2)
    ]


# ---- random block sequences ---------------------------------------------------------------


def _random_table(root: Path, rng: random.Random, props: dict[str, str], log_only: bool) -> list[str]:
    """A table of random blocks over six keys; returns the completed instants."""
    t = MorTable(root, props=props)
    keys = "abcdef"
    completed = [I[1]]
    base_instant = I[1]
    if log_only:
        first = t.log_file([t.avro_block(I[1], [(k, rng.randint(0, 5), f"{I[1]}") for k in rng.sample(keys, 3)])],
                           base_instant=I[1], version=1)
        t.commit(I[1], [first])
    else:
        base = t.base_file(I[1], [(k, rng.randint(0, 5), "base") for k in rng.sample(keys, rng.randint(1, 6))])
        t.commit(I[1], [base])
    version = 1 if log_only else 0
    for n in range(2, rng.randint(4, 8)):
        instant = I[n]
        blocks: list[bytes] = []
        for _ in range(rng.randint(1, 3)):
            roll = rng.random()
            chosen = rng.sample(keys, rng.randint(1, 3))
            if roll < 0.5:
                rows = [(k, rng.randint(0, 5), f"{instant}/{k}") for k in chosen]
                blocks.append(t.avro_block(instant, rows) if rng.random() < 0.5 else t.parquet_block(instant, rows))
            elif roll < 0.85:
                kind = rng.choice(["natural", "null", "long", "int"])
                if kind == "natural":
                    blocks.append(t.delete_block(instant, chosen))
                else:
                    values_ = [None if kind == "null" else rng.randint(0, 5) for _ in chosen]
                    blocks.append(t.delete_block(instant, chosen, pa.array(values_, pa.int32() if kind == "int" else pa.int64())))
            elif n > 2:
                blocks.append(lb.encode_rollback_block(instant, I[rng.randint(2, n - 1)]))
        version += 1
        log = t.log_file(blocks, base_instant=base_instant, version=version, token=rng.choice(["0-1-0", "1-0-1"]))
        state = rng.choices(["completed", "inflight", "requested"], [8, 1, 1])[0]
        t.commit(instant, [log], state=state)
        if state == "completed":
            completed.append(instant)
    return completed


@pytest.mark.parametrize("seed", range(24))
def test_random_block_sequences(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    props = OWL_PROPS if seed % 3 == 2 else {}
    completed = _random_table(tmp_path, rng, props, log_only=seed % 4 == 3)
    rows = assert_reads_like_hudi_rs(tmp_path)
    assert rows == rows_of(read_rs(tmp_path))
    for instant in completed:
        assert_reads_like_hudi_rs(tmp_path, as_of=instant)
