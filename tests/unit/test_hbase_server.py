"""The HBase Thrift1 test server, exercised only through happybase.

Runs against the in-memory stand-in, or against a real HBase Thrift server when
HBASE_THRIFT_HOST is set, so every assertion here is HBase's behaviour, not the stand-in's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import happybase
import pytest

from tests.support.hbase_server import hbase_server

pytestmark = pytest.mark.hbase


@pytest.fixture
def connection(hbase_thrift) -> Iterator[happybase.Connection]:
    host, port = hbase_thrift
    conn = happybase.Connection(host, port, timeout=20_000)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def table_name(connection) -> Iterator[bytes]:
    name = f"test_{uuid.uuid4().hex[:12]}".encode()
    connection.create_table(name, {"_s": dict(max_versions=3)})
    try:
        yield name
    finally:
        if name in connection.tables():
            connection.delete_table(name, disable=True)


@pytest.fixture
def table(connection, table_name) -> happybase.Table:
    return connection.table(table_name)


def fill(table: happybase.Table, n: int = 5) -> None:
    with table.batch(batch_size=2) as b:
        for i in range(n):
            b.put(f"k{i}".encode(), {b"_s:commit_ts": f"c{i}".encode(), b"_s:file_name": f"f{i}".encode()})


def test_create_table_lists_it_with_its_family(connection, table_name):
    assert table_name in connection.tables()
    families = connection.table(table_name).families()
    assert list(families) == [b"_s"]
    assert families[b"_s"]["max_versions"] == 3
    assert connection.is_table_enabled(table_name) is True


def test_create_existing_table_is_already_exists(connection, table_name):
    with pytest.raises(Exception) as err:
        connection.create_table(table_name, {"_s": {}})
    assert type(err.value).__name__ == "AlreadyExists"


def test_put_and_row(table):
    table.put(b"r1", {b"_s:commit_ts": b"001", b"_s:file_name": b"fid-1", b"_s:partition_path": b"p=1"})
    assert table.row(b"r1") == {b"_s:commit_ts": b"001", b"_s:file_name": b"fid-1", b"_s:partition_path": b"p=1"}
    assert table.row(b"r1", columns=[b"_s:file_name"]) == {b"_s:file_name": b"fid-1"}
    assert table.row(b"r1", columns=[b"_s"]) == {
        b"_s:commit_ts": b"001",
        b"_s:file_name": b"fid-1",
        b"_s:partition_path": b"p=1",
    }
    assert table.row(b"missing") == {}


def test_batch_with_batch_size_and_rows_skip_missing(table):
    fill(table, 5)
    got = table.rows([b"k3", b"nope", b"k0", b"k4"], columns=[b"_s:commit_ts"])
    assert got == [(b"k3", {b"_s:commit_ts": b"c3"}), (b"k0", {b"_s:commit_ts": b"c0"}), (b"k4", {b"_s:commit_ts": b"c4"})]
    assert table.rows([]) == {}  # happybase's own short-cut, no round trip


def test_scan_ranges_prefix_and_limit(table):
    fill(table, 5)
    table.put(b"j9", {b"_s:commit_ts": b"x"})
    table.put(b"l0", {b"_s:commit_ts": b"y"})
    keys = lambda scan: [k for k, _ in scan]  # noqa: E731
    assert keys(table.scan()) == [b"j9", b"k0", b"k1", b"k2", b"k3", b"k4", b"l0"]
    assert keys(table.scan(row_start=b"k1", row_stop=b"k3")) == [b"k1", b"k2"]
    assert keys(table.scan(row_start=b"k35")) == [b"k4", b"l0"]
    assert keys(table.scan(row_stop=b"k1")) == [b"j9", b"k0"]
    assert keys(table.scan(row_prefix=b"k")) == [b"k0", b"k1", b"k2", b"k3", b"k4"]
    assert keys(table.scan(row_prefix=b"k", limit=2)) == [b"k0", b"k1"]
    assert keys(table.scan(limit=3, batch_size=1)) == [b"j9", b"k0", b"k1"]
    assert keys(table.scan(reverse=True, limit=2)) == [b"l0", b"k4"]
    assert list(table.scan(row_start=b"k2", row_stop=b"k3", columns=[b"_s:file_name"])) == [
        (b"k2", {b"_s:file_name": b"f2"})
    ]
    assert list(table.scan(row_prefix=b"zz")) == []


def test_scan_sorted_columns_and_timestamps(table):
    table.put(b"r", {b"_s:b": b"2", b"_s:a": b"1"}, timestamp=100)
    [(key, row)] = list(table.scan(sorted_columns=True, include_timestamp=True))
    assert key == b"r"
    assert list(row.items()) == [(b"_s:a", (b"1", 100)), (b"_s:b", (b"2", 100))]


def test_versions_and_timestamps(table):
    for ts, value in [(10, b"old"), (20, b"mid"), (30, b"new")]:
        table.put(b"v", {b"_s:commit_ts": value}, timestamp=ts)
    assert table.row(b"v") == {b"_s:commit_ts": b"new"}
    assert table.row(b"v", include_timestamp=True) == {b"_s:commit_ts": (b"new", 30)}
    assert table.cells(b"v", b"_s:commit_ts") == [b"new", b"mid", b"old"]
    assert table.cells(b"v", b"_s:commit_ts", versions=2, include_timestamp=True) == [(b"new", 30), (b"mid", 20)]
    # HBase's time range for a read "at" ts is [0, ts): the cell written at ts is not included
    assert table.row(b"v", timestamp=30) == {b"_s:commit_ts": b"mid"}
    assert table.row(b"v", timestamp=31) == {b"_s:commit_ts": b"new"}
    assert table.row(b"v", timestamp=10) == {}
    assert table.rows([b"v"], timestamp=25) == [(b"v", {b"_s:commit_ts": b"mid"})]
    assert table.cells(b"v", b"_s:commit_ts", timestamp=30) == [b"mid", b"old"]
    # the family keeps 3 versions: a fourth pushes the oldest out
    table.put(b"v", {b"_s:commit_ts": b"newest"}, timestamp=40)
    assert table.cells(b"v", b"_s:commit_ts") == [b"newest", b"new", b"mid"]


def test_max_versions_one(connection):
    name = f"test_{uuid.uuid4().hex[:12]}".encode()
    connection.create_table(name, {"_s": dict(max_versions=1)})
    try:
        t = connection.table(name)
        t.put(b"r", {b"_s:a": b"1"}, timestamp=1)
        t.put(b"r", {b"_s:a": b"2"}, timestamp=2)
        assert t.cells(b"r", b"_s:a", include_timestamp=True) == [(b"2", 2)]
    finally:
        connection.delete_table(name, disable=True)


def test_delete_column_and_row(table):
    table.put(b"r", {b"_s:a": b"1", b"_s:b": b"2"})
    table.put(b"other", {b"_s:a": b"x"})
    table.delete(b"r", columns=[b"_s:b"])
    assert table.row(b"r") == {b"_s:a": b"1"}
    table.delete(b"r")
    assert table.row(b"r") == {}
    assert [k for k, _ in table.scan()] == [b"other"]
    with table.batch(batch_size=10) as b:
        b.delete(b"other")
    assert table.row(b"other") == {}


def test_delete_with_timestamp_removes_versions_up_to_it(table):
    for ts in (10, 20, 30):
        table.put(b"r", {b"_s:a": str(ts).encode()}, timestamp=ts)
    table.delete(b"r", columns=[b"_s:a"], timestamp=20)
    assert table.cells(b"r", b"_s:a", include_timestamp=True) == [(b"30", 30)]
    # the delete marker also hides a later put of an older version
    table.put(b"r", {b"_s:a": b"15"}, timestamp=15)
    assert table.cells(b"r", b"_s:a", include_timestamp=True) == [(b"30", 30)]


def test_counter(table):
    assert table.counter_inc(b"c", b"_s:n") == 1
    assert table.counter_inc(b"c", b"_s:n", 5) == 6
    assert table.counter_dec(b"c", b"_s:n", 2) == 4
    assert table.counter_get(b"c", b"_s:n") == 4


def test_unknown_table_and_family_are_io_errors(connection, table):
    with pytest.raises(Exception) as err:
        connection.table(b"no_such_table_" + uuid.uuid4().hex.encode()).row(b"x")
    assert type(err.value).__name__ == "IOError"
    with pytest.raises(Exception) as err:
        table.put(b"r", {b"nofam:a": b"1"})
    assert type(err.value).__name__ == "IOError"


def test_delete_table(connection):
    name = f"test_{uuid.uuid4().hex[:12]}".encode()
    connection.create_table(name, {"_s": {}})
    connection.disable_table(name)
    assert connection.is_table_enabled(name) is False
    connection.enable_table(name)
    connection.delete_table(name, disable=True)
    assert name not in connection.tables()


@pytest.mark.parametrize(("transport", "protocol"), [("framed", "binary"), ("buffered", "compact"), ("framed", "compact")])
def test_stand_in_speaks_other_transports_and_protocols(transport, protocol):
    with hbase_server(transport=transport, protocol=protocol) as (host, port):
        conn = happybase.Connection(host, port, transport=transport, protocol=protocol)
        try:
            conn.create_table("t", {"_s": {}})
            conn.table("t").put(b"r", {b"_s:a": b"1"})
            assert conn.table("t").row(b"r") == {b"_s:a": b"1"}
            assert conn.tables() == [b"t"]
        finally:
            conn.close()
