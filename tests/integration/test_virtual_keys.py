"""Tables without meta fields (`hoodie.populate.meta.fields=false`, Apache Hudi's virtual keys).

Apache Hudi still writes the five `_hoodie_*` columns into such files, null except
`_hoodie_file_name`, and no bloom filter or key range in the footer (checked on its own files
below). We write them the same way: copy-on-write, index SIMPLE or GLOBAL_SIMPLE, keys computed
from the key fields wherever a file is read. Merge-on-read writes, incremental reads (no commit
time per record) and key lookups are refused before anything is touched.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from engine import Table
from engine.errors import InvalidConfigError, UnsupportedFeatureError
from tests.support import hudi1x, hudi_rs
from tests.support.tables import tree_bytes

pytestmark = pytest.mark.spark

COW = ["sample_table/cow/v6_simplekeygen_hivestyle_no_metafields", "sample_table/cow/v8_simplekeygen_hivestyle_no_metafields"]
MOR = "sample_table/mor/parquet/v6_simplekeygen_hivestyle_no_metafields"
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path"]


def _as_hudi_writes_them(path: Path) -> None:
    """Every base file: the meta columns present and null, the file name filled, no key footer."""
    files = sorted(path.rglob("*.parquet"))
    assert files
    for f in files:
        stored = pq.read_table(f, columns=[*META, "_hoodie_file_name"]).to_pylist()
        assert all(r[c] is None for r in stored for c in META), f
        assert {r["_hoodie_file_name"] for r in stored} <= {f.name}, f
        footer = pq.ParquetFile(f).metadata.metadata or {}
        assert not [k for k in footer if b"hoodie" in k or b"bloom" in k], (f, list(footer))


def _rows(path: Path) -> list[tuple]:
    return sorted((r["id"], r["name"], r["byteField"]) for r in hudi_rs.snapshot(str(path)))


@pytest.mark.parametrize("name", COW)
def test_upsert_delete_and_rollback_of_a_table_without_meta_fields(spark, name, tmp_path):
    fx = hudi1x.fixture(name, tmp_path)
    _as_hudi_writes_them(fx.table)
    table = Table.open(spark, str(fx.table))
    before = _rows(fx.table)
    assert before == [(1, "Alice", 10), (2, "Bob", 20), (3, "Carol", 10), (4, "Diana", 30)]
    data = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")])
    changed = data.filter(F.col("id") == 3).withColumn("name", F.lit("Caroline"))
    added = data.filter(F.col("id") == 4).withColumn("id", F.lit(5)).withColumn("name", F.lit("Eve"))

    result = table.upsert(changed.unionByName(added))  # no index named: SIMPLE (the files carry no bloom filter)

    assert (result.updates, result.inserts, result.partitions) == (1, 1, ("byteField=10", "byteField=30"))
    assert _rows(fx.table) == [(1, "Alice", 10), (2, "Bob", 20), (3, "Caroline", 10), (4, "Diana", 30), (5, "Eve", 30)]
    _as_hudi_writes_them(fx.table)
    ours = sorted((r["id"], r["name"], r["byteField"]) for r in table.read().collect())
    assert ours == _rows(fx.table)
    (written,) = [p for p in (fx.table / "byteField=10").glob(f"*_{result.instant}.parquet")]
    assert sorted(pq.read_table(written, columns=["id", "name"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "Alice"}, {"id": 3, "name": "Caroline"}]  # the update replaced Carol in place

    gone = table.delete(data.filter(F.col("id") == 2).select("id", "byteField"))
    assert gone.deletes == 1 and [r[0] for r in _rows(fx.table)] == [1, 3, 4, 5]
    table.maintenance.rollback(gone.instant)
    table.maintenance.rollback(result.instant)
    assert _rows(fx.table) == before

    files = tree_bytes(fx.table)
    with pytest.raises(InvalidConfigError, match="index BLOOM cannot serve a table without meta fields"):
        table.upsert(changed, {"hoodie.index.type": "BLOOM"})
    with pytest.raises(UnsupportedFeatureError, match="incremental reads are not supported on tables without meta"):
        table.read_incremental("000")
    with pytest.raises(UnsupportedFeatureError, match="key lookups read _hoodie_record_key"):
        table.read_keys(["3"])
    assert tree_bytes(fx.table) == files


def test_merge_on_read_without_meta_fields_is_read_and_not_written(spark, tmp_path):
    fx = hudi1x.fixture(MOR, tmp_path)
    _as_hudi_writes_them(fx.table)
    table = Table.open(spark, str(fx.table))
    ours = sorted((r["id"], r["name"], r["byteField"]) for r in table.read().collect())
    assert ours == _rows(fx.table) and len(ours) == 4
    files = tree_bytes(fx.table)
    batch = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")]).limit(1)
    with pytest.raises(InvalidConfigError, match=r"merge-on-read tables without meta fields"):
        table.upsert(batch)
    assert tree_bytes(fx.table) == files


SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.string()), ("ts", pa.int64())])


def test_a_version_6_table_created_without_meta_fields(spark, tmp_path):
    path = tmp_path / "people"
    table = Table.create(spark, str(path), name="people", record_key="id", partition_fields="day",
                         precombine_field="ts", index="SIMPLE", hive_style=True, schema=SCHEMA,
                         populate_meta_fields=False)
    assert "hoodie.populate.meta.fields=false" in (path / ".hoodie" / "hoodie.properties").read_text()
    rows = [(1, "a", "2024-01-15", 1), (2, "b", "2024-01-16", 1)]
    table.upsert(spark.createDataFrame(rows, "id long, name string, day string, ts long"))
    second = table.upsert(spark.createDataFrame([(1, "A", "2024-01-15", 2), (3, "c", "2024-01-15", 1)],
                                                "id long, name string, day string, ts long"))
    assert (second.updates, second.inserts) == (1, 1)

    assert sorted(p.name for p in path.iterdir() if not p.name.startswith(".")) == ["day=2024-01-15", "day=2024-01-16"]
    _as_hudi_writes_them(path)
    (latest,) = (path / "day=2024-01-15").glob(f"*_{second.instant}.parquet")
    assert pq.read_schema(latest).names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                                 "_hoodie_partition_path", "_hoodie_file_name"]
    expected = [(1, "A", "2024-01-15"), (2, "b", "2024-01-16"), (3, "c", "2024-01-15")]
    assert sorted((r["id"], r["name"], r["day"]) for r in table.read().collect()) == expected
    assert sorted((r["id"], r["name"], r["day"]) for r in hudi_rs.snapshot(str(path))) == expected
    with pytest.raises(InvalidConfigError, match="needs index SIMPLE or GLOBAL_SIMPLE"):
        Table.create(spark, str(tmp_path / "other"), name="other", record_key="id", populate_meta_fields=False)
