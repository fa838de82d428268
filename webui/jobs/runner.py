"""The job runner: a process of its own that holds the one SparkSession and executes jobs.

    hoodie-console worker [--once] [--max-jobs N]      (or: flask --app webui worker)

At start it registers itself (table `workers`, heartbeat every 2 s) and fails the jobs that a
dead runner left `running`; queued jobs stay queued. It then claims jobs one at a time
(`webui.jobs.claim`), runs them (`webui.jobs.operations`) with live progress
(`webui.jobs.progress`), and records the outcome on the job row and in the audit log.
SIGTERM/SIGINT stop the runner within `STOP_GRACE_S`: the running job is cancelled (the engine
aborts it cleanly between steps); a job that does not stop in time is marked `interrupted` and the
process exits, leaving its instant to the next write's repair, which rolls it back at once (the
runner is proven dead), so the table stays consistent either way.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import traceback
import uuid
from typing import Any

import sqlalchemy as sa
from flask import Flask

from engine.facade import EngineError, process_start
from webui.extensions import db
from webui.jobs.claim import claim_next, fail_orphans
from webui.jobs.operations import JobRefused, Operations
from webui.jobs.progress import JobCancelled, JobReporter
from webui.models import Job, JobState, Upload, User, Worker, utcnow
from webui.services import audit

log = logging.getLogger("webui.worker")
HEARTBEAT_S = 2.0
ORPHAN_SWEEP_S = 10.0
STOP_GRACE_S = 3.0  # a stop request waits this long for the running job to end before exiting


class Runner:
    def __init__(self, app: Flask, worker_id: str | None = None, master: str | None = None) -> None:
        self.app = app
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.master = master or app.config.get("CONSOLE_SPARK_MASTER") or "local[*]"
        self._spark: Any = None
        self._stop = threading.Event()
        self._current: JobReporter | None = None
        self._stopping_job: int | None = None  # the job a stop request interrupted
        mode = app.config.get("CONSOLE_CONCURRENCY_MODE") or "SINGLE_WRITER"
        self.operations = Operations(self._get_spark, {"hoodie.write.concurrency.mode": mode})

    # ---- Spark -----------------------------------------------------------------------------------
    def _get_spark(self) -> Any:
        if self._spark is None:
            from engine.facade import build_session

            conf = {"spark.ui.enabled": "false"}
            self._spark = build_session(self.master, app_name="hoodie-console-worker", conf=conf)
        return self._spark

    # ---- lifecycle -------------------------------------------------------------------------------
    def register(self) -> list[int]:
        with self.app.app_context():
            db.session.add(Worker(id=self.worker_id, host=socket.gethostname(), pid=os.getpid(),
                                  process_start=process_start(os.getpid()), started_at=utcnow(),
                                  heartbeat_at=utcnow()))
            db.session.commit()
            failed = fail_orphans(db.session, me=self.worker_id)
            for job_id in failed:
                self._audit_outcome(job_id)
        if failed:
            log.warning("marked %d job(s) of dead runners as failed: %s", len(failed), failed)
        return failed

    def _beat(self) -> None:
        last_sweep = time.monotonic()
        engine = self._engine()
        while not self._stop.wait(HEARTBEAT_S):
            try:
                with engine.begin() as conn:
                    conn.execute(sa.update(Worker).where(Worker.id == self.worker_id).values(heartbeat_at=utcnow()))
                if time.monotonic() - last_sweep > ORPHAN_SWEEP_S:
                    last_sweep = time.monotonic()
                    with self.app.app_context():
                        for job_id in fail_orphans(db.session, me=self.worker_id):
                            self._audit_outcome(job_id)
            except Exception as exc:  # a database hiccup must not kill the runner
                log.warning("heartbeat failed: %s", exc)

    def _engine(self) -> sa.Engine:
        with self.app.app_context():
            return db.engine

    def stop(self, *_args: object) -> None:
        """Stop: cancel the running job, and if it has not ended after STOP_GRACE_S (a Spark stage
        that does not check for cancellation), mark it interrupted and exit the process."""
        self._stop.set()
        current = self._current
        if current is not None:
            self._stopping_job = current.job_id
            current.cancel.set()
            if self._spark is not None:
                try:
                    self._spark.sparkContext.cancelAllJobs()
                except Exception:  # noqa: BLE001 - the session may be stopping already
                    pass
            threading.Thread(target=self._exit_unless_done, args=(current.job_id,), daemon=True).start()

    def _exit_unless_done(self, job_id: int) -> None:
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if self._current is None or self._current.job_id != job_id:
                return
            time.sleep(0.05)
        self._mark(job_id, JobState.INTERRUPTED, INTERRUPTED_ERROR)
        log.warning("job %s interrupted: the runner stopped while it ran", job_id)
        os._exit(0)  # the JVM goes with us; the next write's repair rolls the job's instant back

    def _mark(self, job_id: int, state: JobState, error: str) -> None:
        with self.app.app_context():
            db.session.execute(sa.update(Job).where(Job.id == job_id).values(
                state=state.value, error=error, finished_at=utcnow()))
            db.session.execute(sa.update(Worker).where(Worker.id == self.worker_id).values(stopped=True))
            self._audit_outcome(job_id, commit=False)
            db.session.commit()

    def run(self, max_jobs: int | None = None, once: bool = False, poll_s: float = 1.0,
            install_signals: bool = True) -> int:
        """Claim and run jobs until stopped; `once`: stop when the queue is empty; `max_jobs`:
        stop after that many. Returns the number of jobs run."""
        if install_signals:
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        self.register()
        beat = threading.Thread(target=self._beat, name="worker-heartbeat", daemon=True)
        beat.start()
        done = 0
        try:
            while not self._stop.is_set():
                with self.app.app_context():
                    job_id = claim_next(db.session, self.worker_id)
                if job_id is None:
                    if once:
                        break
                    self._stop.wait(poll_s)
                    continue
                self.execute(job_id)
                done += 1
                if max_jobs is not None and done >= max_jobs:
                    break
        finally:
            self._stop.set()
            with self.app.app_context():
                db.session.execute(sa.update(Worker).where(Worker.id == self.worker_id).values(stopped=True))
                db.session.commit()
            if self._spark is not None:
                self._spark.stop()
        return done

    # ---- one job -----------------------------------------------------------------------------------
    def execute(self, job_id: int) -> None:
        with self.app.app_context():
            job = db.session.get(Job, job_id)
            assert job is not None
            operation, params = job.operation, dict(job.params or {})
            base_path = job.table.base_path if job.table is not None else None
            table_name = job.table.name if job.table is not None else None
            upload = db.session.get(Upload, params["upload"]) if params.get("upload") else None
            data = upload.data if upload is not None else None
            cancel_early = job.cancel_requested
            engine = db.engine
        reporter = JobReporter(engine, job_id, self._spark, table_name).start()
        self._current = reporter
        state, result, error = JobState.FAILED, None, None
        try:
            if cancel_early:
                reporter.cancel.set()
            reporter.check_cancel()
            if base_path is None:
                raise JobRefused("the job's table is no longer registered")
            result = self.operations.run(operation, params, base_path, reporter, data)
            state = JobState.SUCCEEDED
        except JobCancelled:
            state, error = JobState.CANCELLED, "cancelled on request; the table is as it was before the job"
            if self._stopping_job == job_id:
                state, error = JobState.INTERRUPTED, INTERRUPTED_ERROR
        except (JobRefused, EngineError) as exc:
            cancelled = reporter.cancel.is_set()
            state = JobState.CANCELLED if cancelled else JobState.FAILED
            error = f"{type(exc).__name__}: {exc}"
            if cancelled:
                error = "cancelled on request: " + error
            if self._stopping_job == job_id:
                state, error = JobState.INTERRUPTED, f"{INTERRUPTED_ERROR} ({type(exc).__name__}: {exc})"
        except Exception as exc:
            cancelled = reporter.cancel.is_set()
            state = JobState.CANCELLED if cancelled else JobState.FAILED
            error = f"unexpected {type(exc).__name__}: {_first_line(str(exc))}"
            if self._stopping_job == job_id:
                state, error = JobState.INTERRUPTED, INTERRUPTED_ERROR
            reporter.log(traceback.format_exc(limit=5).strip().splitlines()[-1])
        finally:
            reporter.log(f"job {state.value}" + (f": {error}" if error else ""))
            reporter.stop()
            self._current = None
        with self.app.app_context():
            db.session.execute(
                sa.update(Job).where(Job.id == job_id).values(
                    state=state.value, result=result, error=error, finished_at=utcnow())
            )
            if upload is not None:
                db.session.execute(sa.delete(Upload).where(Upload.id == upload.id))
            self._audit_outcome(job_id, commit=False)
            db.session.commit()  # one transaction: whoever sees the job finished sees its audit row

    def _audit_outcome(self, job_id: int, commit: bool = True) -> None:
        """The outcome of an action's job, appended to the audit log (previews are not actions);
        `commit=False`: in the transaction that records the job's end, so the two are seen together."""
        job = db.session.get(Job, job_id, populate_existing=True)  # the state just updated, not a cached one
        if job is None or job.operation == "preview":
            return
        actor = db.session.get(User, job.created_by) if job.created_by else None
        outcome = job.state
        if job.result and isinstance(job.result, dict) and job.result.get("instant"):
            outcome += f": instant {job.result['instant']}"
        elif job.error:
            outcome += f": {job.error}"
        audit.record(actor, f"{job.operation}.finished", outcome,
                     table=job.table.name if job.table is not None else None,
                     params={k: v for k, v in (job.params or {}).items()
                             if k not in ("upload", "fingerprint", "plan_hash", "user")},
                     plan_hash=(job.params or {}).get("plan_hash"), job_id=job.id, commit=commit)


INTERRUPTED_ERROR = ("interrupted: the job runner was stopped (Ctrl-C or SIGTERM) while the job ran; what it "
                     "had started is rolled back by the next write to the table (the job is not retried)")


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), text)
