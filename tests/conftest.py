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

    session = build_session("local[2]", app_name="hoodie-tests", conf={"spark.ui.enabled": "false"})
    yield session
    session.stop()
