"""Schema evolution on write, copy-on-write and merge-on-read: type promotions (also nested), missing
columns written as nulls, refused changes. After every commit our read == a model == hudi-rs; time
travel to before a change returns the old schema; incremental reads cross the change."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from engine import SchemaMismatchError, Table
from engine.constants import META_COLUMNS
from tests.support import hudi_rs
from tests.support.tables import rows, tree_bytes, tree_dirs

pytestmark = pytest.mark.spark

TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
BASE = ("id string, city string, ts long, val int, amount float, price decimal(10,2), tags array<int>, "
        "attrs map<string,int>, info struct<a:int,b:string>")
WIDE = ("id string, city string, ts long, val long, amount double, price decimal(12,4), tags array<long>, "
        "attrs map<string,double>, info struct<a:long,b:string,c:string>")
WIDE_ARROW = pa.schema([
    ("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()), ("val", pa.int64()), ("amount", pa.float64()),
    ("price", pa.decimal128(12, 4)), ("tags", pa.list_(pa.int64())), ("attrs", pa.map_(pa.string(), pa.float64())),
    ("info", pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", pa.string())])),
])


def make(spark, tmp_path, table_type: str) -> Table:
    return Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city",
                        precombine_field="ts", table_type=table_type)


def _plain(value):
    """Spark's and hudi-rs's Python values in one form: maps (hudi-rs: lists of pairs) as dicts."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return {k: _plain(v) for k, v in value}
        return [_plain(v) for v in value]
    return value


def by_id(records: list[dict]) -> dict[str, dict]:
    return {r["id"]: {k: _plain(v) for k, v in r.items() if k not in META_COLUMNS} for r in records}


def ours(df) -> dict[str, dict]:
    return by_id(rows(df))


def oracle(t: Table, as_of: str | None = None) -> dict[str, dict]:
    return by_id(hudi_rs.snapshot(t.path, as_of))


def check(spark, t: Table, model: dict[str, dict]) -> None:
    """Ours (the Table API and the `format("hudi")` source) == the model == hudi-rs."""
    assert ours(t.read()) == model
    assert ours(spark.read.format("hudi").load(t.path)) == model
    assert oracle(t) == model


def base_row(i: str, city: str, ts: int, n: int) -> tuple:
    return (i, city, ts, n, n + 0.5, Decimal(f"{n}.25"), [n, n + 1], {"k": n}, (n, f"b{n}"))


def model_row(r: tuple, c: str | None | bool = False) -> dict:
    out = dict(zip(["id", "city", "ts", "val", "amount", "price", "tags", "attrs", "info"], r, strict=True))
    out["info"] = dict(zip(["a", "b", "c"], r[8], strict=False))
    if c is not False:
        out["info"]["c"] = c
    return out


def log_files(t: Table) -> list[str]:
    return [log.path for s in t.file_system_view().latest_slices() for log in s.log_files]


@pytest.mark.parametrize(("table_type", "block_format"), [
    ("COPY_ON_WRITE", None), ("MERGE_ON_READ", "parquet"), ("MERGE_ON_READ", "avro")])
