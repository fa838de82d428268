"""tests/stack: the running local lakehouse, found ONLY through environment variables.

The variable names are the ones docker-compose.yml sets for the console and the job runner;
`make stack-test` runs this suite inside the compose stack, `make stack-local` against the
same roles started as processes (tests/support/process_stack.py). Without the variables every
test here is skipped with the list of what is missing. Run this directory in its own pytest
process: it needs a SparkSession on the stack's master, and a process holds one SparkContext.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

ENGINE_ENV = (
    "SPARK_MASTER",
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "HBASE_THRIFT_HOST",
    "CONSOLE_WAREHOUSE_ROOTS",
)


@pytest.fixture(scope="session")
def stack_env() -> dict[str, str]:
    """The engine's variables, or a skip naming the missing ones."""
    missing = [name for name in ENGINE_ENV if not os.environ.get(name)]
    if missing:
        pytest.skip(f"no stack: set {', '.join(missing)} (make stack-test or make stack-local)")
    return {name: os.environ[name] for name in ENGINE_ENV}


@pytest.fixture(scope="session")
def warehouse(stack_env) -> str:
    """A folder for this run's tables under the first warehouse root (s3://bucket/warehouse)."""
    root = stack_env["CONSOLE_WAREHOUSE_ROOTS"].split(",")[0].strip().rstrip("/")
    assert root.startswith("s3://"), f"the stack's warehouse is on S3, got {root!r}"
    return f"{root}/stack-tests/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def table_uri(warehouse, request) -> str:
    return f"{warehouse}/{request.node.name}"


@pytest.fixture(scope="session")
def cluster_spark(stack_env) -> Iterator:
    """One SparkSession on the stack's master ($SPARK_MASTER), built the way the engine builds it."""
    from pyspark import SparkContext

    from engine.spark import build_session

    if SparkContext._active_spark_context is not None:
        pytest.fail("tests/stack must run in its own pytest process (a SparkContext already runs here)")
    spark = build_session(app_name="hoodie-stack-tests", conf={"spark.ui.enabled": "false"})
    assert spark.sparkContext.master == stack_env["SPARK_MASTER"]
    yield spark
    spark.stop()
