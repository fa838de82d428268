"""The engine on the running stack: upserts through the Spark cluster into the S3 warehouse
(read back by hudi-rs), and the HBASE index against the stack's HBase Thrift server.

Nothing here names a host or a port: Spark, S3 and HBase come from SPARK_MASTER, AWS_* and
HBASE_THRIFT_HOST/PORT as the compose file sets them (see conftest.py).
"""

from __future__ import annotations

import os
import uuid

import boto3
import botocore.config
import happybase
import pytest

from engine import Table
from engine.services.maintenance import Maintenance
from tests.support import hudi_rs
from tests.support.tables import rows

pytestmark = pytest.mark.stack

SCHEMA = "id string, city string, fare double, ts long"
KEYS = "id string, city string"


def s3_client():
    return boto3.session.Session().client(
        "s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=botocore.config.Config(s3={"addressing_style": "path"}))


def s3_keys(uri: str) -> list[str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    pages = s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    return sorted(o["Key"].removeprefix(prefix + "/") for page in pages for o in page.get("Contents", []))


def executors(spark) -> int:
    """Executors registered with this application (a local master has none: only the driver)."""
    return spark.sparkContext._jsc.sc().getExecutorIds().size()


def test_upserts_through_the_cluster_into_s3_read_back_by_hudi_rs(cluster_spark, table_uri):
    spark = cluster_spark
    t = Table.create(spark, table_uri, name="stack_trips", record_key="id", partition_fields="city",
                     precombine_field="ts")
    r1 = t.upsert(spark.createDataFrame(
        [("t1", "paris", 10.0, 1), ("t2", "rome", 20.0, 1), ("t3", "paris", 30.0, 1)], SCHEMA))
    r2 = t.upsert(spark.createDataFrame([("t1", "paris", 11.0, 2), ("t4", "oslo", 40.0, 2)], SCHEMA))
    r3 = t.delete(spark.createDataFrame([("t2", "rome")], KEYS))
    assert (r1.inserts, r2.inserts, r2.updates, r3.deletes) == (3, 1, 1, 1)
    assert executors(spark) >= 1  # the writes ran on the cluster's executors, not in a local master

    ours = rows(Table.open(spark, table_uri).read())
    assert [(r["id"], r["city"], r["fare"], r["_hoodie_commit_time"]) for r in ours] == [
        ("t4", "oslo", 40.0, r2.instant), ("t1", "paris", 11.0, r2.instant), ("t3", "paris", 30.0, r1.instant)
    ]
    options = hudi_rs.s3_storage_options()
    assert hudi_rs.sort_rows(hudi_rs.snapshot(table_uri, storage_options=options)) == ours
    as_of_r1 = hudi_rs.snapshot(table_uri, as_of=r1.instant, storage_options=options)
    assert sorted((r["id"], r["fare"]) for r in as_of_r1) == [("t1", 10.0), ("t2", 20.0), ("t3", 30.0)]

    # the objects are in the stack's bucket: the three commits on the timeline, base files per partition
    keys = s3_keys(table_uri)
    assert [k for k in keys if k.startswith(".hoodie/") and k.endswith(".commit")] == [
        f".hoodie/{i}.commit" for i in (r1.instant, r2.instant, r3.instant)
    ]
    assert sorted({k.split("/")[0] for k in keys if k.endswith(".parquet")}) == ["oslo", "paris", "rome"]


@pytest.fixture
def hbase_index():
    """A fresh HBase table name for the index, dropped afterwards, on the stack's Thrift server."""
    name = f"stack_{uuid.uuid4().hex[:10]}"
    conn = happybase.Connection(os.environ["HBASE_THRIFT_HOST"], int(os.environ.get("HBASE_THRIFT_PORT", "9090")))
    yield conn, name
    if name.encode() in conn.tables():
        conn.delete_table(name, disable=True)
    conn.close()


def entries(conn, name) -> dict[str, tuple[str, str, str]]:
    """key -> (partition, file id, commit) as stored in the index table."""
    return {
        k.decode(): (d[b"_s:partition_path"].decode(), d[b"_s:file_name"].decode(), d[b"_s:commit_ts"].decode())
        for k, d in conn.table(name).scan()
    }


def locations(table: Table) -> dict[str, tuple[str, str]]:
    """key -> (partition, file id) of the live records."""
    return {r["id"]: (r["_hoodie_partition_path"], r["_hoodie_file_name"].split("_")[0]) for r in rows(table.read())}


def test_hbase_index_writes_moves_rollback_and_uncompleted_entries(cluster_spark, table_uri, hbase_index):
    spark = cluster_spark
    conn, name = hbase_index
    # no address option: the Thrift server comes from HBASE_THRIFT_HOST/PORT. The test moves a
    # record to another partition, which HBASE does only when asked (Apache Hudi's default,
    # hoodie.hbase.index.update.partition.path=false, updates it in place)
    opts = {"hoodie.index.hbase.table": name, "hoodie.clean.automatic": "false",
            "hoodie.archive.automatic": "false", "hoodie.hbase.index.update.partition.path": "true"}
    t = Table.create(spark, table_uri, name="stack_hbase", record_key="id", partition_fields="city",
                     precombine_field="ts", index="HBASE")

    # writes: one HBase row per key, pointing at its partition and file group, stamped with the commit
    r1 = t.upsert(spark.createDataFrame(
        [("a", "paris", 1.0, 1), ("b", "paris", 2.0, 1), ("c", "rome", 3.0, 1)], SCHEMA), options=opts)
    assert name.encode() in conn.tables()
    after_r1, snapshot_r1 = entries(conn, name), rows(t.read())
    assert after_r1 == {k: (*loc, r1.instant) for k, loc in locations(t).items()}
    assert sorted(after_r1) == ["a", "b", "c"]

    # a partition move (the index is global): b leaves paris for oslo, no copy stays behind
    r2 = t.upsert(spark.createDataFrame([("b", "oslo", 2.5, 2)], SCHEMA), options=opts)
    assert [(r["id"], r["city"], r["fare"]) for r in rows(t.read())] == [
        ("b", "oslo", 2.5), ("a", "paris", 1.0), ("c", "rome", 3.0)
    ]
    moved = entries(conn, name)
    assert moved["b"] == (*locations(t)["b"], r2.instant) and moved["b"][0] == "oslo"
    assert {k: v for k, v in moved.items() if k != "b"} == {k: v for k, v in after_r1.items() if k != "b"}
    storage = hudi_rs.s3_storage_options()
    assert hudi_rs.sort_rows(hudi_rs.snapshot(table_uri, storage_options=storage)) == rows(t.read())

    # rollback of the move: the index and the data are as after r1
    Maintenance(t.meta, opts).rollback(r2.instant)
    assert entries(conn, name) == after_r1
    assert rows(t.read()) == snapshot_r1
    assert hudi_rs.sort_rows(hudi_rs.snapshot(table_uri, storage_options=storage)) == snapshot_r1

    # an entry written by a commit that never completed is ignored: the key is new to the table
    conn.table(name).put(b"ghost", {b"_s:commit_ts": b"29990101000000000", b"_s:file_name": b"nope-0",
                                    b"_s:partition_path": b"paris"})
    r3 = t.upsert(spark.createDataFrame([("ghost", "rome", 9.0, 3), ("a", "paris", 1.5, 3)], SCHEMA), options=opts)
    assert (r3.inserts, r3.updates) == (1, 1)
    assert [(r["id"], r["city"]) for r in rows(t.read())] == [("a", "paris"), ("b", "paris"), ("c", "rome"),
                                                             ("ghost", "rome")]
    final = entries(conn, name)
    assert final["ghost"] == (*locations(t)["ghost"], r3.instant) and final["ghost"][0] == "rome"
    assert final["a"] == after_r1["a"]  # an in-place update keeps its entry
