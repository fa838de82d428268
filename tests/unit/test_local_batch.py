"""The driver's half of a one-job write (`engine.data.batch`), the bloom filter extension
and the dictionary choice of the base-file writer: pure functions, checked against their
definitions (the distributed pipeline's rules, a fresh bloom build, pyarrow's own encoding)."""

from __future__ import annotations

import io
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.columns import FILE_ID_COL, KEY_COL, OP_COL, OP_DELETE, OP_UPSERT, PART_COL
from engine.data import batch as lb
from engine.data.keys import KEYS_SCHEMA
from engine.index.bloom_filter import build_for_keys, extended_for_keys, footer_entries
from engine.write.file_writer import dictionary_columns
from engine.write.tagging import profile


def _batch(rows: list[tuple]) -> pa.Table:
    keys, parts, ts = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {
            "ts": pa.array(ts, pa.int64()),
            KEY_COL: pa.array(keys, pa.string()),
            PART_COL: pa.array(parts, pa.string()),
        }
    )


def _model_dedupe(rows: list[tuple], by_partition: bool) -> list[tuple]:
    """Spark's rule (`engine.write.prepare.dedupe`): largest ts wins, nulls lose, later input wins ties;
    survivors in input order."""
    best: dict[tuple, int] = {}
    for i, (k, p, ts) in enumerate(rows):
        group = (k, p) if by_partition else (k,)
        j = best.get(group)
        if j is None:
            best[group] = i
            continue
        cur = rows[j][2]
        if ts is not None and (cur is None or ts >= cur):
            best[group] = i
        elif ts is None and cur is None:
            best[group] = i
    return [rows[i] for i in sorted(best.values())]


@pytest.mark.parametrize("by_partition", [True, False])
def test_dedupe_matches_the_distributed_rule(by_partition: bool) -> None:
    rng = random.Random(7)
    for _ in range(50):
        rows = [
            (f"k{rng.randrange(6)}", f"p{rng.randrange(2)}", rng.choice([None, 1, 2, 3, 3]))
            for _ in range(rng.randrange(1, 25))
        ]
        by = [KEY_COL, PART_COL] if by_partition else [KEY_COL]
        got = lb.dedupe(_batch(rows), "ts", by)
        want = _model_dedupe(rows, by_partition)
        assert list(zip(got.column(KEY_COL).to_pylist(), got.column(PART_COL).to_pylist(), got.column("ts").to_pylist(), strict=True)) == want


def test_dedupe_without_precombine_keeps_the_last_arrival() -> None:
    rows = [("a", "p", 5), ("b", "p", 1), ("a", "p", 1), ("a", "p", 3)]
    got = lb.dedupe(_batch(rows), None, [KEY_COL, PART_COL])
    assert got.column("ts").to_pylist() == [1, 3]
    assert got.column(KEY_COL).to_pylist() == ["b", "a"]
    assert lb.has_duplicates(_batch(rows), [KEY_COL, PART_COL])
    assert not lb.has_duplicates(got, [KEY_COL, PART_COL])


def test_with_ops_marks_deletes() -> None:
    t = _batch([("a", "p", 1), ("b", "p", 2), ("c", "p", 3)]).append_column(
        "_hoodie_is_deleted", pa.array([True, None, False])
    )
    assert lb.with_ops(t, False).column(OP_COL).to_pylist() == [OP_DELETE, OP_UPSERT, OP_UPSERT]
    assert lb.with_ops(t, True).column(OP_COL).to_pylist() == [OP_DELETE] * 3
    plain = _batch([("a", "p", 1)])
    assert lb.with_ops(plain, False).column(OP_COL).to_pylist() == [OP_UPSERT]


def test_attach_locations_non_global_matches_key_and_partition() -> None:
    batch = _batch([("a", "p1", 1), ("a", "p2", 1), ("b", "p1", 1)])
    found = pa.table([["a", "b"], ["p1", "p9"], ["f1", "f2"]], schema=KEYS_SCHEMA)
    out = lb.attach_locations(batch, found, is_global=False)
    assert out.column(FILE_ID_COL).to_pylist() == ["f1", None, None]
    assert out.column(PART_COL).to_pylist() == ["p1", "p2", "p1"]


def test_attach_locations_global_writes_where_the_key_lives() -> None:
    batch = _batch([("a", "p2", 1), ("b", "p1", 1), ("c", "p3", 1)])
    found = pa.table([["a", "b"], ["p1", "p1"], ["f1", "f2"]], schema=KEYS_SCHEMA)
    out = lb.attach_locations(batch, found, is_global=True)
    assert out.column(FILE_ID_COL).to_pylist() == ["f1", "f2", None]
    assert out.column(PART_COL).to_pylist() == ["p1", "p1", "p3"]
    empty = lb.attach_locations(batch, KEYS_SCHEMA.empty_table(), is_global=True)
    assert empty.column(FILE_ID_COL).to_pylist() == [None, None, None]
    assert empty.column(PART_COL).to_pylist() == ["p2", "p1", "p3"]


