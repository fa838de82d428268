"""Undoing one instant: it becomes invisible first (its completed file reverted to inflight), then
the index gives back its locations, then its files, the partition folders it created and left
empty, its heartbeat, its schema version and its timeline files go. Idempotent: a resumed run
tolerates its own earlier partial run.

Used by rollback and restore (`engine.services`) and by a failed write undoing itself
(`engine.write.guarded`): the mechanism below the services, beside the lock and the commit check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine import failpoints
from engine.constants import (
    COMMIT_TIME_COL,
    METAFOLDER,
    PARTITION_METADATA_FILE,
    PARTITION_PATH_COL,
    RECORD_KEY_COL,
)
from engine.data.file_names import (
    file_instant,
    parse_base_file_name,
    parse_cdc_log_file_name,
    parse_log_file_name,
)
from engine.errors import InvalidInputError
from engine.index.base import Index, RollbackChange
from engine.table import lifecycle, schema_history
from engine.table.lifecycle import (
    ensure_file,
    heartbeat_path,
    remove_instant,
)
from engine.table.meta_client import MetaClient
from engine.table.ownership import FileOwnership
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

_log = logging.getLogger(__name__)
PLAN_MODEL = "HoodieRollbackPlan"
METADATA_MODEL = "HoodieRollbackMetadata"
Fence = Callable[[], None] | None  # the table lock's check(): raises ConcurrentWriteError once lost

CHANGE_SCHEMA_REMOVED = pa.schema(
    [("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string())]
)
CHANGE_SCHEMA_RESTORED = pa.schema(
    [("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string()), ("commit_time", pa.string())]
)


def instant_files(
    meta: MetaClient,
    time: str,
    index: Index | None,
    groups: set[tuple[str, str]] | None = None,
    logs: bool = True,
) -> list[str]:
    """Every file written by instant `time`: base files named with it, log files whose blocks it
    wrote (merge-on-read: a log file is named after its slice's base instant, so its blocks'
    headers tell; only the groups `time` wrote when they are known), plus the index's own files.

    A log file holding blocks of `time` and of other instants (Apache Hudi appending on HDFS)
    cannot be deleted without losing the others: InvalidInputError."""
    from engine.data.log_file import log_block_instants

    found = []
    for df in meta.list_data_files():
        if parse_base_file_name(df.name) is not None:
            if file_instant(df.name) == time:
                found.append(df.path)
            continue
        cdc = parse_cdc_log_file_name(df.name)
        if cdc is not None:  # a CDC log file is named with the write that left it
            if cdc.base_instant == time:
                found.append(df.path)
            continue
        if not logs:
            continue
        log = parse_log_file_name(df.name)
        # a log file `time` wrote belongs to a slice based at or before it
        if (
            log is None
            or log.base_instant > time
            or (groups is not None and (df.partition, log.file_id) not in groups)
        ):
            continue
        instants = log_block_instants(meta.storage, df.path)
        if time not in instants:
            continue
        if any(i != time for i in instants):
            raise InvalidInputError(
                f"log file {df.path} holds blocks of {time} and of other instants ({', '.join(sorted(set(instants)))}); "
                f"rolling {time} back would need a rollback command block, which this version does not write"
            )
        found.append(df.path)
    if index is not None:
        found.extend(index.rollback_files(meta, time))
    return sorted(set(found))


def undo_instant(
    meta: MetaClient,
    time: str,
    action: Action,
    planned: Iterable[str],
    index: Index | None,
    final: bool = True,
    skipped: list[str] | None = None,
    replaced: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
) -> list[str]:
    """Make instant `time` vanish: invisible first, then its files, index entries and timeline files.

    Returns the files deleted by this call. Used by rollback and restore; idempotent. Files that
    are not this instant's own (`owned_instant_files`) are kept and appended to `skipped`.
    `replaced`: file groups a replacecommit replaces, besides those its metadata names (a
    failed write undoing itself knows them before any metadata does).
    """
    storage = meta.storage
    # the file groups the instant wrote, from its metadata (read before the revert removes the
    # completed file): a resumed undo whose files are already gone still knows them
    planned_parts, planned_groups, exact = instant_groups(meta, time, action)
    # a replacecommit's replaced groups become current again: their keys go back into the index
    replaced = set(replaced) | replaced_groups(meta, time, action)
    completed = Instant(time, action, State.COMPLETED)
    if storage.exists(meta.instant_path(completed)):
        # revert to inflight: the instant stops being visible before any of its files goes
        ensure_file(meta, completed.with_state(State.INFLIGHT))
        storage.delete(meta.instant_path(completed))
    # its deltacommit on the metadata table goes before its files (as Hudi rolls back the metadata
    # table's first); the rollback's tombstones cover what a metadata compaction already holds
    lifecycle.abandoned(meta, time)
    failpoints.hit("rollback.after_revert")
    logs = action is not Action.COMPACTION
    found = sorted(set(planned) | set(instant_files(meta, time, index, planned_groups or None, logs)))
    files, foreign = owned_instant_files(meta, time, found, planned_groups if exact else None, "rollback")
    if skipped is not None:
        skipped.extend(foreign)
    if index is not None:
        # the index is reverted before any file goes: the change is read from the instant's
        # files, so a resumed run (after a crash among the deletions below) would see only part
        # of it. Reverting first is safe (the instant is invisible already) and idempotent: a
        # resumed run recomputes the same change, or a part of one already applied.
        change = index_change(meta, index, time, files, planned_groups | replaced)
        index.rollback_commit(meta, time, change, final=final)
    deleted = []
    for i, rel in enumerate(files):
        if storage.exists(rel):
            storage.delete(rel)
            deleted.append(rel)
        if i == 0:
            failpoints.hit("rollback.files_deleted")
    touched = {parent_folder(f) for f in files if not f.startswith(".hoodie")} | planned_parts
    if not planned_groups:  # a write that named no file groups (a one-pass bulk_insert) may have
        touched |= set(meta.partitions_with_metadata())  # created partitions it wrote no file in
    _remove_created_partitions(meta, touched, time)
    storage.delete(heartbeat_path(time))
    schema_history.remove(storage, time)  # schema on read: the version it recorded goes with it
    remove_instant(meta, time, action)
    if action is Action.COMMIT:
        remove_instant(meta, time, Action.COMPACTION)  # a completed compaction is a commit
    return deleted


def parent_folder(rel: str) -> str:
    return rel.rpartition("/")[0]


def file_uri(base: str, rel: str) -> str:
    return f"{base.rstrip('/')}/{rel}"


def index_change(
    meta: MetaClient,
    index: Index,
    time: str,
    files: list[str],
    groups: set[tuple[str, str]],
    timeline: Timeline | None = None,
) -> RollbackChange:
    """How rolling back `time` moves record locations (from its `files`, before any is deleted),
    for an index that stores them; empty for one that derives them from the data files."""
    if not index.wants_locations:
        return RollbackChange(CHANGE_SCHEMA_REMOVED.empty_table(), CHANGE_SCHEMA_RESTORED.empty_table())
    return RollbackChange(
        _written_keys(meta, files, time), _restored_locations(meta, files, groups, timeline)
    )


def _written_keys(meta: MetaClient, files: list[str], time: str) -> pa.Table:
    """(key, partition, file id) of records the instant wrote itself (commit time == instant)."""
    parts = []
    for rel in files:
        bn = parse_base_file_name(rel.rpartition("/")[2])
        if bn is None or not meta.storage.exists(rel):
            continue
        t = read_keys(meta, rel)
        t = t.filter(pc.equal(t.column(COMMIT_TIME_COL), time))
        parts.append(
            pa.table(
                {
                    "key": t.column(RECORD_KEY_COL),
                    "partition": pa.array([parent_folder(rel)] * t.num_rows, pa.string()),
                    "file_id": pa.array([bn.file_id] * t.num_rows, pa.string()),
                },
                schema=CHANGE_SCHEMA_REMOVED,
            )
        )
    return pa.concat_tables(parts) if parts else CHANGE_SCHEMA_REMOVED.empty_table()


def _restored_locations(
    meta: MetaClient,
    files: list[str],
    planned: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
    timeline: Timeline | None = None,
) -> pa.Table:
    """Locations of every record in the slices that become current again (the file groups the
    rolled-back instant wrote, at their now-latest visible slice; `timeline`: the table without
    the instant, when it is still completed)."""
    groups = set(planned)
    for rel in files:
        bn = parse_base_file_name(rel.rpartition("/")[2])
        if bn is not None:
            groups.add((parent_folder(rel), bn.file_id))
    if not groups:
        return CHANGE_SCHEMA_RESTORED.empty_table()
    view = meta.file_system_view(timeline)
    parts = []
    for part, fid in sorted(groups):
        g = view.group(part, fid)
        base = g.latest_slice.base_file if g is not None and g.latest_slice is not None else None
        if base is None:
            continue
        t = read_keys(meta, base.path)
        parts.append(
            pa.table(
                {
                    "key": t.column(RECORD_KEY_COL),
                    "partition": pa.array([part] * t.num_rows, pa.string()),
                    "file_id": pa.array([fid] * t.num_rows, pa.string()),
                    "commit_time": t.column(COMMIT_TIME_COL),
                },
                schema=CHANGE_SCHEMA_RESTORED,
            )
        )
    return pa.concat_tables(parts) if parts else CHANGE_SCHEMA_RESTORED.empty_table()


def instant_groups(
    meta: MetaClient, time: str, action: Action
) -> tuple[set[str], set[tuple[str, str]], bool]:
    """Partitions and (partition, file id) groups the instant's completed (or inflight, planned)
    metadata names: a write killed before its first file in a new partition still created that
    partition's metadata file, and a resumed undo must still revert the index of its groups.
    The flag says the groups come from the completed metadata (every file the instant wrote)."""
    from engine.errors import CorruptTableError
    from engine.timeline.commit_metadata import CommitMetadata

    for state in (State.COMPLETED, State.INFLIGHT):
        try:
            body = meta.storage.read_bytes(meta.instant_path(Instant(time, action, state)))
        except FileNotFoundError:
            continue
        if not body.strip():
            continue
        try:
            cm = CommitMetadata.from_json(body)
        except CorruptTableError:
            return set(), set(), False
        groups = {(s.partitionPath, s.fileId) for s in cm.write_stats if s.fileId}
        return set(cm.partition_to_write_stats), groups, state is State.COMPLETED
    return set(), set(), False


def replaced_groups(meta: MetaClient, time: str, action: Action) -> set[tuple[str, str]]:
    """The (partition, file id) groups replacecommit `time` replaces, from its completed (or, in
    version 6, inflight) metadata; empty for other actions or when unreadable."""
    from engine.errors import CorruptTableError
    from engine.timeline.commit_metadata import CommitMetadata

    if action is not Action.REPLACE_COMMIT:
        return set()
    for state in (State.COMPLETED, State.INFLIGHT):
        try:
            body = meta.storage.read_bytes(meta.instant_path(Instant(time, action, state)))
        except FileNotFoundError:
            continue
        try:
            ids = CommitMetadata.from_bytes(body).partition_to_replace_file_ids if body.strip() else None
        except CorruptTableError:
            ids = None
        if ids:
            return {(p, f) for p, fids in ids.items() for f in fids}
    return set()


def owned_instant_files(
    meta: MetaClient, time: str, files: Iterable[str], groups: set[tuple[str, str]] | None, service: str
) -> tuple[list[str], list[str]]:
    """(files to delete, files kept) among `files`, candidates for undoing instant `time`.

    Kept, and logged: files that are not this table's (`FileOwnership`: another table's folder
    or partition, or not a Hudi file name); base files not named with `time`; and, when `groups`
    (the completed instant's file groups) is given, files of other file groups. The table's own
    metadata files (`.hoodie/...`, the index's) are not data files and pass."""
    ownership = FileOwnership(meta.storage)
    out = []
    for rel in ownership.owned(files, service):
        if rel.startswith(METAFOLDER + "/"):
            out.append(rel)
            continue
        partition, _, name = rel.rpartition("/")
        base = parse_base_file_name(name)
        log = (parse_log_file_name(name) or parse_cdc_log_file_name(name)) if base is None else None
        if base is not None and base.instant != time:
            reason = f"a base file of instant {base.instant}, not {time}"
        elif (
            groups is not None
            and (partition, base.file_id if base else log.file_id if log else "") not in groups
        ):
            reason = f"its file group is not one that {time} wrote"
        else:
            out.append(rel)
            continue
        ownership.skipped.append((rel, reason))
        _log.warning(
            "%s of %s: not deleting %s: %s", service, meta.storage.base_uri, meta.storage.uri(rel), reason
        )
    return out, ownership.skipped_paths


def _remove_created_partitions(meta: MetaClient, partitions: set[str], time: str) -> None:
    """Remove partition folders the instant created (metadata commitTime == instant) and left empty.

    Only while no other write (or compaction, clustering) is pending: a rollback runs under the table lock, so no write can
    claim an instant meanwhile, but one that claimed earlier (an optimistic writer, which writes
    its files without the lock) may be about to put its first file into the folder. Apache
    Hudi's rollback never removes partition folders; we do only when nobody else can be in one."""
    storage = meta.storage
    writing = (
        Action.COMMIT,
        Action.DELTA_COMMIT,
        Action.REPLACE_COMMIT,
        Action.COMPACTION,
        Action.LOG_COMPACTION,
        Action.CLUSTERING,
    )
    if any(i.time != time and i.action in writing for i in meta.timeline().pending.instants):
        return
    for part in sorted(partitions, reverse=True):
        if not part:
            continue
        rel = f"{part}/{PARTITION_METADATA_FILE}"
        try:
            text = storage.read_bytes(rel).decode("utf-8", "replace")
        except FileNotFoundError:
            continue
        if f"commitTime={time}" not in text.splitlines():
            continue
        if any(i.name != PARTITION_METADATA_FILE for i in storage.list_files_recursive(part)):
            continue
        storage.delete(rel)
        storage.delete_dir(part)
        parents = part.split("/")[:-1]
        while parents:
            p = "/".join(parents)
            if storage.list_dir(p):
                break
            storage.delete_dir(p)
            parents.pop()


def read_keys(meta: MetaClient, rel: str) -> pa.Table:
    """(record key, partition path, commit time) of a base file's rows. A table without meta
    fields stores none of them: the key is computed from the key fields, the partition is the
    file's folder and the commit time the file's instant (the latest a record in it can have been
    written, so a dependency check errs on the side of refusing)."""
    if meta.config.populate_meta_fields:
        with meta.storage.open_input_file(rel) as f:
            return pq.read_table(f, columns=[RECORD_KEY_COL, PARTITION_PATH_COL, COMMIT_TIME_COL])
    from engine.data.file_names import parse_base_file_name
    from engine.keygen.keys import KeySpec, key_array

    spec = KeySpec.from_config(meta.config)
    with meta.storage.open_input_file(rel) as f:
        keys = key_array(spec, pq.read_table(f, columns=list(spec.record_key_fields)))
    folder, _, name = rel.rpartition("/")
    parsed = parse_base_file_name(name)
    n = len(keys)
    return pa.table(
        [
            keys,
            pa.array([folder] * n, pa.string()),
            pa.array([parsed.instant if parsed else None] * n, pa.string()),
        ],
        names=[RECORD_KEY_COL, PARTITION_PATH_COL, COMMIT_TIME_COL],
    )
