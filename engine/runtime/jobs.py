"""Spark job groups of the engine's writes: naming, cancelling, and waiting for their tasks to stop."""

from __future__ import annotations

import time


def job_group(instant: str) -> str:
    """The Spark job group of the write of `instant` (cancel it to stop that write's tasks)."""
    return f"hoodie-write-{instant}"


def stop_tasks(spark, group: str, timeout: float = 30.0) -> None:
    """Cancel a failed write's jobs and wait until none of their tasks runs any more.

    A failed job does not wait for its other tasks; cleaning up before they stop could leave
    behind a file that a still-running task finishes writing afterwards.
    """
    sc = spark.sparkContext
    sc.cancelJobGroup(group)
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stages = [
            tracker.getStageInfo(s)
            for j in tracker.getJobIdsForGroup(group)
            if (info := tracker.getJobInfo(j)) is not None
            for s in info.stageIds
        ]
        if all(st is None or st.numActiveTasks == 0 for st in stages):
            break
        time.sleep(0.2)
    # Python workers of killed tasks get spark.python.task.killTimeout (2 s) to stop
    time.sleep(spark_seconds(sc.getConf().get("spark.python.task.killTimeout", "2s")) + 0.5)


def spark_seconds(value: str) -> float:
    """Spark duration strings ("2s", "1500ms", "2") as seconds."""
    value = value.strip().lower()
    if value.endswith("ms"):
        return float(value[:-2]) / 1000
    if value.endswith("min"):
        return float(value[:-3]) * 60
    return float(value.rstrip("s"))


__all__ = ["job_group", "spark_seconds", "stop_tasks"]
