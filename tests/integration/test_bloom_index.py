"""BLOOM index: key-range pruning, bloom check, exact check — same results as SIMPLE."""

from __future__ import annotations

import random

import pytest

from engine import Table
from engine.index.key_lookup import candidates_in_range
from tests.support import hudi_rs
from tests.support.tables import data_rows, rows

pytestmark = pytest.mark.spark

SCHEMA = "id string, day string, v string, ts long"


def make(spark, path, index, **kw) -> Table:
    return Table.create(spark, str(path), name="b", record_key="id", partition_fields="day",
                        precombine_field="ts", index=index, **kw)


def test_candidates_in_range_is_a_binary_search():
    import numpy as np

    keys = np.array(["a", "c", "e", "g"], dtype=object)
    assert candidates_in_range(keys, "b", "f").tolist() == ["c", "e"]
    assert candidates_in_range(keys, "h", "z").tolist() == []
    assert candidates_in_range(keys, "a", "a").tolist() == ["a"]
    assert candidates_in_range(keys, None, None).tolist() == ["a", "c", "e", "g"]


def test_same_operations_same_snapshot_as_simple(spark, tmp_path):
    rng = random.Random(3)
    tables = {idx: make(spark, tmp_path / idx, idx) for idx in ("SIMPLE", "BLOOM")}
    for step in range(4):
        batch = [(f"k{rng.randrange(80):03d}", f"d{rng.randrange(3)}", f"v{step}", step) for _ in range(40)]
        victims = [(f"k{rng.randrange(80):03d}", f"d{rng.randrange(3)}") for _ in range(5)]
        for t in tables.values():
            t.upsert(spark.createDataFrame(batch, SCHEMA))
            t.delete(spark.createDataFrame(victims, "id string, day string"))
    simple, bloom = (data_rows(tables[i].read()) for i in ("SIMPLE", "BLOOM"))
    assert bloom == simple and len(bloom) > 0
    assert rows(tables["BLOOM"].read()) == hudi_rs.sort_rows(hudi_rs.snapshot(tables["BLOOM"].path))


def test_range_pruning_reads_only_the_file_that_can_hold_the_keys(spark, tmp_path):
    t = make(spark, tmp_path / "t", "BLOOM")
    small = {"hoodie.parquet.max.file.size": 40_000, "hoodie.copyonwrite.record.size.estimate": 100,
             "hoodie.index.bloom.num_entries": 1000, "hoodie.index.bloom.fpp": 0.001}
    # four bulk inserts: four file groups with disjoint key ranges in one partition
    for part in range(4):
        batch = [(f"k{i:05d}", "d0", "v", 0) for i in range(part * 400, (part + 1) * 400)]
        t.bulk_insert(spark.createDataFrame(batch, SCHEMA), options=small)
    assert len(t.file_system_view().groups_in("d0")) == 4
    ranges = sorted((r["_hoodie_file_name"], r["id"]) for r in rows(t.read()))
    first_file = ranges[0][0]
    keys_of_first = [k for f, k in ranges if f == first_file][:5]
    r = t.upsert(spark.createDataFrame([(k, "d0", "new", 1) for k in keys_of_first], SCHEMA), options=small)
    assert r.updates == 5 and r.inserts == 0
    assert r.index_stats == {"files": 4, "range_pruned": 3, "bloom_pruned": 0, "files_read": 1,
                             "candidates": 5, "false_positives": 0}
    meta = t.commit_metadata(r.instant).extra_metadata
    assert meta["engine.index.range_pruned"] == "3" and meta["engine.index.files_read"] == "1"


def test_false_positives_never_mis_tag(spark, tmp_path):
    """A filter far too small says "maybe" for almost every key; the exact check keeps tagging right."""
    t = make(spark, tmp_path / "t", "BLOOM")
    tiny = {"hoodie.index.bloom.num_entries": 1, "hoodie.index.bloom.fpp": 0.5}
    t.upsert(spark.createDataFrame([(f"a{i:03d}", "d0", "v", 0) for i in range(0, 200, 2)], SCHEMA), options=tiny)
    # odd keys interleave the stored even keys: inside the range, absent, bloom says maybe
    batch = [(f"a{i:03d}", "d0", "w", 1) for i in range(1, 41)]
    r = t.upsert(spark.createDataFrame(batch, SCHEMA), options=tiny)
    assert (r.updates, r.inserts) == (20, 20)
    assert r.index_stats["false_positives"] >= 15
    got = {x["id"]: x["v"] for x in rows(t.read())}
    assert len(got) == 120
    assert all(got[f"a{i:03d}"] == "w" for i in range(1, 41))
    assert all(got[f"a{i:03d}"] == "v" for i in range(42, 200, 2))
