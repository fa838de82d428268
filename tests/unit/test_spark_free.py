"""The engine's Spark boundary: everything but the Spark-facing modules imports without pyspark.

The console browses tables and plans table services in web requests, which must never start (or
even import) Spark. New modules are Spark-free unless added to SPARK_MODULES below.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import engine

# modules that run Spark at import time by design (DataFrames, sessions, the write pipeline)
SPARK_MODULES = {
    "engine.api",
    "engine.demo.__main__",
    "engine.demo.tour",
    "engine.index.spark_tagging",
    "engine.read.lookup",
    "engine.read.native",
    "engine.read.reader",
    "engine.data.scan",
    "engine.spark",
    "engine.spark.datasource",  # Spark's data source API (pyspark.sql.datasource)
    "engine.spark.datasource.changes",
    "engine.spark.datasource.options",  # pure itself, but its package `engine.spark` imports the session
    "engine.spark.datasource.reader",
    "engine.spark.datasource.service",
    "engine.spark.datasource.source",
    "engine.spark.datasource.writer",
    "engine.runtime.errors",
    "engine.spark.jvm_noise",  # pure itself, but its package `engine.spark` imports the session
    "engine.runtime.jobs",
    "engine.spark.session",
    "engine.write.bucket_column",
    "engine.write.executor",
    "engine.write.index_rows",
    "engine.write.one_job",
    "engine.write.bulk_stream",
    "engine.write.occ_keys",
    "engine.write.guarded",
    "engine.write.prepare",
    "engine.write.pipeline",
    "engine.write.prepared",
    "engine.keygen.spark_keys",
    "engine.write.tagging",
    "engine.write.tasks",
}

PROBE = """
import importlib, json, sys
leaks = []
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
    if "pyspark" in sys.modules:
        leaks.append(name)
        break
print(json.dumps(leaks))
"""


def engine_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(engine.__path__, "engine."))


def test_spark_free_modules_do_not_import_pyspark() -> None:
    spark_free = [m for m in engine_modules() if m not in SPARK_MODULES]
    # the modules the console and Maintenance depend on are among them
    for needed in (
        "engine.index.base",
        "engine.index.bloom",
        "engine.index.hbase",
        "engine.index.record",
        "engine.index.simple",
        "engine.services.maintenance",
        "engine.services.rollback",
        "engine.services.restore",
        "engine.services.repair",
        "engine.table.fs_view",
        "engine.table.meta_client",
        "engine.timeline.timeline",
        "engine.cli",
    ):
        assert needed in spark_free
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(spark_free)], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []


def test_maintenance_builds_every_index_without_pyspark() -> None:
    code = """
import sys
from engine.config.table_config import IndexType
from engine.index import index_for
from engine.services.maintenance import Maintenance  # noqa: F401
made = [type(index_for(t, {"hoodie.index.hbase.thrift.host": "h"}, "t")).__name__ for t in IndexType]
print(",".join(made), "pyspark" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names, leaked = out.stdout.split()
    assert set(names.split(",")) == {
        "SimpleIndex", "GlobalSimpleIndex", "BloomIndex", "GlobalBloomIndex", "HBaseIndex", "RecordIndex"
    }
    assert leaked == "False"


def test_spark_modules_listed_here_exist() -> None:
    assert SPARK_MODULES <= set(engine_modules())
