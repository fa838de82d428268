"""`assign_buckets` (vectorised) gives exactly the buckets of the row-by-row definition the write
tasks used before: updates by their file group, inserts by insert number in (partition, key) order."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from engine.columns import FILE_ID_COL, KEY_COL, PART_COL
from engine.write.assign import assign_buckets
from engine.write.planner import InsertRange, bucket_for_insert


def reference(table: pa.Table, sp: int, updates_idx, ranges, offsets) -> list[int]:
    """The former task code, row by row."""
    parts = table.column(PART_COL).to_pylist()
    fids = table.column(FILE_ID_COL).to_pylist()
    keys = table.column(KEY_COL).to_pylist()
    out = [0] * table.num_rows
    inserts = []
    for i, (part, fid) in enumerate(zip(parts, fids, strict=True)):
        if fid is not None:
            out[i] = updates_idx[(part, fid)]
        else:
            inserts.append(i)
    inserts.sort(key=lambda i: (parts[i], keys[i]))
    counters: dict[str, int] = {}
    for i in inserts:
        part = parts[i]
        n = counters.get(part, 0)
        counters[part] = n + 1
        out[i] = bucket_for_insert(ranges[part], offsets[(sp, part)] + n)
    return out


def _case(rng: random.Random):
    partitions = rng.sample(["2024/01/01", "paris", "Zürich", "", "ä/b", "p=1", "日本", "a\tb"], rng.randint(1, 5))
    groups = {(p, f"fid-{p}-{g}"): None for p in partitions for g in range(rng.randint(0, 3))}
    updates_idx = {}
    bucket = 0
    for pair in groups:
        updates_idx[pair] = bucket
        bucket += 1
    sp = rng.randint(0, 3)
    rows = []
    inserts_per_part = {p: 0 for p in partitions}
    for _ in range(rng.randint(0, 400)):
        p = rng.choice(partitions)
        key = rng.choice(["k1", "k2", "ß", "K", "10", "9", "é"]) + str(rng.randint(0, 50))
        if groups and rng.random() < 0.4:
            p, fid = rng.choice(list(groups))
            rows.append((key, p, fid))
        else:
            rows.append((key, p, None))
            inserts_per_part[p] += 1
    ranges, offsets = {}, {}
    for p, count in inserts_per_part.items():
        offset = rng.randint(0, 1000)
        offsets[(sp, p)] = offset
        bounds = sorted({offset, offset + count, *(offset + rng.randint(0, count) for _ in range(rng.randint(0, 3)))})
        start = rng.randint(0, offset)  # a range may start before this task's first number
        cuts = [start, *[b for b in bounds if b > start]]
        if cuts[-1] < offset + count or len(cuts) == 1:
            cuts.append(offset + count + rng.randint(1, 5))
        planned = []
        for a, b in zip(cuts, cuts[1:], strict=False):
            planned.append(InsertRange(start=a, end=b, bucket=bucket))
            bucket += 1
        ranges[p] = tuple(planned)
    rng.shuffle(rows)
    table = pa.table({"x": list(range(len(rows))), KEY_COL: [r[0] for r in rows], PART_COL: [r[1] for r in rows],
                      FILE_ID_COL: pa.array([r[2] for r in rows], pa.string())})
    return table, sp, updates_idx, ranges, offsets


@pytest.mark.parametrize("seed", range(300))
def test_same_buckets_as_the_row_by_row_definition(seed):
    table, sp, updates_idx, ranges, offsets = _case(random.Random(seed))
    got = assign_buckets(table, sp, updates_idx, ranges, offsets)
    assert got.type == pa.int32()
    assert got.to_pylist() == reference(table, sp, updates_idx, ranges, offsets)


def test_duplicate_keys_keep_their_input_order_and_chunked_input():
    # the same key twice in one partition (insert without de-duplication): stable, like sorted()
    rows = [("b", "p", None), ("a", "p", None), ("a", "p", None), ("c", "q", "f1")]
    batch = pa.record_batch({KEY_COL: [r[0] for r in rows], PART_COL: [r[1] for r in rows],
                             FILE_ID_COL: pa.array([r[2] for r in rows], pa.string())})
    table = pa.Table.from_batches([batch.slice(0, 2), batch.slice(2)])
    ranges = {"p": (InsertRange(0, 2, 10), InsertRange(2, 5, 11))}
    got = assign_buckets(table, 1, {("q", "f1"): 3}, ranges, {(1, "p"): 0}).to_pylist()
    assert got == [11, 10, 10, 3] == reference(table, 1, {("q", "f1"): 3}, ranges, {(1, "p"): 0})


def test_unknown_group_and_numbers_outside_the_plan_are_errors():
    table = pa.table({KEY_COL: ["a"], PART_COL: ["p"], FILE_ID_COL: pa.array(["nope"], pa.string())})
    with pytest.raises(KeyError):
        assign_buckets(table, 0, {("p", "f1"): 0}, {}, {})
    inserts = pa.table({KEY_COL: ["a", "b", "c"], PART_COL: ["p"] * 3, FILE_ID_COL: pa.array([None] * 3, pa.string())})
    with pytest.raises(IndexError, match="insert number 4 is outside the planned ranges"):
        assign_buckets(inserts, 0, {}, {"p": (InsertRange(0, 4, 1),)}, {(0, "p"): 2})
    with pytest.raises(IndexError, match="insert number 0 is outside"):
        assign_buckets(inserts, 0, {}, {"p": ()}, {(0, "p"): 0})
    with pytest.raises(KeyError):
        assign_buckets(inserts, 0, {}, {"p": (InsertRange(0, 4, 1),)}, {})  # no offset for this Spark partition
    assert assign_buckets(inserts.slice(0, 0), 0, {}, {}, {}).to_pylist() == []
