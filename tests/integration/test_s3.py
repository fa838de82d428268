"""The core write/read path against a real HTTP S3 endpoint (moto server on 127.0.0.1)."""

from __future__ import annotations

import json

import pytest

from engine import Table, TableNotFoundError
from engine.storage import storage_for
from tests.support.tables import rows

pytestmark = [pytest.mark.spark, pytest.mark.s3]

SCHEMA = "id int, name string, city string, ts long"


def test_write_read_on_s3(spark, s3_server):
    bucket = s3_server.create_bucket()
    uri = f"s3://{bucket}/lake/trips"
    opts = s3_server.storage_options()
    table = Table.create(spark, uri, name="trips", record_key="id", partition_fields="city",
                         precombine_field="ts", storage_options=opts)
    r1 = table.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "paris", 1)], SCHEMA))
    r2 = table.upsert(spark.createDataFrame([(1, "a2", "paris", 2), (4, "d", "oslo", 2)], SCHEMA))
    r3 = table.delete(spark.createDataFrame([(2, "rome")], "id int, city string"))
    assert (r1.inserts, r2.inserts, r2.updates, r3.deletes) == (3, 1, 1, 1)

    reopened = Table.open(spark, uri, storage_options=opts)
    assert [(r["id"], r["name"], r["_hoodie_commit_time"]) for r in rows(reopened.read())] == [
        (4, "d", r2.instant), (1, "a2", r2.instant), (3, "c", r1.instant)
    ]
    assert sorted(r["id"] for r in rows(reopened.read(as_of=r1.instant))) == [1, 2, 3]
    assert sorted(r["id"] for r in rows(reopened.read_incremental(r1.instant))) == [1, 4]

    # the objects in the bucket: exactly the timeline files and the base files the commits name
    client = s3_server.client()
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"])
    timeline = [k.rsplit("/", 1)[1] for k in keys if "/.hoodie/" in k and "/.hoodie/.lock/" not in k]
    # each write took the table lock (a conditional put per lease); the two newest leases are kept
    locks = [k.rsplit("/", 1)[1] for k in keys if "/.hoodie/.lock/" in k]
    assert locks == ["lock.000000000002", "lock.000000000003"]
    assert timeline == sorted(
        [f"{i}.commit" for i in (r1.instant, r2.instant, r3.instant)]
        + [f"{i}.commit.requested" for i in (r1.instant, r2.instant, r3.instant)]
        + [f"{i}.inflight" for i in (r1.instant, r2.instant, r3.instant)]
        + ["hoodie.properties"]
    )
    written = set()
    for inst in (r1.instant, r2.instant, r3.instant):
        meta = json.loads(client.get_object(Bucket=bucket, Key=f"lake/trips/.hoodie/{inst}.commit")["Body"].read())
        written |= {s["path"] for stats in meta["partitionToWriteStats"].values() for s in stats}
    base_files = {k.removeprefix("lake/trips/") for k in keys if k.endswith(".parquet")}
    assert base_files == written


def test_timeline_files_are_created_exclusively_on_s3(s3_server):
    bucket = s3_server.create_bucket()
    storage = storage_for(f"s3://{bucket}/t", s3_server.storage_options())
    storage.create_exclusive(".hoodie/20260101000000000.commit", b"{}")
    with pytest.raises(FileExistsError):
        storage.create_exclusive(".hoodie/20260101000000000.commit", b"other")
    assert storage.read_bytes(".hoodie/20260101000000000.commit") == b"{}"


def test_open_missing_table_on_s3(spark, s3_server):
    bucket = s3_server.create_bucket()
    with pytest.raises(TableNotFoundError, match=f"no Hudi table at s3://{bucket}/nothing"):
        Table.open(spark, f"s3://{bucket}/nothing", storage_options=s3_server.storage_options())


def test_schema_on_read_on_s3(spark, s3_server):
    """A merge-on-read table on S3: rename and drop by `alter`, an update under the new names (a log
    block over the old base file), a compaction; the history lands in `.hoodie/.schema/`."""
    from tests.support import hudi_rs

    bucket = s3_server.create_bucket()
    uri = f"s3://{bucket}/lake/evolving"
    opts = s3_server.storage_options()
    table = Table.create(spark, uri, name="evolving", record_key="id", partition_fields="city",
                         precombine_field="ts", table_type="MERGE_ON_READ", storage_options=opts)
    c1 = table.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "rome", 1)], SCHEMA)).instant
    res = table.alter(rename={"name": "label"})
    c3 = table.upsert(spark.createDataFrame([(1, "paris", 2, "a2")], "id int, city string, ts long, label string")).instant
    model = [(1, "paris", 2, "a2"), (2, "rome", 1, "b")]

    def got(df):
        return sorted((r["id"], r["city"], r["ts"], r["label"]) for r in rows(df))

    assert got(table.read()) == model
    assert sorted((r["id"], r["name"]) for r in rows(table.read(as_of=c1))) == [(1, "a"), (2, "b")]
    client = s3_server.client()
    keys = sorted(o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="lake/evolving/.hoodie/.schema/")["Contents"])
    assert [k.rsplit("/", 1)[1] for k in keys if k.endswith(".schemacommit")] == [f"{res.instant}.schemacommit",
                                                                                  f"{c3}.schemacommit"]
    table.maintenance.compact(spark=spark)
    assert got(Table.open(spark, uri, storage_options=opts).read()) == model
    rs = hudi_rs.snapshot(uri, storage_options=hudi_rs.s3_storage_options(s3_server.env()))
    assert sorted((r["id"], r["label"]) for r in rs) == [(1, "a2"), (2, None)]  # hudi-rs: by name


