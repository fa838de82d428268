"""Writes under the HBASE index, end to end, against the HBase Thrift server of `hbase_thrift`
(the stand-in in tests/support, or a real HBase when HBASE_THRIFT_HOST is set)."""

from __future__ import annotations

import random
import socket
import uuid

import happybase
import pytest

from engine import StorageError, Table
from tests.support import hudi_rs
from tests.support.tables import data_rows, rows, tree_bytes

pytestmark = [pytest.mark.spark, pytest.mark.hbase]

SCHEMA = "id string, city string, v string, ts long"


@pytest.fixture
def hbase(hbase_thrift):
    host, port = hbase_thrift
    name = f"hbt_{uuid.uuid4().hex[:10]}"
    options = {"hoodie.index.hbase.thrift.host": host, "hoodie.index.hbase.thrift.port": str(port),
               "hoodie.index.hbase.table": name}
    conn = happybase.Connection(host, port, autoconnect=True)
    yield options, conn, name
    if name.encode() in conn.tables():
        conn.delete_table(name, disable=True)
    conn.close()


def entries(conn, name) -> dict[str, tuple[str, str, str]]:
    return {
        k.decode(): (d[b"_s:partition_path"].decode(), d[b"_s:file_name"].decode(), d[b"_s:commit_ts"].decode())
        for k, d in conn.table(name).scan()
    }


def make(spark, path, index="HBASE") -> Table:
    return Table.create(spark, str(path), name="h", record_key="id", partition_fields="city",
                        precombine_field="ts", index=index)


def test_same_operations_same_snapshot_as_global_simple(spark, tmp_path, hbase):
    options, conn, name = hbase
    rng = random.Random(5)
    tables = {"HBASE": make(spark, tmp_path / "h"), "GLOBAL_SIMPLE": make(spark, tmp_path / "g", "GLOBAL_SIMPLE")}
    for step in range(4):
        batch = [(f"k{rng.randrange(40):02d}", f"c{rng.randrange(3)}", f"v{step}", step) for _ in range(20)]
        victims = [(f"k{rng.randrange(40):02d}", "any") for _ in range(4)]
        for t in tables.values():
            t.upsert(spark.createDataFrame(batch, SCHEMA), options=options)
            t.delete(spark.createDataFrame(victims, "id string, city string"), options=options)
    h = tables["HBASE"]
    assert data_rows(h.read()) == data_rows(tables["GLOBAL_SIMPLE"].read())
    assert rows(h.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(h.path))
    # one HBase row per live key, pointing at its partition and file group
    live = {r["id"]: (r["_hoodie_partition_path"], r["_hoodie_file_name"].split("_")[0]) for r in rows(h.read())}
    stored = entries(conn, name)
    assert {k: v[:2] for k, v in stored.items()} == live
    completed = {i.time for i in h.timeline().completed_writes}
    assert {v[2] for v in stored.values()} <= completed


def test_unreachable_hbase_fails_before_any_file_is_written(spark, tmp_path):
    t = make(spark, tmp_path / "t")
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before = tree_bytes(t.path)
    opts = {"hoodie.index.hbase.thrift.host": "127.0.0.1", "hoodie.index.hbase.thrift.port": str(port)}
    with pytest.raises(StorageError, match=f"HBase index unreachable at 127.0.0.1:{port}"):
        t.upsert(spark.createDataFrame([("a", "paris", "v", 1)], SCHEMA), options=opts)
    assert tree_bytes(t.path) == before


def test_entries_of_uncompleted_commits_are_ignored(spark, tmp_path, hbase):
    options, conn, name = hbase
    t = make(spark, tmp_path / "t")
    r1 = t.upsert(spark.createDataFrame([("a", "paris", "v1", 1)], SCHEMA), options=options)
    # an entry left by a commit that never completed (as after a crash or a rollback)
    conn.table(name).put(b"ghost", {b"_s:commit_ts": b"29990101000000000", b"_s:file_name": b"nope-0",
                                    b"_s:partition_path": b"paris"})
    r2 = t.upsert(spark.createDataFrame([("ghost", "paris", "g", 2), ("a", "paris", "v2", 2)], SCHEMA), options=options)
    assert (r2.inserts, r2.updates) == (1, 1)
    assert [(x["id"], x["v"]) for x in rows(t.read())] == [("a", "v2"), ("ghost", "g")]
    stored = entries(conn, name)
    assert stored["ghost"][2] == r2.instant and stored["a"][2] == r1.instant  # an in-place update keeps its entry


