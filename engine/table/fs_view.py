"""`FileSystemView`: partitions -> file groups -> slices, built from a file listing and a timeline (pure).

Only files whose instant is visible (a completed write, or older than the timeline's first
instant) are included; `as_of` cuts the view at an instant for time travel. File groups that a
completed replacecommit replaced are hidden.

Merge-on-read: log files belong to the slice of their base instant; which of their blocks count is
the reader's business (block instants). A pending compaction C of a group starts a new slice at C:
logs written after it was scheduled are named with base instant C and are visible although C is
not completed; until C completes, readers merge that slice with the previous one (Apache Hudi's
merged file slice), which `latest_slices` returns.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from engine.data.file_group import BaseFile, FileGroup, FileSlice, LogFile
from engine.data.file_names import parse_base_file_name, parse_log_file_name
from engine.timeline.timeline import Timeline


@dataclass(frozen=True)
class DataFile:
    """One file found under the table (path relative to the base)."""

    path: str
    size: int

    @property
    def partition(self) -> str:
        return self.path.rpartition("/")[0]

    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]


@dataclass(frozen=True)
class FileSystemView:
    groups: tuple[FileGroup, ...]
    # (partition, file id) -> the instant of a pending compaction planned on that group
    pending_compaction: Mapping[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        files: Iterable[DataFile],
        timeline: Timeline,
        as_of: str | None = None,
        replaced: Mapping[str, Iterable[str]] | None = None,
        committed_paths: frozenset[str] | None = None,
        pending_compaction: Mapping[tuple[str, str], str] | None = None,
        archived_completions: Callable[[], Mapping[str, str]] | None = None,
    ) -> FileSystemView:
        """Group visible files into file groups.

        `replaced` maps partition -> file ids replaced by completed replacecommits (hidden).
        `committed_paths`, when given, breaks ties between two base files of the same file id and
        instant (debris of a failed task attempt) in favour of the one the commit names.
        `pending_compaction` maps (partition, file id) -> the pending compaction planned on it.
        `archived_completions` (timeline layout 2) gives the completion times of archived instants
        (the LSM history); it is called only when a log file was written by an instant older
        than the active timeline, whose completion time decides its slice and its order.
        """
        replaced_ids = {(p, f) for p, ids in (replaced or {}).items() for f in ids}
        pending = dict(pending_compaction or {})
        bases: dict[tuple[str, str, str], BaseFile] = {}
        logs: dict[tuple[str, str, str], list[LogFile]] = defaultdict(list)
        completion = timeline.completion_times
        by_completion = bool(completion)  # timeline layout 2 (table versions 8, 9)
        late_logs: list[LogFile] = []
        for df in files:
            partition, name = df.partition, df.name
            bn = parse_base_file_name(name)
            if bn is not None:
                if not _visible(bn.instant, timeline, as_of):
                    continue
                key = (partition, bn.file_id, bn.instant)
                cand = BaseFile(partition, bn, df.size)
                prev = bases.get(key)
                if prev is None or _prefer(cand, prev, committed_paths):
                    bases[key] = cand
                continue
            ln = parse_log_file_name(name)
            if ln is None:
                continue
            if by_completion:
                # layout 2: named with the deltacommit that wrote it, sliced below once bases are known
                if _visible(ln.base_instant, timeline, as_of):
                    late_logs.append(LogFile(partition, ln, df.size))
                continue
            after_compaction = pending.get((partition, ln.file_id)) == ln.base_instant
            if (after_compaction and (as_of is None or ln.base_instant <= as_of)) or _visible(
                ln.base_instant, timeline, as_of
            ):
                logs[(partition, ln.file_id, ln.base_instant)].append(LogFile(partition, ln, df.size))
        if late_logs and archived_completions is not None and any(
            lf.name.base_instant not in completion for lf in late_logs
        ):
            completion = {**archived_completions(), **completion}
        if late_logs:
            _slice_by_completion(late_logs, bases, pending, completion, logs)
        slices: dict[tuple[str, str], list[FileSlice]] = defaultdict(list)
        for key in set(bases) | set(logs):
            partition, file_id, instant = key
            if (partition, file_id) in replaced_ids:
                continue
            log_files = tuple(sorted(logs.get(key, ()), key=lambda lf: (
                completion.get(lf.name.base_instant, lf.name.base_instant) if by_completion else "",
                lf.name.version, lf.name.write_token or "")))
            slices[(partition, file_id)].append(FileSlice(partition, file_id, instant, bases.get(key), log_files))
        groups = tuple(
            FileGroup(p, f, tuple(sorted(s, key=lambda sl: sl.base_instant)))
            for (p, f), s in sorted(slices.items())
        )
        return cls(groups, pending)

    @property
    def partitions(self) -> list[str]:
        return sorted({g.partition for g in self.groups})

    def groups_in(self, partition: str) -> list[FileGroup]:
        return [g for g in self.groups if g.partition == partition]

    def latest_slices(self, partitions: Iterable[str] | None = None) -> list[FileSlice]:
        """The slice of each group that readers (and index lookups) see: the latest one, merged
        with the previous slice while a compaction planned on the group is pending."""
        wanted = set(partitions) if partitions is not None else None
        out = []
        for g in self.groups:
            if wanted is not None and g.partition not in wanted:
                continue
            s = g.merged_slice(self.pending_compaction.get((g.partition, g.file_id)))
            if s is not None:
                out.append(s)
        return out

    def compaction_pending_on(self, partition: str, file_id: str) -> str | None:
        """The instant of the pending compaction planned on a file group, if any."""
        return self.pending_compaction.get((partition, file_id))

    def latest_base_files(self, partitions: Iterable[str] | None = None) -> list[BaseFile]:
        return [s.base_file for s in self.latest_slices(partitions) if s.base_file is not None]

    def group(self, partition: str, file_id: str) -> FileGroup | None:
        return self._by_id.get((partition, file_id))

    @cached_property
    def _by_id(self) -> dict[tuple[str, str], FileGroup]:
        out: dict[tuple[str, str], FileGroup] = {}
        for g in self.groups:
            out.setdefault((g.partition, g.file_id), g)
        return out


def _slice_by_completion(
    late_logs: list[LogFile],
    bases: Mapping[tuple[str, str, str], BaseFile],
    pending: Mapping[tuple[str, str], str],
    completion: Mapping[str, str],
    logs: dict[tuple[str, str, str], list[LogFile]],
) -> None:
    """Timeline layout 2: a log file is named with the deltacommit that wrote it, and belongs to
    the newest slice of its group that began at or before that deltacommit completed (a base
    file's instant, or a pending compaction planned on the group); with none, it starts a slice
    of its own (Java `HoodieFileGroup.addLogFile`, hudi-rs `FileGroup::add_log_file`)."""
    starts: dict[tuple[str, str], set[str]] = defaultdict(set)
    for partition, file_id, instant in bases:
        starts[(partition, file_id)].add(instant)
    for group, instant in pending.items():
        starts[group].add(instant)
    def done(lf: LogFile) -> str:  # older than the active timeline: its own time
        return completion.get(lf.name.base_instant, lf.name.base_instant)

    for lf in sorted(late_logs, key=lambda f: (done(f), f.name.version, f.name.write_token or "")):
        group = (lf.partition, lf.name.file_id)
        keys = [k for k in starts[group] if k <= done(lf)]
        key = max(keys) if keys else lf.name.base_instant
        starts[group].add(key)  # a log before any base starts a slice the next logs join
        logs[(lf.partition, lf.name.file_id, key)].append(lf)


def _visible(instant: str, timeline: Timeline, as_of: str | None) -> bool:
    if as_of is not None and instant > as_of:
        return False
    return timeline.is_visible(instant)


def _prefer(cand: BaseFile, prev: BaseFile, committed: frozenset[str] | None) -> bool:
    if committed is not None:
        if cand.path in committed and prev.path not in committed:
            return True
        if prev.path in committed and cand.path not in committed:
            return False
    return cand.file_name > prev.file_name
