"""Table pages: overview (charts, health), timeline, commit detail, file groups."""

from __future__ import annotations

from flask import Blueprint, render_template, request

from webui.auth import current_actor, requires
from webui.models import Role
from webui.services import browse, changes, compactions, file_groups, health, jobs, schema_log, tables
from webui.services.snapshot import TableSnapshot

bp = Blueprint("browse", __name__, url_prefix="/tables/<name>")


def _snapshot(name: str):  # type: ignore[no-untyped-def]
    entry = tables.get_table(name)
    return entry, TableSnapshot.load(tables.open_meta(entry))


def _int_arg(key: str, default: int) -> int:
    try:
        return int(request.args.get(key, default))
    except (TypeError, ValueError):
        return default


@bp.get("")
@requires(Role.VIEWER)
def overview_page(name: str):  # type: ignore[no-untyped-def]
    entry, snap = _snapshot(name)
    schemas = snap.cached("schema_log", lambda: schema_log.history(snap))
    return render_template("overview.html", entry=entry, ov=browse.overview(snap), mor=compactions.overview(snap),
                           findings=health.check(snap), jobs=jobs.recent(entry, limit=8), schemas=schemas,
                           actor=current_actor())


@bp.get("/timeline")
@requires(Role.VIEWER)
def timeline_page(name: str):  # type: ignore[no-untyped-def]
    entry, snap = _snapshot(name)
    actions = [a for a in request.args.getlist("action") if a]
    states = [s for s in request.args.getlist("state") if s]
    page = browse.timeline_page(
        snap, actions=actions, states=states, since=request.args.get("since") or None,
        until=request.args.get("until") or None, include_archived=request.args.get("archived") == "1",
        page=_int_arg("page", 1), per_page=_int_arg("per_page", browse.TIMELINE_PAGE),
    )
    all_actions = sorted({i.action.value for i in snap.timeline.instants})
    return render_template("timeline.html", entry=entry, page=page, actions=actions, states=states,
                           all_actions=all_actions, args=request.args, actor=current_actor())


@bp.get("/commits/<instant>")
@requires(Role.VIEWER)
def commit_page(name: str, instant: str):  # type: ignore[no-untyped-def]
    entry, snap = _snapshot(name)
    return render_template("commit.html", entry=entry, c=browse.commit_detail(snap, instant), actor=current_actor())


@bp.get("/commits/<instant>/changes")
@requires(Role.VIEWER)
def changes_page(name: str, instant: str):  # type: ignore[no-untyped-def]
    entry, snap = _snapshot(name)
    detail = browse.commit_detail(snap, instant)
    ch = changes.commit_changes(snap, instant, op=request.args.get("op") or None, page=_int_arg("page", 1),
                                per_page=_int_arg("per_page", changes.CHANGES_PAGE))
    return render_template("commit_changes.html", entry=entry, c=detail, ch=ch, actor=current_actor())


@bp.get("/file-groups")
@requires(Role.VIEWER)
def file_groups_page(name: str):  # type: ignore[no-untyped-def]
    entry, snap = _snapshot(name)
    partition = request.args.get("partition")
    fg = file_groups.page(snap, partition if partition is not None and partition != "*" else None,
                          page=_int_arg("page", 1), per_page=_int_arg("per_page", file_groups.GROUPS_PAGE),
                          with_logs=request.args.get("logs") == "1", pending_only=request.args.get("pending") == "1")
    return render_template("file_groups.html", entry=entry, fg=fg, pending=compactions.pending(snap),
                           actor=current_actor())