def test_profile_rows_feed_the_distributed_profile() -> None:
    t = pa.table(
        {
            KEY_COL: ["a", "b", "c", "d", "e"],
            PART_COL: ["p", "p", "p", "q", "q"],
            OP_COL: [OP_UPSERT, OP_UPSERT, OP_DELETE, OP_DELETE, OP_UPSERT],
            FILE_ID_COL: pa.array(["f1", None, "f1", None, None], pa.string()),
        }
    )
    workloads, offsets, absent, kept, stale = profile(lb.profile_rows(t))
    assert (absent, kept, stale) == (1, 5, 0)
    assert workloads["p"].inserts == 1 and workloads["p"].updates == {"f1": 1} and workloads["p"].deletes == {"f1": 1}
    assert workloads["q"].inserts == 1 and workloads["q"].updates == {} and workloads["q"].deletes == {}
    assert offsets == {(0, "p"): 0, (0, "q"): 0}
    written = lb.records_to_write(t)
    assert written.column(KEY_COL).to_pylist() == ["a", "b", "c", "e"]  # the absent delete "d" is not sent


def test_split_by_bucket_and_pack_tasks() -> None:
    rows = pa.table({"v": list(range(8))})
    parts = lb.split_by_bucket(rows, pa.array([2, 0, 2, 1, 0, 2, 1, 1], pa.int32()))
    assert {b: t.column("v").to_pylist() for b, t in parts.items()} == {0: [1, 4], 1: [3, 6, 7], 2: [0, 2, 5]}
    weights = {0: 10, 1: 9, 2: 1, 3: 1, 4: 1}
    groups = lb.pack_tasks(weights, 2)
    assert sorted(groups) == [[0, 3], [1, 2, 4]]  # largest first onto the lightest group: 11 and 11
    assert sorted(sum(weights[b] for b in g) for g in groups) == [11, 11]
    assert lb.pack_tasks({5: 1}, 4) == [[5]]
    assert sorted(b for g in lb.pack_tasks({i: i for i in range(10)}, 3) for b in g) == list(range(10))
    table = pa.table({"a": [1, 2], "b": ["x", None]})
    assert lb.from_ipc(lb.to_ipc(table)).equals(table)


@pytest.mark.parametrize("old_n,added_n", [(0, 5), (1000, 0), (10_000, 200), (59_000, 1000)])
def test_extended_bloom_filter_is_byte_identical_to_a_rebuild(old_n: int, added_n: int) -> None:
    old_keys = pa.array([f"key-{i}" for i in range(old_n)], pa.string())
    added = pa.array([f"new-{i}" for i in range(added_n)], pa.string())
    old = build_for_keys(old_keys)
    out = extended_for_keys(old, old_n, added, old_n + added_n)
    assert out is not None
    everything = pa.concat_arrays([added, old_keys])  # any order: one row is a set of bits
    assert footer_entries(out) == footer_entries(build_for_keys(everything))


def test_extended_bloom_filter_refuses_what_a_rebuild_would_differ_from() -> None:
    keys = pa.array([f"k{i}" for i in range(100)], pa.string())
    old = build_for_keys(keys)
    assert extended_for_keys(old, 99, keys[:1], 101) is None  # count differs from the old file's rows
    assert extended_for_keys(old, 100, keys[:1], 60_001) is None  # would need a second row
    assert extended_for_keys(build_for_keys(keys, num_entries=1000), 100, keys[:1], 101) is None  # other sizing
    assert extended_for_keys(None, 100, keys[:1], 101) is None


def test_dictionary_columns_and_the_written_file() -> None:
    n = 5000
    table = pa.table(
        {
            "unique": [f"u{i}" for i in range(n)],
            "city": [f"c{i % 10}" for i in range(n)],
            "constant": ["x"] * n,
            "nested": pa.array([{"a": i} for i in range(n)]),
        }
    )
    assert dictionary_columns(table) == ["city", "constant"]
    sink = io.BytesIO()
    pq.write_table(table, sink, use_dictionary=dictionary_columns(table))
    meta = pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert "RLE_DICTIONARY" in encodings["city"] and "RLE_DICTIONARY" not in encodings["unique"]
    assert pq.read_table(io.BytesIO(sink.getvalue())).equals(table)
    # Hudi's meta columns by what they hold, whatever their first rows look like: one value per
    # file or a few are dictionary encoded, one per row is not
    meta_cols = pa.table({
        "_hoodie_commit_time": [f"2024{i:010d}" for i in range(n)],
        "_hoodie_commit_seqno": ["s"] * n,
        "_hoodie_record_key": ["k"] * n,
        "_hoodie_partition_path": [f"p{i}" for i in range(n)],
        "_hoodie_file_name": ["f"] * n,
        "id": list(range(n)),
    })
    assert dictionary_columns(meta_cols) == ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name"]
