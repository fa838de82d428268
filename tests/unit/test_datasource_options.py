"""Pure parts of the Spark data source: option parsing, partition pruning, Parquet filters."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from engine.errors import InvalidConfigError
from engine.read.prune import (
    Predicate,
    arrow_filter,
    group_slices,
    partition_values,
    slice_may_match,
    target_partition_bytes,
)
from engine.spark.datasource.options import (
    ReadOptions,
    WriteOptions,
    instant_of,
    pack_catalog_options,
    table_path,
    unpack_catalog_options,
)


@pytest.mark.parametrize("text, instant", [
    ("20240102030405678", "20240102030405678"),
    ("20240102030405", "20240102030405000"),
    ("000", "00000000000000000"),
    ("2024-01-02", "20240102000000000"),
    ("2024-01-02 03:04:05", "20240102030405000"),
    ("2024-01-02 03:04:05.6", "20240102030405600"),
    ("2024-01-02T03:04:05.678", "20240102030405678"),
])
def test_instant_forms_apache_hudi_accepts(text, instant):
    assert instant_of(text, "as.of.instant") == instant


@pytest.mark.parametrize("text", ["yesterday", "2024-1-2", "202401020304056789", "", "2024-01-02 03:04"])
def test_other_instant_texts_are_refused(text):
    with pytest.raises(InvalidConfigError, match="is not an instant time"):
        instant_of(text, "as.of.instant")


def test_read_options():
    assert ReadOptions.parse({}) == ReadOptions("snapshot")
    assert ReadOptions.parse({"AS.OF.INSTANT": "20240102030405"}).as_of == "20240102030405000"
    assert ReadOptions.parse({"timestampAsOf": "2024-01-02"}).as_of == "20240102000000000"
    incr = ReadOptions.parse({"hoodie.datasource.query.type": "incremental",
                              "hoodie.datasource.read.begin.instanttime": "000",
                              "hoodie.datasource.read.end.instanttime": "20240102030405678"})
    assert (incr.query_type, incr.begin, incr.end) == ("incremental", "0" * 17, "20240102030405678")
    assert not incr.cdc
    assert ReadOptions.parse({"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": "000",
                              "hoodie.datasource.query.incremental.format": "CDC"}).cdc
    for bad, message in [
        ({"hoodie.datasource.query.type": "snap"}, "use one of snapshot, read_optimized, incremental"),
        ({"hoodie.datasource.query.type": "incremental"}, "needs hoodie.datasource.read.begin.instanttime"),
        ({"hoodie.datasource.read.begin.instanttime": "000"}, "need hoodie.datasource.query.type=incremental"),
        ({"hoodie.datasource.query.type": "read_optimized", "as.of.instant": "000"}, "not read_optimized"),
        ({"hoodie.datasource.query.incremental.format": "cdc"}, "cdc needs hoodie.datasource.query.type=incremental"),
        ({"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": "000",
          "hoodie.datasource.query.incremental.format": "changes"}, "use latest_state or cdc"),
        ({"versionAsOf": "3"}, "versionAsOf is not a Hudi option"),
    ]:
        with pytest.raises(InvalidConfigError, match=message):
            ReadOptions.parse(bad)


def test_write_options():
    w = WriteOptions.parse({
        "hoodie.table.name": "trips", "hoodie.datasource.write.recordkey.field": "a, b",
        "hoodie.datasource.write.partitionpath.field": "city", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": "merge_on_read", "hoodie.index.type": "RECORD",
        "hoodie.datasource.write.hive_style_partitioning": "true", "hoodie.upsert.shuffle.parallelism": "4",
        "hoodie.insert.shuffle.parallelism": "4", "hoodie.storage.endpoint_url": "http://x", "path": "/t",
    })
    assert (w.operation, w.table_name, w.record_key, w.partition_fields, w.precombine) == (
        "upsert", "trips", ("a", "b"), ("city",), "ts")
    assert (w.table_type, w.hive_style, w.index_type) == ("MERGE_ON_READ", True, "RECORD")
    # what the engine's WriteConfig takes: hoodie.* options not consumed, ignored or storage settings
    assert w.engine_options == {"hoodie.index.type": "RECORD", "hoodie.upsert.shuffle.parallelism": "4"}
    assert w.creation_problem() is None
    # no record key: generated keys (Apache Hudi 0.14+), unless the first write is an upsert or delete
    assert WriteOptions.parse({"hoodie.table.name": "t"}).creation_problem() is None
    assert WriteOptions.parse({"hoodie.table.name": "t", "hoodie.datasource.write.operation": "delete"}).creation_problem() == (
        "the first write to a path creates its table: set hoodie.datasource.write.recordkey.field (the record key "
        "field), or insert without one (the keys are then generated, as Apache Hudi 0.14+ does)")
    assert "set hoodie.table.name" in str(WriteOptions.parse({}).creation_problem())
    assert w.conflicts({"hoodie.datasource.write.recordkey.field": ("a", "b"),
                        "hoodie.datasource.write.precombine.field": "ts2"}) == [
        "hoodie.datasource.write.precombine.field=ts but the table has ts2"]
    with pytest.raises(InvalidConfigError, match="use one of upsert, insert, bulk_insert, delete"):
        WriteOptions.parse({"hoodie.datasource.write.operation": "merge"})
    with pytest.raises(InvalidConfigError, match="is not a key generator this engine has"):
        WriteOptions.parse({"hoodie.datasource.write.keygenerator.class": "com.example.MyKeyGen"})
    assert WriteOptions.parse({"hoodie.datasource.write.keygenerator.class":
                               "org.apache.hudi.keygen.TimestampBasedKeyGenerator"}).key_generator == "TIMESTAMP"


def test_catalog_options_travel_in_the_schema_metadata():
    packed = pack_catalog_options({"path": "file:/data/t", "location": "file:/data/t", "owner": "me",
                                   "provider": "hudi", "as.of.instant": "5", "option.as.of.instant": "5"})
    assert unpack_catalog_options(packed) == {"path": "/data/t", "as.of.instant": "5"}
    assert unpack_catalog_options("not json") == {} and unpack_catalog_options(None) == {}
    assert table_path({"location": "file:///data/t"}) == "/data/t"
    assert table_path({"paths": '["s3://b/t"]'}) == "s3://b/t"
    with pytest.raises(InvalidConfigError, match="read from one path"):
        table_path({"paths": '["/a", "/b"]'})


def test_partition_values_of_paths():
    assert partition_values("city=paris/day=2", ("city", "day"), True) == {"city": "paris", "day": "2"}
    assert partition_values("city=paris", ("city", "day"), True) is None
    assert partition_values("2024/01/02", ("date",), False) == {"date": "2024/01/02"}
    assert partition_values("paris/2", ("city", "day"), False) == {"city": "paris", "day": "2"}
    assert partition_values("paris", ("city", "day"), False) is None
    assert partition_values("", ("city",), False) is None


TYPES = {"city": pa.string(), "day": pa.int32(), "d": pa.date32(), "x": pa.float64()}


@pytest.mark.parametrize("partition, pred, keep", [
    ("paris", Predicate("city", "eq", "paris"), True),
    ("rome", Predicate("city", "eq", "paris"), False),
    ("rome", Predicate("city", "eq", "paris", negated=True), True),
    ("paris", Predicate("city", "eq", "paris", negated=True), False),
    ("rome", Predicate("city", "in", ("paris", "oslo")), False),
    ("rome", Predicate("city", "starts_with", "ro"), True),
    ("rome", Predicate("city", "gt", "s"), False),
    ("rome", Predicate("city", "is_null"), False),
    ("__HIVE_DEFAULT_PARTITION__", Predicate("city", "eq", "paris"), True),  # nulls: never pruned
    ("default", Predicate("city", "eq", "paris"), True),
    ("rome", Predicate("city", "eq", 5), True),  # a literal of another type: Spark cast it, do not guess
    ("rome", Predicate("other", "eq", "x"), True),  # not a partition column
])
def test_slice_pruning_by_one_partition_field(partition, pred, keep):
    assert slice_may_match(partition, [pred], ("city",), False, TYPES) is keep


def test_slice_pruning_by_typed_and_hive_style_fields():
    fields = ("city", "day")
    assert not slice_may_match("city=rome/day=7", [Predicate("day", "gt", 10)], fields, True, TYPES)
    assert slice_may_match("city=rome/day=17", [Predicate("day", "gt", 10)], fields, True, TYPES)
    assert slice_may_match("city=rome/day=x7", [Predicate("day", "gt", 10)], fields, True, TYPES)  # not an int
    assert not slice_may_match("2024-01-02", [Predicate("d", "lt", dt.date(2024, 1, 1))], ("d",), False, TYPES)
    assert slice_may_match("1.5", [Predicate("x", "gt", 2.0)], ("x",), False, TYPES)  # floats never pruned


def test_arrow_filter_keeps_only_what_spark_and_arrow_evaluate_alike():
    schema = pa.schema([("s", pa.string()), ("i", pa.int64()), ("f", pa.float64()), ("d", pa.date32())])
    table = pa.table({"s": ["a", "b", None], "i": [1, 2, 3], "f": [float("nan"), 1.0, 2.0],
                      "d": [dt.date(2024, 1, 1), dt.date(2024, 1, 2), None]}, schema=schema)
    assert arrow_filter([Predicate("f", "gt", 1.0)], schema) is None  # NaN orders differently
    assert arrow_filter([Predicate("i", "eq", "1")], schema) is None  # literal of another type
    assert arrow_filter([Predicate("s", "is_null", negated=True)], schema) is None
    expr = arrow_filter([Predicate("i", "ge", 2), Predicate("s", "eq", "a", negated=True)], schema)
    assert table.filter(expr).column("i").to_pylist() == [2]  # the null s is dropped, as Spark drops it
    expr = arrow_filter([Predicate("s", "in", ("a", "b")), Predicate("d", "lt", dt.date(2024, 1, 2))], schema)
    assert table.filter(expr).column("i").to_pylist() == [1]
    expr = arrow_filter([Predicate("s", "starts_with", "b")], schema)
    assert table.filter(expr).column("i").to_pylist() == [2]


def test_slices_are_grouped_into_partitions_by_size():
    assert group_slices([10, 10, 10, 100, 5], 25) == [[0, 1], [2], [3], [4]]
    assert group_slices([], 25) == []
    assert target_partition_bytes(1000, 16, 128, 4) == 63
    assert target_partition_bytes(10, 16, 128, 4) == 4
    assert target_partition_bytes(10**9, 16, 128, 4) == 128


def test_beside_apache_hudis_jvm_source_only_hoodie_is_registered():
    from engine.spark.datasource import sources_for

    assert [c.name() for c in sources_for(False)] == ["hudi", "hoodie"]
    assert [c.name() for c in sources_for(True)] == ["hoodie"]


# ---- issue 32: save modes, custom key generators, auto keys, payload classes ---------------------
def test_save_modes_as_hoodie_spark_sql_writer_handles_them():
    from engine.spark.datasource.options import save_mode_operation

    assert save_mode_operation("upsert", False) == ("upsert", False)
    assert save_mode_operation("insert", True) == ("insert", True)  # the table is deleted and created again
    assert save_mode_operation("bulk_insert", True) == ("bulk_insert", True)
    assert save_mode_operation("insert_overwrite", True) == ("insert_overwrite", True)
    assert save_mode_operation("insert_overwrite_table", True) == ("insert_overwrite_table", False)
    assert save_mode_operation("upsert", True, sql=True) == ("insert_overwrite_table", False)  # SQL INSERT OVERWRITE
    with pytest.raises(InvalidConfigError, match="Append is the only save mode applicable for delete"):
        save_mode_operation("delete", True)


def test_write_options_for_custom_keys_url_encoding_and_auto_keys():
    w = WriteOptions.parse({"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
                            "hoodie.datasource.write.partitionpath.field": "country:SIMPLE,day:TIMESTAMP",
                            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator",
                            "hoodie.datasource.write.partitionpath.urlencode": "true"})
    assert (w.key_generator, w.partition_fields, w.url_encode) == ("CUSTOM", ("country", "day"), True)
    assert w.engine_options["hoodie.datasource.write.partitionpath.field"] == "country:SIMPLE,day:TIMESTAMP"
    auto = WriteOptions.parse({"hoodie.table.name": "t", "hoodie.datasource.write.partitionpath.field": "city"})
    assert auto.creation_problem() is None and not auto.operation_given  # keys generated (Hudi 0.14+)
    upsert = WriteOptions.parse({"hoodie.table.name": "t", "hoodie.datasource.write.operation": "upsert"})
    assert "set hoodie.datasource.write.recordkey.field" in upsert.creation_problem()


def test_a_payload_class_this_engine_does_not_merge_with_is_refused():
    ok = {"hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload"}
    WriteOptions.parse(ok)
    with pytest.raises(InvalidConfigError, match="com.payloads.CustomMergeIntoConnector: this engine merges records as"):
        WriteOptions.parse({"hoodie.datasource.write.payload.class": "com.payloads.CustomMergeIntoConnector"})
