"""Job pages (live progress by polling /jobs/<id>/status), cancel, and the data preview."""

from __future__ import annotations

from flask import Blueprint, flash, jsonify, redirect, render_template, url_for

from webui.auth import current_actor, requires
from webui.forms import ActionForm, PreviewForm
from webui.models import Role
from webui.services import audit, jobs, tables

bp = Blueprint("jobs", __name__)


@bp.get("/jobs")
@requires(Role.VIEWER)
def list_jobs():  # type: ignore[no-untyped-def]
    return render_template("jobs.html", jobs=jobs.recent(limit=100))


@bp.get("/jobs/<int:job_id>")
@requires(Role.VIEWER)
def job_page(job_id: int):  # type: ignore[no-untyped-def]
    job = jobs.get(job_id)
    actor = current_actor()
    return render_template("job.html", job=job, doc=jobs.describe(job), form=ActionForm(),
                           can_cancel=jobs.may_cancel(actor, job))


@bp.get("/jobs/<int:job_id>/status")
@requires(Role.VIEWER)
def job_status(job_id: int):  # type: ignore[no-untyped-def]
    return jsonify(jobs.describe(jobs.get(job_id)))


@bp.post("/jobs/<int:job_id>/cancel")
@requires(Role.VIEWER)
def cancel(job_id: int):  # type: ignore[no-untyped-def]
    job = jobs.get(job_id)
    actor = current_actor()
    changed = jobs.request_cancel(actor, job)  # type: ignore[arg-type]
    flash("Cancellation requested." if changed else "The job had already finished.", "info")
    return redirect(url_for("jobs.job_page", job_id=job_id))


@bp.route("/tables/<name>/preview", methods=["GET", "POST"])
@requires(Role.VIEWER)
def data_preview(name: str):  # type: ignore[no-untyped-def]
    entry = tables.get_table(name)
    form = PreviewForm()
    if entry.table_type != "MERGE_ON_READ":  # read-optimized reads differ from snapshots on MOR only
        form.mode.choices = [c for c in form.mode.choices if c.value != "read_optimized"]  # type: ignore[union-attr]
    status = 200
    if form.validate_on_submit():
        mode = form.mode.data or "snapshot"
        if mode in ("as_of", "incremental") and not form.instant.data:
            form.instant.errors = ["this read needs an instant"]
            status = 400
        else:
            params = {"mode": mode, "instant": form.instant.data or None, "limit": form.limit.data or 50}
            job = jobs.enqueue(current_actor(), entry, "preview", params)
            audit.record(current_actor(), "preview", "queued", table=entry.name, params=params, job_id=job.id)
            return redirect(url_for("jobs.job_page", job_id=job.id))
    elif form.is_submitted():
        status = 400
    recent = [j for j in jobs.recent(entry, limit=30) if j.operation == "preview"][:8]
    return render_template("preview.html", entry=entry, form=form, recent=recent), status
