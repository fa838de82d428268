"""The file-system view as a report (`hoodie fsview`, the console's file-group pages), as Apache
Hudi's `hudi-cli show fsview latest` lists it: partition -> file group -> slices -> base and log
files, with sizes, record counts and the commit that wrote each file, and the pending compaction
of each group. Spark-free: the counts come from the commits' write stats, not from the files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.data.file_group import FileSlice
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline


@dataclass(frozen=True)
class FileStats:
    """What the commit that wrote a file says about it."""

    instant: str  # the commit that wrote it
    records: int  # records written (a log file: its data block's records)
    deletes: int  # records deleted (a log file: its delete block's keys)


@dataclass
class FileGroupReport:
    partition: str
    file_id: str
    slices: list[dict] = field(default_factory=list)
    pending_compaction: str | None = None

    def to_dict(self) -> dict:
        return {
            "file_id": self.file_id,
            "pending_compaction": self.pending_compaction,
            "slices": self.slices,
        }


def written_files(meta: MetaClient, timeline: Timeline) -> dict[str, FileStats]:
    """path -> FileStats of every file the active timeline's completed writes name."""
    out: dict[str, FileStats] = {}
    for inst in timeline.completed_writes.instants:
        for s in meta.commit_metadata(inst).write_stats:
            if s.path:
                out[s.path] = FileStats(inst.time, s.numWrites, s.numDeletes)
    return out


def _slice_doc(s: FileSlice, stats: dict[str, FileStats]) -> dict:
    def file_doc(path: str, name: str, size: int) -> dict:
        st = stats.get(path)
        return {
            "name": name,
            "path": path,
            "size": size,
            "records": st.records if st else None,
            "deletes": st.deletes if st else None,
            "commit": st.instant if st else None,
        }

    base = s.base_file
    logs = [file_doc(lf.path, lf.file_name, lf.size) for lf in s.log_files]
    return {
        "base_instant": s.base_instant,
        "base_file": file_doc(base.path, base.file_name, base.size) if base is not None else None,
        "log_files": logs,
        "size": s.size,
        "log_size": sum(lf.size for lf in s.log_files),
    }


def file_group_report(
    meta: MetaClient, timeline: Timeline | None = None, as_of: str | None = None, partition: str | None = None
) -> dict[str, list[FileGroupReport]]:
    """partition -> its file groups (every slice, oldest first), with per-file stats."""
    tl = timeline or meta.timeline()
    view = meta.file_system_view(tl, as_of=as_of)
    stats = written_files(meta, tl)
    out: dict[str, list[FileGroupReport]] = {}
    for part in view.partitions:
        if partition is not None and part != partition:
            continue
        for g in view.groups_in(part):
            out.setdefault(part, []).append(
                FileGroupReport(
                    part,
                    g.file_id,
                    [_slice_doc(s, stats) for s in g.slices],
                    view.compaction_pending_on(part, g.file_id),
                )
            )
    return out


__all__ = ["FileGroupReport", "FileStats", "file_group_report", "written_files"]