def test_type_promotions_move_the_table_schema_forward(spark, tmp_path, table_type, block_format):
    t = make(spark, tmp_path, table_type)
    opts = {"hoodie.logfile.data.block.format": block_format} if block_format else None
    r1, r2 = base_row("1", "paris", 1, 10), base_row("2", "rome", 1, 20)
    c1 = t.upsert(spark.createDataFrame([r1, r2], BASE), options=opts).instant
    old = {"1": model_row(r1), "2": model_row(r2)}
    check(spark, t, old)

    # wider types everywhere (also in a struct, a list and a map) plus a new nested field; only
    # paris is rewritten (merge-on-read: a log block under the new schema over the old base file)
    w1 = ("1", "paris", 2, 2**40, 1.1, Decimal("12345678.1234"), [2**33], {"k": 0.1}, (2**35, "b", "new"))
    c2 = t.upsert(spark.createDataFrame([w1], WIDE), options=opts).instant
    assert t.schema() == WIDE_ARROW
    assert len(log_files(t)) == (1 if block_format else 0)
    promoted = {"1": model_row(w1), "2": model_row(r2, None)}
    check(spark, t, promoted)
    snap = t.read()
    assert snap.schema.simpleString().endswith(
        "val:bigint,amount:double,price:decimal(12,4),tags:array<bigint>,attrs:map<string,double>,"
        "info:struct<a:bigint,b:string,c:string>>")

    # time travel to before the change: the old schema and the old rows (as Apache Hudi's time
    # travel resolves the schema as of the instant); hudi-rs reads them with the latest schema
    before = t.read(as_of=c1)
    assert "val:int,amount:float,price:decimal(10,2),tags:array<int>,attrs:map<string,int>" in before.schema.simpleString()
    assert ours(before) == old
    ds_before = spark.read.format("hudi").option("as.of.instant", c1).load(t.path)
    assert ds_before.schema == before.schema and ours(ds_before) == old
    assert oracle(t, c1) == {k: {**v, "info": {**v["info"], "c": None}} for k, v in old.items()}

    # an incremental read across the change: the promoted record only, in the new schema
    assert ours(t.read_incremental(c1)) == {"1": promoted["1"]}
    assert by_id(hudi_rs.incremental(t.path, c1)) == {"1": promoted["1"]}
    assert ours(t.read_incremental("0" * 17)) == promoted

    # a narrower batch after the promotion is written as the table's (wider) types
    r2b = (*base_row("2", "rome", 3, 30)[:8], (30, "b30", "c30"))
    c3 = t.upsert(spark.createDataFrame([r2b], BASE.replace("b:string>", "b:string,c:string>")), options=opts).instant
    assert t.schema() == WIDE_ARROW
    model = {"1": promoted["1"], "2": model_row(r2b)}
    check(spark, t, model)
    assert ours(t.read_incremental(c2)) == {"2": model["2"]}
    assert ours(t.read(as_of=c2)) == promoted

    if table_type == "MERGE_ON_READ":  # compaction rewrites the old base files with the new schema
        t.maintenance.compact(spark=spark)
        assert log_files(t) == []
        check(spark, t, model)
        assert ours(t.read(as_of=c3)) == model


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_missing_columns_written_as_nulls_with_the_option(spark, tmp_path, table_type):
    t = make(spark, tmp_path, table_type)
    schema = "id string, city string, ts long, note string, info struct<a:int,b:string>"
    c1 = t.upsert(spark.createDataFrame(
        [("1", "paris", 1, "n1", (1, "x")), ("2", "rome", 1, "n2", (2, "y"))], schema)).instant
    model = {"1": {"id": "1", "city": "paris", "ts": 1, "note": "n1", "info": {"a": 1, "b": "x"}},
             "2": {"id": "2", "city": "rome", "ts": 1, "note": "n2", "info": {"a": 2, "b": "y"}}}
    check(spark, t, model)

    # without the option a batch lacking a column (top level or nested) is refused, table untouched
    lacking = spark.createDataFrame([("1", "paris", 2, (5,)), ("3", "oslo", 2, (6,))],
                                    "id string, city string, ts long, info struct<a:int>")
    before, dirs = tree_bytes(t.path), tree_dirs(t.path)
    with pytest.raises(SchemaMismatchError, match=r"lacks table column\(s\) note, info\.b;"):
        t.upsert(lacking)
    assert tree_bytes(t.path) == before and tree_dirs(t.path) == dirs

    # with it: the update's missing values are null (the incoming record replaces the stored one,
    # as Apache Hudi's default payloads merge), the insert's too; the schema keeps every column
    c2 = t.upsert(lacking, options={"hoodie.write.set.null.for.missing.columns": "true"}).instant
    model["1"] = {"id": "1", "city": "paris", "ts": 2, "note": None, "info": {"a": 5, "b": None}}
    model["3"] = {"id": "3", "city": "oslo", "ts": 2, "note": None, "info": {"a": 6, "b": None}}
    check(spark, t, model)
    assert t.schema().names == ["id", "city", "ts", "note", "info"]
    assert ours(t.read_incremental(c1)) == {k: model[k] for k in ("1", "3")}

    # Apache Hudi's older key does the same
    t.upsert(spark.createDataFrame([("2", "rome", 3, (7, "z"))], "id string, city string, ts long, info struct<a:int,b:string>"),
             options={"hoodie.datasource.write.reconcile.schema": "true"})
    model["2"] = {"id": "2", "city": "rome", "ts": 3, "note": None, "info": {"a": 7, "b": "z"}}
    check(spark, t, model)
    assert ours(t.read(as_of=c2))["2"]["note"] == "n2"


