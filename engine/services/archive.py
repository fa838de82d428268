"""Archival: keep the active timeline bounded by moving old completed instants to the archived
timeline: in table version 6 `.hoodie/archived/` (Apache Hudi 0.14's log files of
`HoodieArchivedMetaEntry`), in versions 8 and 9 (timeline layout 2) the LSM history
`.hoodie/timeline/history/` (Apache Hudi 1.x's Parquet files and manifests,
`engine.services.archive_lsm`). Planning is the same for both; only where the archived
instants are stored differs (`engine.services.archive_store`).

When more than `hoodie.keep.max.commits` completed commits are active, the oldest are archived
until `hoodie.keep.min.commits` remain, never reaching: the earliest pending instant, the
earliest savepoint, or the earliest commit the last clean retained (its snapshot must stay
readable), nor the latest compaction of the table's metadata table where it has one
(`engine.metadata.archival`). Completed clean and rollback instants older than the cut go with
them; savepoints and restores stay active (Apache Hudi 0.14 never archives restores).

Order (crash safety): the archive is written first (version 6: one new archive file
`.commits_.archive.<N>_1-0-1`, created exclusively; layout 2: a layer-0 Parquet file, then a new
manifest, then `_version_`), then the instants' timeline files are removed oldest instant first, and
for each instant its requested/inflight files before its completed file. So the active timeline
is always a suffix of the history (data files of archived commits predate its first instant and
stay visible), and an instant is never seen as pending. An interrupted archival leaves instants
both archived and active; the next run skips what the archive already holds.

Before that, files of instants in the range about to be archived that never completed (debris a
straggler task of an aborted write may have left) are deleted: once archived, an instant's
files count because they predate the active timeline. Only files of this table's known failed
writes are deleted (recorded when they aborted, or named by an active rollback or restore), and
only if `FileOwnership` agrees they are this table's. A file in that range whose instant this
table never knew is kept and logged, and archival stops below it (`ArchivePlan.held_back`):
archiving past it would make it visible.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from engine import failpoints
from engine.metadata import archival
from engine.serial import Documented
from engine.services import archive_lsm
from engine.services.archive_store import SERVICE_MODELS, LsmArchive, store_for
from engine.storage.base import FileInfo
from engine.table import failed_writes
from engine.table.lifecycle import remove_instant, rolled_back_instants
from engine.table.meta_client import MetaClient, instant_file_names
from engine.table.ownership import FileOwnership
from engine.table.retention import last_earliest_retained
from engine.timeline import lsm
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

_log = logging.getLogger(__name__)
ARCHIVED_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, *SERVICE_MODELS)


@dataclass(frozen=True)
class ArchivePlan(Documented):
    instants: tuple[Instant, ...]  # completed instants to archive, oldest first
    # files of failed writes in the range archival exposes: deleted before the archive is written
    debris: tuple[str, ...] = ()
    # files in that range whose instant this table never knew (not its writes, nor its known
    # failed writes: perhaps another table's): kept, and archival stops below the oldest of them
    held_back: tuple[str, ...] = ()

    @property
    def times(self) -> list[str]:
        return [i.time for i in self.instants]


def plan_archive(meta: MetaClient, timeline: Timeline, keep_min: int, keep_max: int) -> ArchivePlan:
    """What archival would do now: the instants to archive, the failed writes' files to delete
    first, and the files that hold it back (see the module docstring)."""
    chosen = _chosen(meta, timeline, keep_min, keep_max, None)
    if not chosen:
        return ArchivePlan(())
    below = _files_below(meta, timeline, chosen)
    if below.unexplained:
        # archiving past an unexplained file would make it visible (files older than the first
        # active write count): keep the last write before the oldest one active
        oldest = min(instant for _path, instant in below.unexplained)
        held = max((t for t in timeline.completed_write_times if t < oldest), default=oldest)
        chosen = _chosen(meta, timeline, keep_min, keep_max, held)
        kept = tuple(sorted(path for path, _instant in below.unexplained))
        below = _files_below(meta, timeline, chosen) if chosen else _Below((), ())
        return ArchivePlan(chosen, below.debris, kept)
    return ArchivePlan(chosen, below.debris)


def chosen_instants(
    meta: MetaClient, timeline: Timeline, keep_min: int, keep_max: int, bound: str | None = None
) -> tuple[Instant, ...]:
    """The completed instants archival takes (below `bound`, when given), oldest first."""
    return _chosen(meta, timeline, keep_min, keep_max, bound)


def _chosen(
    meta: MetaClient, timeline: Timeline, keep_min: int, keep_max: int, held: str | None
) -> tuple[Instant, ...]:
    writes = timeline.completed_writes.instants
    if len(writes) <= keep_max:
        return ()
    cut = writes[len(writes) - keep_min].time  # instants before `cut` may go
    bounds = [i.time for i in timeline.pending.instants]
    metadata_bound = archival.data_table_bound(meta, timeline) if meta.config.version >= 8 else None
    if metadata_bound is not None:  # never past the latest compaction of the metadata table
        bounds.append(metadata_bound)
    bounds += [sp.time for sp in timeline.savepoints]
    retained = last_earliest_retained(meta, timeline)
    if retained:
        bounds.append(retained)
    if held is not None:
        bounds.append(held)
    replace_bound = oldest_replace_to_keep(meta, timeline)  # every version: see its docstring
    if replace_bound is not None:
        bounds.append(replace_bound)
    if bounds:
        cut = min(cut, *bounds)
    # savepoints stay while they exist; restores stay too (Hudi 0.14 never archives them)
    return tuple(i for i in timeline.completed.instants if i.time < cut and i.action in ARCHIVED_ACTIONS)


def oldest_replace_to_keep(meta: MetaClient, timeline: Timeline) -> str | None:
    """The oldest replacecommit or clustering instant archival must not pass (every version):
    a pending one, or a completed one whose replaced file groups still have files on storage.

    Only an active replacecommit hides the file groups it replaced; archived, they would be read
    again. Apache Hudi (`ClusteringUtils.getEarliestInstantToRetainForClustering`) keeps every
    replacecommit a clean has not passed, trusting its cleaner to have deleted the replaced
    groups; this engine's clean deletes them too (`engine.services.clean`), but the files
    themselves are checked, which also covers groups a savepoint kept or Hudi's cleaner left."""
    replaces = [i for i in timeline.instants if i.action in (Action.REPLACE_COMMIT, Action.CLUSTERING)]
    if not replaces:
        return None
    present: set[tuple[str, str]] | None = None
    for inst in replaces:
        if not inst.is_completed or inst.action is not Action.REPLACE_COMMIT:
            return inst.time
        replaced = meta.commit_metadata(inst).partition_to_replace_file_ids or {}
        if not any(replaced.values()):
            continue
        if present is None:
            present = _groups_on_storage(meta)
        if any((p, f) in present for p, ids in replaced.items() for f in ids):
            return inst.time
    return None


