"""Read-only views of a table for the pages and the API: overview, timeline, commit, file groups.

Everything here reads metadata through the engine's Spark-free modules (MetaClient, Timeline,
FileSystemView, CommitMetadata) and returns plain data (dicts, lists) for templates and JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from werkzeug.exceptions import NotFound

from engine.facade import (
    Action,
    EngineError,
    Instant,
    MetaClient,
    State,
    WriteConfig,
    parse_instant_time,
    summarize_metadata,
)
from webui.services import compactions
from webui.services.compactions import file_stats
from webui.services.snapshot import TableSnapshot

CHART_COMMITS = 60  # commits shown in the records-per-commit chart
SIZE_BUCKETS_MB = (1, 4, 16, 32, 64, 100, 120, 256)


def instant_datetime(time: str) -> str:
    try:
        return parse_instant_time(time).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except EngineError:
        return time


def _ms_iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def config_doc(meta: MetaClient) -> dict[str, Any]:
    cfg = meta.config
    return {
        "name": cfg.name,
        "path": meta.storage.base_uri,
        "table_type": cfg.table_type.value,
        "record_key_fields": list(cfg.record_key_fields),
        "partition_fields": list(cfg.partition_fields),
        "precombine_field": cfg.precombine_field,
        "hive_style": cfg.hive_style,
        "index_type": cfg.index_type.value if cfg.index_type else None,
        "version": cfg.version,
        "cdc_mode": cfg.cdc_mode.value if cfg.cdc_mode is not None else None,
    }


@dataclass(frozen=True)
class Limits:
    small_file_limit: int
    max_file_size: int
    commits_retained: int
    keep_max_commits: int


def table_limits(meta: MetaClient) -> Limits:
    """The write limits in effect: the table's stored hoodie.* settings over the engine defaults."""
    cfg = WriteConfig.from_options(None)
    extra = dict(meta.config.extra) if getattr(meta.config, "extra", None) else {}

    def num(key: str, default: int) -> int:
        try:
            return int(extra.get(key, default))
        except (TypeError, ValueError):
            return default

    return Limits(
        small_file_limit=num("hoodie.parquet.small.file.limit", cfg.small_file_limit),
        max_file_size=num("hoodie.parquet.max.file.size", cfg.max_file_size),
        commits_retained=num("hoodie.cleaner.commits.retained", cfg.cleaner_commits_retained),
        keep_max_commits=num("hoodie.keep.max.commits", cfg.keep_max_commits),
    )


def overview(snap: TableSnapshot) -> dict[str, Any]:
    """Type, keys, index, sizes and records, the latest commit, chart data and the health panel.

    Records and bytes come from the commits' write stats of the files in the latest slices:
    `records` counts the records the commits wrote into the latest base files; on merge-on-read
    tables `log_records` / `log_deletes` count what the deltacommits wrote into the log files
    since (records written, not rows: an update counts in its base file and again in a log)."""

    def build() -> dict[str, Any]:
        view = snap.view()
        stats = file_stats(snap)
        latest = view.latest_slices()
        bases = [s.base_file for s in latest if s.base_file is not None]
        per_partition: dict[str, dict[str, int]] = {}
        for b in bases:
            p = per_partition.setdefault(b.partition, {"files": 0, "bytes": 0, "records": 0})
            p["files"] += 1
            p["bytes"] += b.size
            p["records"] += stats.get(b.path, (0, 0, ""))[0]
        log_bytes = log_records = log_deletes = log_files = 0
        for s in latest:
            for lf in s.log_files:
                written, deleted, _ = stats.get(lf.path, (0, 0, ""))
                log_files += 1
                log_bytes += lf.size
                log_records += written
                log_deletes += deleted
        writes = snap.timeline.completed_writes.instants
        chart = []
        for inst in writes[-CHART_COMMITS:]:
            cm = snap.commit(inst)
            t = cm.totals()
            chart.append({"instant": inst.time, "action": inst.action.value, "operation": cm.operation_type,
                          "inserts": t["inserts"], "updates": t["updates"], "deletes": t["deletes"]})
        last = writes[-1] if writes else None
        last_doc = None
        if last is not None:
            cm = snap.commit(last)
            last_doc = {"instant": last.time, "action": last.action.value, "at": instant_datetime(last.time),
                        "operation": cm.operation_type, **cm.totals()}
        limits = table_limits(snap.meta)
        sizes = [b.size for b in bases]
        base_bytes = sum(sizes)
        return {
            "config": config_doc(snap.meta),
            "fingerprint": snap.fingerprint,
            "partitions": len(per_partition),
            "file_groups": len(view.groups),
            "files": len(bases),
            "bytes": base_bytes + log_bytes,
            "base_bytes": base_bytes,
            "records": sum(p["records"] for p in per_partition.values()),
            "log_files": log_files,
            "log_bytes": log_bytes,
            "log_records": log_records,
            "log_deletes": log_deletes,
            "instants": len(snap.timeline),
            "completed_writes": len(writes),
            "latest_commit": last_doc,
            "per_partition": per_partition,
            "metadata_table": _metadata_doc(snap),
            "limits": {"small_file_limit": limits.small_file_limit, "max_file_size": limits.max_file_size},
            "charts": {
                "records_per_commit": chart,
                "file_sizes": size_histogram(sizes, limits),
            },
        }

    return snap.cached("overview", build)