def test_rollback_puts_back_what_a_rolled_back_write_deleted_or_moved(spark, tmp_path, hbase):
    options, conn, name = hbase
    # HBASE updates a record whose partition changed in place by default (Apache Hudi's
    # hoodie.hbase.index.update.partition.path=false): this test moves it
    opts = {**options, "hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
            "hoodie.hbase.index.update.partition.path": "true"}
    t = make(spark, tmp_path / "t")
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "paris", "v1", 1)], SCHEMA), options=opts)
    before = entries(conn, name)
    r2 = t.delete(spark.createDataFrame([("a", "any")], "id string, city string"), options=opts)
    assert "a" not in entries(conn, name)
    t.maintenance.__class__(t.meta, opts).rollback(r2.instant)
    assert entries(conn, name) == before  # the deleted key's location is back
    r3 = t.upsert(spark.createDataFrame([("b", "rome", "v3", 3)], SCHEMA), options=opts)  # moves b
    assert entries(conn, name)["b"][0] == "rome"
    t.maintenance.__class__(t.meta, opts).rollback(r3.instant)
    assert entries(conn, name) == before
    # the index is right: re-writing a key updates it in place, nothing is duplicated
    r4 = t.upsert(spark.createDataFrame([("a", "paris", "v4", 4), ("c", "oslo", "v4", 4)], SCHEMA), options=opts)
    assert (r4.inserts, r4.updates) == (1, 1)
    assert [(x["id"], x["city"], x["v"]) for x in rows(t.read())] == [
        ("c", "oslo", "v4"), ("a", "paris", "v4"), ("b", "paris", "v1")
    ]
    assert rows(t.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))
    assert set(entries(conn, name)) == {"a", "b", "c"}


def test_a_rollback_interrupted_among_its_deletions_reverts_the_whole_index_when_resumed(spark, tmp_path, hbase, monkeypatch):
    from engine import failpoints
    from engine.services.maintenance import Maintenance

    class Crash(BaseException):
        pass

    options, conn, name = hbase
    opts = {**options, "hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
    t = make(spark, tmp_path / "t")
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "paris", "v1", 1)], SCHEMA), options=opts)
    before, snapshot = entries(conn, name), rows(t.read())
    # r2 inserts c in oslo and moves b to rome: three files (oslo, paris, rome), oslo deleted first
    r2 = t.upsert(spark.createDataFrame([("c", "oslo", "v2", 2), ("b", "rome", "v2", 2)], SCHEMA), options=opts)
    assert set(entries(conn, name)) == {"a", "b", "c"}
    # the dry run names the index entries the rollback reverts, and changes nothing
    from engine.services.rollback import IndexRevert

    after_r2, files_r2 = entries(conn, name), tree_bytes(t.path)
    plan = Maintenance(t.meta, opts).rollback(r2.instant, dry_run=True)
    assert plan.index_revert == IndexRevert("HBASE", 2, 1, ("c",), ("a", "b"))  # b back to paris, c gone
    assert entries(conn, name) == after_r2 and tree_bytes(t.path) == files_r2

    def crash(point):
        if point == "rollback.files_deleted":
            raise Crash(point)

    with monkeypatch.context() as m:  # the process dies right after the rollback's first deletion
        m.setattr(failpoints, "hit", crash)
        with pytest.raises(Crash):
            Maintenance(t.meta, opts).rollback(r2.instant)
    assert not (tmp_path / "t" / "oslo").exists() or not any((tmp_path / "t" / "oslo").glob("*.parquet"))
    report = Maintenance(t.meta, opts).repair()
    assert len(report.rollbacks_finished) == 1
    # the resumed rollback saw only the files left, but the index was reverted before any went
    assert entries(conn, name) == before
    assert rows(t.read()) == snapshot == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))
    r3 = t.upsert(spark.createDataFrame([("c", "lima", "v3", 3)], SCHEMA), options=opts)
    assert (r3.inserts, r3.updates) == (1, 0)