def _groups_on_storage(meta: MetaClient) -> set[tuple[str, str]]:
    from engine.data.file_names import parse_base_file_name, parse_log_file_name

    out = set()
    for df in meta.list_data_files():
        parsed = parse_base_file_name(df.name) or parse_log_file_name(df.name)
        if parsed is not None:
            out.add((df.partition, parsed.file_id))
    return out


def _companions(meta: MetaClient, action: Action) -> tuple[Action, ...]:
    """The actions whose timeline files an archived instant of `action` leaves besides its own:
    a commit's compaction plan files; in layout 2 also a replacecommit's clustering files and a
    deltacommit's log-compaction files (layout 2 names pending clustering `T.clustering.*`)."""
    if action is Action.COMMIT:
        return (Action.COMPACTION,)
    if meta.layout.version >= 2 and action is Action.REPLACE_COMMIT:
        return (Action.CLUSTERING,)
    if meta.layout.version >= 2 and action is Action.DELTA_COMMIT:
        return (Action.LOG_COMPACTION,)
    return ()


def _remove_archived(meta: MetaClient, inst: Instant) -> None:
    for companion in _companions(meta, inst.action):
        remove_instant(meta, inst.time, companion)  # plan files first: the completed file goes last
    remove_instant(meta, inst.time, inst.action)


