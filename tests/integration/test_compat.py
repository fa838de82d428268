"""Compatibility with Apache Hudi: hudi-rs (the reference reader) agrees with us, both ways.

- Our reader returns exactly hudi-rs's rows for every COW sample written by Apache Hudi on Spark.
- After we upsert into a copy of a sample, hudi-rs reads it and sees the change.
- Over a random sequence of our commits, hudi-rs agrees on every snapshot, every time-travel
  instant and incremental ranges.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import functions as F

from engine import Table
from engine.constants import META_COLUMNS
from tests.support import hudi_rs
from tests.support.samples import list_samples, sample_table
from tests.support.tables import rows

pytestmark = pytest.mark.spark

COW_SAMPLES = [
    "cow_v6_simplekeygen_nonhivestyle",
    "cow_v6_complexkeygen_hivestyle",
    "cow_v6_nonpartitioned",
    "cow_v6_empty",
]


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([("_hoodie_partition_path", "ascending"), ("_hoodie_record_key", "ascending")])


def ours_vs_oracle(table: Table) -> tuple[pa.Table, pa.Table | None]:
    ours = _sorted(table.read().toArrow())
    theirs = hudi_rs.arrow_snapshot(table.path)
    return ours, (_sorted(theirs).cast(ours.schema) if theirs is not None else None)


def test_sample_list_is_complete():
    for name in COW_SAMPLES:
        assert name in list_samples() or not list_samples()


@pytest.fixture
def sample(tmp_path):
    def get(name: str) -> Path:
        root = sample_table(name, tmp_path)
        return root

    return get


@pytest.mark.parametrize("name", COW_SAMPLES)
def test_our_reader_matches_hudi_rs_on_samples(spark, sample, name):
    path = sample(name)
    table = Table.open(spark, str(path))
    ours, theirs = ours_vs_oracle(table)
    if theirs is None:
        assert ours.num_rows == 0 and name == "cow_v6_empty"
        return
    assert ours.num_rows == theirs.num_rows > 0
    assert ours.equals(theirs), "our snapshot differs from hudi-rs"


@pytest.mark.parametrize("name", [n for n in COW_SAMPLES if n != "cow_v6_empty"])
def test_upsert_into_a_copy_of_a_sample(spark, sample, name, tmp_path):
    src = sample(name)
    path = tmp_path / f"copy-{name}"
    shutil.copytree(src, path)
    table = Table.open(spark, str(path))
    before = _sorted(table.read().toArrow())
    first_key = before.column("_hoodie_record_key")[0].as_py()
    data = table.read().drop(*META_COLUMNS)
    keys = table.config.record_key_fields

    # update the first record (bigger precombine value) and insert a brand-new one
    first = before.slice(0, 1).drop_columns(list(META_COLUMNS))
    updated = data.where(" AND ".join(f"`{k}` = {first.column(k)[0].as_py()!r}" for k in keys))
    updated = updated.withColumn("intField", F.lit(424242)).withColumn("longField", F.col("longField") + 1)
    fresh = updated.withColumn("id", F.lit(999)).withColumn("intField", F.lit(777))
    result = table.upsert(updated.unionByName(fresh))
    assert (result.updates, result.inserts) == (1, 1)

    ours, theirs = ours_vs_oracle(table)
    assert theirs is not None and ours.equals(theirs)
    assert theirs.num_rows == before.num_rows + 1
    changed = theirs.filter(pc.equal(theirs.column("_hoodie_record_key"), first_key)).to_pylist()
    assert [(r["intField"], r["_hoodie_commit_time"]) for r in changed] == [(424242, result.instant)]
    assert theirs.filter(pc.equal(theirs.column("id"), 999)).column("intField").to_pylist() == [777]
    # every other record is unchanged, meta columns included (except the file name of rewritten groups)
    untouched_before = before.filter(pc.not_equal(before.column("_hoodie_record_key"), first_key))
    untouched_after = ours.filter(
        pc.and_(pc.not_equal(ours.column("_hoodie_record_key"), first_key), pc.not_equal(ours.column("id"), 999))
    )
    cols = [c for c in before.column_names if c != "_hoodie_file_name"]
    assert untouched_after.select(cols).equals(untouched_before.select(cols))


def test_random_commit_sequence_agrees_with_hudi_rs(spark, tmp_path):
    rng = random.Random(7)
    table = Table.create(spark, str(tmp_path / "seq"), name="seq", record_key="id", partition_fields="day",
                         precombine_field="ts")
    schema = "id int, day string, v string, ts long"
    live: dict[int, tuple] = {}
    instants = []
    for step in range(6):
        op = ["upsert", "upsert", "delete", "upsert", "insert", "upsert"][step]
        if op == "delete":
            victims = rng.sample(sorted(live), 5)
            res = table.delete(spark.createDataFrame([(k, live[k][1]) for k in victims], "id int, day string"))
            for k in victims:
                del live[k]
        else:
            batch = []
            for _ in range(30):
                k = rng.randrange(60) if op == "upsert" else 1000 + step * 100 + len(batch)
                day = live[k][1] if k in live else f"d{k % 4}"
                batch.append((k, day, f"v{step}-{k}", step))
            res = getattr(table, op)(spark.createDataFrame(batch, schema))
            for row in batch:
                live[row[0]] = row
        instants.append(res.instant)
        ours = rows(table.read())
        assert [(r["id"], r["day"], r["v"], r["ts"]) for r in ours] == sorted(
            live.values(), key=lambda r: (r[1], str(r[0]))
        )
    for inst in instants:
        assert rows(table.read(as_of=inst)) == hudi_rs.sort_rows(hudi_rs.snapshot(table.path, inst))
    for start, end in zip(instants, instants[1:], strict=False):
        assert rows(table.read_incremental(start, end)) == hudi_rs.sort_rows(hudi_rs.incremental(table.path, start, end))
    assert rows(table.read_incremental(instants[0])) == hudi_rs.sort_rows(hudi_rs.incremental(table.path, instants[0]))


MOR_SAMPLES = ["mor_parquet_v6_simplekeygen_nonhivestyle", "mor_parquet_v6_nonpartitioned", "trips_mor_avro_v6_trips_8i1u"]


@pytest.mark.parametrize("name", MOR_SAMPLES)
def test_merge_on_read_samples_read_as_hudi_rs_reads_them(spark, sample, name):
    """Snapshot (base files merged with Parquet or Avro log blocks), read-optimized, every
    time-travel instant and every incremental range of Apache Hudi's MOR samples."""
    table = Table.open(spark, str(sample(name)))
    assert any(s.log_files for s in table.file_system_view().latest_slices())
    ours, theirs = ours_vs_oracle(table)
    assert theirs is not None and ours.num_rows == theirs.num_rows > 0
    assert ours.equals(theirs)
    ro = hudi_rs.arrow_read_optimized(table.path)
    assert _sorted(table.read(read_optimized=True).toArrow()).equals(_sorted(ro).cast(ours.schema))
    instants = [i.time for i in table.timeline().completed_writes.instants]
    for inst in instants:  # (Arrow tables: these samples hold maps and zoned timestamps)
        theirs = hudi_rs.arrow_snapshot(table.path, inst)
        assert theirs is not None
        assert _sorted(table.read(as_of=inst).toArrow()).equals(_sorted(theirs).cast(ours.schema)), inst
    for start in instants[:-1]:
        theirs = hudi_rs.arrow_incremental(table.path, start)
        assert theirs is not None
        assert _sorted(table.read_incremental(start).toArrow()).equals(_sorted(theirs).cast(ours.schema)), start


