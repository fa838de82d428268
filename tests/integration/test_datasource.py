"""The engine as Spark's `hudi` data source: Apache Hudi's quick-start flow written only with
`spark.read/write.format("hudi")` and SQL, each step checked against hudi-rs and against the same
writes through the `Table` API; pushdown proven by the files a read opens; bad options refused
with the table unchanged."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.datasource import EqualTo, GreaterThan

from engine import Table
from engine.constants import META_COLUMNS
from engine.spark import last_write, register
from engine.spark.datasource.options import ReadOptions
from engine.spark.datasource.reader import HudiReader
from engine.storage.local import LocalStorage
from tests.support import hudi_rs
from tests.support.tables import tree_bytes

pytestmark = pytest.mark.spark

SCHEMA = "uuid string, rider string, driver string, fare double, city string, ts long"
TRIPS = [
    ("334e26e9", "rider-A", "driver-K", 19.10, "san_francisco", 1695159649087),
    ("e96c4396", "rider-C", "driver-M", 27.70, "san_francisco", 1695091554788),
    ("9909a8b1", "rider-D", "driver-L", 33.90, "sao_paulo", 1695046462179),
    ("e3cf430c", "rider-G", "driver-Q", 34.15, "sao_paulo", 1695516137016),
    ("1dced545", "rider-I", "driver-S", 41.06, "chennai", 1695376420876),
]
OPTIONS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "uuid",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}


def _data(rows: list[dict]) -> list[tuple]:
    return sorted((r["uuid"], r["rider"], r["driver"], r["fare"], r["city"], r["ts"]) for r in rows)


def _rs_data(path, **kw) -> list[tuple]:
    return _data(hudi_rs.snapshot(path, **kw))


def _ds_rows(spark, path, **options) -> list[dict]:
    reader = spark.read.format("hudi")
    for k, v in options.items():
        reader = reader.option(k, v)
    return [r.asDict() for r in reader.load(str(path)).collect()]


def _sorted_arrow(t: pa.Table) -> pa.Table:
    return t.sort_by([("_hoodie_partition_path", "ascending"), ("_hoodie_record_key", "ascending")])


def _ops(table: Table) -> list[tuple[str, int, int, int]]:
    """(operation, inserts, updates, deletes) of every completed write, from its commit metadata."""
    out = []
    for inst in table.timeline().completed_writes.instants:
        meta = table.commit_metadata(inst.time)
        stats = meta.write_stats
        out.append((meta.operation_type, sum(s.numInserts for s in stats), sum(s.numUpdateWrites for s in stats),
                    sum(s.numDeletes for s in stats)))
    return out


def test_quick_start_flow_through_the_data_source_matches_hudi_rs_and_the_table_api(spark, tmp_path):
    path, twin_path = str(tmp_path / "trips"), str(tmp_path / "twin")
    inserts = spark.createDataFrame(TRIPS, SCHEMA)

    # insert: the first write creates the table (COPY_ON_WRITE, as Apache Hudi's default)
    inserts.write.format("hudi").options(**OPTIONS).mode("overwrite" if False else "append").save(path)
    first = last_write(spark)
    assert first is not None and (first["operation"], first["inserts"], first["updates"]) == ("UPSERT", 5, 0)
    table = Table.open(spark, path)
    assert (table.config.name, table.config.record_key_fields, table.config.partition_fields) == (
        "trips", ("uuid",), ("city",))
    assert table.config.precombine_field == "ts" and table.config.table_type.value == "COPY_ON_WRITE"
    assert _data(_ds_rows(spark, path)) == _rs_data(path) == sorted(TRIPS)

    # the same writes through the Table API, for comparison
    twin = Table.create(spark, twin_path, name="trips", record_key="uuid", partition_fields="city",
                        precombine_field="ts")
    twin.upsert(inserts)

    # upsert: rider-D's fare changes, a new trip arrives
    updates = spark.createDataFrame(
        [("9909a8b1", "rider-D", "driver-L", 25.00, "sao_paulo", 1695046462180),
         ("c8abbe79", "rider-E", "driver-O", 93.50, "chennai", 1695115999911)], SCHEMA)
    updates.write.format("hudi").options(**OPTIONS).option("hoodie.datasource.write.operation", "upsert") \
        .mode("append").save(path)
    twin.upsert(updates)
    expected = sorted([t for t in TRIPS if t[0] != "9909a8b1"]
                      + [("9909a8b1", "rider-D", "driver-L", 25.00, "sao_paulo", 1695046462180),
                         ("c8abbe79", "rider-E", "driver-O", 93.50, "chennai", 1695115999911)])
    assert _data(_ds_rows(spark, path)) == _rs_data(path) == expected

    # delete: rider-A's trip
    deletes = spark.read.format("hudi").load(path).where("rider = 'rider-A'").select("uuid", "city")
    deletes.write.format("hudi").options(**OPTIONS).option("hoodie.datasource.write.operation", "delete") \
        .mode("append").save(path)
    assert last_write(spark)["deletes"] == 1
    twin.delete(spark.createDataFrame([("334e26e9", "san_francisco")], "uuid string, city string"))
    expected = [t for t in expected if t[1] != "rider-A"]
    assert _data(_ds_rows(spark, path)) == _rs_data(path) == expected

    # the same table the Table API writes: rows (meta columns but file names and times), commit metadata
    table = Table.open(spark, path)
    assert _ops(table) == _ops(Table.open(spark, twin_path)) == [
        ("UPSERT", 5, 0, 0), ("UPSERT", 1, 1, 0), ("DELETE", 0, 0, 1)]
    keep = ["_hoodie_record_key", "_hoodie_partition_path", *[c for c in ("uuid", "rider", "fare", "city", "ts")]]
    ours = _sorted_arrow(spark.read.format("hudi").load(path).toArrow()).select(keep)
    theirs = _sorted_arrow(Table.open(spark, twin_path).read().toArrow()).select(keep)
    assert ours.equals(theirs)

    # time travel to every write, and incremental pulls, as hudi-rs reads them
    times = [i.time for i in table.timeline().completed_writes.instants]
    for t in times:
        assert _data(_ds_rows(spark, path, **{"as.of.instant": t})) == _rs_data(path, as_of=t)
    assert _data(_ds_rows(spark, path, **{"as.of.instant": times[0]})) == sorted(TRIPS)
    incr = _ds_rows(spark, path, **{"hoodie.datasource.query.type": "incremental",
                                    "hoodie.datasource.read.begin.instanttime": times[0]})
    assert _data(incr) == _data(hudi_rs.incremental(path, times[0])) == sorted(
        [("9909a8b1", "rider-D", "driver-L", 25.00, "sao_paulo", 1695046462180),
         ("c8abbe79", "rider-E", "driver-O", 93.50, "chennai", 1695115999911)])
    window = _ds_rows(spark, path, **{"hoodie.datasource.query.type": "incremental",
                                      "hoodie.datasource.read.begin.instanttime": "000",
                                      "hoodie.datasource.read.end.instanttime": times[0]})
    assert _data(window) == sorted(TRIPS)
    assert {r["_hoodie_commit_time"] for r in window} == {times[0]}

    # snapshot columns: meta columns first, then the data columns, as Table.read
    cols = spark.read.format("hudi").load(path).columns
    assert cols == [*META_COLUMNS, "uuid", "rider", "driver", "fare", "city", "ts"]


def test_sql_create_select_insert_and_what_sql_cannot_do(spark, tmp_path):
    path = str(tmp_path / "sqltrips")
    spark.createDataFrame(TRIPS, SCHEMA).write.format("hudi").options(**OPTIONS).mode("append").save(path)
    first = Table.open(spark, path).timeline().completed_writes.instants[0].time
    spark.sql(f"CREATE TABLE ds_trips USING hudi LOCATION '{path}'")
    try:
        got = spark.sql("SELECT uuid, fare FROM ds_trips WHERE city = 'sao_paulo' ORDER BY uuid").collect()
        assert [tuple(r) for r in got] == [("9909a8b1", 33.90), ("e3cf430c", 34.15)]
        spark.sql("INSERT INTO ds_trips (uuid, rider, driver, fare, city, ts) "
                  "VALUES ('e3cf430c', 'rider-G', 'driver-Q', 99.0, 'sao_paulo', 1695516137017), "
                  "('aaaa0001', 'rider-Z', 'driver-Z', 5.5, 'chennai', 1695516137017)")
        assert last_write(spark)["updates"] == 1 and last_write(spark)["inserts"] == 1
        got = spark.sql("SELECT uuid, fare FROM ds_trips WHERE city IN ('sao_paulo', 'chennai') ORDER BY uuid")
        assert [tuple(r) for r in got.collect()] == [
            ("1dced545", 41.06), ("9909a8b1", 33.90), ("aaaa0001", 5.5), ("e3cf430c", 99.0)]
        assert _rs_data(path) == _data([r.asDict() for r in spark.sql("SELECT * FROM ds_trips").collect()])

        # time travel in SQL: through a view's options (Spark refuses VERSION AS OF on Python sources)
        spark.sql(f"CREATE TEMPORARY VIEW ds_trips_v1 USING hudi OPTIONS (path '{path}', 'as.of.instant' '{first}')")
        assert _data([r.asDict() for r in spark.sql("SELECT * FROM ds_trips_v1").collect()]) == sorted(TRIPS)
        with pytest.raises(Exception, match="TIME_TRAVEL"):
            spark.sql(f"SELECT * FROM ds_trips VERSION AS OF '{first}'").collect()
        before = tree_bytes(path)
        with pytest.raises(Exception, match="MERGE INTO"):
            spark.sql("MERGE INTO ds_trips t USING (SELECT 'x' uuid) s ON t.uuid = s.uuid "
                      "WHEN MATCHED THEN DELETE")
        with pytest.raises(Exception, match="CREATE TABLE ... AS SELECT and saveAsTable are not supported"):
            spark.sql(f"CREATE TABLE ds_ctas USING hudi LOCATION '{tmp_path / 'ctas'}' AS SELECT 1 AS id")
        assert tree_bytes(path) == before and not (tmp_path / "ctas" / ".hoodie").exists()
        # INSERT OVERWRITE: Apache Hudi's SQL replaces the table's data (insert_overwrite_table), the table stays
        spark.sql("INSERT OVERWRITE ds_trips (uuid, rider, driver, fare, city, ts) "
                  "VALUES ('aaaa0002', 'rider-W', 'driver-W', 7.5, 'oslo', 1695516137020)")
        table = Table.open(spark, path)
        last = table.timeline().completed_writes.instants[-1]
        assert table.commit_metadata(last.time).operation_type == "INSERT_OVERWRITE_TABLE"
        assert first in {i.time for i in table.timeline().completed_writes.instants}  # history kept
        assert [tuple(r) for r in spark.sql("SELECT uuid, city FROM ds_trips").collect()] == [("aaaa0002", "oslo")]
    finally:
        spark.sql("DROP VIEW IF EXISTS ds_trips_v1")
        spark.sql("DROP TABLE IF EXISTS ds_trips")
        spark.sql("DROP TABLE IF EXISTS ds_ctas")


def test_merge_on_read_through_the_data_source_equals_table_read(spark, tmp_path):
    path = str(tmp_path / "mor")
    table = Table.create(spark, path, name="mor", record_key="uuid", partition_fields="city", precombine_field="ts",
                         table_type="MERGE_ON_READ")
    table.upsert(spark.createDataFrame(TRIPS, SCHEMA))
    table.upsert(spark.createDataFrame(
        [("334e26e9", "rider-A", "driver-K", 1.0, "san_francisco", 1695159649088),
         ("9909a8b1", "rider-D", "driver-L", 2.0, "sao_paulo", 1695046462170)], SCHEMA))  # older ts: ignored
    table.delete(spark.createDataFrame([("1dced545", "chennai")], "uuid string, city string"))
    assert any(s.log_files for s in table.file_system_view().latest_slices())
    ours = _sorted_arrow(spark.read.format("hudi").load(path).toArrow())
    assert ours.equals(_sorted_arrow(table.read().toArrow()))
    assert _data(ours.to_pylist()) == _rs_data(path)
    ro = _sorted_arrow(spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized")
                       .load(path).toArrow())
    assert ro.equals(_sorted_arrow(table.read(read_optimized=True).toArrow()))
    assert _data(ro.to_pylist()) == sorted(TRIPS)


def _three_city_table(spark, path: str) -> Table:
    table = Table.create(spark, path, name="cities", record_key="uuid", partition_fields="city",
                         precombine_field="ts", hive_style=True)
    table.upsert(spark.createDataFrame(TRIPS, SCHEMA))
    return table


def test_partition_filters_skip_whole_partitions_other_filters_reach_parquet(spark, tmp_path):
    path = str(tmp_path / "pruned")
    table = _three_city_table(spark, path)
    schema = spark.read.format("hudi").load(path).schema

    opened: list[str] = []
    real_open = LocalStorage.open_input_file

    def counting(self, rel):
        opened.append(rel)
        return real_open(self, rel)

    def read_all(filters) -> list[dict]:
        reader = HudiReader(path, {}, ReadOptions(), schema)
        assert list(reader.pushFilters(filters)) == filters  # all go back to Spark, which applies them again
        out = []
        for part in reader.partitions():
            for batch in reader.read(part):
                out.extend(batch.to_pylist())
        return out

    LocalStorage.open_input_file = counting  # type: ignore[method-assign]
    try:
        everything = read_all([])
        assert len(everything) == 5 and len({o.split("/")[0] for o in opened}) == 3
        opened.clear()
        paris = read_all([EqualTo(("city",), "sao_paulo")])
        assert sorted(r["uuid"] for r in paris) == ["9909a8b1", "e3cf430c"]
        assert opened and {o.split("/")[0] for o in opened} == {"city=sao_paulo"}
        opened.clear()
        # not a partition column: every file is opened, the rows the Parquet reader filters are not returned
        dear = read_all([GreaterThan(("ts",), 1695300000000)])
        assert sorted(r["uuid"] for r in dear) == ["1dced545", "e3cf430c"]
        assert len({o.split("/")[0] for o in opened}) == 3
    finally:
        LocalStorage.open_input_file = real_open  # type: ignore[method-assign]

    # through Spark: the other partitions' files are never opened (they are garbage now)
    for f in Path(path).glob("city=s*/*.parquet"):
        f.write_bytes(b"not parquet")
    got = spark.read.format("hudi").load(path).where("city = 'chennai'").select("uuid").collect()
    assert [r.uuid for r in got] == ["1dced545"]
    with pytest.raises(Exception, match="cannot read base file"):
        spark.read.format("hudi").load(path).where("fare > 0").collect()
    assert table.config.name == "cities"


def test_a_user_schema_reads_only_those_columns_and_hoodie_is_the_same_source(spark, tmp_path):
    path = str(tmp_path / "cols")
    _three_city_table(spark, path)
    got = spark.read.format("hoodie").schema("uuid string, fare double").load(path).orderBy("uuid").collect()
    assert [tuple(r) for r in got] == sorted((t[0], t[3]) for t in TRIPS)
    with pytest.raises(Exception, match=r"columns \['nope'\] are not in the table"):
        spark.read.format("hudi").schema("uuid string, nope int").load(path).collect()
    assert register(spark) == ("hudi", "hoodie")  # registered once by build_session; again is a no-op


def test_bad_options_and_bad_input_leave_the_table_as_it_was(spark, tmp_path):
    path = str(tmp_path / "bad")
    _three_city_table(spark, path)
    before = tree_bytes(path)
    df = spark.createDataFrame(TRIPS[:1], SCHEMA)
    options = {**OPTIONS, "hoodie.table.name": "cities"}

    def write(options, mode="append", frame=df):
        frame.write.format("hudi").options(**options).mode(mode).save(path)

    with pytest.raises(Exception, match="hoodie.datasource.write.operation='merge': use one of upsert"):
        write({**options, "hoodie.datasource.write.operation": "merge"})
    with pytest.raises(Exception, match="hoodie.datasource.write.recordkey.field=rider but the table has uuid"):
        write({**options, "hoodie.datasource.write.recordkey.field": "rider"})
    with pytest.raises(Exception, match="hoodie.table.name=trips but the table has cities"):
        write(OPTIONS)
    with pytest.raises(Exception, match="unknown write option 'hoodie.parquet.nonsense'"):
        write({**options, "hoodie.parquet.nonsense": "1"})
    nulls = spark.createDataFrame([(None, "r", "d", 1.0, "chennai", 1)], SCHEMA)
    with pytest.raises(Exception, match="InvalidInputError"):
        write(options, frame=nulls)
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("hudi").options(**OPTIONS).save(path)  # Spark's default mode, errorifexists
    assert tree_bytes(path) == before
    assert not list(Path(path, ".hoodie", ".temp").glob("datasource-*"))

    # the first write to a path needs a name, and a record key unless it inserts (keys then generated,
    # as Apache Hudi 0.14+ does: tests/integration/test_quickstart.py); nothing is left behind
    fresh = tmp_path / "fresh"
    with pytest.raises(Exception, match="set hoodie.table.name"):
        df.write.format("hudi").option("hoodie.datasource.write.recordkey.field", "uuid").mode("append").save(str(fresh))
    with pytest.raises(Exception, match="set hoodie.datasource.write.recordkey.field"):
        df.write.format("hudi").option("hoodie.table.name", "t").option(
            "hoodie.datasource.write.operation", "upsert").mode("append").save(str(fresh))
    with pytest.raises(Exception, match="InvalidInputError"):
        nulls.write.format("hudi").options(**OPTIONS).mode("append").save(str(fresh))
    assert not fresh.exists() or not any(fresh.rglob("*"))

    # reads: a path that is not a table, bad query options
    with pytest.raises(Exception, match="no Hudi table at"):
        spark.read.format("hudi").load(str(tmp_path / "nothing")).collect()
    with pytest.raises(Exception, match="hoodie.datasource.query.type='snap'"):
        spark.read.format("hudi").option("hoodie.datasource.query.type", "snap").load(path).collect()
    with pytest.raises(Exception, match="an incremental query needs hoodie.datasource.read.begin.instanttime"):
        spark.read.format("hudi").option("hoodie.datasource.query.type", "incremental").load(path).collect()
    with pytest.raises(Exception, match="as.of.instant='yesterday' is not an instant time"):
        spark.read.format("hudi").option("as.of.instant", "yesterday").load(path).collect()
    with pytest.raises(Exception, match="is before the first instant"):
        spark.read.format("hudi").option("as.of.instant", "2001-01-01").load(path).collect()
    assert tree_bytes(path) == before


def test_overwrite_modes_replace_the_table_or_the_input_partitions(spark, tmp_path):
    """Save modes as Apache Hudi's `HoodieSparkSqlWriter.handleSaveModes` treats them (issue 32):
    overwrite with insert_overwrite_table keeps the table and replaces its file groups; overwrite
    with any other operation deletes the table and creates it again (the operation is its first
    commit); overwrite with delete is refused."""
    path = str(tmp_path / "over")
    spark.createDataFrame(TRIPS, SCHEMA).write.format("hudi").options(**OPTIONS).mode("append").save(path)
    fresh = [("f0000001", "rider-X", "driver-X", 10.0, "chennai", 1), ("f0000002", "rider-Y", "driver-Y", 20.0, "oslo", 1)]
    spark.createDataFrame(fresh, SCHEMA).write.format("hudi").options(**OPTIONS) \
        .option("hoodie.datasource.write.operation", "insert_overwrite_table").mode("overwrite").save(path)
    assert _data(_ds_rows(spark, path)) == _rs_data(path) == sorted(fresh)
    table = Table.open(spark, path)
    writes = table.timeline().completed_writes.instants
    assert len(writes) == 2
    assert (writes[-1].action.value, table.commit_metadata(writes[-1].time).operation_type) == (
        "replacecommit", "INSERT_OVERWRITE_TABLE")

    # mode("overwrite") with insert (Apache Hudi's quick start) or the default upsert: a new table
    for operation in ("insert", None):
        again = [("f0000009", "rider-Q", "driver-Q", 9.0, "lima", 3)]
        writer = spark.createDataFrame(again, SCHEMA).write.format("hudi").options(**OPTIONS)
        if operation:
            writer = writer.option("hoodie.datasource.write.operation", operation)
        writer.mode("overwrite").save(path)
        assert last_write(spark)["replaced_table"] is True
        assert _data(_ds_rows(spark, path)) == _rs_data(path) == sorted(again)
        table = Table.open(spark, path)
        (only,) = table.timeline().instants
        assert (only.action.value, table.commit_metadata(only.time).operation_type) == (
            "commit", (operation or "upsert").upper())
        assert sorted(p.name for p in Path(path).iterdir()) == [".hoodie", "lima"]
    with pytest.raises(Exception, match="Append is the only save mode applicable for delete"):
        spark.createDataFrame(again, SCHEMA).write.format("hudi").options(**OPTIONS) \
            .option("hoodie.datasource.write.operation", "delete").mode("overwrite").save(path)
    # a batch without record keys is refused before the table is deleted
    before = tree_bytes(path)
    nulls = spark.createDataFrame([(None, "r", "d", 1.0, "rome", 1)], SCHEMA)
    with pytest.raises(Exception, match="null or empty record key"):
        nulls.write.format("hudi").options(**OPTIONS).mode("overwrite").save(path)
    assert tree_bytes(path) == before

    # insert_overwrite: only the partitions of the input are replaced
    oslo = [("f0000003", "rider-Z", "driver-Z", 30.0, "oslo", 2)]
    spark.createDataFrame(oslo, SCHEMA).write.format("hudi").options(**OPTIONS) \
        .option("hoodie.datasource.write.operation", "insert_overwrite").mode("append").save(path)
    assert _data(_ds_rows(spark, path)) == _rs_data(path) == sorted([*again, *oslo])
    assert last_write(spark)["operation"] == "INSERT_OVERWRITE"
    # overwrite may redefine the table (another record key): Apache Hudi creates it from the options
    spark.createDataFrame(fresh, SCHEMA).write.format("hudi").options(**{
        **OPTIONS, "hoodie.datasource.write.recordkey.field": "rider"}).mode("overwrite").save(path)
    assert Table.open(spark, path).meta.config.record_key_fields == ("rider",)
    assert _data(_ds_rows(spark, path)) == _rs_data(path) == sorted(fresh)


SAMPLES = ["cow_v6_complexkeygen_hivestyle", "cow_v6_simplekeygen_nonhivestyle", "cow_v6_nonpartitioned",
           "cow_v6_empty", "mor_parquet_v6_nonpartitioned", "mor_parquet_v6_simplekeygen_nonhivestyle",
           "trips_mor_avro_v6_trips_8i1u"]


@pytest.mark.parametrize("name", SAMPLES)
def test_tables_apache_hudi_wrote_read_as_hudi_rs_reads_them(spark, name, tmp_path):
    from tests.support.samples import sample_table

    path = sample_table(name, tmp_path)
    ours = spark.read.format("hudi").load(str(path)).toArrow()
    theirs = hudi_rs.arrow_snapshot(path)
    if theirs is None:
        assert name == "cow_v6_empty" and ours.num_rows == 0
        return
    assert ours.num_rows == theirs.num_rows > 0
    assert _sorted_arrow(ours).equals(_sorted_arrow(theirs).cast(ours.schema))
    assert _sorted_arrow(ours).equals(_sorted_arrow(Table.open(spark, str(path)).read().toArrow()))


@pytest.mark.s3
def test_writes_and_reads_on_s3_through_the_data_source(spark, s3_server):
    bucket = s3_server.create_bucket()
    uri = f"s3://{bucket}/lake/trips"
    storage = {f"hoodie.storage.{k}": v for k, v in s3_server.storage_options().items()}
    spark.createDataFrame(TRIPS, SCHEMA).write.format("hudi").options(**OPTIONS, **storage).mode("append").save(uri)
    update = ("1dced545", "rider-I", "driver-S", 1.0, "chennai", 1695376420877)
    spark.createDataFrame([update], SCHEMA).write.format("hudi").options(**OPTIONS, **storage) \
        .mode("append").save(uri)
    assert (last_write(spark)["updates"], last_write(spark)["inserts"]) == (1, 0)
    got = spark.read.format("hudi").options(**storage).load(uri).where("city = 'chennai'").collect()
    assert [(r.uuid, r.fare) for r in got] == [("1dced545", 1.0)]
    expected = sorted([t for t in TRIPS if t[0] != "1dced545"] + [update])
    table = Table.open(spark, uri, storage_options=s3_server.storage_options())
    assert _data(_ds_rows(spark, uri, **storage)) == _data([r.asDict() for r in table.read().collect()]) == expected
    assert len(table.timeline().completed_writes.instants) == 2
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert not [k for k in keys if "/.temp/" in k]  # the staged rows are gone
