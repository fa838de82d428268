"""Global indexes (GLOBAL_SIMPLE, GLOBAL_BLOOM): a key is found in any partition, and a record whose
partition changes is moved (hoodie.index.update.partition.path=true) or updated in place (false)."""

from __future__ import annotations

import random

import pytest

from engine import Table
from tests.support import hudi_rs
from tests.support.tables import data_rows, rows

pytestmark = pytest.mark.spark

SCHEMA = "id string, city string, v string, ts long"
GLOBAL = ["GLOBAL_SIMPLE", "GLOBAL_BLOOM"]


def make(spark, path, index) -> Table:
    return Table.create(spark, str(path), name="g", record_key="id", partition_fields="city",
                        precombine_field="ts", index=index)


def located(t: Table) -> list[tuple]:
    return [(r["id"], r["_hoodie_partition_path"], r["city"], r["v"]) for r in rows(t.read())]


@pytest.mark.parametrize("index", GLOBAL)
def test_partition_change_moves_the_record(spark, tmp_path, index):
    t = make(spark, tmp_path / "t", index)
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1)], SCHEMA))
    r = t.upsert(spark.createDataFrame([("a", "rome", "v2", 2)], SCHEMA))
    # deleted from paris, inserted into rome: one record, never two
    assert (r.deletes, r.inserts, r.updates) == (1, 1, 0)
    assert located(t) == [("a", "rome", "rome", "v2"), ("b", "rome", "rome", "v1")]
    assert rows(t.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))


@pytest.mark.parametrize("index", GLOBAL)
def test_partition_change_updates_in_place_when_configured(spark, tmp_path, index):
    t = make(spark, tmp_path / "t", index)
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1)], SCHEMA))
    r = t.upsert(spark.createDataFrame([("a", "rome", "v2", 2)], SCHEMA),
                 options={"hoodie.index.update.partition.path": "false"})
    assert (r.deletes, r.inserts, r.updates) == (0, 0, 1)
    # stays in the paris folder (partition path meta column), with the new values
    assert located(t) == [("a", "paris", "rome", "v2")]


@pytest.mark.parametrize("index", GLOBAL)
def test_global_delete_finds_the_key_in_any_partition(spark, tmp_path, index):
    t = make(spark, tmp_path / "t", index)
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1)], SCHEMA))
    r = t.delete(spark.createDataFrame([("a", "somewhere-else"), ("zz", "paris")], "id string, city string"))
    assert (r.deletes, r.absent_deletes) == (1, 1)
    assert located(t) == [("b", "rome", "rome", "v1")]


def test_non_global_index_inserts_into_the_new_partition(spark, tmp_path):
    t = make(spark, tmp_path / "t", "SIMPLE")
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1)], SCHEMA))
    r = t.upsert(spark.createDataFrame([("a", "rome", "v2", 2)], SCHEMA))
    assert (r.inserts, r.updates, r.deletes) == (1, 0, 0)
    assert located(t) == [("a", "paris", "paris", "v1"), ("a", "rome", "rome", "v2")]


def test_every_index_gives_the_same_snapshot(spark, tmp_path):
    """One random operation sequence, run under each index; global ones agree with each other and
    non-global ones with each other (they differ only where a key changes partition)."""
    rng = random.Random(11)
    steps = []
    for step in range(4):
        batch = [(f"k{rng.randrange(60):02d}", f"c{rng.randrange(3)}", f"v{step}", step) for _ in range(30)]
        victims = [(f"k{rng.randrange(60):02d}", f"c{rng.randrange(3)}") for _ in range(4)]
        steps.append((batch, victims))
    result = {}
    for index in ("SIMPLE", "BLOOM", "GLOBAL_SIMPLE", "GLOBAL_BLOOM"):
        t = make(spark, tmp_path / index, index)
        for batch, victims in steps:
            t.upsert(spark.createDataFrame(batch, SCHEMA))
            t.delete(spark.createDataFrame(victims, "id string, city string"))
        result[index] = data_rows(t.read())
        assert rows(t.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))
    assert result["SIMPLE"] == result["BLOOM"]
    assert result["GLOBAL_SIMPLE"] == result["GLOBAL_BLOOM"]
    ids = [r["id"] for r in result["GLOBAL_SIMPLE"]]
    assert len(ids) == len(set(ids))  # a global index never keeps a key twice


def test_partition_move_counts_no_dropped_duplicates(spark, tmp_path):
    from engine import Table

    t = Table.create(spark, str(tmp_path / "mv"), name="mv", record_key="id", partition_fields="city",
                     precombine_field="ts", index="GLOBAL_SIMPLE")
    schema = "id string, city string, v string, ts long"
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "paris", "v1", 1)], schema))
    r = t.upsert(spark.createDataFrame([("a", "rome", "v2", 2), ("c", "rome", "v2", 2)], schema))
    assert (r.input_records, r.duplicates_dropped, r.inserts, r.deletes, r.updates) == (2, 0, 2, 1, 0)
