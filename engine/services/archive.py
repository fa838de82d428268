"""Archival: keep the active timeline bounded by moving old completed instants to
`.hoodie/archived/` (Apache Hudi's archived-timeline log files of `HoodieArchivedMetaEntry`).

When more than `hoodie.keep.max.commits` completed commits are active, the oldest are archived
until `hoodie.keep.min.commits` remain, never reaching: the earliest pending instant, the
earliest savepoint, or the earliest commit the last clean retained (its snapshot must stay
readable). Completed clean and rollback instants older than the cut go with them; savepoints and
restores stay active (Apache Hudi 0.14 never archives restores).

Order (crash safety): one new archive file is written first (`.commits_.archive.<N>_1-0-1`,
created exclusively), then the instants' timeline files are removed oldest instant first, and
for each instant its requested/inflight files before its completed file. So the active timeline
is always a suffix of the history (data files of archived commits predate its first instant and
stay visible), and an instant is never seen as pending. An interrupted archival leaves instants
both archived and active; the next run skips what the archive already holds.

Before that, files of instants in the range about to be archived that never completed (debris a
straggler task of an aborted write may have left) are deleted: once archived, an instant's
files count because they predate the active timeline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine import failpoints
from engine.constants import METAFOLDER
from engine.errors import CorruptTableError
from engine.services import clean as clean_service
from engine.services.serial import Documented
from engine.table.commit_metadata import CommitMetadata
from engine.table.meta_client import MetaClient
from engine.timeline import archive_log, avro_models
from engine.timeline.instant import Action, Instant, State
from engine.timeline.lifecycle import remove_instant
from engine.timeline.timeline import Timeline

SERVICE_MODELS = {
    Action.CLEAN: "HoodieCleanMetadata",
    Action.ROLLBACK: "HoodieRollbackMetadata",
}
ARCHIVED_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, *SERVICE_MODELS)


@dataclass(frozen=True)
class ArchivePlan(Documented):
    instants: tuple[Instant, ...]  # completed instants to archive, oldest first

    @property
    def times(self) -> list[str]:
        return [i.time for i in self.instants]


def archive_folder(meta: MetaClient) -> str:
    return f"{METAFOLDER}/{meta.config.archivelog_folder}"


def plan_archive(meta: MetaClient, timeline: Timeline, keep_min: int, keep_max: int) -> ArchivePlan:
    writes = timeline.completed_writes.instants
    if len(writes) <= keep_max:
        return ArchivePlan(())
    cut = writes[len(writes) - keep_min].time  # instants before `cut` may go
    bounds = [i.time for i in timeline.pending.instants]
    bounds += [sp.time for sp in timeline.savepoints]
    retained = clean_service.last_earliest_retained(meta, timeline)
    if retained:
        bounds.append(retained)
    if bounds:
        cut = min(cut, *bounds)
    # savepoints stay while they exist; restores stay too (Hudi 0.14 never archives them)
    chosen = tuple(i for i in timeline.completed.instants if i.time < cut and i.action in ARCHIVED_ACTIONS)
    return ArchivePlan(chosen)


def _entry(meta: MetaClient, inst: Instant) -> dict:
    body = meta.read_instant(inst)
    if inst.action.is_write:
        metadata: CommitMetadata | dict | None = CommitMetadata.from_json(body)
    else:
        model = SERVICE_MODELS.get(inst.action)
        metadata = avro_models.deserialize(model, body) if model else None
    return archive_log.archived_entry(inst.time, inst.action.value, "COMPLETED", metadata)


def execute_archive(meta: MetaClient, plan: ArchivePlan, fence: Callable[[], None] | None = None) -> list[str]:
    """Archive the plan's instants; returns their times."""
    if not plan.instants:
        return []
    if fence is not None:
        fence()
    remove_debris_below(meta, meta.timeline(), plan)
    already = {e.get("commitTime") for e in read_archived_entries(meta)}
    todo = [i for i in plan.instants if i.time not in already]
    folder = archive_folder(meta)
    if todo:
        meta.storage.makedirs(folder)
        block = archive_log.encode_archive_block([_entry(meta, i) for i in todo])
        version = 1 + max(
            (v for f in meta.storage.list_dir(folder) if (v := archive_log.parse_archive_file_name(f.name)) is not None),
            default=0,
        )
        meta.storage.create_exclusive(f"{folder}/{archive_log.archive_file_name(version)}", block)
    failpoints.hit("archive.after_file")
    if fence is not None:
        fence()
    for inst in plan.instants:  # oldest first; completed file last within each instant
        remove_instant(meta, inst.time, inst.action)
    return plan.times


