"""Partition folders of typed, spaced and URL-encoded values (issue 32): named as Apache Hudi's
upsert path names them (`engine.keygen.values`, `PartitionPathEncodeUtils`), so that an upsert
of an existing key and a new key into an existing partition writes into that partition's folder,
never a new folder spelled differently; and Hudi-written tables with typed partitions keep their
folders through our upsert."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

from engine import Table
from tests.integration.test_hudi1x_fixtures import _changed_and_added
from tests.support import hudi1x, hudi_rs

pytestmark = pytest.mark.spark

SCHEMA = ("id string, s string, i int, b bigint, d date, dec decimal(10,2), t timestamp, flag boolean, "
          "note string, ts long")
AT = dt.datetime(2024, 1, 15, 10, 0, 0, 123456, tzinfo=dt.UTC)


def _folders(path: str) -> set[str]:
    root = Path(path)
    return {str(p.parent.relative_to(root)) for p in root.rglob(".hoodie_partition_metadata")
            if ".hoodie" not in p.relative_to(root).parts[:-1]}


def _rows(spark, path: str) -> list[tuple]:
    return sorted((r["id"], r["note"]) for r in Table.open(spark, path).read().collect())


def _frame(spark, rows, schema, source):
    """The rows as a Spark DataFrame (the Spark write paths) or as its pyarrow Table (the local
    write, which keys and partitions them with pyarrow: the same renderings)."""
    df = spark.createDataFrame(rows, schema)
    return df.toArrow() if source == "arrow" else df


@pytest.mark.parametrize(("url_encode", "source"), [(False, "spark"), (True, "spark"), (False, "arrow"), (True, "arrow")])
def test_typed_partition_values_keep_their_folder(spark, tmp_path, url_encode, source):
    path = str(tmp_path / "typed")
    parts = "s,i,b,d,dec,t,flag"
    t = Table.create(spark, path, name="typed", record_key="id", partition_fields=parts, precombine_field="ts",
                     hive_style=True, url_encode=url_encode)
    rows = [("k1", "a b:c/d", 7, 10_000_000_000, dt.date(2024, 1, 15), Decimal("12.30"), AT, True, "first", 1),
            ("k2", "a b:c/d", 7, 10_000_000_000, dt.date(2024, 1, 15), Decimal("12.30"), AT, True, "first", 1)]
    t.insert(_frame(spark, rows, SCHEMA, source))
    s = "a b%3Ac%2Fd" if url_encode else "a b:c/d"
    expected = f"s={s}/i=7/b=10000000000/d=2024-01-15/dec=12.30/t=1705312800123456/flag=true"
    if not url_encode:  # the slash in the value makes two folder levels, as in Hudi
        expected = "s=a b:c/d/i=7/b=10000000000/d=2024-01-15/dec=12.30/t=1705312800123456/flag=true"
    assert _folders(path) == {expected}
    assert {r["_hoodie_partition_path"] for r in t.read().collect()} == {expected}
    # an update of k1 and a new k3 in the same partition: the same folder, no other
    again = [("k1", "a b:c/d", 7, 10_000_000_000, dt.date(2024, 1, 15), Decimal("12.30"), AT, True, "second", 2),
             ("k3", "a b:c/d", 7, 10_000_000_000, dt.date(2024, 1, 15), Decimal("12.30"), AT, True, "new", 2)]
    result = t.upsert(_frame(spark, again, SCHEMA, source))
    assert (result.updates, result.inserts) == (1, 1)
    assert result.write_path == ("local" if source == "arrow" else "distributed")
    assert _folders(path) == {expected}
    assert _rows(spark, path) == [("k1", "second"), ("k2", "first"), ("k3", "new")]
    assert sorted((r["id"], r["note"]) for r in hudi_rs.snapshot(path)) == _rows(spark, path)
    # nulls and empty strings go to Hudi's default partition
    nulls = [("k4", "", None, 1, None, None, None, None, "nulls", 3)]
    t.upsert(_frame(spark, nulls, SCHEMA, source))
    default = "s=__HIVE_DEFAULT_PARTITION__/i=__HIVE_DEFAULT_PARTITION__/b=1/d=__HIVE_DEFAULT_PARTITION__/" \
              "dec=__HIVE_DEFAULT_PARTITION__/t=__HIVE_DEFAULT_PARTITION__/flag=__HIVE_DEFAULT_PARTITION__"
    assert _folders(path) == {expected, default}


@pytest.mark.parametrize("name", ["sample_table/cow/v6_complexkeygen_hivestyle", "sample_table/cow/v8_complexkeygen_hivestyle"])
def test_a_hudi_table_with_typed_partitions_keeps_its_folders(spark, tmp_path, name):
    """byteField=10/shortField=300 (byte and short partition columns, written by Apache Hudi): our
    upsert of a changed and a new record lands in those folders."""
    fx = hudi1x.fixture(name, tmp_path)
    folders = _folders(str(fx.table))
    table = Table.open(spark, str(fx.table))
    batch, _column, _original, _again = _changed_and_added(spark, table)
    table.upsert(batch)
    assert _folders(str(fx.table)) == folders


@pytest.mark.parametrize(("version", "source"), [(6, "spark"), (9, "spark"), (9, "arrow")])
def test_a_custom_key_generator_table_written_through_spark(spark, tmp_path, version, source):
    """CustomKeyGenerator: `country:SIMPLE,day:TIMESTAMP` (the TIMESTAMP part an `hh a` Joda pattern
    that Hudi prints, and we refused before), hive-style; version 9 keeps the types in
    hoodie.properties as Apache Hudi 1.x does, version 6 beside the names."""
    import javaproperties

    path = str(tmp_path / "custom")
    options = {"hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
               "hoodie.keygen.timebased.output.dateformat": "yyyy-MM-dd hh a",
               "hoodie.keygen.timebased.output.timezone": "UTC"}
    t = Table.create(spark, path, name="custom", record_key="id", partition_fields="country:SIMPLE,day:TIMESTAMP",
                     precombine_field="ts", key_generator="CUSTOM", key_generator_options=options,
                     hive_style=True, table_version=version)
    props = javaproperties.loads(Path(path, ".hoodie", "hoodie.properties").read_text())
    if version == 9:
        assert props["hoodie.table.partition.fields"] == "country:SIMPLE,day:TIMESTAMP"
        assert props["hoodie.table.keygenerator.type"] == "CUSTOM"
    else:
        assert props["hoodie.table.partition.fields"] == "country,day"
        assert props["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.CustomKeyGenerator"
    schema = "id string, country string, day long, ts long"
    t.upsert(_frame(spark, [("a", "fr", 1705311000123, 1), ("b", "fr", 1705348800000, 1)], schema, source))
    assert _folders(path) == {"country=fr/day=2024-01-15 09 AM", "country=fr/day=2024-01-15 08 PM"}
    result = t.upsert(_frame(spark, [("a", "fr", 1705311000123, 2), ("c", "de", 1705311000999, 2)], schema, source))
    assert (result.updates, result.inserts) == (1, 1)
    assert _folders(path) == {"country=fr/day=2024-01-15 09 AM", "country=fr/day=2024-01-15 08 PM",
                              "country=de/day=2024-01-15 09 AM"}
    keys = sorted((r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in t.read().collect())
    assert keys == [("a", "country=fr/day=2024-01-15 09 AM"), ("b", "country=fr/day=2024-01-15 08 PM"),
                    ("c", "country=de/day=2024-01-15 09 AM")]
    if version == 6:  # hudi-rs 0.5 takes `country\:SIMPLE` (Java's escaping, as Apache Hudi 1.x writes it) for a column
        assert sorted((r["_hoodie_record_key"], r["_hoodie_partition_path"]) for r in hudi_rs.snapshot(path)) == keys
