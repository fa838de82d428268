"""Table services for the console: server-side dry-run plans, their hash, and the timeline
fingerprint a confirmation must carry.

A confirmation page shows `preview(...)`: the engine's dry-run plan, a summary of what is at
stake (instants, files, index entries, records, bytes), the timeline fingerprint it was planned
on and the plan's hash. `confirm(...)` plans again: if the fingerprint (or the plan) changed,
the confirmation is refused with `StalePlanError` carrying the fresh plan to show.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from engine.facade import EngineError, is_valid_instant_time
from webui.models import Role, TableEntry
from webui.services import compactions
from webui.services.snapshot import TableSnapshot
from webui.services.tables import open_meta

# operation -> (role needed, takes an instant, title)
SERVICES: dict[str, tuple[Role, bool, str]] = {
    "rollback": (Role.ADMIN, True, "Roll back a commit"),
    "restore": (Role.ADMIN, True, "Restore the table to an instant"),
    "savepoint": (Role.OPERATOR, True, "Create a savepoint"),
    "savepoint_delete": (Role.OPERATOR, True, "Delete a savepoint"),
    "clean": (Role.OPERATOR, False, "Clean old file versions"),
    "archive": (Role.OPERATOR, False, "Archive old instants"),
    "compaction": (Role.OPERATOR, False, "Compact merge-on-read file slices"),
    "clustering": (Role.OPERATOR, False, "Cluster small file slices"),
    "metadata_build": (Role.ADMIN, False, "Build a metadata table partition"),
    "metadata_drop": (Role.ADMIN, False, "Drop a metadata table partition"),
}
# services on one partition of the metadata table (a `partition` parameter)
METADATA_SERVICES = frozenset({"metadata_build", "metadata_drop"})
_PARTITION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,99}$")
# services whose instant may be given (compaction, clustering: run that pending plan) or left out
OPTIONAL_INSTANT = frozenset({"compaction", "clustering"})
# clustering's layout: the sort columns (names, comma-separated) and the curve
_SORT_COLUMNS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}(,[A-Za-z_][A-Za-z0-9_]{0,127}){0,7}$")
LAYOUTS = ("linear", "z-order", "hilbert")
SORT_COLUMNS_KEY = "hoodie.clustering.plan.strategy.sort.columns"
LAYOUT_KEY = "hoodie.layout.optimize.strategy"


class PlanError(ValueError):
    """The service cannot be planned (the engine refused it, or the arguments are bad)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class StalePlanError(PlanError):
    """The table changed since the plan was shown; `fresh` is the plan to show now."""

    def __init__(self, message: str, fresh: Preview) -> None:
        super().__init__(message, 409)
        self.fresh = fresh


def to_doc(value: Any) -> Any:
    """An engine plan or result as JSON-friendly data: its `to_dict()` (issue 10, step 0), or the
    engine's own conversion for plain values (lists of instants, a savepoint's time)."""
    from engine.facade import to_doc as engine_doc

    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, dict):
        return to_dict()
    return engine_doc(value)


