"""The file-groups page and API: partition -> file groups -> slices -> base and log files.

Built on the engine's `file_group_report` (`engine.table.fs_report`, what `hoodie fsview` prints,
as Apache Hudi's `hudi-cli show fsview latest`): per file its name, size, records and deletes
and the commit that wrote it (from the commits' write stats, not from the files), per group the
pending compaction planned on it. The report is built once per timeline fingerprint and kept in
the snapshot cache; a page is then a slice of a list, so 10,000 groups page as fast as 10.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.facade import file_group_report
from webui.services.snapshot import TableSnapshot

GROUPS_PAGE = 100
MAX_PER_PAGE = 1000


@dataclass(frozen=True)
class Report:
    groups: list[dict[str, Any]]  # every group, partition order then file id, slices newest first
    partitions: list[dict[str, Any]]  # per partition: groups, bytes of the latest slices, log files


def _group_doc(partition: str, report: Any) -> dict[str, Any]:
    """One group for the page: slices newest first, each marked with its role."""
    pending = report.pending_compaction
    slices = list(reversed(report.slices))
    fid = report.file_id
    for k, s in enumerate(slices):
        logs = s["log_files"]
        # names without what the row already says (the file id, the slice's instant); full names on hover
        if s["base_file"]:
            s["base_file"]["short"] = s["base_file"]["name"].removeprefix(f"{fid}_")
        for lf in logs:
            lf["short"] = "…" + lf["name"].removeprefix(f".{fid}_{s['base_instant']}")
        s["latest"] = k == 0
        s["log_records"] = sum(lf["records"] or 0 for lf in logs)
        s["log_deletes"] = sum(lf["deletes"] or 0 for lf in logs)
        s["records"] = s["base_file"]["records"] if s["base_file"] else None
        # while compaction C is pending, writers start a log-only slice at C that readers merge
        # with the slice C compacts (the one below it); C's base file appears when C completes
        s["after_pending_compaction"] = pending is not None and s["base_instant"] == pending
        s["being_compacted"] = False
    if pending is not None:
        planned = next((s for s in slices if s["base_instant"] != pending), None)
        if planned is not None:
            planned["being_compacted"] = True
    return {"partition": partition, "file_id": report.file_id, "pending_compaction": pending, "slices": slices,
            "log_files": sum(len(s["log_files"]) for s in slices)}


def report(snap: TableSnapshot) -> Report:
    """The whole table's file groups (cached by the timeline fingerprint)."""

    def build() -> Report:
        by_partition = file_group_report(snap.meta, snap.timeline)
        groups: list[dict[str, Any]] = []
        partitions = []
        for part in sorted(by_partition):
            docs = [_group_doc(part, g) for g in by_partition[part]]
            groups.extend(docs)
            latest = [g["slices"][0] for g in docs if g["slices"]]
            partitions.append({
                "partition": part, "file_groups": len(docs), "bytes": sum(s["size"] for s in latest),
                "log_files": sum(len(s["log_files"]) for s in latest),
            })
        return Report(groups, partitions)

    return snap.cached("file_group_report", build)


def page(snap: TableSnapshot, partition: str | None = None, page: int = 1, per_page: int = GROUPS_PAGE,
         with_logs: bool = False, pending_only: bool = False) -> dict[str, Any]:
    """One page of file groups (of one partition, or only those with log files in their latest
    slice, or only those a pending compaction holds)."""
    rep = report(snap)
    groups = rep.groups
    if partition is not None:
        groups = [g for g in groups if g["partition"] == partition]
    if with_logs:
        groups = [g for g in groups if g["slices"] and g["slices"][0]["log_files"]]
    if pending_only:
        groups = [g for g in groups if g["pending_compaction"]]
    per_page = max(1, min(per_page, MAX_PER_PAGE))
    pages = max(1, math.ceil(len(groups) / per_page))
    page = max(1, min(page, pages))
    return {"partitions": rep.partitions, "partition": partition, "with_logs": with_logs, "pending_only": pending_only,
            "groups": groups[(page - 1) * per_page: page * per_page], "total": len(groups), "page": page,
            "pages": pages, "per_page": per_page, "fingerprint": snap.fingerprint,
            "table_type": snap.meta.config.table_type.value}
