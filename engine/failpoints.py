"""Fault injection for the crash and concurrency tests: kill the writer's whole process group at a
named point, or pause it there.

Inert unless the environment names the point: `HOODIE_FAILPOINT=<name>` and
`HOODIE_FAILPOINT_PGID=<process group>` (the crash tests start each writer in a process group
of its own and set both). The kill is a real SIGKILL of the driver, its JVM and its Spark
Python workers, like a machine losing power: nothing gets to clean up.

Pausing (`HOODIE_PAUSEPOINT=<name>`, `HOODIE_PAUSEPOINT_DIR=<dir>`): at the point the writer
creates `<dir>/<name>.reached` and waits until `<dir>/<name>.go` exists (at most
`PAUSE_LIMIT` seconds), so that a test can run another writer at that moment; then it removes
both files, and pauses again at the next hit.
"""

from __future__ import annotations

import os
import signal
import time

ENV_POINT = "HOODIE_FAILPOINT"
ENV_PGID = "HOODIE_FAILPOINT_PGID"
ENV_PAUSE = "HOODIE_PAUSEPOINT"
ENV_PAUSE_DIR = "HOODIE_PAUSEPOINT_DIR"
PAUSE_LIMIT = 120.0

# the points, in the order a write or a table service reaches them
POINTS = (
    "write.prepared",  # the write's schema resolved and its batch prepared (tagged, planned), no instant claimed
    "write.after_requested",  # the instant is claimed, nothing written yet
    "write.claimed",  # the instant claimed and its heartbeat running, no lock held, nothing written
    "write.file_written",  # inside a Spark task, after it wrote its base file
    "write.log_written",  # inside a Spark task, after it wrote its log file (merge-on-read)
    "write.before_commit_lock",  # optimistic concurrency: files written, the commit lock not yet taken
    "write.commit_locked",  # optimistic concurrency: the commit lock held, the conflict check not run
    "write.before_complete",  # every data (and index) file written, the commit not completed
    "metadata.written",  # the metadata table's deltacommit of an instant completed, the instant not yet
    "write.after_complete",  # the commit completed, the lock still held (automatic services not run)
    "rollback.after_revert",  # a rolled-back completed instant was made pending, files not yet deleted
    "rollback.files_deleted",  # some of the rollback's files deleted
    "clean.file_deleted",  # a clean deleted its first file
    "restore.after_first",  # a restore rolled back its first instant of several
    "archive.after_data_file",  # layout 2: the LSM history's new Parquet file is written, no manifest yet
    "archive.after_manifest",  # layout 2: the new manifest is written, `_version_` not yet updated
    "archive.after_file",  # the archive file is written, the instants not yet removed
    "compaction.after_inflight",  # a compaction moved to inflight, no base file written yet
    "compaction.before_complete",  # every base file of a compaction written, the commit not completed
    "clustering.after_inflight",  # a clustering moved to inflight, no file group written yet
    "clustering.before_complete",  # every file group of a clustering written, the replacecommit not completed
)


def hit(point: str) -> None:
    """SIGKILL the configured process group if `point` is the armed failpoint; pause at it if it
    is the armed pause point."""
    if os.environ.get(ENV_PAUSE) == point and os.environ.get(ENV_PAUSE_DIR):
        _pause(point, os.environ[ENV_PAUSE_DIR])
    if os.environ.get(ENV_POINT) != point:
        return
    pgid = os.environ.get(ENV_PGID)
    if not pgid:
        return  # armed without a group to kill: never kill whoever happens to run us
    os.killpg(int(pgid), signal.SIGKILL)


def _pause(point: str, folder: str) -> None:
    with open(os.path.join(folder, f"{point}.reached"), "w") as f:
        f.write(str(os.getpid()))
    go = os.path.join(folder, f"{point}.go")
    deadline = time.monotonic() + PAUSE_LIMIT
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
    for name in (os.path.join(folder, f"{point}.reached"), go):  # the test waits for `go` to go
        try:
            os.remove(name)
        except FileNotFoundError:
            pass
