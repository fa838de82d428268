"""Fault injection for the crash tests: kill the writer's whole process group at a named point.

Inert unless the environment names the point: `HOODIE_FAILPOINT=<name>` and
`HOODIE_FAILPOINT_PGID=<process group>` (the crash tests start each writer in a process group
of its own and set both). The kill is a real SIGKILL of the driver, its JVM and its Spark
Python workers, like a machine losing power: nothing gets to clean up.
"""

from __future__ import annotations

import os
import signal

ENV_POINT = "HOODIE_FAILPOINT"
ENV_PGID = "HOODIE_FAILPOINT_PGID"

# the points, in the order a write or a table service reaches them
POINTS = (
    "write.after_requested",  # the instant is claimed, nothing written yet
    "write.file_written",  # inside a Spark task, after it wrote its base file
    "write.log_written",  # inside a Spark task, after it wrote its log file (merge-on-read)
    "write.before_complete",  # every data (and index) file written, the commit not completed
    "rollback.after_revert",  # a rolled-back completed instant was made pending, files not yet deleted
    "rollback.files_deleted",  # some of the rollback's files deleted
    "clean.file_deleted",  # a clean deleted its first file
    "restore.after_first",  # a restore rolled back its first instant of several
    "archive.after_data_file",  # layout 2: the LSM history's new Parquet file is written, no manifest yet
    "archive.after_manifest",  # layout 2: the new manifest is written, `_version_` not yet updated
    "archive.after_file",  # the archive file is written, the instants not yet removed
    "compaction.after_inflight",  # a compaction moved to inflight, no base file written yet
    "compaction.before_complete",  # every base file of a compaction written, the commit not completed
)


def hit(point: str) -> None:
    """SIGKILL the configured process group if `point` is the armed failpoint."""
    if os.environ.get(ENV_POINT) != point:
        return
    pgid = os.environ.get(ENV_PGID)
    if not pgid:
        return  # armed without a group to kill: never kill whoever happens to run us
    os.killpg(int(pgid), signal.SIGKILL)