def _metadata_doc(snap: TableSnapshot) -> dict[str, Any] | None:
    """Apache Hudi's metadata table: its partitions and where reads list files from (None: none)."""
    summary = summarize_metadata(snap.meta, snap.timeline)
    return summary.to_dict() if summary.present else None


def size_histogram(sizes: list[int], limits: Limits) -> dict[str, Any]:
    edges = sorted({*(m * 1024 * 1024 for m in SIZE_BUCKETS_MB), limits.small_file_limit, limits.max_file_size})
    labels, counts = [], []
    lower = 0
    for edge in edges:
        labels.append(f"< {_mb(edge)}")
        counts.append(sum(1 for s in sizes if lower <= s < edge))
        lower = edge
    labels.append(f">= {_mb(edges[-1])}")
    counts.append(sum(1 for s in sizes if s >= edges[-1]))
    small_index = edges.index(limits.small_file_limit)
    return {"labels": labels, "counts": counts, "small_below_bucket": small_index + 1,
            "small_file_limit": limits.small_file_limit, "max_file_size": limits.max_file_size}


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:g} MB"


# ---- timeline ----------------------------------------------------------------------------
TIMELINE_PAGE = 50


def _instant_row(snap: TableSnapshot, inst: Instant) -> dict[str, Any]:
    row: dict[str, Any] = {
        "time": inst.time,
        "at": instant_datetime(inst.time),
        "action": inst.action.value,
        "state": inst.state.value,
        "archived": False,
        "completed_at": _ms_iso(snap.completed_at_ms(inst)) if inst.is_completed else None,
        "operation": None,
        "stats": None,
    }
    if inst.is_completed and inst.action.is_write:
        try:
            cm = snap.commit(inst)
            row["operation"] = cm.operation_type
            row["stats"] = cm.totals()
        except EngineError as exc:
            row["error"] = str(exc)
    elif inst.action is Action.COMPACTION:  # a pending compaction: what its plan merges
        plan = next((p for p in compactions.pending_plans(snap) if p["instant"] == inst.time), None)
        if plan is not None:
            row["plan"] = {"slices": plan["slices"], "log_files": plan["log_files"], "log_bytes": plan["log_bytes"]}
    return row


def archived_rows(snap: TableSnapshot) -> list[dict[str, Any]]:
    def build() -> list[dict[str, Any]]:
        if not snap.timeline.has_archive:
            return []
        from engine.facade import read_archived_entries

        rows = []
        for e in read_archived_entries(snap.meta):
            t = str(e.get("commitTime") or "")
            rows.append({"time": t, "at": instant_datetime(t), "action": e.get("actionType"), "state": "archived",
                         "archived": True, "completed_at": None, "operation": None, "stats": None})
        return rows

    return snap.cached("archived", build)


def timeline_page(
    snap: TableSnapshot,
    *,
    actions: list[str] | None = None,
    states: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    include_archived: bool = False,
    page: int = 1,
    per_page: int = TIMELINE_PAGE,
) -> dict[str, Any]:
    """Instants newest first, filtered and paged; stats only for the rows on the page."""
    insts = list(reversed(snap.timeline.instants))
    wanted_actions = set(actions or [])
    wanted_states = set(states or [])

    def keep(action: str, state: str, time: str) -> bool:
        return (
            (not wanted_actions or action in wanted_actions)
            and (not wanted_states or state in wanted_states)
            and (not since or time >= since)
            and (not until or time <= until)
        )

    active = [i for i in insts if keep(i.action.value, i.state.value, i.time)]
    archived = [r for r in reversed(archived_rows(snap)) if keep(r["action"], "archived", r["time"])] if include_archived else []
    total = len(active) + len(archived)
    per_page = max(1, min(per_page, 500))
    pages = max(1, math.ceil(total / per_page))
    page = max(1, min(page, pages))
    lo, hi = (page - 1) * per_page, page * per_page
    rows = [_instant_row(snap, i) for i in active[lo:hi]]
    if hi > len(active):
        rows += archived[max(0, lo - len(active)): hi - len(active)]
    return {"rows": rows, "total": total, "page": page, "pages": pages, "per_page": per_page,
            "fingerprint": snap.fingerprint, "visual": visual_timeline(snap)}


STATE_CLASSES = {"completed": "ok", "inflight": "run", "requested": "wait"}