REFUSED = [
    (BASE.replace("val int", "val string"), "column 'val' is string in the input but int32 in the table"),
    (BASE.replace("city string", "city int"), "column 'city' is int32 in the input but string in the table"),
    (BASE.replace("decimal(10,2)", "decimal(10,4)"),
     r"column 'price' is decimal128\(10, 4\) in the input but decimal128\(10, 2\) in the table"),
    (BASE.replace("info struct<a:int", "info struct<a:string"), "column 'info.a' is string in the input but int32 in the table"),
    (BASE.replace("tags array<int>", "tags array<boolean>"), "column 'tags.element' is bool in the input but int32 in the table"),
]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_incompatible_changes_are_refused_and_the_table_is_untouched(spark, tmp_path, table_type):
    t = make(spark, tmp_path, table_type)  # one table for every refused change (each leaves it as it was)
    t.upsert(spark.createDataFrame([base_row("1", "paris", 1, 10)], BASE))
    before, dirs, snapshot = tree_bytes(t.path), tree_dirs(t.path), rows(t.read())
    for schema, message in REFUSED:
        with pytest.raises(SchemaMismatchError, match=message):
            t.upsert(spark.createDataFrame([], schema))
        assert tree_bytes(t.path) == before and tree_dirs(t.path) == dirs, schema
        assert rows(t.read()) == snapshot, schema


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_narrower_input_for_a_long_column_is_written_as_long(spark, tmp_path, table_type):
    """long -> int is not a change Apache Hudi makes to a table: an int batch is written as long,
    and an int precombine value is compared with the stored long ones without overflow."""
    t = make(spark, tmp_path, table_type)
    t.upsert(spark.createDataFrame([("1", "paris", 2**40, 2**40)], "id string, city string, ts long, val long"))
    narrow = "id string, city string, ts int, val int"
    t.upsert(spark.createDataFrame([("2", "paris", 1, 5)], narrow))
    assert t.schema().field("val").type == pa.int64() and t.schema().field("ts").type == pa.int64()
    model = {"1": {"id": "1", "city": "paris", "ts": 2**40, "val": 2**40},
             "2": {"id": "2", "city": "paris", "ts": 1, "val": 5}}
    check(spark, t, model)
    # an older event for key 1 (int ordering value 5 < 2**40) changes nothing
    r = t.upsert(spark.createDataFrame([("1", "paris", 5, 6), ("2", "paris", 2, 7)], narrow))
    model["2"] = {"id": "2", "city": "paris", "ts": 2, "val": 7}
    check(spark, t, model)
    assert r.updates == 1


def native(df) -> bool:
    """Whether Spark's own parquet scan reads `df` (else our pyarrow scan, which casts each file)."""
    text = df._jdf.queryExecution().executedPlan().toString()
    assert ("FileScan parquet" in text) != ("MapInArrow" in text), text
    return "FileScan parquet" in text


def test_files_of_a_narrower_type_are_not_read_by_the_native_parquet_scan(spark, tmp_path):
    t = make(spark, tmp_path, "COPY_ON_WRITE")
    narrow, wide = "id string, city string, ts long, val int", "id string, city string, ts long, val long"
    c1 = t.upsert(spark.createDataFrame([("1", "paris", 1, 1), ("2", "rome", 1, 2)], narrow)).instant
    assert native(t.read())
    t.upsert(spark.createDataFrame([("1", "paris", 2, 2**40)], wide))
    snap = t.read()  # rome's file still holds int32 values
    assert not native(snap)
    assert ours(snap) == {"1": {"id": "1", "city": "paris", "ts": 2, "val": 2**40},
                          "2": {"id": "2", "city": "rome", "ts": 1, "val": 2}} == oracle(t)
    before = t.read(as_of=c1)  # every file of that instant was written under its schema
    assert native(before) and ours(before)["1"]["val"] == 1
    t.upsert(spark.createDataFrame([("2", "rome", 2, 3)], wide))
    snap = t.read()  # every file now carries the promoted type
    assert native(snap)
    assert ours(snap) == {"1": {"id": "1", "city": "paris", "ts": 2, "val": 2**40},
                          "2": {"id": "2", "city": "rome", "ts": 2, "val": 3}} == oracle(t)
