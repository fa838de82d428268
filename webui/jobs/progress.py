"""Live progress of a running job: the engine's progress lines, Spark's status tracker, cancel.

`JobReporter` is handed to the engine as its `progress` callable. A monitor thread flushes
the log tail and progress to the job row every half second, polls Spark's status tracker
(jobs, stages, tasks), and watches the row's `cancel_requested`: once it is set the monitor
cancels the job's Spark job groups (the console's own and the engine's `hoodie-write-<instant>`,
see `engine.write.executor`) and the next progress line raises `JobCancelled`, so the engine
aborts the write and leaves the table as it was.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import deque
from typing import Any

import sqlalchemy as sa

from webui.models import Job

LOG_LINES = 200
POLL_S = 0.5
# tests only, inert unless set: "<prefix>[@<table>]" blocks a job (of that table) at the first
# progress line starting with <prefix> until it is cancelled (or killed), e.g. "writing@trips"
HOLD_ENV = "CONSOLE_TEST_HOLD_AT"
_INSTANT_RE = re.compile(r"instant (\d{17})")


class JobCancelled(Exception):
    """Raised inside the job when its cancellation was requested."""


def console_group(job_id: int) -> str:
    return f"console-job-{job_id}"


class JobReporter:
    def __init__(self, engine: Any, job_id: int, spark: Any = None, table: str | None = None) -> None:
        self.engine = engine  # a SQLAlchemy Engine: the monitor thread uses its own connections
        self.job_id = job_id
        self.table = table
        self.spark = spark
        self.started = time.monotonic()
        self.lines: deque[str] = deque(maxlen=LOG_LINES)
        self.step = "starting"
        self.instant: str | None = None
        self.spark_progress: dict[str, Any] = {}
        self.cancel = threading.Event()
        self._dirty = True
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"job-{job_id}-monitor", daemon=True)

    # ---- called from the job ----------------------------------------------------------------
    def __call__(self, message: str) -> None:
        self.log(message)
        hold, _, table = (os.environ.get(HOLD_ENV) or "").partition("@")
        if hold and message.startswith(hold) and (not table or table == self.table):
            self.log(f"holding at {hold!r} until cancelled (test hook {HOLD_ENV})")
            self.flush()
            self.cancel.wait(timeout=120)
        self.check_cancel()

    def log(self, message: str) -> None:
        with self._lock:
            self.lines.append(f"[{time.monotonic() - self.started:7.1f}s] {message}")
            self.step = message
            found = _INSTANT_RE.search(message)
            if found:
                self.instant = found.group(1)
            self._dirty = True

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise JobCancelled("cancelled on request")

    # ---- monitor thread ---------------------------------------------------------------------
    def start(self) -> JobReporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self._poll_spark()
                self.flush()
                self._poll_cancel()
            except Exception as exc:  # the monitor must never kill the job
                self.log(f"(progress monitor: {type(exc).__name__}: {exc})")

    def _poll_spark(self) -> None:
        if self.spark is None:
            return
        sc = self.spark.sparkContext
        tracker = sc.statusTracker()
        active_jobs = tracker.getActiveJobsIds()
        stages = []
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                stages.append({"stage": sid, "name": info.name, "tasks": info.numTasks,
                               "done": info.numCompletedTasks, "active": info.numActiveTasks,
                               "failed": info.numFailedTasks})
        snapshot = {"active_jobs": len(active_jobs), "stages": stages,
                    "tasks": sum(s["tasks"] for s in stages), "tasks_done": sum(s["done"] for s in stages)}
        with self._lock:
            if snapshot != self.spark_progress:
                self.spark_progress = snapshot
                self._dirty = True

    def _poll_cancel(self) -> None:
        with self.engine.connect() as conn:
            wanted = conn.scalar(sa.select(Job.cancel_requested).where(Job.id == self.job_id))
        if wanted and not self.cancel.is_set():
            self.log("cancel requested: stopping the job")
            self.cancel.set()
        if self.cancel.is_set() and self.spark is not None:
            sc = self.spark.sparkContext
            sc.cancelJobGroup(console_group(self.job_id))
            if self.instant:
                sc.cancelJobGroup(f"hoodie-write-{self.instant}")

    def progress_doc(self) -> dict[str, Any]:
        return {"step": self.step, "elapsed_s": round(time.monotonic() - self.started, 1),
                "instant": self.instant, "spark": self.spark_progress}

    def flush(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            doc = self.progress_doc()
            tail = "\n".join(self.lines)
            self._dirty = False
        with self.engine.begin() as conn:
            conn.execute(sa.update(Job).where(Job.id == self.job_id).values(progress=doc, log_tail=tail))
