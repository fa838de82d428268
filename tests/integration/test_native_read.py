"""Copy-on-write reads through Spark's own parquet reader (`engine.read.native`) return exactly
what the pyarrow scan returns, and the pyarrow scan is kept wherever they could differ."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame

from engine import Table
from engine.data.keys import ScanFile
from engine.data.scan import scan_files
from engine.read.native import native_scan
from engine.read.reader import table_schema_or_empty
from tests.support import hudi_rs
from tests.support.tables import rows

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"


def plan(df: DataFrame) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def native(df: DataFrame) -> bool:
    text = plan(df)
    assert ("FileScan parquet" in text) != ("MapInArrow" in text), text
    return "FileScan parquet" in text


def pyarrow_scan(spark, t: Table, as_of: str | None = None) -> list[dict]:
    """The same files through the pyarrow scan, for comparison."""
    timeline = t.meta.timeline()
    slices = t.meta.file_system_view(timeline, as_of=as_of).latest_slices()
    files = [ScanFile(s.base_file.path, s.partition, s.file_id) for s in slices]
    return rows(scan_files(spark, t.meta.storage, files, table_schema_or_empty(t.meta, timeline)))


def oracle(t: Table, as_of: str | None = None) -> list[dict]:
    return hudi_rs.sort_rows(hudi_rs.snapshot(t.path, as_of))


def test_snapshot_time_travel_and_incremental_read_natively(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city",
                     precombine_field="ts", hive_style=True)
    first = t.upsert(spark.createDataFrame([(1, "a", "007", 1), (2, "b", "paris", 1), (3, "c", "paris", 1)], SCHEMA))
    second = t.upsert(spark.createDataFrame([(2, "b2", "paris", 2), (4, "d", "007", 2)], SCHEMA))
    snap = t.read()
    assert native(snap)
    got = rows(snap)
    # the partition column comes from the files: "007" stays a string (no inference from city=007/)
    assert [(r["id"], r["name"], r["city"]) for r in got] == [(1, "a", "007"), (4, "d", "007"), (2, "b2", "paris"),
                                                             (3, "c", "paris")]
    assert got == pyarrow_scan(spark, t) == oracle(t)
    assert snap.schema.names == [f.name for f in table_schema_or_empty(t.meta, t.meta.timeline())]

    old = t.read(as_of=first.instant)
    assert native(old)
    assert rows(old) == pyarrow_scan(spark, t, first.instant) == oracle(t, first.instant)
    assert sorted(r["name"] for r in rows(old)) == ["a", "b", "c"]

    inc = t.read_incremental(first.instant)
    assert native(inc)
    assert sorted((r["id"], r["name"], r["_hoodie_commit_time"]) for r in rows(inc)) == [
        (2, "b2", second.instant), (4, "d", second.instant)]
    assert rows(t.read_incremental(first.instant, first.instant)) == []


def test_files_of_an_older_schema_keep_the_pyarrow_scan(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city",
                     precombine_field="ts")
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "rome", 1)], SCHEMA))
    assert native(t.read())
    # a new column: paris is rewritten under the new schema, rome's file still has the old one
    t.upsert(spark.createDataFrame([(3, "c", "paris", 2, dt.date(2024, 1, 2))], SCHEMA + ", day date"))
    snap = t.read()
    assert not native(snap)
    assert [(r["id"], r["day"]) for r in rows(snap)] == [(1, None), (3, dt.date(2024, 1, 2)), (2, None)]
    assert rows(snap) == oracle(t)
    # once every file is rewritten under the new schema, the native reader is used again
    t.upsert(spark.createDataFrame([(2, "b2", "rome", 3, dt.date(2024, 1, 3))], SCHEMA + ", day date"))
    snap = t.read()
    assert native(snap)
    assert [(r["id"], r["name"], r["day"]) for r in rows(snap)] == [
        (1, "a", None), (3, "c", dt.date(2024, 1, 2)), (2, "b2", dt.date(2024, 1, 3))]
    assert rows(snap) == oracle(t)


@pytest.mark.parametrize("city", ["a:b", "x[1]", "{y}", "q?r", "Zürich", "with space", "a+b"])
def test_paths_spark_would_glob_or_refuse_keep_the_pyarrow_scan(spark, tmp_path, city):
    t = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city",
                     precombine_field="ts")
    t.upsert(spark.createDataFrame([(1, "a", city, 1), (2, "b", "plain", 1)], SCHEMA))
    snap = t.read()
    assert not native(snap)
    assert [(r["id"], r["city"]) for r in rows(snap)] == sorted([(1, city), (2, "plain")],
                                                                key=lambda r: r[1])


def test_incremental_ranges_bounded_on_both_sides(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city",
                     precombine_field="ts")
    c1 = t.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "rome", 1)], SCHEMA)).instant
    c2 = t.upsert(spark.createDataFrame([(1, "a2", "paris", 2), (3, "c", "rome", 2)], SCHEMA)).instant
    c3 = t.upsert(spark.createDataFrame([(2, "b3", "rome", 3), (4, "d", "paris", 3)], SCHEMA)).instant
    middle = t.read_incremental(c1, c2)
    assert native(middle)
    # (c1, c2] as of c2: the records c2 wrote, not those c3 rewrote since
    assert sorted((r["id"], r["name"], r["_hoodie_commit_time"]) for r in rows(middle)) == [
        (1, "a2", c2), (3, "c", c2)]
    assert sorted((r["id"], r["name"]) for r in rows(t.read_incremental(c2, c3))) == [(2, "b3"), (4, "d")]
    assert sorted(r["id"] for r in rows(t.read_incremental(c1))) == [1, 2, 3, 4]


def test_the_schema_is_the_pyarrow_scans(spark, tmp_path):
    """A column of F.lit is non-nullable in the input but stored as a nullable (union) field, so
    both readers give the same DataFrame schema; a non-nullable field (Hudi-written tables can have
    them) or a type Spark reads differently keeps the pyarrow scan."""
    from pyspark.sql import functions as F

    t = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city",
                     precombine_field="ts")
    df = spark.createDataFrame([(1, "a", "paris", 1)], SCHEMA).withColumn("source", F.lit("cdc"))
    assert not df.schema["source"].nullable
    t.upsert(df)
    snap = t.read()
    assert native(snap)
    timeline = t.meta.timeline()
    files = [ScanFile(s.base_file.path, s.partition, s.file_id) for s in t.file_system_view().latest_slices()]
    schema = table_schema_or_empty(t.meta, timeline)
    assert snap.schema == scan_files(spark, t.meta.storage, files, schema).schema
    assert [(r["id"], r["source"]) for r in rows(snap)] == [(1, "cdc")]
    required = schema.set(schema.get_field_index("source"), pa.field("source", pa.string(), nullable=False))
    assert native_scan(spark, t.meta, timeline, files, required) is None
    for odd in (pa.timestamp("ns", tz="UTC"), pa.timestamp("us"), pa.list_(pa.timestamp("ns", tz="UTC"))):
        changed = schema.set(schema.get_field_index("source"), pa.field("source", odd))
        assert native_scan(spark, t.meta, timeline, files, changed) is None


def test_merge_on_read_base_files_read_natively_log_slices_not(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city",
                     precombine_field="ts", table_type="MERGE_ON_READ", index="RECORD")
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "paris", 1)], SCHEMA))
    assert native(t.read())  # base files only so far
    t.upsert(spark.createDataFrame([(2, "b2", "paris", 2)], SCHEMA))  # a log file
    snap, ro = t.read(), t.read(read_optimized=True)
    assert not native(snap) and native(ro)
    assert [(r["id"], r["name"]) for r in rows(snap)] == [(1, "a"), (2, "b2")]
    assert [(r["id"], r["name"]) for r in rows(ro)] == [(1, "a"), (2, "b")]
    assert rows(snap) == oracle(t)


def test_a_vanished_file_or_a_skipping_session_keeps_the_pyarrow_scan(spark, tmp_path):
    from pathlib import Path

    t = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city",
                     precombine_field="ts")
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "rome", 1)], SCHEMA))
    spark.conf.set("spark.sql.files.ignoreMissingFiles", "true")
    try:
        assert not native(t.read())  # the pyarrow scan does not skip a missing file silently
    finally:
        spark.conf.unset("spark.sql.files.ignoreMissingFiles")
    assert native(t.read())
    # a file cleaned between planning the read and building the DataFrame: Spark would fail there
    timeline = t.meta.timeline()
    schema = table_schema_or_empty(t.meta, timeline)
    files = [ScanFile(s.base_file.path, s.partition, s.file_id) for s in t.file_system_view().latest_slices()]
    assert native_scan(spark, t.meta, timeline, files, schema) is not None
    (rome,) = Path(t.path, "rome").glob("*.parquet")
    rome.unlink()
    assert native_scan(spark, t.meta, timeline, files, schema) is None
