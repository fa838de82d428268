"""Rollback refusals: whether undoing an instant would lose committed data (no writes here).

A completed instant cannot be rolled back when a savepoint at or after it protects it, when a
later completed write rewrote one of its file groups, when the file versions it replaced were
cleaned, or when it deleted or moved keys that a later commit wrote again (they would come back
twice). A pending compaction cannot be removed once writes appended on top of it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from engine.constants import COMMIT_TIME_COL, PARTITION_PATH_COL, RECORD_KEY_COL
from engine.data.file_names import join_path, parse_log_file_name
from engine.errors import InvalidInputError, RollbackRefusedError
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline
from engine.transaction.undo import read_keys

# completed instants rollback undoes: writes, and replacecommits (insert_overwrite, or a clustering
# Apache Hudi ran), whose replaced file groups become visible again
ROLLBACK_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
# pending instants whose files can simply go: failed writes, a clustering (or insert_overwrite)
# Apache Hudi scheduled or started, which replaces nothing until it completes, and a compaction
# no write has appended on top of yet
PENDING_ROLLBACK_ACTIONS = (
    Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING, Action.COMPACTION,
)


def undoable(inst: Instant) -> bool:
    """Whether rollback (and restore) can undo this instant: a commit, or a pending instant that
    was never visible (PENDING_ROLLBACK_ACTIONS)."""
    return inst.action in ROLLBACK_ACTIONS or (not inst.is_completed and inst.action in PENDING_ROLLBACK_ACTIONS)


def check_rollback_allowed(meta: MetaClient, timeline: Timeline, target: Instant) -> None:
    """Refuse (RollbackRefusedError) a rollback of a completed instant that would lose data."""
    if not undoable(target):
        state = "completed " if target.is_completed else ""
        raise InvalidInputError(
            f"cannot roll back a {state}{target.action.value} instant ({target.time}): only commits, "
            f"replacecommits and pending clusterings or compactions can be rolled back"
        )
    if not target.is_completed:
        if target.action is Action.COMPACTION:
            _check_nothing_on_top_of(meta, target.time)
        return
    guarded = [sp.time for sp in timeline.savepoints if sp.time >= target.time]
    if guarded:
        raise RollbackRefusedError(
            f"cannot roll back {target.time}: savepoint(s) {', '.join(guarded)} protect it; "
            f"delete them or restore to an instant before it",
            tuple(guarded),
        )
    metadata = meta.commit_metadata(target)
    stats = metadata.write_stats
    mine = {(s.partitionPath, s.fileId) for s in stats}
    dependents = []
    for later in timeline.completed_writes.instants:
        if later.time <= target.time:
            continue
        md = meta.commit_metadata(later)
        replaced = {(p, f) for p, ids in (md.partition_to_replace_file_ids or {}).items() for f in ids}
        # a later write to one of its groups, or a replacecommit (clustering, insert_overwrite)
        # that replaced one: its new files hold the records the rollback would take back
        if any((s.partitionPath, s.fileId) in mine for s in md.write_stats) or replaced & mine:
            dependents.append(later.time)
    if dependents:
        raise RollbackRefusedError(
            f"cannot roll back {target.time}: later commit(s) {', '.join(dependents)} rewrote or replaced file "
            f"groups it wrote; roll those back first (newest first) or restore to an instant before {target.time}",
            tuple(dependents),
        )
    present = {df.path for df in meta.list_data_files()}
    existing_names = {p.rpartition("/")[2] for p in present}
    missing = []
    previous: list[tuple[str, str]] = []  # (T's version, the version it replaced) per group
    for s in stats:
        if s.logVersion is not None:
            continue  # a log file: the slice it was appended to stays as it was
        if s.prevCommit and s.prevCommit != "null":
            prefix = f"{s.fileId}_"
            suffix = f"_{s.prevCommit}.parquet"
            found = sorted(n for n in existing_names if n.startswith(prefix) and n.endswith(suffix))
            if not found:
                missing.append(f"{s.partitionPath}/{s.fileId} @ {s.prevCommit}")
            else:
                previous.append((s.path or "", join_path(s.partitionPath, found[0])))
    previous.extend(_replaced_versions(meta, timeline, target, metadata.partition_to_replace_file_ids, missing))
    if missing:
        raise RollbackRefusedError(
            f"cannot roll back {target.time}: the file versions it replaced were cleaned "
            f"({', '.join(sorted(missing)[:5])}{' ...' if len(missing) > 5 else ''}); the records would be lost"
        )
    rewritten = _rewritten_removed_keys(meta, timeline, target.time, mine, previous, present)
    if rewritten:
        writers = tuple(sorted(rewritten))
        keys = sorted({k for ks in rewritten.values() for k in ks})
        raise RollbackRefusedError(
            f"cannot roll back {target.time}: it deleted or moved record(s) that later commit(s) "
            f"{', '.join(writers)} wrote again ({', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''}); "
            f"rolling it back would keep them twice. Roll those back first (newest first) or restore "
            f"to an instant before {target.time}",
            writers,
        )


def _replaced_versions(
    meta: MetaClient, timeline: Timeline, target: Instant, replaced: dict[str, list[str]] | None, missing: list[str]
) -> list[tuple[str, str]]:
    """("", latest base file) of each file group replacecommit `target` replaced, which rolling it
    back makes current again (no current version: every key in it counts as taken out); a group
    with no file left (cleaned) is added to `missing`."""
    groups = {(p, f) for p, ids in (replaced or {}).items() for f in ids}
    if not groups:
        return []
    without = Timeline(tuple(i for i in timeline.instants if i.time != target.time), timeline.has_archive)
    view = meta.file_system_view(without)
    out = []
    for part, fid in sorted(groups):
        group = view.group(part, fid)
        latest = group.latest_slice if group is not None else None
        if latest is None:
            missing.append(f"{part}/{fid} (replaced)")
        elif latest.base_file is not None:
            out.append(("", latest.base_file.path))
    return out


def _check_nothing_on_top_of(meta: MetaClient, compaction: str) -> None:
    """A pending compaction that writes appended to (log files based at its instant) cannot be
    removed: those log files belong to the slice it starts. Run it instead."""
    for df in meta.list_data_files():
        log = parse_log_file_name(df.name)
        if log is not None and log.base_instant == compaction:
            raise RollbackRefusedError(
                f"cannot roll back pending compaction {compaction}: later writes appended to the slices it "
                f"starts (e.g. {df.path}); run it (`hoodie compaction run PATH {compaction}`) instead"
            )


def _rewritten_removed_keys(
    meta: MetaClient,
    timeline: Timeline,
    time: str,
    mine: set[tuple[str, str]],
    previous: list[tuple[str, str]],
    present: set[str],
) -> dict[str, set[str]]:
    """Later commit -> keys it wrote that instant `time` had taken out of its file groups.

    Rolling `time` back makes the versions it replaced current again, so a key it deleted or
    moved to another partition comes back where it was. If a later commit wrote that key again
    elsewhere (an insert after the delete, a global index placing it in another partition,
    bulk_insert), the table would hold it twice: that commit depends on `time`."""
    removed: set[str] = set()
    for current, prev in previous:
        before = set(read_keys(meta, prev).column(RECORD_KEY_COL).to_pylist())
        after = set(read_keys(meta, current).column(RECORD_KEY_COL).to_pylist()) if current in present else set()
        removed |= before - after
    removed |= _log_deleted_keys(meta, time, present)
    if not removed:
        return {}
    wanted = pa.array(sorted(removed), pa.string())
    out: dict[str, set[str]] = {}
    for sl in meta.file_system_view(timeline).latest_slices():
        if (sl.partition, sl.file_id) in mine:
            continue
        if sl.log_files:
            t = _slice_keys(meta, timeline, sl, wanted)  # merge-on-read: the slice as readers see it
        elif sl.base_file is None or sl.base_file.instant <= time:
            continue  # a record written after `time` lives in a file version written after it
        else:
            t = read_keys(meta, sl.base_file.path)
        hit = t.filter(
            pc.and_(pc.is_in(t.column(RECORD_KEY_COL).cast(pa.string()), value_set=wanted),
                    pc.greater(t.column(COMMIT_TIME_COL).cast(pa.string()), time))
        )
        for key, commit in zip(hit.column(RECORD_KEY_COL).to_pylist(), hit.column(COMMIT_TIME_COL).to_pylist(), strict=True):
            out.setdefault(commit, set()).add(key)
    return out


def _log_deleted_keys(meta: MetaClient, time: str, present: set[str]) -> set[str]:
    """Keys the delete blocks of `time`'s log files name (merge-on-read deletes and moves)."""
    from engine.data.log_block import BlockType, decode_delete_block
    from engine.data.log_file import read_log_blocks

    keys: set[str] = set()
    done = Instant(time, Action.DELTA_COMMIT, State.COMPLETED)
    if not meta.storage.exists(meta.instant_path(done)):
        return keys
    for stat in meta.commit_metadata(done).write_stats:
        if stat.logVersion is None or not stat.path or stat.path not in present:
            continue
        for block in read_log_blocks(meta.storage, stat.path):
            if block.block_type == BlockType.DELETE:
                keys.update(decode_delete_block(block).column("key").to_pylist())
    return keys


def _slice_keys(meta: MetaClient, timeline: Timeline, sl, keys: pa.Array) -> pa.Table:
    """(record key, partition path, commit time) of the live records of a merge-on-read slice
    among `keys`, merged as readers merge it."""
    from engine.data.slice_reader import SliceFiles, merge_mode_for, read_slice
    from engine.schema.avro import with_meta_fields
    from engine.timeline.timeline import CommittedInstants

    schema = with_meta_fields(meta.latest_schema(timeline) or pa.schema([]))
    merged = read_slice(
        meta.storage, SliceFiles.from_slice(sl), schema, ordering_field=meta.config.precombine_field,
        mode=merge_mode_for(meta.config),
        is_committed=CommittedInstants(timeline.completed_write_times, timeline.archived_before), keys=keys,
    )
    return merged.select([RECORD_KEY_COL, PARTITION_PATH_COL, COMMIT_TIME_COL])


