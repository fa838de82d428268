"""`bucket_column` (the JVM bucket expression used when every partition's inserts go to one
bucket) gives exactly the buckets of `assign_buckets`, and fails on records the plan lacks."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql.utils import CapturedException

from engine.columns import FILE_ID_COL, KEY_COL, PART_COL
from engine.write.assign import assign_buckets
from engine.write.bucket_column import bucket_column, needs_numbering
from engine.write.planner import InsertRange

pytestmark = pytest.mark.spark

PARTITIONS = ["2024/01/01", "paris", "Zürich", "", "ä/b", "p=1", "日本", "a\tb", "x\x01y"]


def _case(rng: random.Random) -> tuple[pa.Table, dict, dict]:
    partitions = rng.sample(PARTITIONS, rng.randint(1, 6))
    groups = [(p, f"fid-{p}-{g}") for p in partitions for g in range(rng.randint(0, 3))]
    updates_idx = {pair: i for i, pair in enumerate(groups)}
    inserting = [p for p in partitions if rng.random() < 0.8]
    rows = []
    for i in range(rng.randint(0, 200)):
        if groups and (not inserting or rng.random() < 0.5):
            p, fid = rng.choice(groups)
            rows.append((f"k{i}", p, fid))
        elif inserting:
            rows.append((f"k{i}", rng.choice(inserting), None))
    counts = {p: sum(1 for r in rows if r[1] == p and r[2] is None) for p in inserting}
    first = len(groups)
    ranges = {p: (InsertRange(0, counts[p], first + j),) for j, p in enumerate(inserting)}
    table = pa.table({KEY_COL: [r[0] for r in rows], PART_COL: [r[1] for r in rows],
                      FILE_ID_COL: pa.array([r[2] for r in rows], pa.string())})
    return table, updates_idx, ranges


def test_needs_numbering_only_for_several_insert_buckets_in_a_partition():
    assert not needs_numbering({})
    assert not needs_numbering({"p": (InsertRange(0, 5, 1),), "q": (InsertRange(0, 2, 2),)})
    assert needs_numbering({"p": (InsertRange(0, 5, 1), InsertRange(5, 9, 2))})
    with pytest.raises(ValueError, match="several insert buckets"):
        bucket_column({}, {"p": (InsertRange(0, 5, 1), InsertRange(5, 9, 2))})


def test_same_buckets_as_assign_buckets(spark):
    rng = random.Random(7)
    cases = [_case(rng) for _ in range(40)]
    for n, (table, updates_idx, ranges) in enumerate(cases):
        offsets = {(0, p): 0 for p in ranges}
        want = assign_buckets(table, 0, updates_idx, ranges, offsets).to_pylist()
        df = spark.createDataFrame(table.to_pandas() if table.num_rows else [], schema=f"{KEY_COL} string, "
                                   f"{PART_COL} string, {FILE_ID_COL} string").coalesce(1)
        got = df.withColumn("b", bucket_column(updates_idx, ranges)).select(KEY_COL, "b").toArrow()
        by_key = dict(zip(got.column(KEY_COL).to_pylist(), got.column("b").to_pylist(), strict=True))
        assert [by_key[k] for k in table.column(KEY_COL).to_pylist()] == want, n
        assert got.schema.field("b").type == pa.int32()


@pytest.mark.parametrize("row", [("k", "p", "unknown-fid"), ("k", "q", None), ("k", "q", "f1")])
def test_a_record_the_plan_lacks_fails_the_task(spark, row):
    df = spark.createDataFrame([row], schema=f"{KEY_COL} string, {PART_COL} string, {FILE_ID_COL} string")
    col = bucket_column({("p", "f1"): 0}, {"p": (InsertRange(0, 1, 1),)})
    with pytest.raises((PySparkException, CapturedException), match="the write plan does not have: q|unknown-fid"):
        df.select(col).collect()
