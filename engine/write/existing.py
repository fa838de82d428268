"""The planner's view of a partition's file groups: the latest slice of each, with what a
merge-on-read write appends to."""

from __future__ import annotations

from engine.table.fs_view import FileSystemView
from engine.write.planner import ExistingFile


def existing_files(view: FileSystemView, partition: str, mor: bool) -> list[ExistingFile]:
    """The latest slice of each file group of `partition`, as the planner sees it."""
    if not mor:
        return [ExistingFile(b.partition, b.file_id, b.instant, b.path, b.size) for b in view.latest_base_files([partition])]
    out = []
    for g in view.groups_in(partition):
        pending = view.compaction_pending_on(g.partition, g.file_id)
        merged = g.merged_slice(pending)
        if merged is None:
            continue
        base = merged.base_file
        latest = g.latest_slice
        # appends go to the slice a pending compaction started (its own log files), else to the latest
        if pending is None:
            target_logs = merged.log_files
        else:
            target_logs = latest.log_files if latest is not None and latest.base_instant == pending else ()
        out.append(
            ExistingFile(
                g.partition,
                g.file_id,
                merged.base_instant,
                base.path if base is not None else None,
                base.size if base is not None else 0,
                log_size=sum(lf.size for lf in merged.log_files),
                log_names=tuple(lf.file_name for lf in target_logs),
                log_base_instant=pending or merged.base_instant,
                pending_compaction=pending is not None,
            )
        )
    return out


__all__ = ["existing_files"]
