"""Upserts on a real Spark standalone cluster (master + one worker on 127.0.0.1).

The executors import `engine` only from the zip the driver ships (`ship_engine`): they run
an interpreter that cannot see the editable install (see `isolated_python`), and a task
reports where `engine` came from. The driver runs in a subprocess because this pytest
process may already hold the local SparkContext of the `spark` fixture, and only one
SparkContext can live in a Python process.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from engine import Table
from engine.timeline import Action, State
from tests.support import hudi_rs
from tests.support.spark_cluster import (
    clean_env,
    find_spark_class,
    isolated_python,
    java_available,
    run_driver,
    spark_cluster,
)

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
APP_NAME = "hoodie-cluster-test"
RESULT_MARK = "HOODIE_RESULT="
TIMEOUT = 120.0

DRIVER = textwrap.dedent(
    f"""
    import json, sys

    from engine import Table
    from engine.spark import build_session

    master, path = sys.argv[1], sys.argv[2]
    SCHEMA = "id int, name string, city string, ts long"


    def where_is_engine(_):
        # runs in an executor's Python worker
        import os, sys
        import engine
        return {{
            "engine_file": os.path.abspath(engine.__file__),
            "engine_loader": type(engine.__loader__).__name__,
            # directories on sys.path that hold an `engine` package (the repo would be one)
            "engine_dirs": [p for p in sys.path if os.path.isdir(os.path.join(p or ".", "engine"))],
            "no_site": sys.flags.no_site,
            "meta_path": [type(f).__name__ if not isinstance(f, type) else f.__name__ for f in sys.meta_path],
            "sys_path": sys.path,
            "cwd": os.getcwd(),
        }}


    spark = build_session(master, app_name={APP_NAME!r}, conf={{
        "spark.executor.memory": "1g",
        "spark.executor.cores": "1",
        "spark.cores.max": "1",
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "512m",
        "spark.sql.shuffle.partitions": "2",
    }})
    try:
        sc = spark.sparkContext
        probe = sc.parallelize([0], 1).map(where_is_engine).collect()[0]
        t = Table.create(spark, path, name="trips", record_key="id", partition_fields="city", precombine_field="ts")
        r1 = t.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "paris", 1)], SCHEMA))
        r2 = t.upsert(spark.createDataFrame([(1, "a2", "paris", 2), (4, "d", "oslo", 2)], SCHEMA))
        read_back = [r.asDict() for r in t.read().collect()]
        # the data source on the cluster: a filtered read of that table, a write creating another
        ds_read = [r.asDict() for r in spark.read.format("hudi").load(path).where("city = 'paris'").collect()]
        (spark.createDataFrame([(5, "e", "paris", 3), (6, "f", "rome", 3)], SCHEMA).write.format("hudi")
            .option("hoodie.table.name", "ds").option("hoodie.datasource.write.recordkey.field", "id")
            .option("hoodie.datasource.write.partitionpath.field", "city")
            .option("hoodie.datasource.write.precombine.field", "ts").mode("append").save(path + "-ds"))
        result = {{"master": sc.master, "probe": probe, "r1": r1.to_dict(), "r2": r2.to_dict(), "rows": read_back,
                   "ds_read": ds_read}}
    finally:
        spark.stop()
    print({RESULT_MARK!r} + json.dumps(result, sort_keys=True), flush=True)
    """
)


def require_spark_cluster_tools() -> None:
    """Skip when the machine cannot start a standalone cluster; with CI=true, fail instead."""
    missing = []
    if find_spark_class() is None:
        missing.append("`spark-class` (ships with `pip install pyspark`, next to the python executable)")
    if not java_available():
        missing.append("`java` (JAVA_HOME or PATH)")
    if missing:
        reason = f"Spark standalone cluster test needs {' and '.join(missing)}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI=true, so this is a failure, not a skip")
        pytest.skip(reason)


def py(python: str | Path, code: str, cwd: Path):
    return run_driver([str(python), "-c", code], env=clean_env(), cwd=cwd, timeout=60)


def test_upserts_on_standalone_cluster_with_shipped_engine(tmp_path):
    require_spark_cluster_tools()
    outside = tmp_path / "cwd"  # every process runs outside the repo
    outside.mkdir()
    executor_python = isolated_python(tmp_path)

    # Why the wrapper: the venv's own interpreter finds the repo's `engine` from anywhere
    # (editable install) ...
    plain = py(sys.executable, "import engine; print(engine.__file__)", outside)
    assert plain.returncode == 0 and plain.stdout.strip() == str(REPO / "engine" / "__init__.py")
    # ... while the executors' interpreter cannot import it at all, but has the rest of the venv.
    isolated = py(executor_python, "import engine", outside)
    assert isolated.returncode == 1 and "No module named 'engine'" in isolated.stderr, isolated.stderr
    deps = py(executor_python, "import pyspark, pyarrow, pandas; print(pyspark.__version__)", outside)
    assert deps.returncode == 0, deps.stderr

    table_path = tmp_path / "trips"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    pyspark_env = {"PYSPARK_PYTHON": str(executor_python), "PYSPARK_DRIVER_PYTHON": sys.executable}

    with spark_cluster(cores=1, memory="1g", timeout=TIMEOUT, env=pyspark_env) as cluster:
        proc = run_driver([sys.executable, str(script), cluster.master_url, str(table_path)],
                          env=clean_env({**pyspark_env, "HOODIE_SPARK_LOG_LEVEL": "WARN"}),
                          cwd=outside, timeout=TIMEOUT)
        assert proc.returncode == 0, f"driver failed:\n{proc.stderr[-8000:]}\n{cluster.logs()}"
        (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARK)]
        result = json.loads(line[len(RESULT_MARK):])

        # the application really ran on this master, on its one worker, and finished
        def app_finished() -> bool:
            apps = (cluster.state() or {}).get("completedapps", [])
            return any(a.get("name") == APP_NAME and a.get("state") == "FINISHED" for a in apps)

        cluster.wait_until("the application to finish", app_finished, timeout=30)
        state = cluster.state() or {}
        assert state["aliveworkers"] == 1 and [w["cores"] for w in state["workers"]] == [1]
        (app,) = [a for a in state["completedapps"] if a["name"] == APP_NAME]
        assert app["cores"] == 1 and app["memoryperexecutor"] == 1024
        work_dir = cluster.work_dir

    assert result["master"] == cluster.master_url

    # executors: isolated interpreter, engine imported from the shipped zip in SparkFiles
    probe = result["probe"]
    assert probe["no_site"] == 1
    assert not any("editable" in name.lower() for name in probe["meta_path"]), probe["meta_path"]
    assert probe["engine_dirs"] == [], probe["sys_path"]
    assert Path(probe["cwd"]).is_relative_to(work_dir / app["id"]), probe["cwd"]
    # standalone executors fetch addPyFile files into their working dir (the SparkFiles root)
    assert probe["engine_file"] == probe["cwd"] + "/engine.zip/engine/__init__.py"
    assert probe["engine_loader"] == "zipimporter"

    # writes: 3 inserts, then 1 update + 1 insert
    r1, r2 = result["r1"], result["r2"]
    assert (r1["operation"], r1["inserts"], r1["updates"], r1["deletes"], r1["files_written"]) == ("UPSERT", 3, 0, 0, 2)
    assert r1["partitions"] == ["paris", "rome"]
    assert (r2["inserts"], r2["updates"], r2["deletes"], r2["files_written"]) == (1, 1, 0, 2)
    assert r2["partitions"] == ["oslo", "paris"]
    i1, i2 = r1["instant"], r2["instant"]
    assert i1 < i2

    # the table, read by hudi-rs in this process, is exactly what was written
    got = hudi_rs.sort_rows(hudi_rs.snapshot(table_path))
    assert [(r["_hoodie_commit_time"], r["_hoodie_record_key"], r["_hoodie_partition_path"],
             r["id"], r["name"], r["city"], r["ts"]) for r in got] == [
        (i2, "4", "oslo", 4, "d", "oslo", 2),
        (i2, "1", "paris", 1, "a2", "paris", 2),
        (i1, "3", "paris", 3, "c", "paris", 1),
        (i1, "2", "rome", 2, "b", "rome", 1),
    ]
    # ... and the engine's own read on the cluster returned the same rows
    assert hudi_rs.sort_rows(result["rows"]) == got
    # ... as did the data source's filtered read (partition paris), and its write is read by hudi-rs
    assert hudi_rs.sort_rows(result["ds_read"]) == [r for r in got if r["city"] == "paris"]
    assert [(r["id"], r["name"], r["city"]) for r in hudi_rs.sort_rows(hudi_rs.snapshot(f"{table_path}-ds"))] == [
        (5, "e", "paris"), (6, "f", "rome")]

    # timeline: exactly two completed commits, nothing pending
    table = Table.open(None, str(table_path))
    assert [(i.time, i.action, i.state) for i in table.timeline()] == [
        (i1, Action.COMMIT, State.COMPLETED), (i2, Action.COMMIT, State.COMPLETED)
    ]
