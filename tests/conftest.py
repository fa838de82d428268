"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.moto_s3 import MotoS3, start_moto_s3


@pytest.fixture(scope="session")
def s3_server() -> Iterator[MotoS3]:
    """A moto S3 server on 127.0.0.1 for the whole session; make a bucket per test."""
    server = start_moto_s3()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test run (Spark start-up costs seconds)."""
    from engine.spark import build_session

    session = build_session(
        "local[2]",
        app_name="hoodie-tests",
        conf={
            "spark.ui.enabled": "false",
            # the tests' batches are tiny: compiling whole-stage code costs more than it saves
            # (measured: test_writes + test_mor_writes + test_datasource 112 s -> 100 s)
            "spark.sql.codegen.wholeStage": "false",
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def hbase_thrift() -> Iterator[tuple[str, int]]:
    """(host, port) of an HBase Thrift1 server: the real one named by HBASE_THRIFT_HOST
    (HBASE_THRIFT_PORT, default 9090), else an in-memory stand-in on 127.0.0.1."""
    import os

    host = os.environ.get("HBASE_THRIFT_HOST")
    if host:
        yield host, int(os.environ.get("HBASE_THRIFT_PORT", "9090"))
        return
    from tests.support.hbase_server import hbase_server

    with hbase_server() as address:
        yield address


@pytest.fixture
def hbase_options(hbase_thrift):
    """A function giving the write options of a fresh HBase index table on `hbase_thrift` (one new
    table per call); the tables made are dropped after the test."""
    import uuid

    import happybase

    host, port = hbase_thrift
    made: list[str] = []

    def options() -> dict[str, str]:
        name = f"t_{uuid.uuid4().hex[:10]}"
        made.append(name)
        return {"hoodie.index.hbase.thrift.host": host, "hoodie.index.hbase.thrift.port": str(port),
                "hoodie.index.hbase.table": name}

    yield options
    conn = happybase.Connection(host, port, autoconnect=True)
    try:
        existing = conn.tables()
        for name in made:
            if name.encode() in existing:
                conn.delete_table(name, disable=True)
    finally:
        conn.close()
