"""Writing tables whose key generator is Apache Hudi's `TimestampBasedKeyGenerator`.

The fixtures are tables Apache Hudi wrote (hudi-rs's test data, tests/support/hudi1x.py): an
update stays in the record's existing partition folder, a new record lands in exactly the folder
Hudi would name for its time, hudi-rs reads the result, and a rollback restores hudi-rs's first
answer. A version 6 table created here with the key generator writes the same folders.
"""

from __future__ import annotations

import json
from pathlib import Path

import javaproperties
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from engine import Table
from engine.errors import InvalidConfigError, InvalidInputError
from tests.support import hudi1x, hudi_rs

pytestmark = pytest.mark.spark

# fixture -> (partition field, a new record's value, the folder Hudi names for it)
FIXTURES = {
    "sample_table/cow/v9_timebasedkeygen_epochmillis": ("ts_millis", 1718454896000, "2024/06/15/12"),
    "sample_table/cow/v9_timebasedkeygen_unixtimestamp": ("ts_epoch", 1718454896, "2024/06/15"),
    "sample_table/cow/v9_timebasedkeygen_nonhivestyle": ("ts_str", "2024-06-15T12:34:56.000Z", "2024/06/15/12"),
    "sample_table/mor/avro/v9_timebasedkeygen_nonhivestyle": ("ts_str", "2024-06-15T23:34:56.000Z", "2024/06/15/23"),
    "sample_table/cow/v6_timebasedkeygen_nonhivestyle": ("ts_str", "2024-06-15T12:34:56.000Z", "2024/06/15/12"),
}


def _oracle(path: Path) -> list[dict]:
    return sorted(hudi_rs.snapshot(str(path)), key=lambda r: json.dumps(
        {k: v for k, v in r.items() if not k.startswith("_hoodie_")}, sort_keys=True, default=str))


def _data_files(folder: Path, instant: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if instant in p.name and not p.name.endswith(".crc"))


@pytest.mark.parametrize("name", list(FIXTURES))
def test_upsert_keeps_updates_in_place_and_puts_new_records_in_their_time_folder(spark, name, tmp_path):
    field, value, folder = FIXTURES[name]
    fx = hudi1x.fixture(name, tmp_path)
    table = Table.open(spark, str(fx.table))
    key = table.meta.config.record_key_fields[0]
    before = _oracle(fx.table)
    # a key with one row (some fixtures hold a key twice: Apache Hudi inserted it twice)
    counts = {k: sum(1 for r in before if r[key] == k) for k in {r[key] for r in before}}
    first_key = min(k for k, n in counts.items() if n == 1)
    (old_partition,) = [r["_hoodie_partition_path"] for r in before if r[key] == first_key]
    data = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")])
    first = data.filter(F.col(key) == first_key)
    changed = first.withColumn("currency" if "currency" in data.columns else "name", F.lit("changed by hoodie"))
    new_key = "NEW-KEY-1" if data.schema[key].dataType.typeName() == "string" else 1_000_001
    added = first.withColumn(key, F.lit(new_key).cast(data.schema[key].dataType)).withColumn(
        field, F.lit(value).cast(data.schema[field].dataType))

    # Apache Hudi 0.x kept the type in the writer's options only, not in hoodie.properties
    options = {"hoodie.keygen.timebased.timestamp.type": "DATE_STRING"} if "/v6_" in name else None
    result = table.upsert(changed.unionByName(added), options)

    assert result.inserts == 1 and result.updates == 1, result
    assert sorted(result.partitions) == sorted({old_partition, folder})
    assert _data_files(fx.table / folder, result.instant)  # the new record's folder, exactly as Hudi names it
    assert _data_files(fx.table / old_partition, result.instant)  # the update stayed in its folder
    after = _oracle(fx.table)
    assert len(after) == len(before) + 1
    new = [r for r in after if r[key] == new_key]
    assert len(new) == 1 and new[0]["_hoodie_partition_path"] == folder
    assert str(new[0][field]) == str(value)  # hudi-rs types a timestamp partition field as a string
    updated = [r for r in after if r[key] == first_key and "changed by hoodie" in (r.get("currency"), r.get("name"))]
    assert len(updated) == 1 and updated[0]["_hoodie_partition_path"] == old_partition
    ours = table.read().filter(F.col(key) == new_key).select("_hoodie_partition_path", field).collect()
    assert [tuple(r) for r in ours] == [(folder, str(value))]  # read as Apache Hudi reads it: a string

    table.maintenance.rollback(result.instant)
    assert _oracle(fx.table) == before


def test_delete_finds_the_record_through_its_time_partition(spark, tmp_path):
    fx = hudi1x.fixture("sample_table/cow/v9_timebasedkeygen_unixtimestamp", tmp_path)
    table = Table.open(spark, str(fx.table))
    before = {r["txn_id"] for r in hudi_rs.snapshot(str(fx.table))}
    gone = table.read().filter(F.col("txn_id") == "TXN-002").select("txn_id", "ts_epoch", "txn_ts")
    result = table.delete(gone)
    assert result.deletes == 1 and result.partitions == ("2024/01/15",)
    assert {r["txn_id"] for r in hudi_rs.snapshot(str(fx.table))} == before - {"TXN-002"}


