"""Bad input gets a typed error and leaves the table byte-identical (files and timeline)."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import (
    InstantNotFoundError,
    InvalidInputError,
    SchemaMismatchError,
    StorageError,
    Table,
    TableNotFoundError,
)
from engine.errors import CorruptTableError
from tests.support.tables import rows, tree_bytes, tree_dirs

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"


@pytest.fixture
def table(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts")
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "rome", 1)], SCHEMA))
    return t


def assert_unchanged(table: Table, action, error: type[Exception], match: str):
    before, dirs = tree_bytes(table.path), tree_dirs(table.path)
    snapshot = rows(table.read())
    with pytest.raises(error, match=match):
        action()
    assert tree_bytes(table.path) == before
    assert tree_dirs(table.path) == dirs
    assert rows(table.read()) == snapshot


@pytest.mark.parametrize("operation, options", [
    ("upsert", {}), ("insert", {}), ("bulk_insert", {}), ("bulk_insert", {"hoodie.combine.before.insert": "true"}),
    ("bulk_insert", {"hoodie.bulkinsert.sort.mode": "NONE"}),
])
def test_null_record_key(spark, table, operation, options):
    bad = spark.createDataFrame([(3, "c", "oslo", 1), (None, "x", "new-city", 1), (None, "y", "rome", 1)], SCHEMA)
    assert_unchanged(table, lambda: getattr(table, operation)(bad, options=options), InvalidInputError,
                     r"2 input record\(s\) have a null or empty record key \(id\)")


def test_empty_string_record_key(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "s"), name="s", record_key="k", precombine_field="ts")
    t.upsert(spark.createDataFrame([("a", 1)], "k string, ts long"))
    assert_unchanged(t, lambda: t.upsert(spark.createDataFrame([("", 2)], "k string, ts long")),
                     InvalidInputError, "null or empty record key")


def test_missing_record_key_column(spark, table):
    bad = spark.createDataFrame([("c", "oslo", 1)], "name string, city string, ts long")
    assert_unchanged(table, lambda: table.upsert(bad), InvalidInputError, "no record key column 'id'")


def test_missing_partition_column_on_delete(spark, table):
    bad = spark.createDataFrame([(1,)], "id int")
    assert_unchanged(table, lambda: table.delete(bad), InvalidInputError, "no partition column 'city'")


def test_missing_precombine_column(spark, table):
    bad = spark.createDataFrame([(3, "c", "oslo")], "id int, name string, city string")
    assert_unchanged(table, lambda: table.upsert(bad), InvalidInputError, "no precombine column 'ts'")


def test_type_mismatch_with_table_schema(spark, table):
    bad = spark.createDataFrame([(3, "c", "oslo", "yesterday")], "id int, name string, city string, ts string")
    assert_unchanged(table, lambda: table.upsert(bad), SchemaMismatchError, "column 'ts' is string in the input but int64 in the table")


def test_missing_table_column(spark, table):
    bad = spark.createDataFrame([(3, "oslo", 1)], "id int, city string, ts long")
    assert_unchanged(table, lambda: table.upsert(bad), SchemaMismatchError, "lacks table column")


def test_not_a_dataframe(table):
    assert_unchanged(table, lambda: table.upsert([{"id": 1}]), InvalidInputError, "expected a Spark DataFrame")


def test_unknown_instants(table):
    assert_unchanged(table, lambda: table.read(as_of="20000101000000000"), InstantNotFoundError, "before the first instant")
    assert_unchanged(table, lambda: table.read(as_of="yesterday"), InvalidInputError, "instant time")
    assert_unchanged(table, lambda: table.commit_metadata("20991231000000000"), InstantNotFoundError, "not a completed instant")


def test_corrupt_base_file_is_a_typed_error(spark, table):
    """A base file that is not parquet: tagging fails with CorruptTableError, nothing is written."""
    (paris,) = list(Path(table.path, "paris").glob("*.parquet"))
    paris.write_bytes(b"not parquet at all")
    before, dirs = tree_bytes(table.path), tree_dirs(table.path)
    with pytest.raises(CorruptTableError, match="cannot read base file .*paris"):
        table.upsert(spark.createDataFrame([(1, "a2", "paris", 2)], SCHEMA))
    assert tree_bytes(table.path) == before and tree_dirs(table.path) == dirs


def test_failure_inside_write_tasks_rolls_the_instant_back(spark, table):
    """The key column reads fine (tagging passes) but merging fails in the task: the instant is undone."""
    (paris,) = list(Path(table.path, "paris").glob("*.parquet"))
    pq.write_table(pa.table({"_hoodie_record_key": ["1"], "ts": ["not-a-number"]}), paris)
    before, dirs = tree_bytes(table.path), tree_dirs(table.path)
    new_city = spark.createDataFrame([(1, "a2", "paris", 2), (7, "g", "lima", 2)], SCHEMA)
    with pytest.raises(StorageError, match=r"write of instant \d{17} failed and was rolled back: .*not-a-number") as err:
        table.upsert(new_city)
    assert tree_bytes(table.path) == before and tree_dirs(table.path) == dirs
    # all that is left is the failed write's record of itself (engine.table.failed_writes)
    instant = re.search(r"instant (\d{17})", str(err.value)).group(1)
    assert [p.name for p in Path(table.path, ".hoodie", ".failed_writes").iterdir()] == [instant]


def test_path_that_is_not_a_table(spark, tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "data.csv").write_text("a,b\n")
    before = tree_bytes(tmp_path / "plain")
    with pytest.raises(TableNotFoundError, match="no Hudi table at"):
        Table.open(spark, str(tmp_path / "plain"))
    with pytest.raises(TableNotFoundError):
        Table.open(spark, str(tmp_path / "missing"))
    assert tree_bytes(tmp_path / "plain") == before
