"""Merge-on-read in the console: pending compaction plans, the log files snapshot reads merge,
and when to compact.

Spark-free, from the cached snapshot: plans come from `C.compaction.requested` files
(`engine.table.compaction_plan`), log files from the file-system view, their record counts from
the deltacommits' write stats. A log file's records are records *written* (an update counts in
its base file and again in the log); the row count after merging is known only by reading.
"""

from __future__ import annotations

import time
from typing import Any

from engine.facade import Action, EngineError, TableType, WriteConfig, parse_instant_time
from webui.services.snapshot import TableSnapshot

INLINE_KEY = "hoodie.compact.inline"
MAX_DELTA_KEY = "hoodie.compact.inline.max.delta.commits"
_DEFAULTS = WriteConfig.from_options(None)
# Apache Hudi compacts inline after this many deltacommits (hoodie.compact.inline.max.delta.commits);
# a deltacommit adds at most one log file to a slice, so as many log files is the same signal
COMPACT_AFTER = _DEFAULTS.compact_max_delta_commits


def is_mor(snap: TableSnapshot) -> bool:
    return snap.meta.config.table_type is TableType.MERGE_ON_READ


def file_stats(snap: TableSnapshot) -> dict[str, tuple[int, int, str]]:
    """path -> (records written, records deleted, instant) of every file the completed writes on
    the active timeline name (from their write stats; commits parsed once per process)."""

    def build() -> dict[str, tuple[int, int, str]]:
        out: dict[str, tuple[int, int, str]] = {}
        for inst in snap.timeline.completed_writes.instants:
            for stat in snap.commit(inst).write_stats:
                if stat.path:
                    out[stat.path] = (stat.numWrites, stat.numDeletes, inst.time)
        return out

    return snap.cached("file_stats", build)


def settings(snap: TableSnapshot) -> dict[str, Any]:
    """Inline compaction as the console's writes get it, and what hoodie.properties says."""
    stored = dict(snap.meta.config.extra or ())
    return {
        "inline": _DEFAULTS.compact_inline,
        "max_delta_commits": COMPACT_AFTER,
        "stored": {k: stored[k] for k in (INLINE_KEY, MAX_DELTA_KEY) if k in stored},
    }


# ---- plans ---------------------------------------------------------------------------------------
def plan_doc(snap: TableSnapshot, plan: Any, state: str | None) -> dict[str, Any]:
    """A compaction plan for people: its operations with the sizes of the files they merge."""
    sizes = _slice_sizes(snap)
    ops = []
    for op in plan.operations:
        base_size = sizes.get(op.base_path) if op.base_path else None
        log_sizes = [sizes.get(p) for p in op.log_paths]
        ops.append({
            "partition": op.partition, "file_id": op.file_id, "base_instant": op.base_instant,
            "base_file": op.base_file, "base_size": base_size, "log_files": list(op.log_files),
            "log_bytes": sum(s or 0 for s in log_sizes),
        })
    return {
        "instant": plan.instant, "state": state, "operations": ops, "slices": len(ops),
        "log_files": sum(len(o["log_files"]) for o in ops), "log_bytes": sum(o["log_bytes"] for o in ops),
        "base_bytes": sum(o["base_size"] or 0 for o in ops),
    }


def _slice_sizes(snap: TableSnapshot) -> dict[str, int]:
    """path -> size of every file in a slice of the view (compaction plans name these)."""

    def build() -> dict[str, int]:
        out = {}
        for g in snap.view().groups:
            for s in g.slices:
                if s.base_file is not None:
                    out[s.base_file.path] = s.base_file.size
                for lf in s.log_files:
                    out[lf.path] = lf.size
        return out

    return snap.cached("slice_sizes", build)


