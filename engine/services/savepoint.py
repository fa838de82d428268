"""Savepoints: mark a completed commit so that clean never deletes its file slices, and so that
`restore` can always return to it.

A savepoint of commit T is `T.savepoint.inflight` then `T.savepoint` (Avro
`HoodieSavepointMetadata`: per partition, the names of the base files of the snapshot at T).
"""

from __future__ import annotations

import getpass
import time as _time
from dataclasses import dataclass

from engine.errors import InstantNotFoundError, InvalidInputError
from engine.serial import Documented
from engine.table.lifecycle import ensure_file, read_avro, write_avro
from engine.table.meta_client import MetaClient
from engine.table.retention import last_earliest_retained
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

MODEL = "HoodieSavepointMetadata"


@dataclass(frozen=True)
class Savepoint(Documented):
    """A savepoint: the commit time it protects and the base files (relative paths) it keeps."""

    time: str
    files: tuple[str, ...]
    user: str = ""
    comment: str = ""
    saved_at: int = 0  # epoch milliseconds (as Apache Hudi records it)


def plan_savepoint(meta: MetaClient, timeline: Timeline, time: str, user: str | None = None, comment: str = "") -> Savepoint:
    inst = timeline.get(time)
    if inst is None or not inst.is_completed or not inst.action.is_write:
        raise InstantNotFoundError(f"{time} is not a completed commit on the active timeline of {meta.storage.base_uri}")
    if any(sp.time == time for sp in timeline.savepoints):
        raise InvalidInputError(f"commit {time} is already savepointed")
    retained = last_earliest_retained(meta, timeline)
    if retained is not None and time < retained:
        # as Apache Hudi: its snapshot may have lost file versions to that clean
        raise InvalidInputError(
            f"commit {time} cannot be savepointed: a clean already retained only from {retained}"
        )
    missing = missing_snapshot_files(meta, timeline, time)
    if missing:  # a clean (KEEP_LATEST_FILE_VERSIONS records no retained commit) broke the snapshot
        raise InvalidInputError(
            f"commit {time} cannot be savepointed: {len(missing)} file(s) of its snapshot were cleaned "
            f"(e.g. {missing[0]})"
        )
    view = meta.file_system_view(timeline, as_of=time)
    files = tuple(sorted(b.path for b in view.latest_base_files()))
    return Savepoint(time, files, user if user is not None else _user(), comment, int(_time.time() * 1000))


def missing_snapshot_files(meta: MetaClient, timeline: Timeline, time: str) -> list[str]:
    """The files of the snapshot at `time` (latest version of each file group written by the
    active timeline's completed writes up to `time`, from their commit metadata: a base file and,
    on merge-on-read, the log files written on top of it since) that no longer exist."""
    latest: dict[tuple[str, str], list[str]] = {}
    for w in timeline.completed_writes.instants:
        if w.time > time:
            break
        for s in meta.commit_metadata(w).write_stats:
            if not s.path:
                continue
            if s.logVersion is None:  # a base file starts a new slice
                latest[(s.partitionPath, s.fileId)] = [s.path]
            else:
                latest.setdefault((s.partitionPath, s.fileId), []).append(s.path)
    present = {df.path for df in meta.list_data_files()}
    return sorted(p for paths in latest.values() for p in paths if p not in present)


def create_savepoint(meta: MetaClient, sp: Savepoint) -> Savepoint:
    """Write the savepoint (the caller holds the table lock)."""
    inflight = Instant(sp.time, Action.SAVEPOINT, State.INFLIGHT)
    ensure_file(meta, inflight)
    write_avro(meta, inflight.with_state(State.COMPLETED), MODEL, to_record(sp))
    return sp


def delete_savepoint(meta: MetaClient, timeline: Timeline, time: str) -> None:
    if not any(sp.time == time for sp in timeline.savepoints):
        raise InstantNotFoundError(f"there is no savepoint at {time}")
    remove_savepoint_files(meta, time)


def remove_savepoint_files(meta: MetaClient, time: str) -> None:
    for state in (State.COMPLETED, State.INFLIGHT):  # the completed file first: no half savepoint stays
        meta.storage.delete(meta.instant_path(Instant(time, Action.SAVEPOINT, state)))


def list_savepoints(meta: MetaClient, timeline: Timeline | None = None) -> list[Savepoint]:
    tl = timeline or meta.timeline()
    return [read_savepoint(meta, sp.time) for sp in tl.savepoints]


def read_savepoint(meta: MetaClient, time: str) -> Savepoint:
    rec = read_avro(meta, Instant(time, Action.SAVEPOINT, State.COMPLETED), MODEL)
    files = []
    for part, pm in (rec.get("partitionMetadata") or {}).items():
        for name in pm.get("savepointDataFile") or []:
            files.append(f"{part}/{name}" if part else name)
    return Savepoint(time, tuple(sorted(files)), rec.get("savepointedBy") or "", rec.get("comments") or "", rec.get("savepointedAt") or 0)


def savepointed_files(meta: MetaClient, timeline: Timeline) -> frozenset[str]:
    """Every base file some savepoint protects."""
    return frozenset(f for sp in list_savepoints(meta, timeline) for f in sp.files)


def to_record(sp: Savepoint) -> dict:
    parts: dict[str, list[str]] = {}
    for f in sp.files:
        part, _, name = f.rpartition("/")
        parts.setdefault(part, []).append(name)
    return {
        "savepointedBy": sp.user,
        "savepointedAt": sp.saved_at,
        "comments": sp.comment,
        "partitionMetadata": {
            p: {"partitionPath": p, "savepointDataFile": sorted(names)} for p, names in sorted(parts.items())
        },
        "version": 1,
    }


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in some containers
        return "unknown"
