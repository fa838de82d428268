"""The instant lifecycle on storage: claim a new instant (`T.<action>.requested`, created
exclusively), move it to inflight, complete it (exclusively: one writer completes an instant),
remove its files, and read/write the Avro plans and metadata of table-service instants.

Used by writes (`engine.write.commit`) and every table service.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from engine.constants import heartbeat_file
from engine.errors import CommitConflictError, CorruptTableError
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant, State, next_instant_time
from engine.timeline.timeline import Timeline

MAX_CLAIM_ATTEMPTS = 50


def claim_instant(
    meta: MetaClient, timeline: Timeline, action: Action, requested_body: bytes, now: datetime | None = None
) -> str:
    """Create `T.<action>.requested` for a new time T strictly after every instant on the timeline.

    The requested file is created exclusively, so of racing claimants exactly one gets each time.
    """
    last = timeline.last_time
    for _ in range(MAX_CLAIM_ATTEMPTS):
        time = next_instant_time(now or datetime.now(UTC), last)
        requested = Instant(time, action, State.REQUESTED)
        try:
            meta.storage.create_exclusive(meta.instant_path(requested), requested_body)
            return time
        except FileExistsError:
            last = max(time, meta.timeline().last_time or time)
    raise CommitConflictError("could not claim a new instant time: the timeline keeps moving")


# Called with (meta, completed instant, its body) before an instant of a table completes, and with
# (meta, time) when an unfinished write is abandoned: the metadata table's writer keeps it in step
# (`engine.metadata.writer` registers itself; this layer cannot import it).
BeforeComplete = Callable[["MetaClient", Instant, bytes], None]
Abandoned = Callable[["MetaClient", str], None]
_before_complete: list[BeforeComplete] = []
_abandoned: list[Abandoned] = []


def on_before_complete(hook: BeforeComplete) -> None:
    if hook not in _before_complete:
        _before_complete.append(hook)


def on_abandoned(hook: Abandoned) -> None:
    if hook not in _abandoned:
        _abandoned.append(hook)


def before_complete(meta: MetaClient, instant: Instant, body: bytes) -> None:
    for hook in list(_before_complete):
        hook(meta, instant, body)


def abandoned(meta: MetaClient, time: str) -> None:
    """An unfinished write at `time` is being removed: hooks undo what they did for it."""
    for hook in list(_abandoned):
        hook(meta, time)


def transition_to_inflight(meta: MetaClient, time: str, action: Action, body: bytes) -> None:
    """Create the inflight file of a requested instant (exclusively)."""
    meta.storage.create_exclusive(meta.instant_path(Instant(time, action, State.INFLIGHT)), body)


def complete_instant(meta: MetaClient, time: str, action: Action, body: bytes) -> None:
    """Write the completed instant file exclusively: from here on the instant is visible.

    A retried conditional PUT (its first attempt succeeded, the answer was lost) sees its own file
    (same bytes): that is this writer's completion, not a conflict.
    """
    done = Instant(time, action, State.COMPLETED)
    if meta.layout.version >= 2:
        # layout 2 names the completed file with its completion time: one completion per instant
        existing = meta.completed_file_name(time, action)
        if existing is not None:
            if meta.storage.read_bytes(f"{meta.layout.folder}/{existing}") == body:
                return
            raise CommitConflictError(f"instant {time} was completed by another writer")
    before_complete(meta, done, body)
    if meta.layout.version >= 2:
        done = done.with_completion(next_instant_time(datetime.now(UTC), time))
    path = meta.instant_path(done)
    try:
        meta.storage.create_exclusive(path, body)
    except FileExistsError as exc:
        if meta.storage.read_bytes(path) == body:
            return
        raise CommitConflictError(f"instant {time} was completed by another writer") from exc


def is_instant_completed(meta: MetaClient, time: str, action: Action) -> bool:
    return meta.completed_file_name(time, action) is not None


def write_avro(meta: MetaClient, instant: Instant, model: str, record: dict, exclusive: bool = True) -> None:
    """Write an instant file holding one Avro record (Apache Hudi's container-file form)."""
    from engine.timeline import avro_models

    body = avro_models.serialize(model, record)
    if instant.state is State.COMPLETED:
        before_complete(meta, instant, body)
    path = meta.instant_path(instant)
    if exclusive:
        try:
            meta.storage.create_exclusive(path, body)
        except FileExistsError:
            if meta.storage.read_bytes(path) != body:
                raise
    else:
        meta.storage.write_bytes(path, body)


def read_avro(meta: MetaClient, instant: Instant, model: str) -> dict:
    from engine.timeline import avro_models

    data = meta.read_instant(instant)
    try:
        return avro_models.deserialize(model, data)
    except CorruptTableError as exc:
        raise CorruptTableError(f"{meta.instant_path(instant)}: {exc}") from exc


def rolled_back_instants(meta: MetaClient, timeline: Timeline) -> set[str]:
    """The instants the completed rollbacks and restores of `timeline` name as undone."""
    out: set[str] = set()
    for inst in timeline.filter(actions=[Action.ROLLBACK, Action.RESTORE], completed=True).instants:
        model = "HoodieRollbackMetadata" if inst.action is Action.ROLLBACK else "HoodieRestoreMetadata"
        record = read_avro(meta, inst, model)
        out.update(str(t) for t in record.get("commitsRollback") or record.get("instantsToRollback") or [])
    return out


def ensure_file(meta: MetaClient, instant: Instant, body: bytes = b"") -> None:
    """Create an instant file if it is missing (resuming an interrupted service)."""
    try:
        meta.storage.create_exclusive(meta.instant_path(instant), body)
    except FileExistsError:
        pass


def remove_instant(meta: MetaClient, time: str, action: Action) -> None:
    """Remove an instant's timeline files: requested and inflight first, the completed file last,
    so an interrupted removal never leaves a completed-looking instant without its history."""
    for state in State:  # requested, inflight, completed (layout 2 finds its name by listing)
        meta.storage.delete(meta.instant_path(Instant(time, action, state)))


def heartbeat_path(time: str) -> str:
    return heartbeat_file(time)
