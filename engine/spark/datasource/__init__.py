"""The engine as a Spark data source: `spark.read.format("hudi")`, `df.write.format("hudi")`,
`CREATE TABLE ... USING hudi`. `register(spark)` makes it available in a session."""

from __future__ import annotations

import sys
from typing import Any

from pyspark.sql import SparkSession

from engine.spark.datasource.source import HoodieDataSource, HudiDataSource

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
JVM_HUDI_CLASS = "org.apache.hudi.DefaultSource"
_registered: dict[int, tuple[str, ...]] = {}


def _jvm_hudi_present(spark: SparkSession) -> bool:
    try:
        loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()  # type: ignore[union-attr]
        loader.loadClass(JVM_HUDI_CLASS)
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


def sources_for(jvm_hudi: bool) -> tuple[type[HudiDataSource], ...]:
    """The sources to register: `hudi` and `hoodie`, or only `hoodie` beside Apache Hudi's JVM source."""
    return (HoodieDataSource,) if jvm_hudi else (HudiDataSource, HoodieDataSource)


def register(spark: SparkSession) -> tuple[str, ...]:
    """Register the engine's data source in `spark` as `hudi` and `hoodie`, and start the commit
    service its writes go through (in this process, which must be the application's driver).

    If Apache Hudi's JVM data source is on the classpath, `hudi` stays Apache Hudi's (Spark prefers
    JVM sources) and the engine answers to `hoodie` only; a one-line notice says so. Turns on
    `spark.sql.python.filterPushdown.enabled` so reads receive Spark's filters. Returns the names
    registered; calling it again for the same session does nothing more."""
    if id(spark) in _registered:
        return _registered[id(spark)]
    from engine.spark.datasource import service

    svc, _server = service.start(spark)
    names: list[str] = []
    jvm_hudi = _jvm_hudi_present(spark)
    for base in sources_for(jvm_hudi):
        # a class made here (not importable by name) is pickled by value: the workers get `service`
        cls: Any = type(base.__name__, (base,), {"service": svc, "__module__": __name__ + "._session"})
        spark.dataSource.register(cls)
        names.append(base.short_name)
    if jvm_hudi:
        print("hoodie: Apache Hudi's JVM data source is on the classpath and keeps format('hudi'); "
              "this engine is format('hoodie')", file=sys.stderr)
    spark.conf.set(PUSHDOWN_CONF, "true")
    _registered[id(spark)] = tuple(names)
    return tuple(names)


def last_write(spark: SparkSession) -> dict[str, Any] | None:
    """The result of the latest `df.write.format("hudi")` in this session (a `WriteResult` as a
    dict: instant, operation, inserts, updates, deletes, ...), or None before the first."""
    from engine.spark.datasource import service

    return service.last_result(spark)


__all__ = ["HoodieDataSource", "HudiDataSource", "last_write", "register"]