def test_an_unparseable_date_string_fails_the_write_and_leaves_the_table(spark, tmp_path):
    from tests.support.tables import tree_bytes

    fx = hudi1x.fixture("sample_table/cow/v6_timebasedkeygen_nonhivestyle", tmp_path)
    table = Table.open(spark, str(fx.table))
    files = tree_bytes(fx.table)
    bad = table.read().limit(1).drop(*[c for c in table.read().columns if c.startswith("_hoodie_")]).withColumn(
        "ts_str", F.lit("15/06/2024"))
    with pytest.raises(InvalidConfigError, match="needs hoodie.keygen.timebased.timestamp.type"):
        table.upsert(bad)  # version 6 keeps no timestamp type: the writer must name it
    with pytest.raises(InvalidConfigError, match="differs from the table's"):
        table.upsert(bad, {"hoodie.keygen.timebased.timestamp.type": "DATE_STRING",
                           "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd"})
    assert tree_bytes(fx.table) == files
    with pytest.raises(InvalidInputError, match="'15/06/2024' matches none of the input date formats"):
        table.upsert(bad, {"hoodie.keygen.timebased.timestamp.type": "DATE_STRING"})
    assert {k: v for k, v in tree_bytes(fx.table).items() if "/.hoodie/" not in f"/{k}"} == {
        k: v for k, v in files.items() if "/.hoodie/" not in f"/{k}"}


SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("amount", pa.int32())])


def test_a_version_6_table_created_with_the_timestamp_key_generator(spark, tmp_path):
    path = tmp_path / "events"
    table = Table.create(
        spark, str(path), name="events", record_key="id", partition_fields="ts", precombine_field="amount",
        hive_style=True, schema=SCHEMA, key_generator="TIMESTAMP",
        key_generator_options={"hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
                               "hoodie.keygen.timebased.output.dateformat": "yyyy-MM-dd",
                               "hoodie.keygen.timebased.output.timezone": "Asia/Tokyo"},
    )
    props = javaproperties.loads((path / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
    assert props["hoodie.keygen.timebased.timestamp.type"] == "EPOCHMILLISECONDS"
    assert props["hoodie.keygen.timebased.output.dateformat"] == "yyyy-MM-dd"
    assert props["hoodie.keygen.timebased.output.timezone"] == "Asia/Tokyo"
    assert props["hoodie.table.version"] == "6"
    rows = [("a", 1705311000000, 1), ("b", 1705348800000, 2), ("c", None, 3)]  # 15 Jan 18:30 / 16 Jan 05:00 Tokyo
    table.insert(spark.createDataFrame(rows, "id string, ts long, amount int"))

    folders = sorted(p.name for p in path.iterdir() if not p.name.startswith("."))
    assert folders == ["ts=1970-01-01", "ts=2024-01-15", "ts=2024-01-16"]
    for folder, key in (("ts=1970-01-01", "c"), ("ts=2024-01-15", "a"), ("ts=2024-01-16", "b")):
        (file,) = [p for p in (path / folder).iterdir() if p.suffix == ".parquet"]
        stored = pq.read_table(file, columns=["_hoodie_record_key", "_hoodie_partition_path", "id"]).to_pylist()
        assert stored == [{"_hoodie_record_key": key, "_hoodie_partition_path": folder, "id": key}]
    expected = [("a", 1705311000000, 1), ("b", 1705348800000, 2), ("c", None, 3)]
    assert sorted(tuple(r) for r in table.read().select("id", "ts", "amount").collect()) == expected
    assert sorted((r["id"], r["ts"], r["amount"]) for r in hudi_rs.snapshot(str(path))) == expected


def test_creation_checks_the_timestamp_options(spark, tmp_path):
    # every Joda letter with a fixed rendering is printed (`hh` since issue 32); a letter Joda does not
    # know, or a zone name, is refused naming it, before the table exists
    with pytest.raises(InvalidConfigError, match="'Q' \\('QQ'\\) is not a Joda-Time pattern letter"):
        Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="ts",
                     key_generator="TIMESTAMP",
                     key_generator_options={"hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
                                            "hoodie.keygen.timebased.output.dateformat": "yyyy/QQ/dd/hh"})
    assert not (tmp_path / "t").exists()
    with pytest.raises(InvalidConfigError, match="only hoodie.keygen.timebased"):
        Table.create(spark, str(tmp_path / "u"), name="u", record_key="id", partition_fields="ts",
                     key_generator="TIMESTAMP", key_generator_options={"hoodie.index.type": "SIMPLE"})
    assert not (tmp_path / "t").exists() and not (tmp_path / "u").exists()
