"""Partition folders of typed, spaced and URL-encoded values (issue 32): named as Apache Hudi's
upsert path names them (`engine.write.key_values`, `PartitionPathEncodeUtils`), so that an upsert
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


@pytest.mark.parametrize("url_encode", [False, True])
def test_typed_partition_values_keep_their_folder(spark, tmp_path, url_encode):
    path = str(tmp_path / "typed")
    parts = "s,i,b,d,dec,t,flag"
    t = Table.create(spark, path, name="typed", record_key="id", partition_fields=parts, precombine_field="ts",
                     hive_style=True, url_encode=url_encode)
    rows = [("k1", "a b:c/d", 7, 10_000_000_000, dt.date(2024, 1, 15), Decimal("12.30"), AT, True, "first", 1),
            ("k2", "a b:c/d", 7, 10_000_000_000, dt.date(2024, 1, 15), Decimal("12.30"), AT, True, "first", 1)]
    t.insert(spark.createDataFrame(rows, SCHEMA))
    s = "a b%3Ac%2Fd" if url_encode else "a b:c/d"
    expected = f"s={s}/i=7/b=10000000000/d=2024-01-15/dec=12.30/t=1705312800123456/flag=true"
    if not url_encode:  # the slash in the value makes two folder levels, as in Hudi
        expected = "s=a b:c/d/i=7/b=10000000000/d=2024-01-15/dec=12.30/t=1705312800123456/flag=true"
    assert _folders(path) == {expected}
    assert {r["_hoodie_partition_path"] for r in t.read().collect()} == {expected}
    # an update of k1 and a new k3 in the same partition: the same folder, no other
    again = [("k1", "a b:c/d", 7, 10_000_000_000, dt.date(2024, 1, 15), Decimal("12.30"), AT, True, "second", 2),
             ("k3", "a b:c/d", 7, 10_000_000_000, dt.date(2024, 1, 15), Decimal("12.30"), AT, True, "new", 2)]
    result = t.upsert(spark.createDataFrame(again, SCHEMA))
    assert (result.updates, result.inserts) == (1, 1)
    assert _folders(path) == {expected}
    assert _rows(spark, path) == [("k1", "second"), ("k2", "first"), ("k3", "new")]
    assert sorted((r["id"], r["note"]) for r in hudi_rs.snapshot(path)) == _rows(spark, path)
    # nulls and empty strings go to Hudi's default partition
    nulls = [("k4", "", None, 1, None, None, None, None, "nulls", 3)]
    t.upsert(spark.createDataFrame(nulls, SCHEMA))
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