def execute_archive(
    meta: MetaClient,
    plan: ArchivePlan,
    fence: Callable[[], None] | None = None,
    compaction_batch_size: int = lsm.DEFAULT_COMPACTION_BATCH,
) -> list[str]:
    """Archive the plan's instants; returns their times. Layout 2 then compacts the LSM history
    (`hoodie.timeline.compaction.batch.size` files of a layer into one of the next)."""
    if not plan.instants:
        return []
    if fence is not None:
        fence()
    remove_debris(meta, plan)
    store = store_for(meta)
    store.settle(meta)
    already = store.held_times(meta)
    todo = [i for i in plan.instants if i.time not in already]
    if todo:
        store.append(meta, todo)
    failpoints.hit("archive.after_file")
    if fence is not None:
        fence()
    for inst in plan.instants:  # oldest first; completed file last within each instant
        _remove_archived(meta, inst)
    first = meta.timeline().archived_before
    if first is not None:  # failed writes below the active timeline: their debris is gone
        failed_writes.forget_before(meta.storage, first)
    if isinstance(store, LsmArchive):
        archive_lsm.compact(meta, compaction_batch_size)
    return plan.times


def timeline_files(meta: MetaClient, plan: ArchivePlan) -> list[FileInfo]:
    """The timeline files that executing `plan` removes (their instants move into the archive),
    in the order `execute_archive` removes them; only those present now."""
    if not plan.instants:
        return []
    layout = meta.layout
    entries = [f for f in meta.storage.list_dir(layout.folder) if not f.is_dir]
    out = []
    if layout.version < 2:
        present = {f.name: f for f in entries}
        for inst in plan.instants:
            actions = (Action.COMPACTION, inst.action) if inst.action is Action.COMMIT else (inst.action,)
            for action in actions:
                names = instant_file_names(Instant(inst.time, action, State.REQUESTED))
                out += [present[n] for n in names if n in present]
        return out
    parsed = [(p, f) for f in entries if (p := layout.parse(f.name)) is not None]
    for inst in plan.instants:
        for action in (*_companions(meta, inst.action), inst.action):
            mine = [(p, f) for p, f in parsed if p.time == inst.time and p.action is action]
            out += [f for _p, f in sorted(mine, key=lambda pf: pf[0].sort_key())]
    return out


@dataclass(frozen=True)
class _Below:
    debris: tuple[str, ...]
    unexplained: tuple[tuple[str, str], ...]  # (path, instant)


def debris_below(meta: MetaClient, timeline: Timeline, plan: ArchivePlan) -> list[str]:
    """The files archiving `plan` deletes first: leftovers of failed writes in the range it adds."""
    return list(_files_below(meta, timeline, plan.instants).debris) if plan.instants else []


def _files_below(meta: MetaClient, timeline: Timeline, instants: tuple[Instant, ...]) -> _Below:
    """Data files that archiving `instants` would make visible although their instant never completed.

    Once archived, an instant's files count because they predate the active timeline (as in
    Apache Hudi and hudi-rs), so a file whose instant falls in the range archival adds and is not
    a completed write there must go first. It is deleted only when it is this table's failed
    write's (`known_failed_writes`, in a file group that write planned) and passes
    `FileOwnership`; any other is unexplained: kept, logged, and it holds archival back.
    Data files and the RECORD index's delta files are considered."""
    from engine.data.file_names import file_instant, parse_base_file_name, parse_log_file_name
    from engine.data.log_file import log_block_instants
    from engine.index.record_files import INDEX_FOLDER, IndexFile

    archived = {i.time for i in instants}
    after = Timeline(tuple(i for i in timeline.instants if i.time not in archived), has_archive=True)
    new_first = after.archived_before
    old_first = timeline.archived_before
    completed = timeline.completed_write_times
    failed = known_failed_writes(meta, timeline)
    ownership = FileOwnership(meta.storage)
    debris: list[str] = []
    unexplained: list[tuple[str, str]] = []

    def exposed(instant: str) -> bool:
        if instant in completed or (old_first is not None and instant < old_first):
            return False  # counts already
        return new_first is None or instant < new_first

    def judge(path: str, instant: str, file_id: str | None) -> None:
        partition = path.rpartition("/")[0]
        known = failed.get(instant)
        if known is None or (file_id is not None and not known.may_have_written(partition, file_id)):
            unexplained.append((path, instant))
            _log.warning(
                "archival of %s: %s (instant %s) is no write this table knows; keeping it, and not archiving "
                "past it", meta.storage.base_uri, meta.storage.uri(path), instant,
            )
        elif ownership.owned([path], "archival"):
            debris.append(path)
        else:
            unexplained.append((path, instant))

    for df in meta.list_data_files():
        log = parse_log_file_name(df.name)
        if log is not None:
            # a log file is named after its slice's base instant; its blocks' instants are what
            # counts (every block is at or after the base instant: later slices cannot hold debris)
            if new_first is not None and log.base_instant >= new_first:
                continue
            instants_ = log_block_instants(meta.storage, df.path)
            if instants_ and all(exposed(i) for i in instants_):
                judge(df.path, max(instants_), log.file_id)
            continue
        instant = file_instant(df.name)
        if instant is not None and exposed(instant):
            base = parse_base_file_name(df.name)
            judge(df.path, instant, base.file_id if base else None)
    for f in meta.storage.list_dir(INDEX_FOLDER):
        ix = IndexFile.parse(f.name) if not f.is_dir else None
        if ix is not None and not ix.is_base and exposed(ix.instant):
            if ix.instant in failed:
                debris.append(ix.path)  # the table's own metadata folder: ownership is certain
            else:
                unexplained.append((ix.path, ix.instant))
    return _Below(tuple(sorted(debris)), tuple(sorted(unexplained)))