def plan_hash(operation: str, params: dict[str, Any], plan: Any) -> str:
    body = json.dumps({"operation": operation, "params": params, "plan": plan}, sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass
class Preview:
    operation: str
    params: dict[str, Any]
    fingerprint: str
    plan: Any
    summary: dict[str, Any]
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def clean_params(operation: str, raw: dict[str, Any]) -> dict[str, Any]:
    if operation not in SERVICES:
        raise PlanError(f"unknown table service {operation!r}", 404)
    _role, takes_instant, _title = SERVICES[operation]
    params: dict[str, Any] = {}
    instant = str(raw.get("instant") or "").strip()
    if takes_instant or (operation in OPTIONAL_INSTANT and instant):
        if not is_valid_instant_time(instant):
            raise PlanError(f"instant must be an instant time yyyyMMddHHmmssSSS, got {instant!r}")
        params["instant"] = instant
    if operation == "savepoint":
        params["comment"] = str(raw.get("comment") or "")[:200]
    if operation == "clustering":
        columns = ",".join(c.strip() for c in str(raw.get("sort_columns") or "").split(",") if c.strip())
        if columns and not _SORT_COLUMNS.match(columns):
            raise PlanError(f"sort columns must be up to 8 column names separated by commas, got {columns!r}")
        layout = str(raw.get("layout") or "").strip().lower() or "linear"
        if layout not in LAYOUTS:
            raise PlanError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        if columns:
            params["sort_columns"] = columns
            params["layout"] = layout
    if operation in METADATA_SERVICES:
        partition = str(raw.get("partition") or "").strip()
        if not _PARTITION_NAME.match(partition):
            raise PlanError(f"partition must name a metadata table partition (as files, column_stats), got {partition!r}")
        params["partition"] = partition
    return params


def clustering_options(params: dict[str, Any]) -> dict[str, str]:
    """The engine options of a clustering's sort columns and layout (none: ordered by record key)."""
    if not params.get("sort_columns"):
        return {}
    return {SORT_COLUMNS_KEY: params["sort_columns"], LAYOUT_KEY: params.get("layout") or "linear"}


def _maintenance(entry: TableEntry, options: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    from engine.facade import Maintenance

    return Maintenance(open_meta(entry), options)


def _dry_run(entry: TableEntry, operation: str, params: dict[str, Any]) -> Any:
    if operation == "clustering":
        return _clustering_dry_run(_maintenance(entry, clustering_options(params)), params.get("instant"))
    m = _maintenance(entry)
    if operation == "rollback":
        return m.rollback(params["instant"], dry_run=True)
    if operation == "restore":
        return m.restore(params["instant"], dry_run=True)
    if operation == "savepoint":
        return m.create_savepoint(params["instant"], comment=params.get("comment", ""), dry_run=True)
    if operation == "savepoint_delete":
        return m.delete_savepoint(params["instant"], dry_run=True)
    if operation == "clean":
        return m.clean(dry_run=True)
    if operation == "compaction":
        return _compaction_dry_run(m, params.get("instant"))
    if operation == "metadata_build":
        return m.plan_metadata_build(params["partition"])
    if operation == "metadata_drop":
        return m.plan_metadata_drop(params["partition"])
    return m.archive(dry_run=True)


@dataclass(frozen=True)
class ServiceDryRun:
    """What a compaction or clustering job will do: run pending plans as they are (`mode`
    "pending"), or schedule a new one (`mode` "schedule"; its instant is chosen when it runs)."""

    mode: str
    plans: list[Any]  # engine CompactionPlan or ClusteringPlan

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "plans": [p.to_dict() for p in self.plans]}


def _pending_or_scheduled(m: Any, kind: str, instant: str | None) -> ServiceDryRun:
    """What `Maintenance.run_compaction(instant)` / `run_clustering(instant)` will do: run that
    pending plan; without an instant, run every pending plan (oldest first), or with none pending
    schedule one (`schedule_<kind>(dry_run=True)`)."""
    pending = getattr(m, f"{kind}_plans")()
    if instant:
        chosen = [p for p in pending if p.instant == instant]
        if not chosen:
            inst = m.meta.timeline().get(instant)
            if inst is not None and inst.is_completed:
                raise PlanError(f"{kind} {instant} is already completed", 409)
            raise PlanError(f"no pending {kind} {instant} on this table", 404)
        return ServiceDryRun("pending", chosen[:1])
    if pending:
        return ServiceDryRun("pending", list(pending))
    plan = getattr(m, f"schedule_{kind}")(dry_run=True)
    return ServiceDryRun("schedule", [plan] if plan is not None else [])


def _compaction_dry_run(m: Any, instant: str | None) -> ServiceDryRun:
    return _pending_or_scheduled(m, "compaction", instant)


def _clustering_dry_run(m: Any, instant: str | None) -> ServiceDryRun:
    return _pending_or_scheduled(m, "clustering", instant)


def preview(entry: TableEntry, operation: str, raw_params: dict[str, Any]) -> Preview:
    """The dry-run plan of a table service, planned now on the table as it is."""
    params = clean_params(operation, raw_params)
    snap = TableSnapshot.load(open_meta(entry))
    try:
        result = _dry_run(entry, operation, params)
    except EngineError as exc:
        raise PlanError(f"{type(exc).__name__}: {exc}", 409) from exc
    doc = to_doc(result)
    if operation == "savepoint" and isinstance(doc, dict):
        doc.pop("saved_at", None)  # the clock, not the plan: it would make every plan's hash new
    after = TableSnapshot.load(snap.meta)
    if after.fingerprint != snap.fingerprint:  # the table moved while planning: plan once more
        return preview(entry, operation, raw_params)
    summary = summarize(snap, operation, params, result, doc)
    return Preview(operation, params, snap.fingerprint, doc, summary, plan_hash(operation, params, doc))


def confirm(entry: TableEntry, operation: str, raw_params: dict[str, Any], fingerprint: str, shown_hash: str) -> Preview:
    """Re-plan and check the confirmation still matches; StalePlanError (with the fresh plan) if not."""
    fresh = preview(entry, operation, raw_params)
    if fresh.fingerprint != fingerprint:
        raise StalePlanError(
            "the table changed since this plan was shown (its timeline is not the one the plan was made on); "
            "nothing was done. Review the new plan below.", fresh)
    if fresh.hash != shown_hash:
        raise StalePlanError("the plan is not the one that was shown; nothing was done. Review the new plan below.", fresh)
    return runnable(fresh)


def runnable(p: Preview) -> Preview:
    """`p`, unless it is a job with nothing to do that should not be queued (compaction)."""
    if p.operation == "compaction" and p.summary["nothing_to_do"]:
        raise PlanError("nothing to compact: no file slice has log files", 409)
    if p.operation == "clustering" and p.summary["nothing_to_do"]:
        raise PlanError("nothing to cluster: no file slice is under the small-file limit", 409)
    return p


# ---- what is at stake ----------------------------------------------------------------------
def _sizes(snap: TableSnapshot) -> dict[str, int]:
    return snap.cached("file_sizes", lambda: {f.path: f.size for f in snap.meta.list_data_files()})


def _commit_totals(snap: TableSnapshot, time: str) -> dict[str, int] | None:
    inst = snap.timeline.get(time)
    if inst is None or not (inst.is_completed and inst.action.is_write):
        return None
    return snap.commit(inst).totals()


def summarize(snap: TableSnapshot, operation: str, params: dict[str, Any], result: Any, doc: Any) -> dict[str, Any]:
    sizes = _sizes(snap)
    out: dict[str, Any] = {"instants": [], "files": [], "bytes": 0, "records": None, "index": None, "notes": []}
    if operation == "rollback":
        files = list(getattr(result, "files", ()))
        t = _commit_totals(snap, params["instant"])
        target = getattr(result, "target", None)
        out["instants"] = [{"time": params["instant"], "action": target.action.value if target else None,
                            "state": target.state.value if target else None, "totals": t}]
        out["files"] = [{"path": f, "size": sizes.get(f)} for f in files]
        out["records"] = t
        revert = getattr(result, "index_revert", None)
        if revert is not None:
            out["index"] = to_doc(revert)
    elif operation == "restore":
        total = {"inserts": 0, "updates": 0, "deletes": 0, "writes": 0}
        files: list[str] = []
        for inst in getattr(result, "instants", ()):
            t = _commit_totals(snap, inst.time)
            out["instants"].append({"time": inst.time, "action": inst.action.value, "state": inst.state.value, "totals": t})
            if t:
                for k in total:
                    total[k] += t[k]
                files += [p for p in snap.commit(snap.timeline.get(inst.time)).written_paths]  # type: ignore[arg-type]
        out["files"] = [{"path": f, "size": sizes.get(f)} for f in sorted(set(files))]
        out["records"] = total
    elif operation == "clean":
        files = list(getattr(result, "all_files", []))
        out["files"] = [{"path": f, "size": sizes.get(f)} for f in files]
        out["notes"].append(f"policy {getattr(result, 'policy', '?')}, {getattr(result, 'retained', '?')} retained; "
                            f"earliest retained commit {getattr(result, 'earliest_retained', None) or '-'}")
    elif operation == "archive":
        _summarize_archive(snap, result, out)
    elif operation == "savepoint":
        files = list(getattr(result, "files", ()))
        out["files"] = [{"path": f, "size": sizes.get(f)} for f in files]
        out["notes"].append(f"clean will keep these {len(files)} base file(s) while the savepoint exists")
    elif operation == "savepoint_delete":
        out["notes"].append(f"the savepoint at {params['instant']} will be removed; clean may then delete its files")
    elif operation == "compaction":
        _summarize_compaction(snap, result, out)
    elif operation == "clustering":
        _summarize_clustering(snap, params, result, out)
    elif operation in METADATA_SERVICES:
        fate = "deleted" if result.action == "drop" else "read"
        out["files"] = [{"path": path, "size": size, "fate": fate} for path, size in result.files]
        out["partitions"] = list(result.partitions)
        out["columns"] = list(result.columns)
        out["file_groups"] = result.file_groups
        out["creates_metadata_table"] = result.creates_metadata_table
        out["notes"] += list(result.notes)
    out["bytes"] = sum(f["size"] or 0 for f in out["files"])
    out["file_count"] = len(out["files"])
    out["nothing_to_do"] = operation in ("clean", "archive", "compaction", "clustering") and not out["files"] and not out["instants"]
    return out


def _summarize_archive(snap: TableSnapshot, plan: Any, out: dict[str, Any]) -> None:
    """Archival's files as rollback's: the timeline files that move into the archive file, then
    the data files of failed writes it deletes first (`ArchivePlan.debris`); each with its fate."""
    from engine.facade import timeline_files

    sizes = _sizes(snap)
    out["instants"] = [{"time": i.time, "action": i.action.value, "state": i.state.value, "totals": None}
                       for i in plan.instants]
    out["files"] = [{"path": f.path, "size": f.size, "fate": "archived"} for f in timeline_files(snap.meta, plan)]
    out["files"] += [{"path": p, "size": sizes.get(p) if p in sizes else _size(snap, p), "fate": "deleted"}
                     for p in plan.debris]
    out["archived_files"] = sum(1 for f in out["files"] if f["fate"] == "archived")
    out["deleted_files"] = len(plan.debris)
    if plan.instants:
        out["notes"].append(f"{len(plan.instants)} instant(s) move from .hoodie/ into an archive file in "
                            f".hoodie/{snap.meta.config.archivelog_folder}/ (their timeline files are removed).")
    if plan.debris:
        out["notes"].append(f"First, {len(plan.debris)} file(s) of failed writes in that range are deleted: once "
                            "archived, their instants' files would count as committed.")
    if plan.held_back:
        out["held_back"] = list(plan.held_back)
        out["notes"].append(f"{len(plan.held_back)} file(s) of instants this table never wrote are kept, and "
                            "archival stops below the oldest of them: " + ", ".join(plan.held_back[:5])
                            + (" …" if len(plan.held_back) > 5 else ""))


def _size(snap: TableSnapshot, path: str) -> int | None:
    try:
        return snap.meta.storage.size(path)
    except (FileNotFoundError, EngineError):  # gone since the plan was made: no size to show
        return None


def _writers_meanwhile() -> str:
    """What a compaction job means for other writers, by the console's CONSOLE_CONCURRENCY_MODE."""
    from flask import current_app, has_app_context

    mode = current_app.config.get("CONSOLE_CONCURRENCY_MODE") if has_app_context() else None
    if mode == "OPTIMISTIC_CONCURRENCY_CONTROL":
        return ("Writers can keep writing meanwhile: the plan leaves out file groups being written, and writes "
                "to the slices it merges go to the new slices.")
    return ("It holds the table lock while it runs: other writes to this table are refused until it finishes "
            "(CONSOLE_CONCURRENCY_MODE=OPTIMISTIC_CONCURRENCY_CONTROL lets them go on).")


def _writers_meanwhile_clustering() -> str:
    """What a clustering job means for other writers, by the console's CONSOLE_CONCURRENCY_MODE."""
    from flask import current_app, has_app_context

    mode = current_app.config.get("CONSOLE_CONCURRENCY_MODE") if has_app_context() else None
    if mode == "OPTIMISTIC_CONCURRENCY_CONTROL":
        return ("Writers can keep writing meanwhile: the plan leaves out file groups being written; while it is "
                "pending, updates to its file groups are refused.")
    return ("It holds the table lock while it runs: other writes to this table are refused until it finishes, and "
            "while a plan is pending, updates to its file groups are refused.")


def _summarize_compaction(snap: TableSnapshot, result: ServiceDryRun, out: dict[str, Any]) -> None:
    sizes = _sizes(snap)
    ops: list[dict[str, Any]] = []
    for plan in result.plans:
        inst = snap.timeline.get(plan.instant) if plan.instant else None
        if inst is not None:
            out["instants"].append({"time": inst.time, "action": inst.action.value, "state": inst.state.value,
                                    "totals": None})
        for o, op in zip(compactions.plan_doc(snap, plan, None)["operations"], plan.operations, strict=True):
            ops.append({**o, "instant": plan.instant or None})
            if op.base_path:
                out["files"].append({"path": op.base_path, "size": o["base_size"]})
            out["files"] += [{"path": lp, "size": sizes.get(lp)} for lp in op.log_paths]
    out["operations"] = ops
    out["slices"] = len(ops)
    out["log_files"] = sum(len(o["log_files"]) for o in ops)
    out["log_bytes"] = sum(o["log_bytes"] for o in ops)
    out["base_bytes"] = sum(o["base_size"] or 0 for o in ops)
    if result.mode == "pending" and result.plans:
        names = ", ".join(p.instant for p in result.plans)
        out["notes"].append(f"Runs the pending compaction plan(s) {names} (oldest first) as planned; no new "
                            "compaction is scheduled now (preview again afterwards).")
    elif ops:
        out["notes"].append("Schedules a compaction of every file slice with log files (its instant is chosen when "
                            "the job starts) and runs it in the job runner's Spark session.")
    if ops:
        out["notes"].append("Each slice's base file and log files are merged into a new base file at the compaction "
                            f"instant; records keep their commit times. {_writers_meanwhile()} The old "
                            "files stay for older snapshots until a clean.")


def _summarize_clustering(snap: TableSnapshot, params: dict[str, Any], result: ServiceDryRun,
                          out: dict[str, Any]) -> None:
    """Each group: its partition, the file slices it rewrites and their bytes, the file groups it is
    planned to become and the size each would have; the sort columns and curve; the files read."""
    from engine.facade import WriteConfig

    sizes = _sizes(snap)
    groups: list[dict[str, Any]] = []
    target = WriteConfig.from_options(clustering_options(params)).clustering.target_file_max_bytes
    for plan in result.plans:
        inst = snap.timeline.get(plan.instant) if plan.instant else None
        if inst is not None:
            out["instants"].append({"time": inst.time, "action": inst.action.value, "state": inst.state.value,
                                    "totals": None})
        for g in plan.groups:
            paths = [p for s in g.slices for p in ([s.base_path] if s.base_path else []) + list(s.log_paths)]
            files = [{"path": p, "size": sizes.get(p), "fate": "replaced"} for p in paths]
            out["files"] += files
            in_bytes = sum(f["size"] or 0 for f in files)
            groups.append({"instant": plan.instant or None, "partition": g.partition, "slices": len(g.slices),
                           "files_in": len(files), "bytes_in": in_bytes, "output_groups": g.output_groups,
                           "expected_file_bytes": in_bytes // max(1, g.output_groups)})
        out["sort_columns"] = list(plan.sort_columns) or out.get("sort_columns") or []
    out["groups"] = groups
    out["slices"] = sum(g["slices"] for g in groups)
    out["output_groups"] = sum(g["output_groups"] for g in groups)
    out["target_file_bytes"] = target
    out["layout"] = (params.get("layout") or "linear") if out.get("sort_columns") else None
    order = (f"sorted by {', '.join(out['sort_columns'])} ({out['layout']})" if out.get("sort_columns")
             else "ordered by record key")
    if groups:
        out["notes"].append(f"{out['slices']} file slice(s) in {len(groups)} group(s) are rewritten into about "
                            f"{out['output_groups']} new file group(s), {order}; records keep their commit times, "
                            "so incremental reads see no change. The replaced file groups stay on storage until "
                            "clean deletes them.")
        out["notes"].append(_writers_meanwhile_clustering())