def test_upsert_and_compact_a_copy_of_a_hudi_written_mor_table(spark, sample, tmp_path):
    """Our deltacommits append to the log files Apache Hudi wrote, and our compaction of its
    slices reads as hudi-rs reads the table."""
    from engine.services.maintenance import Maintenance

    name = "trips_mor_avro_v6_trips_8i1u"
    path = tmp_path / "copy"
    shutil.copytree(sample(name), path)
    table = Table.open(spark, str(path))
    before = table.read().toArrow()
    data = table.read().drop(*META_COLUMNS)
    order = table.config.precombine_field
    assert order is not None
    first_key = sorted(before.column("_hoodie_record_key").to_pylist())[0]
    key_field = table.config.record_key_fields[0]
    updated = data.where(F.col(key_field) == first_key).withColumn(order, F.col(order) + 1000)
    result = table.upsert(updated, options={"hoodie.clean.automatic": "false"})
    assert (result.updates, result.inserts) == (1, 0)
    ours, theirs = ours_vs_oracle(table)
    assert theirs is not None and ours.equals(theirs)
    changed = theirs.filter(pc.equal(theirs.column("_hoodie_record_key"), first_key))
    assert changed.column("_hoodie_commit_time").to_pylist() == [result.instant]
    Maintenance(table.meta, {"hoodie.clean.automatic": "false"}).run_compaction()
    compacted, theirs = ours_vs_oracle(table)
    cols = [c for c in compacted.column_names if c != "_hoodie_file_name"]
    assert theirs is not None and compacted.equals(theirs)
    assert compacted.select(cols).equals(ours.select(cols))
