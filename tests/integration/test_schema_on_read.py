"""Schema on read: renaming, dropping, moving and widening columns with `Table.alter` (one
`alter_schema` commit, no file rewritten, Apache Hudi's internal schema in the commit metadata and
`.hoodie/.schema/`), then writes, compaction, time travel and incremental reads across it. After
every step ours (the Table API and `format("hudi")`) == a model; hudi-rs, which matches columns by
name, is checked for what it returns."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.errors import SchemaChangeError, SchemaMismatchError, UnsupportedFeatureError
from engine.schema.changes import Move
from tests.integration.test_schema_evolution import by_id, log_files, oracle, ours
from tests.support.tables import tree_bytes, tree_dirs

pytestmark = pytest.mark.spark

BASE = "id string, city string, ts long, fare double, tip double, note string"
NEW = "id string, note string, city string, ts long, amount double"


def check(spark, t: Table, model: dict[str, dict]) -> None:
    assert ours(t.read()) == model
    assert ours(spark.read.format("hudi").load(t.path)) == model


def schema_files(t: Table) -> list[str]:
    from pathlib import Path

    return sorted(p.name for p in (Path(t.path) / ".hoodie" / ".schema").iterdir())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_rename_drop_move_then_writes_read_by_column_id(spark, tmp_path, table_type):
    t = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city",
                     precombine_field="ts", table_type=table_type)
    c1 = t.upsert(spark.createDataFrame(
        [("1", "paris", 1, 10.0, 1.0, "n1"), ("2", "rome", 1, 20.0, 2.0, "n2")], BASE)).instant
    old = {"1": {"id": "1", "city": "paris", "ts": 1, "fare": 10.0, "tip": 1.0, "note": "n1"},
           "2": {"id": "2", "city": "rome", "ts": 1, "fare": 20.0, "tip": 2.0, "note": "n2"}}
    assert ours(t.read()) == old
    files_before = sorted(p for p in tree_bytes(t.path) if not p.startswith(".hoodie"))

    res = t.alter(Move("note", after="id"), rename={"fare": "amount"}, drop=["tip"])
    assert res.changes == ("move note after id", "rename fare to amount", "drop tip")
    assert t.schema().names == ["id", "note", "city", "ts", "amount"]
    # one alter_schema commit (commit on COW, deltacommit on MOR), no data file written or changed
    inst = t.timeline().get(res.instant)
    assert inst.is_completed and inst.action.value == ("commit" if table_type == "COPY_ON_WRITE" else "deltacommit")
    meta = t.commit_metadata(res.instant)
    assert meta.operation_type == "ALTER_SCHEMA" and meta.write_stats == []
    latest = json.loads(meta.extra_metadata["latestSchema"])
    assert latest["version-id"] == int(res.instant) and latest["max_column_id"] == 10
    assert [(f["id"], f["name"]) for f in latest["fields"]][5:] == [
        (5, "id"), (10, "note"), (6, "city"), (7, "ts"), (8, "amount")]
    assert json.loads(meta.extra_metadata["schema"])["fields"][-1]["name"] == "amount"
    assert schema_files(t) == [f"{res.instant}.schemacommit", f"{res.instant}.schemacommit.inflight",
                               f"{res.instant}.schemacommit.requested"]
    history = json.loads((tmp_path / "t" / ".hoodie" / ".schema" / f"{res.instant}.schemacommit").read_text())
    assert [s["version-id"] for s in history["schemas"]] == [int(res.instant), 0]
    assert sorted(p for p in tree_bytes(t.path) if not p.startswith(".hoodie")) == files_before

    renamed = {k: {"id": v["id"], "note": v["note"], "city": v["city"], "ts": v["ts"], "amount": v["fare"]}
               for k, v in old.items()}
    check(spark, t, renamed)
    snap = t.read()
    assert snap.columns[5:] == ["id", "note", "city", "ts", "amount"]
    # hudi-rs 0.5 matches columns by name: files written before the rename give null for it
    assert oracle(t) == {k: {**v, "amount": None} for k, v in renamed.items()}

    # a write under the new names: paris is rewritten (COW) or gets a log block (MOR) over its
    # old base file; oslo is new. The commit carries the same version (nothing changed)
    c3 = t.upsert(spark.createDataFrame([("1", "u1", "paris", 2, 11.0), ("3", "n3", "oslo", 2, 30.0)], NEW)).instant
    model = {**renamed, "1": {"id": "1", "note": "u1", "city": "paris", "ts": 2, "amount": 11.0},
             "3": {"id": "3", "note": "n3", "city": "oslo", "ts": 2, "amount": 30.0}}
    check(spark, t, model)
    at_c3 = dict(model)
    assert json.loads(t.commit_metadata(c3).extra_metadata["latestSchema"])["version-id"] == int(res.instant)
    assert f"{c3}.schemacommit" in schema_files(t)
    assert len(log_files(t)) == (1 if table_type == "MERGE_ON_READ" else 0)
    assert oracle(t)["1"]["amount"] == 11.0 and oracle(t)["2"]["amount"] is None

    # a dropped name may come back with its type: a new column (a new id), so the values the old
    # files hold under that name stay gone; with another type it is refused, table untouched
    before, dirs = tree_bytes(t.path), tree_dirs(t.path)
    with pytest.raises(SchemaMismatchError, match=r"column name 'tip' was another column \(double\)"):
        t.upsert(spark.createDataFrame([("2", "x", "rome", 3, 21.0, "big")], NEW + ", tip string"))
    assert tree_bytes(t.path) == before and tree_dirs(t.path) == dirs
    # (rome's new record "4" makes copy-on-write rewrite rome's old base file, which holds the
    # dropped tip of "2": not carried over)
    c4 = t.upsert(spark.createDataFrame([("3", "n3", "oslo", 3, 31.0, 0.5), ("4", "n4", "rome", 3, 40.0, 4.0)],
                                        NEW + ", tip double")).instant
    latest4 = json.loads(t.commit_metadata(c4).extra_metadata["latestSchema"])
    assert latest4["version-id"] == int(c4) and latest4["fields"][-1] == {
        "id": 11, "name": "tip", "optional": True, "type": "double"}
    model = {k: {**v, "tip": None} for k, v in model.items()}
    model["3"] = {"id": "3", "note": "n3", "city": "oslo", "ts": 3, "amount": 31.0, "tip": 0.5}
    model["4"] = {"id": "4", "note": "n4", "city": "rome", "ts": 3, "amount": 40.0, "tip": 4.0}
    check(spark, t, model)

    # time travel: the schema and rows as of each instant; incremental reads across the change
    assert ours(t.read(as_of=c1)) == old
    assert t.read(as_of=c1).columns[5:] == ["id", "city", "ts", "fare", "tip", "note"]
    assert ours(t.read(as_of=c3)) == at_c3
    written_since_c1 = {"1", "3", "4"}  # ("2", copied into rome's new file, keeps its commit time)
    assert ours(t.read_incremental(c1)) == {k: model[k] for k in written_since_c1}
    assert ours(t.read_incremental(c3)) == {k: model[k] for k in written_since_c1 - {"1"}}

    if table_type == "MERGE_ON_READ":
        t.maintenance.compact(spark=spark)  # writes the latest names; nothing is lost
        assert log_files(t) == []
        check(spark, t, model)
        for s in t.file_system_view().latest_slices():  # the ids never reach a file
            footer = pq.read_metadata(str(tmp_path / "t" / s.base_file.path)).metadata
            assert b"hoodie.internal.columns" not in footer and b"ARROW:schema" not in footer
    # every file "2" was in has been rewritten (copy-on-write merge, compaction): hudi-rs agrees
    assert oracle(t) == model


def by_id_rs(t: Table, start: str) -> dict[str, dict]:
    from tests.support import hudi_rs

    return by_id(hudi_rs.incremental(t.path, start))


def test_changes_that_would_corrupt_readers_are_refused_and_the_table_is_untouched(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city",
                     precombine_field="ts")
    t.upsert(spark.createDataFrame([("1", "paris", 1, 10.0, 1.0, "n1")], BASE))
    before, dirs = tree_bytes(t.path), tree_dirs(t.path)
    refused = [
        ({"rename": {"id": "key"}}, "rename id to key: 'id' is the table's record key field"),
        ({"drop": ["city"]}, "drop city: 'city' is the table's partition field"),
        ({"drop": ["ts"]}, r"drop ts: 'ts' is the table's precombine \(ordering\) field"),
        ({"types": {"ts": "double"}}, r"change ts to double: 'ts' is the table's precombine \(ordering\) field"),
        ({"rename": {"fare": "TIP"}}, "rename fare to TIP: a column named 'TIP' exists"),
        ({"rename": {"fare": "_hoodie_record_key"}}, "a column named '_hoodie_record_key' exists"),
        ({"rename": {"nope": "x"}}, "rename nope to x: the table has no column 'nope'"),
        ({"types": {"fare": "int"}}, "change fare to int32: column 'fare' is double; only widening"),
        ({"types": {"note": "long"}}, "column 'note' is int64 in the input but string in the table"),
        ({"rename": {"fare": "bad name"}}, "rename fare to bad name:"),
        ({}, "no change given"),
    ]
    for kwargs, message in refused:
        with pytest.raises(SchemaChangeError, match=message):
            t.alter(**kwargs)
    with pytest.raises(SchemaChangeError, match="give exactly one of first, after, before"):
        Move("note", first=True, after="id")
    with pytest.raises(SchemaChangeError, match="move note after zzz: the table has no other column 'zzz'"):
        t.alter(Move("note", after="zzz"))
    assert tree_bytes(t.path) == before and tree_dirs(t.path) == dirs
    assert t.schema() == pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()),
                                    ("fare", pa.float64()), ("tip", pa.float64()), ("note", pa.string())])

    # a renamed column's old name may not come back with another type: readers matching by name
    # would read the old doubles as strings
    t.alter(rename={"fare": "amount"})
    with pytest.raises(SchemaChangeError, match=r"column name 'fare' was another column \(double\) until version 0"):
        t.alter(rename={"note": "fare"})
    assert t.schema().names == ["id", "city", "ts", "amount", "tip", "note"]

    # a dropped name brought back by a write into another file group: paris's file is untouched.
    # Ours reads it by id (no tip); hudi-rs 0.5 by name: the dropped value comes back, and the
    # renamed column is null
    t.alter(drop=["tip"])
    t.upsert(spark.createDataFrame([("2", "rome", 2, 5.0, "n2", 7.0)],
                                   "id string, city string, ts long, amount double, note string, tip double"))
    model = {"1": {"id": "1", "city": "paris", "ts": 1, "amount": 10.0, "note": "n1", "tip": None},
             "2": {"id": "2", "city": "rome", "ts": 2, "amount": 5.0, "note": "n2", "tip": 7.0}}
    assert ours(t.read()) == model
    assert oracle(t) == {**model, "1": {**model["1"], "amount": None, "tip": 1.0}}


def test_widening_a_column_by_alter_reads_old_files_promoted(spark, tmp_path):
    """Also: `hoodie.schema.on.read.enable=true` on a write starts the internal schema (its first
    version is that commit, not version 0); refused on a version 8 table."""
    t = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", precombine_field="ts")
    df = spark.createDataFrame([("1", 1, 7), ("2", 1, 8)], "id string, ts long, qty int")
    c1 = t.upsert(df, options={"hoodie.schema.on.read.enable": "true"}).instant
    first = json.loads(t.commit_metadata(c1).extra_metadata["latestSchema"])
    assert first["version-id"] == int(c1) and [f["name"] for f in first["fields"]][5:] == ["id", "ts", "qty"]
    assert schema_files(t) == [f"{c1}.schemacommit", f"{c1}.schemacommit.inflight", f"{c1}.schemacommit.requested"]
    res = t.alter(types={"qty": "long"})
    history = json.loads((tmp_path / "t" / ".hoodie" / ".schema" / f"{res.instant}.schemacommit").read_text())
    assert [v["version-id"] for v in history["schemas"]] == [int(res.instant), int(c1)]
    assert t.schema().field("qty").type == pa.int64()
    assert ours(t.read()) == {"1": {"id": "1", "ts": 1, "qty": 7}, "2": {"id": "2", "ts": 1, "qty": 8}}
    assert t.read().schema["qty"].dataType.simpleString() == "bigint"
    t.upsert(spark.createDataFrame([("2", 2, 2**40)], "id string, ts long, qty long"))
    model = {"1": {"id": "1", "ts": 1, "qty": 7}, "2": {"id": "2", "ts": 2, "qty": 2**40}}
    assert ours(t.read()) == model and oracle(t) == model
    assert t.read(as_of=c1).schema["qty"].dataType.simpleString() == "int"
    latest = json.loads(t.commit_metadata(res.instant).extra_metadata["latestSchema"])
    assert latest["fields"][-1] == {"id": 7, "name": "qty", "optional": True, "type": "long"}


def test_schema_on_read_is_refused_on_a_version_8_table(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t8"), name="t8", record_key="id", precombine_field="ts", table_version=8)
    before, dirs = tree_bytes(t.path), tree_dirs(t.path)
    df = spark.createDataFrame([("1", 1)], "id string, ts long")
    with pytest.raises(UnsupportedFeatureError, match="internal schema for a version 8 table is not built"):
        t.upsert(df, options={"hoodie.schema.on.read.enable": "true"})
    assert tree_bytes(t.path) == before and tree_dirs(t.path) == dirs
    t.upsert(df)
    before, dirs = tree_bytes(t.path), tree_dirs(t.path)
    with pytest.raises(UnsupportedFeatureError, match="altering columns of a version 8 table is not built"):
        t.alter(rename={"qty": "x"})
    assert tree_bytes(t.path) == before and tree_dirs(t.path) == dirs
    assert not (tmp_path / "t8" / ".hoodie" / ".schema").exists()