def test_a_snapshot_read_lists_no_data_folder_through_the_metadata_table(spark, s3_server):
    """Issue 35: on S3, a snapshot read of a version 9 table with a metadata table lists only under
    `.hoodie/` (the timeline, the metadata table's files partition and timeline), never a data
    folder: every request moto receives is counted. The same table read after its metadata table
    is dropped lists the table's folders."""
    from tests.support import hudi_rs

    bucket = s3_server.create_bucket()
    uri = f"s3://{bucket}/lake/parts"
    opts = s3_server.storage_options()
    schema = "id string, part string, ts long, value double"
    table = Table.create(spark, uri, name="parts", record_key="id", partition_fields="part", precombine_field="ts",
                         table_version=9, storage_options=opts)
    with_metadata = {"hoodie.metadata.enable": "true"}
    rows_in = [(f"k{i:03d}", f"p{i % 20:02d}", 1, float(i)) for i in range(200)]
    table.bulk_insert(spark.createDataFrame(rows_in, schema), options=with_metadata)
    table.upsert(spark.createDataFrame([(k, p, 2, -v) for k, p, _, v in rows_in[:30]], schema), options=with_metadata)
    want = sorted([(k, -v if i < 30 else v) for i, (k, _p, _t, v) in enumerate(rows_in)])

    with s3_server.recording() as requests:
        got = sorted((r["id"], r["value"]) for r in rows(Table.open(spark, uri, storage_options=opts).read()))
    assert got == want
    lists = [r.prefix for r in requests if r.is_list]
    assert lists and all(p.startswith("lake/parts/.hoodie/") for p in lists), lists
    assert "lake/parts/.hoodie/metadata/files/" in lists
    data_reads = {r.path.split("/")[4] for r in requests if r.method == "GET" and not r.is_list and "/.hoodie/" not in r.path}
    assert data_reads == {f"p{i:02d}" for i in range(20)}  # every partition's file was read, none listed
    rs_options = hudi_rs.s3_storage_options(s3_server.env())
    assert len(hudi_rs.snapshot(uri, storage_options=rs_options)) == 200  # hudi-rs reads it too

    # the control: without the metadata table the same read lists the table's folders
    table.maintenance.drop_metadata_partition("files")
    with s3_server.recording() as requests:
        got = sorted((r["id"], r["value"]) for r in rows(Table.open(spark, uri, storage_options=opts).read()))
    assert got == want
    assert any(r.is_list and not r.prefix.startswith("lake/parts/.hoodie") for r in requests)


def test_clustering_on_s3(spark, s3_server):
    """A merge-on-read table of version 9 on S3 (moto): clustered on a Hilbert curve, read back by
    this engine and hudi-rs; its plan names the slices by their s3:// URIs, as Apache Hudi's do."""
    from engine.services.maintenance import Maintenance
    from engine.table.clustering_plan import read_plan
    from engine.timeline.instant import Action
    from tests.support import hudi_rs

    bucket = s3_server.create_bucket()
    uri = f"s3://{bucket}/lake/clustered"
    opts = s3_server.storage_options()
    table = Table.create(spark, uri, name="clustered", record_key="id", partition_fields="city",
                         precombine_field="ts", table_type="MERGE_ON_READ", table_version=9, storage_options=opts)
    write = {"hoodie.parquet.small.file.limit": "0", "hoodie.clean.automatic": "false"}
    for b in range(3):
        table.upsert(spark.createDataFrame([(b * 10 + i, f"n{b}{i}", ["paris", "rome"][i % 2], b) for i in range(4)],
                                           SCHEMA), options=write)
    table.upsert(spark.createDataFrame([(1, "u", "rome", 9)], SCHEMA), options=write)
    model = sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(table.read()))
    assert len(model) == 12 and len(table.file_system_view().latest_slices()) == 6
    result = Maintenance(table.meta, {"hoodie.clustering.plan.strategy.sort.columns": "ts,name",
                                      "hoodie.layout.optimize.strategy": "hilbert"}).cluster(spark=spark)
    assert sorted(result.replaced) == ["paris", "rome"] and len(result.files) == 2
    reopened = Table.open(spark, uri, storage_options=opts)
    assert reopened.timeline().get(result.instant).action is Action.REPLACE_COMMIT
    assert len(reopened.file_system_view().latest_slices()) == 2
    assert sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(reopened.read())) == model
    rs = hudi_rs.snapshot(uri, storage_options=hudi_rs.s3_storage_options(s3_server.env()))
    assert sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rs) == model
    plan = read_plan(reopened.meta, result.instant, Action.CLUSTERING)
    client = s3_server.client()
    for g in plan.groups:
        for s in g.slices:
            assert s.base_file and client.head_object(Bucket=bucket, Key=f"lake/clustered/{s.base_path}")
    from engine.timeline import avro_models

    raw = client.get_object(Bucket=bucket, Key=f"lake/clustered/.hoodie/timeline/{result.instant}.clustering.requested")
    record = avro_models.deserialize("HoodieRequestedReplaceMetadata", raw["Body"].read())
    paths = [s["dataFilePath"] for g in record["clusteringPlan"]["inputGroups"] for s in g["slices"]]
    assert paths and all(p.startswith(f"s3://{bucket}/lake/clustered/") for p in paths)
