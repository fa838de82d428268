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
from dataclasses import dataclass, field

import pyarrow as pa

from engine.data.file_group import FileGroup
from engine.data.file_names import parse_base_file_name, parse_log_file_name
from engine.data.slice_reader import MergeMode, SliceFiles, merge_mode_for, slice_keys
from engine.errors import CorruptTableError
from engine.storage import Storage
from engine.table.fs_view import DataFile, FileSystemView
from engine.table.meta_client import MetaClient
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


@dataclass(frozen=True)
class _Reading:
    storage: Storage
    mode: MergeMode
    ordering: pa.Field | None
    before: CommittedInstants
    instant: str

    def keys(self, files: SliceFiles | None, with_instant: bool) -> set[str]:
        if files is None or (files.base_path is None and not files.log_paths):
            return set()
        before = self.before
        committed = (lambda t: t == self.instant or before(t)) if with_instant else before
        found = slice_keys(self.storage, files, mode=self.mode, is_committed=committed, ordering=self.ordering)
        return set(found.to_pylist())


def _slice_files(view: FileSystemView, groups: dict[tuple[str, str], FileGroup], partition: str,
                 file_id: str) -> SliceFiles | None:
    group = groups.get((partition, file_id))
    sl = group.merged_slice(view.compaction_pending_on(partition, file_id)) if group is not None else None
    if sl is None:
        return None
    return SliceFiles(partition, file_id, sl.base_instant, sl.base_file.path if sl.base_file else None,
                      tuple(lf.path for lf in sl.log_files))


def _partition_files(storage: Storage, partitions: set[str]) -> list[DataFile]:
    """The data files of `partitions` (one listing each, not the whole table)."""
    out = []
    for partition in sorted(partitions):
        for info in storage.list_dir(partition):
            if not info.is_dir and (parse_base_file_name(info.name) or parse_log_file_name(info.name)):
                out.append(DataFile(info.path, info.size))
    return out


def _after(before: SliceFiles | None, partition: str, file_id: str, paths: list[str]) -> SliceFiles:
    """The group's slice once the instant's files (`paths`) count."""
    bases = [(parsed, p) for p in paths if (parsed := parse_base_file_name(p.rsplit("/", 1)[-1])) is not None]
    if bases:  # a new base file: the group's records are exactly its records
        parsed, path = bases[-1]
        return SliceFiles(partition, file_id, parsed.instant, path, ())
    logs = sorted((log.version, p, log.base_instant) for p in paths
                  if (log := parse_log_file_name(p.rsplit("/", 1)[-1])) is not None)
    if not logs:
        raise CorruptTableError(f"{partition}/{file_id}: the write stats name no base or log file: {paths}")
    if before is None:
        return SliceFiles(partition, file_id, logs[0][2], None, tuple(p for _, p, _ in logs))
    return SliceFiles(partition, file_id, before.base_instant, before.base_path,
                      before.log_paths + tuple(p for _, p, _ in logs if p not in before.log_paths))


def changes(meta: MetaClient, timeline: Timeline, time: str, metadata: CommitMetadata) -> IndexChanges:
    """The record-index changes of the write at `time` (pending on `timeline`), whose metadata is
    `metadata`."""
    written: dict[tuple[str, str], list[str]] = defaultdict(list)
    for partition, stats in metadata.partition_to_write_stats.items():
        for stat in stats:
            if stat.path and stat.fileId:
                written[(partition, stat.fileId)].append(stat.path)
    replaced = {p: ids for p, ids in (metadata.partition_to_replace_file_ids or {}).items() if ids}
    out = IndexChanges()
    if not written and not replaced:
        return out
    touched = {p for p, _ in written} | set(replaced)
    view = meta.file_system_view(timeline, files=_partition_files(meta.storage, touched))
    groups = {(g.partition, g.file_id): g for g in view.groups}
    schema = meta.latest_schema(timeline)
    pc_name = meta.config.precombine_field
    ordering = schema.field(pc_name) if schema is not None and pc_name and pc_name in schema.names else None
    reading = _Reading(meta.storage, merge_mode_for(meta.config), ordering, CommittedInstants.of(timeline), time)
    gone: set[str] = set()
    for (partition, file_id), paths in sorted(written.items()):
        before_files = _slice_files(view, groups, partition, file_id)
        before = reading.keys(before_files, with_instant=False)
        after = reading.keys(_after(before_files, partition, file_id, paths), with_instant=True)
        for key in after - before:
            if key in out.located and out.located[key] != (partition, file_id):
                _log.warning("%s: record key %r written to two file groups by %s (%s/%s and %s/%s); the record "
                             "index names the last", meta.storage.base_uri, key, time, *out.located[key],
                             partition, file_id)
            out.located[key] = (partition, file_id)
        gone |= before - after
    for partition, file_ids in replaced.items():
        for file_id in file_ids:
            gone |= reading.keys(_slice_files(view, groups, partition, file_id), with_instant=False)
    out.deleted = gone - set(out.located)
    return out


__all__ = ["IndexChanges", "changes"]