def test_a_write_aborted_after_the_index_update_reverts_the_index(spark, tmp_path, hbase, monkeypatch):
    from engine.errors import ConcurrentWriteError
    from engine.services.transaction import WriteGuard

    options, conn, name = hbase
    opts = {**options, "hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
    t = make(spark, tmp_path / "t")
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "paris", "v1", 1)], SCHEMA), options=opts)
    before, snapshot = entries(conn, name), tree_bytes(t.path)

    def lost(self):
        raise ConcurrentWriteError("lock lost: taken over by another writer")

    with monkeypatch.context() as m:  # the lock is lost after the HBase puts/deletes, before completion
        m.setattr(WriteGuard, "before_complete", lost)
        with pytest.raises(ConcurrentWriteError):
            t.upsert(spark.createDataFrame([("a", "rome", "v2", 2), ("c", "oslo", "v2", 2)], SCHEMA), options=opts)
    assert entries(conn, name) == before  # a's move was undone, c's insert removed
    assert tree_bytes(t.path) == snapshot
    r = t.upsert(spark.createDataFrame([("a", "paris", "v3", 3)], SCHEMA), options=opts)
    assert (r.inserts, r.updates) == (0, 1)


def test_two_writers_inserting_one_new_key_under_optimistic_concurrency(spark, tmp_path, hbase, monkeypatch):
    """Optimistic concurrency control: a write paused with its files written while another inserts
    the same new key and commits. The paused one fails at its commit with the key named, its
    HBase puts never made; the index keeps the winner's location."""
    from engine.errors import WriteConflictError
    from tests.integration.test_concurrency import paused_in_thread, resume

    options, conn, name = hbase
    occ = {**options, "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
           "hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
    t = make(spark, tmp_path / "t")
    t.upsert(spark.createDataFrame([("1", "paris", "a", 1)], SCHEMA), options=occ)
    thread, caught = paused_in_thread(
        lambda: t.upsert(spark.createDataFrame([("7", "lyon", "slow", 1)], SCHEMA), options=occ), tmp_path / "p", monkeypatch
    )
    (slow,) = [i.time for i in t.timeline().pending]
    r = t.upsert(spark.createDataFrame([("7", "lyon", "fast", 1), ("8", "lyon", "fast", 1)], SCHEMA), options=occ)
    resume(tmp_path / "p")
    thread.join(120)
    (exc,) = caught
    assert isinstance(exc, WriteConflictError) and (exc.instant, exc.other, exc.keys) == (slow, r.instant, ("7",))
    (fast_group,) = {s.fileId for s in t.commit_metadata(r.instant).write_stats}
    assert entries(conn, name)["7"] == ("lyon", fast_group, r.instant)
    expected = [("1", "paris", "a", 1), ("7", "lyon", "fast", 1), ("8", "lyon", "fast", 1)]
    assert sorted((r["id"], r["city"], r["v"], r["ts"]) for r in data_rows(t.read())) == expected
    assert sorted((r["id"], r["city"], r["v"], r["ts"]) for r in hudi_rs.snapshot(t.path)) == expected
    assert slow not in {i.time for i in t.timeline()}


def test_an_insert_the_driver_plans_keeps_the_hbase_index(spark, tmp_path, hbase):
    """An insert of local data (its size known: planned on the driver) into a table whose index
    takes its located records as a DataFrame (HBASE) is written by one Spark job, not locally, and
    its keys reach HBase: the next upsert updates them."""
    import pyarrow as pa

    options, _conn, _name = hbase
    t = make(spark, str(tmp_path / "t"))
    batch = pa.table({"id": ["a", "b"], "city": ["paris", "rome"], "v": ["v1", "v1"], "ts": [1, 1]})
    first = t.insert(spark.createDataFrame(batch), options=options)
    assert (first.write_path, first.inserts) == ("one-job", 2)
    again = t.upsert(spark.createDataFrame([("a", "paris", "v2", 2)], SCHEMA), options=options)
    assert (again.updates, again.inserts) == (1, 0)
    assert sorted((r["id"], r["v"]) for r in rows(t.read())) == [("a", "v2"), ("b", "v1")]
