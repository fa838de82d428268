"""Building a SparkSession configured for the engine (UTC, Arrow), and shipping the engine to workers."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from engine.spark.jvm_noise import StderrFilter

DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
    "spark.python.worker.reuse": "true",
    # reads of base files name every file: stat them on the driver rather than in a listing job
    # (Spark's default starts one past 32 paths, ~0.4 s for a 100-file table on this machine)
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "10000",
}


def build_session(
    master: str | None = None, app_name: str = "hoodie", conf: dict[str, str] | None = None
) -> SparkSession:
    """A SparkSession on `master` (default: $SPARK_MASTER or local[*]) with the engine's settings,
    and the engine registered as its `hudi` data source (`engine.spark.register`).

    Off a local master, the `engine` package is shipped to the executors as a zip. The first
    session of the process starts the JVM with its start-up noise removed (`engine.spark.jvm_noise`).
    """
    master = master or os.environ.get("SPARK_MASTER") or "local[*]"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {**DEFAULT_CONF, "spark.master": master, "spark.app.name": app_name, **(conf or {})}
    if "HOODIE_SPARK_LOG_LEVEL" not in os.environ:
        # quiet JVM start-up (no banner, no hostname warnings): the CLI's errors stay one line;
        # a caller's own driver options come after ours, so theirs win
        log_config = Path(__file__).with_name("log4j2.properties").as_uri()
        options = [f"-Dlog4j2.configurationFile={log_config}", settings.get("spark.driver.extraJavaOptions", "")]
        settings["spark.driver.extraJavaOptions"] = " ".join(o for o in options if o)
    start_quiet_context(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("HOODIE_SPARK_LOG_LEVEL", "ERROR"))
    if not master.startswith("local"):
        ship_engine(spark)
    from engine.spark.datasource import register

    register(spark)
    return spark


def start_quiet_context(settings: dict[str, str]) -> None:
    """Start the JVM with its stderr filtered, and a SparkContext on it, unless there is a JVM.

    pyspark would start it with our stderr, where its start-up noise reaches the user. A JVM that
    is already there (an earlier session of this process, or `spark-submit`'s) is kept as it is.
    """
    # pyspark keeps its one JVM gateway on the class (no public accessor); after a stop() the JVM
    # and gateway remain and a new context reuses them, so a gateway started now would go unused
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    read_end, write_end = os.pipe()
    stderr = StderrFilter(read_end).start()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write_end})
    except BaseException:
        os.close(write_end)
        stderr.flush()  # what the JVM said (on exit: why) reaches stderr before the exception
        raise
    os.close(write_end)
    # what the JVM printed last reaches stderr before this process ends (the JVM lives on a moment)
    atexit.register(stderr.flush)
    SparkContext(conf=conf, gateway=gateway)


def ship_engine(spark: SparkSession) -> str:
    """Zip the `engine` package and add it to the executors' Python path; returns the zip path."""
    pkg = Path(__file__).resolve().parents[1]
    folder = tempfile.mkdtemp(prefix="hoodie-engine-")
    atexit.register(shutil.rmtree, folder, True)
    out = Path(folder) / "engine.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in pkg.rglob("*.py"):
            zf.write(file, file.relative_to(pkg.parent).as_posix())
    spark.sparkContext.addPyFile(str(out))
    return str(out)