def pending_plans(snap: TableSnapshot) -> list[dict[str, Any]]:
    """The pending compactions, oldest first, each with its operations (cached by fingerprint)."""

    def build() -> list[dict[str, Any]]:
        from engine.facade import read_plan

        out = []
        for inst in snap.timeline.pending.instants:
            if inst.action is not Action.COMPACTION:
                continue
            try:
                plan = read_plan(snap.meta, inst.time)
            except (FileNotFoundError, EngineError):
                out.append({"instant": inst.time, "state": inst.state.value, "operations": [], "slices": 0,
                            "log_files": 0, "log_bytes": 0, "base_bytes": 0, "error": "its plan cannot be read"})
                continue
            out.append(plan_doc(snap, plan, inst.state.value))
        return out

    return snap.cached("compaction_plans", build)


def pending(snap: TableSnapshot, now: float | None = None) -> list[dict[str, Any]]:
    """`pending_plans` with each plan's age now (seconds since its instant time)."""
    now = time.time() if now is None else now
    return [{**p, "age_s": max(0, int(now - parse_instant_time(p["instant"]).timestamp()))} for p in pending_plans(snap)]


def plan_of(snap: TableSnapshot, instant: str) -> dict[str, Any] | None:
    """The plan compaction `instant` ran or will run, while its requested file exists (pending, or
    completed and not yet archived); None otherwise."""
    inst = snap.timeline.get(instant)
    if inst is None or inst.action not in (Action.COMPACTION, Action.COMMIT):
        return None
    if inst.action is Action.COMPACTION:
        for p in pending_plans(snap):
            if p["instant"] == instant:
                return p
        return None
    from engine.facade import read_plan

    try:
        plan = read_plan(snap.meta, instant)
    except (FileNotFoundError, EngineError):
        return None
    return plan_doc(snap, plan, "completed")


# ---- log files and when to compact -------------------------------------------------------------------
def log_status(snap: TableSnapshot) -> dict[str, Any]:
    """What snapshot reads merge now: the log files of the latest (merged) slices, their bytes and
    records, the slices to compact soon, and deltacommits since the last compaction."""

    def build() -> dict[str, Any]:
        from engine.facade import deltacommits_since_compaction

        view = snap.view()
        stats = file_stats(snap)
        out: dict[str, Any] = {
            "slices": 0, "slices_with_logs": 0, "log_files": 0, "log_bytes": 0, "log_records": 0,
            "log_deletes": 0, "many_logs": 0, "big_logs": 0, "most_logs": None,
            "in_pending_compaction": 0, "deltacommits_since_compaction": deltacommits_since_compaction(snap.timeline),
            "compact_after": COMPACT_AFTER,
        }
        for s in view.latest_slices():
            out["slices"] += 1
            if not s.log_files:
                continue
            log_bytes = sum(lf.size for lf in s.log_files)
            base_bytes = s.base_file.size if s.base_file is not None else 0
            out["slices_with_logs"] += 1
            out["log_files"] += len(s.log_files)
            out["log_bytes"] += log_bytes
            for lf in s.log_files:
                written, deleted, _ = stats.get(lf.path, (0, 0, ""))
                out["log_records"] += written
                out["log_deletes"] += deleted
            if len(s.log_files) >= COMPACT_AFTER:
                out["many_logs"] += 1
            if base_bytes and log_bytes >= base_bytes:
                out["big_logs"] += 1
            if view.compaction_pending_on(s.partition, s.file_id):
                out["in_pending_compaction"] += 1
            most = out["most_logs"]
            if most is None or len(s.log_files) > most["log_files"]:
                out["most_logs"] = {"partition": s.partition, "file_id": s.file_id, "log_files": len(s.log_files),
                                    "log_bytes": log_bytes, "base_bytes": base_bytes}
        out["compact_soon"] = bool(out["slices_with_logs"]) and (
            out["deltacommits_since_compaction"] >= COMPACT_AFTER or out["many_logs"] > 0 or out["big_logs"] > 0)
        return out

    return snap.cached("log_status", build)


def overview(snap: TableSnapshot, now: float | None = None) -> dict[str, Any] | None:
    """The merge-on-read part of a table's overview (None for copy-on-write tables)."""
    if not is_mor(snap):
        return None
    return {"settings": settings(snap), "logs": log_status(snap), "pending": pending(snap, now)}
