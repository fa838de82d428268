"""Table-service confirmation pages: the server-side dry-run plan, then a job on confirm."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for

from webui.auth import authorize, current_actor, requires
from webui.forms import ServiceConfirmForm
from webui.models import Role
from webui.services import audit, jobs, plans, tables

bp = Blueprint("services", __name__, url_prefix="/tables/<name>/services")


def _role(operation: str) -> Role:
    if operation not in plans.SERVICES:
        abort(404)
    return plans.SERVICES[operation][0]


def _page(entry, operation: str, preview, form, error: str | None = None, status: int = 200):  # type: ignore[no-untyped-def]
    return render_template("service.html", entry=entry, operation=operation, title=plans.SERVICES[operation][2],
                           layouts=plans.LAYOUTS, args=request.args,
                           p=preview, form=form, error=error,
                           needs_name=operation in ("restore", "metadata_drop")), status


def _form_for(preview) -> ServiceConfirmForm:  # type: ignore[no-untyped-def]
    return ServiceConfirmForm(formdata=None, instant=preview.params.get("instant", ""),
                              comment=preview.params.get("comment", ""), partition=preview.params.get("partition", ""),
                              sort_columns=preview.params.get("sort_columns", ""), layout=preview.params.get("layout", ""),
                              fingerprint=preview.fingerprint, plan_hash=preview.hash)


@bp.get("/<operation>")
@requires(Role.VIEWER)
def preview_page(name: str, operation: str):  # type: ignore[no-untyped-def]
    authorize(current_actor(), _role(operation))
    entry = tables.get_table(name)
    try:
        p = plans.preview(entry, operation, dict(request.args))
    except plans.PlanError as exc:
        return _page(entry, operation, None, None, str(exc), exc.status)
    return _page(entry, operation, p, _form_for(p))


@bp.post("/<operation>")
@requires(Role.VIEWER)
def confirm(name: str, operation: str):  # type: ignore[no-untyped-def]
    actor = authorize(current_actor(), _role(operation))
    entry = tables.get_table(name)
    form = ServiceConfirmForm()
    raw = {"instant": form.instant.data, "comment": form.comment.data}
    if operation in plans.METADATA_SERVICES:
        raw["partition"] = form.partition.data
    if operation == "clustering":
        raw["sort_columns"], raw["layout"] = form.sort_columns.data, form.layout.data
    if not form.validate_on_submit():
        return _page(entry, operation, None, None, "the confirmation form is incomplete; open the preview again", 400)
    if operation in ("restore", "metadata_drop") and (form.confirm_name.data or "").strip() != entry.name:
        try:
            p = plans.preview(entry, operation, raw)
        except plans.PlanError as exc:
            return _page(entry, operation, None, None, str(exc), exc.status)
        what = "restore" if operation == "restore" else "drop"
        return _page(entry, operation, p, _form_for(p), f"type the table name {entry.name!r} to confirm the {what}", 400)
    try:
        p = plans.confirm(entry, operation, raw, form.fingerprint.data or "", form.plan_hash.data or "")
    except plans.StalePlanError as exc:
        audit.record(actor, operation, "refused: stale plan", table=entry.name, params=raw,
                     plan_hash=form.plan_hash.data)
        return _page(entry, operation, exc.fresh, _form_for(exc.fresh), str(exc), 409)
    except plans.PlanError as exc:
        audit.record(actor, operation, f"refused: {exc}", table=entry.name, params=raw, plan_hash=form.plan_hash.data)
        return _page(entry, operation, None, None, str(exc), exc.status)
    params = {**p.params, "fingerprint": p.fingerprint, "plan_hash": p.hash, "user": actor.username}
    job, queued = jobs.enqueue_once(actor, entry, operation, params, jobs.plan_key(entry, operation, p.hash, p.fingerprint))
    if not queued:  # the same confirmation twice: one job
        flash(f"This {operation} is already queued as job {job.id}.", "info")
        return redirect(url_for("jobs.job_page", job_id=job.id))
    audit.record(actor, operation, "queued", table=entry.name, params=p.params, plan_hash=p.hash, job_id=job.id)
    return redirect(url_for("jobs.job_page", job_id=job.id))
