"""HBASE index: its pure helpers, and tag/update against an HBase Thrift server with small DataFrames.

The Spark tests (markers spark, hbase) run against the `hbase_thrift` fixture: the in-memory
stand-in, or a real HBase when HBASE_THRIFT_HOST is set.
"""

from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass

import happybase
import pytest

from engine.columns import EXISTING_PART_COL, FILE_ID_COL, KEY_COL, OP_COL, PART_COL
from engine.errors import InvalidConfigError, StorageError
from engine.index.base import TagContext
from engine.index.hbase import (
    COMMIT_TS,
    FILE_NAME,
    PARTITION_PATH,
    PREV_FILE_ID_COL,
    HBaseIndex,
    HBaseSettings,
    TokenBucket,
    batched,
    is_valid_commit,
    lookup_rows,
    plan_mutations,
)
from engine.timeline.timeline import Timeline

DONE = "20240101000000000"  # a completed commit
LATER = "20240102000000000"  # completed too
INFLIGHT = "20240103000000000"  # never completed (failed / rolled back)

# ---- pure helpers ------------------------------------------------------------------------

class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_batched():
    assert list(batched(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(batched([], 3)) == []
    assert list(batched("ab", 2)) == [["a", "b"]]
    with pytest.raises(ValueError):
        list(batched([1], 0))


def test_token_bucket_allows_a_burst_then_waits_for_the_shortfall():
    clock = FakeClock()
    bucket = TokenBucket(rate=10, clock=clock, sleep=clock.sleep)
    assert bucket.acquire(10) == 0.0  # starts full: one second's worth
    assert bucket.acquire(5) == pytest.approx(0.5)
    assert clock.slept == [pytest.approx(0.5)]
    clock.now += 1.0  # refills 10 tokens, capped at capacity 10
    assert bucket.acquire(10) == 0.0
    assert bucket.acquire(1) == pytest.approx(0.1)


def test_token_bucket_rate_over_many_calls():
    clock = FakeClock()
    bucket = TokenBucket(rate=100, burst=1, clock=clock, sleep=clock.sleep)
    for _ in range(201):
        bucket.acquire(1)
    assert clock.now - 100.0 == pytest.approx(2.0)  # 200 ops beyond the burst at 100/s


def test_settings_defaults_env_and_validation():
    s = HBaseSettings.from_options({}, env={"HBASE_THRIFT_HOST": "hb", "HBASE_THRIFT_PORT": "9095"})
    assert (s.host, s.port, s.table, s.get_batch_size, s.put_batch_size) == ("hb", 9095, None, 100, 100)
    assert (s.transport, s.protocol, s.max_qps) == ("buffered", "binary", 10_000)
    assert s.table_name("trips") == "hudi_index_trips"
    assert s.table_name("a b/c") == "hudi_index_a_b_c"
    s = HBaseSettings.from_options(
        {
            "hoodie.index.hbase.thrift.host": "h",
            "hoodie.index.hbase.thrift.port": "1234",
            "hoodie.index.hbase.table": "idx",
            "hoodie.index.hbase.get.batch.size": "7",
            "hoodie.index.hbase.put.batch.size": "9",
            "hoodie.index.hbase.max.qps.per.region.server": "50",
            "hoodie.index.hbase.thrift.transport": "FRAMED",
            "hoodie.index.hbase.thrift.protocol": "compact",
        },
        env={},
    )
    assert (s.host, s.port, s.table, s.get_batch_size, s.put_batch_size, s.max_qps) == ("h", 1234, "idx", 7, 9, 50)
    assert (s.transport, s.protocol, s.table_name("trips")) == ("framed", "compact", "idx")
    assert s.task_qps(4) == 12.5
    assert s.task_qps(1000) == 1.0
    with pytest.raises(InvalidConfigError, match="thrift.host"):
        HBaseSettings.from_options({}, env={})
    with pytest.raises(InvalidConfigError, match="get.batch.size"):
        HBaseSettings.from_options({"hoodie.index.hbase.get.batch.size": "0"}, env={"HBASE_THRIFT_HOST": "h"})
    with pytest.raises(InvalidConfigError, match="transport"):
        HBaseSettings.from_options({"hoodie.index.hbase.thrift.transport": "http"}, env={"HBASE_THRIFT_HOST": "h"})


def test_is_valid_commit():
    done = frozenset({"20240102000000000"})
    assert is_valid_commit("20240102000000000", done, None)
    assert not is_valid_commit("20240103000000000", done, None)  # inflight or rolled back
    assert not is_valid_commit("20240101000000000", done, None)  # no archive: debris
    assert is_valid_commit("20240101000000000", done, "20240102000000000")  # archived commit


def test_lookup_rows_ignores_invisible_and_incomplete_entries():
    counts = {"keys": 0, "found": 0, "ignored_uncommitted": 0}
    rows = [
        (b"k1", {COMMIT_TS: b"c1", FILE_NAME: b"f1", PARTITION_PATH: b"p1"}),
        (b"k2", {COMMIT_TS: b"c2", FILE_NAME: b"f2", PARTITION_PATH: b"p2"}),
        (b"k3", {COMMIT_TS: b"c1", FILE_NAME: b"f3"}),
    ]
    assert lookup_rows(rows, lambda ts: ts == "c1", counts) == (["k1"], ["p1"], ["f1"])
    assert counts == {"keys": 0, "found": 1, "ignored_uncommitted": 2}


def test_plan_mutations():
    rows = [
        ("new", "p1", "f1", "U", None),  # insert: put
        ("same", "p1", "f1", "U", "f1"),  # update in place: no put
        ("moved", "p2", "f9", "U", None),  # moved: put in the new partition...
        ("moved", "p1", "f1", "D", ...),  # ...and no delete of the old location
        ("gone", "p1", "f1", "D", ...),  # delete
        ("gone", "p1", "f1", "D", ...),
        ("unknown", "p1", "f2", "U", ...),  # previous location unknown: put
    ]
    puts, deletes = plan_mutations(rows)
    assert puts == [("new", "p1", "f1"), ("moved", "p2", "f9"), ("unknown", "p1", "f2")]
    assert deletes == ["gone"]


# ---- against an HBase Thrift server -------------------------------------------------------


@dataclass
class _Config:
    name: str


class FakeMeta:
    """Just what the HBASE index reads from a table: its name and its timeline."""

    def __init__(self, name: str, file_names: list[str]) -> None:
        self.config = _Config(name)
        self._names = file_names

    def timeline(self) -> Timeline:
        return Timeline.from_file_names(self._names, has_archive=False)


TIMELINE = [
    f"{DONE}.commit.requested", f"{DONE}.inflight", f"{DONE}.commit",
    f"{LATER}.commit.requested", f"{LATER}.inflight", f"{LATER}.commit",
    f"{INFLIGHT}.commit.requested", f"{INFLIGHT}.inflight",
]


@pytest.fixture
def hbase_index(hbase_thrift):
    host, port = hbase_thrift
    table = f"hudi_index_test_{uuid.uuid4().hex[:10]}"
    index = HBaseIndex(
        {
            "hoodie.index.hbase.thrift.host": host,
            "hoodie.index.hbase.thrift.port": str(port),
            "hoodie.index.hbase.table": table,
            "hoodie.index.hbase.get.batch.size": "2",
            "hoodie.index.hbase.put.batch.size": "2",
        }
    )
    assert index.check_reachable() == table
    conn = happybase.Connection(host, port)
    try:
        yield index, conn.table(table)
    finally:
        conn.delete_table(table, disable=True)
        conn.close()


def context(spark, meta: FakeMeta) -> TagContext:
    return TagContext(spark=spark, meta=meta, view=None, partitions=["p1", "p2"], incoming_keys={})  # type: ignore[arg-type]


def entries(table) -> dict[str, tuple[str, str, str]]:
    return {
        k.decode(): (v[COMMIT_TS].decode(), v[FILE_NAME].decode(), v[PARTITION_PATH].decode())
        for k, v in table.scan()
    }


@pytest.mark.hbase
def test_check_reachable_creates_a_one_version_table(hbase_index):
    index, table = hbase_index
    assert table.families()[b"_s"]["max_versions"] == 1
    assert index.check_reachable() == index.settings.table  # idempotent
    index.check_available()  # the contract's name for it
    assert index.is_global and index.wants_locations


@pytest.mark.hbase
def test_unreachable_server_is_storage_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    index = HBaseIndex({"hoodie.index.hbase.thrift.host": "127.0.0.1", "hoodie.index.hbase.thrift.port": str(port)},
                       table_name="t")
    with pytest.raises(StorageError, match=f"HBase index unreachable at 127.0.0.1:{port}"):
        index.check_reachable()
    with pytest.raises(StorageError, match=f"HBase index unreachable at 127.0.0.1:{port}"):
        index.check_available()


@pytest.mark.spark
@pytest.mark.hbase
def test_update_then_tag(spark, hbase_index):
    index, table = hbase_index
    meta = FakeMeta("trips", TIMELINE)
    ctx = context(spark, meta)
    located = spark.createDataFrame(
        [("k1", "p1", "f1", "U"), ("k2", "p1", "f1", "U"), ("k3", "p2", "f2", "U")],
        f"{KEY_COL} string, {PART_COL} string, {FILE_ID_COL} string, {OP_COL} string",
    )
    index.update_location(ctx, DONE, located)
    assert index.last_update == {"puts": 3, "deletes": 0}
    assert entries(table) == {"k1": (DONE, "f1", "p1"), "k2": (DONE, "f1", "p1"), "k3": (DONE, "f2", "p2")}

    # the next commit: k1 deleted, k2 updated in place (no put), k3 moved to p1, k4 inserted
    located = spark.createDataFrame(
        [
            ("k1", "p1", "f1", "D", "f1"),
            ("k2", "p1", "f1", "U", "f1"),
            ("k3", "p2", "f2", "D", "f2"),
            ("k3", "p1", "f3", "U", None),
            ("k4", "p2", "f2", "U", None),
        ],
        f"{KEY_COL} string, {PART_COL} string, {FILE_ID_COL} string, {OP_COL} string, {PREV_FILE_ID_COL} string",
    )
    index.update_location(ctx, LATER, located)
    assert index.last_update == {"puts": 2, "deletes": 1}
    assert entries(table) == {"k2": (DONE, "f1", "p1"), "k3": (LATER, "f3", "p1"), "k4": (LATER, "f2", "p2")}

    # an entry written by an instant that never completed is ignored
    table.put(b"k5", {COMMIT_TS: INFLIGHT.encode(), FILE_NAME: b"f9", PARTITION_PATH: b"p2"})
    records = spark.createDataFrame(
        [(k, "p2", i) for i, k in enumerate(["k1", "k2", "k3", "k4", "k5", "k6"])],
        f"{KEY_COL} string, {PART_COL} string, v long",
    )
    tagged = index.tag_location(ctx, records)
    got = sorted(tuple(r) for r in tagged.select(KEY_COL, PART_COL, "v", FILE_ID_COL, EXISTING_PART_COL).collect())
    assert got == [
        ("k1", "p2", 0, None, None),
        ("k2", "p2", 1, "f1", "p1"),
        ("k3", "p2", 2, "f3", "p1"),
        ("k4", "p2", 3, "f2", "p2"),
        ("k5", "p2", 4, None, None),
        ("k6", "p2", 5, None, None),
    ]
    assert index.tagging_stats() == {"keys": 6, "found": 3, "ignored_uncommitted": 1}


@pytest.mark.spark
@pytest.mark.hbase
def test_tag_with_no_entries_and_update_needs_a_dataframe(spark, hbase_index):
    index, _table = hbase_index
    ctx = context(spark, FakeMeta("trips", TIMELINE))
    records = spark.createDataFrame([("a", "p1")], f"{KEY_COL} string, {PART_COL} string")
    assert [tuple(r) for r in index.tag_location(ctx, records).collect()] == [("a", "p1", None, None)]
    with pytest.raises(TypeError, match="located records"):
        index.update_location(ctx, DONE, [{"file_id": "f1"}])


def test_rollback_is_a_no_op():
    index = HBaseIndex({"hoodie.index.hbase.thrift.host": "127.0.0.1"}, table_name="t")
    index.rollback_commit(None, INFLIGHT)  # type: ignore[arg-type]  (touches nothing, not even the server)
    assert index.hbase_table() == "hudi_index_t"