def known_failed_writes(meta: MetaClient, timeline: Timeline) -> dict[str, failed_writes.FailedWrite]:
    """The table's failed writes: those recorded when they aborted (`engine.table.failed_writes`),
    and those rolled back by the active rollback and restore instants (their metadata)."""
    out = failed_writes.load(meta.storage)
    for t in sorted(rolled_back_instants(meta, timeline)):
        out.setdefault(t, failed_writes.FailedWrite(t, "", None))
    return out


def remove_debris(meta: MetaClient, plan: ArchivePlan) -> list[str]:
    """Delete the plan's debris (before the archive file is written: a crash leaves nothing
    visible), checking ownership again at the moment of deletion."""
    ownership = FileOwnership(meta.storage)
    removed = ownership.owned(plan.debris, "archival")
    for rel in removed:
        meta.storage.delete(rel)
    return removed


def archive(
    meta: MetaClient,
    keep_min: int,
    keep_max: int,
    dry_run: bool = False,
    fence: Callable[[], None] | None = None,
    compaction_batch_size: int = lsm.DEFAULT_COMPACTION_BATCH,
) -> ArchivePlan | list[str]:
    """Plan and run archival (the caller holds the table lock); the plan alone in a dry run."""
    plan = plan_archive(meta, meta.timeline(), keep_min, keep_max)
    return plan if dry_run else execute_archive(meta, plan, fence, compaction_batch_size)


def finish_interrupted(meta: MetaClient, timeline: Timeline) -> list[str]:
    """Remove active instants that the archive already holds (an archival killed after writing
    it; version 6: the newest archive file, layout 2: the LSM history), oldest first. Returns
    their times."""
    store = store_for(meta)
    store.settle(meta)
    held = store.recently_held(meta)
    if not held:
        return []
    stale = [i for i in timeline.completed.instants if i.time in held and i.action in ARCHIVED_ACTIONS]
    for inst in stale:
        _remove_archived(meta, inst)
    return [i.time for i in stale]


def read_archived_entries(meta: MetaClient) -> list[dict]:
    """Every archived instant's entry (`HoodieArchivedMetaEntry` as a dict), oldest file first;
    in layout 2 the LSM history's instants in that shape (`commitTime`, `actionType`,
    `actionState`, `stateTransitionTime` = completion time)."""
    return store_for(meta).entries(meta)


def archived_instants(meta: MetaClient) -> list[Instant]:
    """The archived instants (completed), oldest first, for browsing history (layout 2: with
    their completion times)."""
    if meta.layout.version >= 2:
        return archive_lsm.archived_instants(meta)
    out = {}
    for e in read_archived_entries(meta):
        t, a = e.get("commitTime"), e.get("actionType")
        if t and a:
            try:
                out[(t, a)] = Instant(t, Action(a), State.COMPLETED)
            except ValueError:
                continue
    return sorted(out.values())