def visual_timeline(snap: TableSnapshot, last: int = 120) -> dict[str, Any]:
    """Lanes by action, one mark per instant (the newest `last`), coloured by state."""
    insts = snap.timeline.instants[-last:]
    lanes = sorted({i.action.value for i in insts}, key=lambda a: [x.value for x in Action].index(a))
    n = len(insts)
    marks = []
    for k, inst in enumerate(insts):
        marks.append({
            "time": inst.time,
            "lane": lanes.index(inst.action.value),
            "x": round(10 + (k / max(1, n - 1)) * 960, 1) if n > 1 else 490,
            "state": inst.state.value,
            "css": STATE_CLASSES.get(inst.state.value, "wait"),
            "title": f"{inst.time} {inst.action.value} {inst.state.value}",
        })
    return {"lanes": lanes, "marks": marks, "height": 28 * max(1, len(lanes)) + 10,
            "first": insts[0].time if insts else None, "last": insts[-1].time if insts else None}


# ---- commit detail -----------------------------------------------------------------------
COMPACTION_COUNTERS = ("totalLogFilesCompacted", "totalLogSizeCompacted", "totalUpdatedRecordsCompacted",
                       "totalLogRecords", "totalLogBlocks", "totalRollbackBlocks")


def _file_doc(part: str, s: Any) -> dict[str, Any]:
    from engine.facade import parse_log_file_name

    name = (s.path or "").rpartition("/")[2]
    log = parse_log_file_name(name) if s.logVersion is not None or name.startswith(".") else None
    doc = {
        "partition": part, "file_id": s.fileId, "path": s.path, "prev_commit": s.prevCommit,
        "new": s.prevCommit in ("null", None, ""), "writes": s.numWrites, "inserts": s.numInserts,
        "updates": s.numUpdateWrites, "deletes": s.numDeletes, "bytes": s.fileSizeInBytes or s.totalWriteBytes,
        "kind": "log" if log is not None else "base",
    }
    if log is not None:  # a merge-on-read log file (Hudi's HoodieDeltaWriteStat)
        doc.update({"log_version": s.logVersion if s.logVersion is not None else log.version,
                    "slice_base_instant": log.base_instant, "base_file": s.baseFile or None,
                    "log_files": list(s.logFiles or []), "log_blocks": s.totalLogBlocks,
                    "log_records": s.totalLogRecords})
    if any(getattr(s, k) for k in COMPACTION_COUNTERS):
        doc["compaction"] = {k: getattr(s, k) for k in COMPACTION_COUNTERS}
    return doc


def commit_detail(snap: TableSnapshot, time: str) -> dict[str, Any]:
    """One instant: its write stats per partition and per file (log files with their version,
    slice and base file; compactions with their counters), the schema, and for a compaction the
    plan it runs or ran."""
    inst = snap.timeline.get(time)
    if inst is None:
        raise NotFound(f"no instant {time} on the active timeline")
    doc: dict[str, Any] = {"instant": _instant_row(snap, inst), "partitions": [], "files": [], "replaced": {},
                           "schema": None, "extra": {}, "compaction_plan": None, "compaction": None}
    if inst.action is Action.COMPACTION:
        doc["compaction_plan"] = compactions.plan_of(snap, time)
    if not (inst.is_completed and inst.action.is_write):
        return doc
    cm = snap.commit(inst)
    for part, stats in sorted(cm.partition_to_write_stats.items()):
        t = {"partition": part, "files": 0, "inserts": 0, "updates": 0, "deletes": 0, "writes": 0, "bytes": 0}
        for s in stats:
            t["files"] += 1 if s.path else 0
            t["inserts"] += s.numInserts
            t["updates"] += s.numUpdateWrites
            t["deletes"] += s.numDeletes
            t["writes"] += s.numWrites
            t["bytes"] += s.totalWriteBytes
            doc["files"].append(_file_doc(part, s))
        doc["partitions"].append(t)
    if cm.compacted or cm.operation_type == "COMPACT":
        doc["compaction"] = {k: sum(getattr(s, k) for s in cm.write_stats) for k in COMPACTION_COUNTERS}
        doc["compaction_plan"] = compactions.plan_of(snap, time)
    doc["log_files_written"] = sum(1 for f in doc["files"] if f["kind"] == "log")
    doc["replaced"] = cm.partition_to_replace_file_ids or {}
    doc["extra"] = {k: v for k, v in cm.extra_metadata.items() if k != "schema"}
    if cm.schema:
        from engine.facade import avro_to_arrow

        try:
            doc["schema"] = [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in avro_to_arrow(cm.schema)]
        except EngineError:
            doc["schema"] = None
    doc["totals"] = cm.totals()
    return doc


def pending_instants(snap: TableSnapshot) -> list[Instant]:
    return [i for i in snap.timeline.instants if i.state is not State.COMPLETED]