def debris_below(meta: MetaClient, timeline: Timeline, plan: ArchivePlan) -> list[str]:
    """Files that archiving `plan` would make visible although their instant never completed.

    Once archived, an instant's files count because they predate the active timeline (as in
    Apache Hudi and hudi-rs), so any file whose instant falls in the range archival adds and is
    not a completed write there is debris of a write that failed or was rolled back (a straggler
    task that wrote after its write was aborted): data files, and the RECORD index's delta files."""
    from engine.index.record_files import INDEX_FOLDER, IndexFile
    from engine.table.file_names import file_instant

    if not plan.instants:
        return []
    archived = set(plan.times)
    after = Timeline(tuple(i for i in timeline.instants if i.time not in archived), has_archive=True)
    new_first = after.archived_before
    old_first = timeline.archived_before
    completed = timeline.completed_write_times

    def debris(instant: str) -> bool:
        if instant in completed or (old_first is not None and instant < old_first):
            return False  # counts already
        return new_first is None or instant < new_first

    out = []
    for df in meta.list_data_files():
        instant = file_instant(df.name)
        if instant is not None and debris(instant):
            out.append(df.path)
    for f in meta.storage.list_dir(INDEX_FOLDER):
        ix = IndexFile.parse(f.name) if not f.is_dir else None
        if ix is not None and not ix.is_base and debris(ix.instant):
            out.append(ix.path)
    return sorted(out)


def remove_debris_below(meta: MetaClient, timeline: Timeline, plan: ArchivePlan) -> list[str]:
    """Delete `debris_below` (before the archive file is written: a crash leaves nothing visible)."""
    removed = debris_below(meta, timeline, plan)
    for rel in removed:
        meta.storage.delete(rel)
    return removed


def archive(
    meta: MetaClient, keep_min: int, keep_max: int, dry_run: bool = False, fence: Callable[[], None] | None = None
) -> ArchivePlan | list[str]:
    """Plan and run archival (the caller holds the table lock); the plan alone in a dry run."""
    plan = plan_archive(meta, meta.timeline(), keep_min, keep_max)
    return plan if dry_run else execute_archive(meta, plan, fence)


def finish_interrupted(meta: MetaClient, timeline: Timeline) -> list[str]:
    """Remove active instants that the newest archive file already holds (an archival killed
    after writing its file), oldest first. Returns their times."""
    folder = archive_folder(meta)
    versions = [
        (v, f.path) for f in meta.storage.list_dir(folder) if (v := archive_log.parse_archive_file_name(f.name)) is not None
    ]
    if not versions:
        return []
    _v, newest = max(versions)
    try:
        held = {e.get("commitTime") for e in archive_log.decode_archive_file(meta.storage.read_bytes(newest))}
    except CorruptTableError as exc:
        raise CorruptTableError(f"{meta.storage.uri(newest)}: {exc}") from exc
    stale = [i for i in timeline.completed.instants if i.time in held and i.action in ARCHIVED_ACTIONS]
    for inst in stale:
        remove_instant(meta, inst.time, inst.action)
    return [i.time for i in stale]


def read_archived_entries(meta: MetaClient) -> list[dict]:
    """Every archived instant's entry (`HoodieArchivedMetaEntry` as a dict), oldest file first."""
    return list(_iter_entries(meta))


def _iter_entries(meta: MetaClient) -> Iterator[dict]:
    folder = archive_folder(meta)
    files = []
    for f in meta.storage.list_dir(folder):
        v = archive_log.parse_archive_file_name(f.name)
        if v is not None:
            files.append((v, f.path))
    for _v, path in sorted(files):
        try:
            yield from archive_log.decode_archive_file(meta.storage.read_bytes(path))
        except CorruptTableError as exc:
            raise CorruptTableError(f"{meta.storage.uri(path)}: {exc}") from exc


def archived_instants(meta: MetaClient) -> list[Instant]:
    """The archived instants (completed), oldest first, for browsing history."""
    out = {}
    for e in read_archived_entries(meta):
        t, a = e.get("commitTime"), e.get("actionType")
        if t and a:
            try:
                out[(t, a)] = Instant(t, Action(a), State.COMPLETED)
            except ValueError:
                continue
    return sorted(out.values())
