"""What a data instant changes in the metadata table's record index, read from the data files as
Apache Hudi 1.x derives it from a commit's write stats (its `BaseFileRecordParsingUtils`): the
same answer whichever index the writer tagged with.

For every file group the instant writes, the keys of its live records before the instant (the
latest slice of the timeline without it) and after it (the new base file; or the slice with the
instant's log files appended, merged with the instant counted as committed):

- a key the group holds after but not before goes into the index at (partition, file id, the
  instant): an insert, a key moved there from another partition (global indexes) or from a
  replaced file group (clustering, insert overwrite);
- a key it held before but not after is deleted from the index, unless the instant put it into
  another file group;
- every key of a file group the instant replaces (`partitionToReplaceFileIds`) is deleted, unless
  the instant put it elsewhere.

Compactions change no location (same keys, same file ids): nothing. Tables without meta fields
are not handled here (the writer drops their record index).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field, replace

from engine.data.file_group import FileGroup
from engine.data.file_names import parse_base_file_name, parse_log_file_name
from engine.data.keys import ScanFile, SliceMerge, live_keys
from engine.errors import CorruptTableError
from engine.storage import Storage
from engine.table.fs_view import DataFile, FileSystemView
from engine.table.meta_client import MetaClient
from engine.table.slice_merge import merge_context
from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.timeline import CommittedInstants, Timeline

_log = logging.getLogger(__name__)


@dataclass
class IndexChanges:
    """Key -> (partition, file id) the instant put it at; keys it deleted."""

    located: dict[str, tuple[str, str]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.located or self.deleted)


def _keys(storage: Storage, file: ScanFile | None, merge: SliceMerge) -> set[str]:
    """The keys of a slice's live records (none for no slice)."""
    if file is None or (file.path is None and not file.log_paths):
        return set()
    return set(live_keys(storage, file, merge=merge).to_pylist())


def _latest(view: FileSystemView, groups: dict[tuple[str, str], FileGroup], partition: str,
            file_id: str) -> ScanFile | None:
    group = groups.get((partition, file_id))
    sl = group.merged_slice(view.compaction_pending_on(partition, file_id)) if group is not None else None
    return ScanFile.of_slice(sl) if sl is not None else None


def _partition_files(storage: Storage, partitions: set[str]) -> list[DataFile]:
    """The data files of `partitions` (one listing each, not the whole table)."""
    out = []
    for partition in sorted(partitions):
        for info in storage.list_dir(partition):
            if not info.is_dir and (parse_base_file_name(info.name) or parse_log_file_name(info.name)):
                out.append(DataFile(info.path, info.size))
    return out


def _after(before: ScanFile | None, partition: str, file_id: str, paths: list[str]) -> ScanFile:
    """The group's slice once the instant's files (`paths`) count."""
    bases = [(parsed, p) for p in paths if (parsed := parse_base_file_name(p.rsplit("/", 1)[-1])) is not None]
    if bases:  # a new base file: the group's records are exactly its records
        parsed, path = bases[-1]
        return ScanFile(path, partition, file_id, (), parsed.instant)
    logs = sorted((log.version, p, log.base_instant) for p in paths
                  if (log := parse_log_file_name(p.rsplit("/", 1)[-1])) is not None)
    if not logs:
        raise CorruptTableError(f"{partition}/{file_id}: the write stats name no base or log file: {paths}")
    if before is None:
        return ScanFile(None, partition, file_id, tuple(p for _, p, _ in logs), logs[0][2])
    return replace(before, log_paths=before.log_paths + tuple(p for _, p, _ in logs if p not in before.log_paths))


@dataclass
class WrittenSlices:
    """The file groups a write at `time` touches, as slices before it and after it (its files
    counted), with the merge contexts to read them: the groups it wrote (partition, file id,
    before, after) and the slices of the groups it replaces."""

    before_merge: SliceMerge
    after_merge: SliceMerge
    written: list[tuple[str, str, ScanFile | None, ScanFile]] = field(default_factory=list)
    replaced: list[ScanFile] = field(default_factory=list)


def written_slices(meta: MetaClient, timeline: Timeline, time: str, metadata: CommitMetadata) -> WrittenSlices:
    """The slices the write at `time` (pending on `timeline`), whose metadata is `metadata`, writes
    and replaces (one storage listing per partition it touches)."""
    written: dict[tuple[str, str], list[str]] = defaultdict(list)
    for partition, stats in metadata.partition_to_write_stats.items():
        for stat in stats:
            if stat.path and stat.fileId:
                written[(partition, stat.fileId)].append(stat.path)
    replaced = {p: ids for p, ids in (metadata.partition_to_replace_file_ids or {}).items() if ids}
    before_merge = merge_context(meta, timeline)
    done = CommittedInstants.of(timeline)  # the before merge's; the after one counts the instant too
    after_merge = replace(before_merge, committed=CommittedInstants(done.completed | {time}, done.archived_before))
    out = WrittenSlices(before_merge, after_merge)
    if not written and not replaced:
        return out
    touched = {p for p, _ in written} | set(replaced)
    view = meta.file_system_view(timeline, files=_partition_files(meta.storage, touched))
    groups = {(g.partition, g.file_id): g for g in view.groups}
    for (partition, file_id), paths in sorted(written.items()):
        before = _latest(view, groups, partition, file_id)
        out.written.append((partition, file_id, before, _after(before, partition, file_id, paths)))
    for partition, file_ids in sorted(replaced.items()):
        for file_id in file_ids:
            found = _latest(view, groups, partition, file_id)
            if found is not None:
                out.replaced.append(found)
    return out


def changes(meta: MetaClient, timeline: Timeline, time: str, metadata: CommitMetadata) -> IndexChanges:
    """The record-index changes of the write at `time` (pending on `timeline`), whose metadata is
    `metadata`."""
    return changes_in(meta, time, written_slices(meta, timeline, time, metadata))


def changes_in(meta: MetaClient, time: str, slices: WrittenSlices) -> IndexChanges:
    """The record-index changes of the write at `time` that touches `slices`."""
    out = IndexChanges()
    gone: set[str] = set()
    for partition, file_id, before_files, after_files in slices.written:
        before = _keys(meta.storage, before_files, slices.before_merge)
        after = _keys(meta.storage, after_files, slices.after_merge)
        for key in after - before:
            if key in out.located and out.located[key] != (partition, file_id):
                _log.warning("%s: record key %r written to two file groups by %s (%s/%s and %s/%s); the record "
                             "index names the last", meta.storage.base_uri, key, time, *out.located[key],
                             partition, file_id)
            out.located[key] = (partition, file_id)
        gone |= before - after
    for found in slices.replaced:
        gone |= _keys(meta.storage, found, slices.before_merge)
    out.deleted = gone - set(out.located)
    return out


__all__ = ["IndexChanges", "WrittenSlices", "changes", "changes_in", "written_slices"]
