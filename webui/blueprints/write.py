"""Write pages: upload a batch (or generate a demo batch), preview it against the table, queue the job."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for

from webui.auth import current_actor, requires
from webui.forms import ConfirmWriteForm, DemoBatchForm, UploadForm
from webui.models import Role
from webui.services import audit, jobs, tables, uploads

bp = Blueprint("write", __name__, url_prefix="/tables/<name>/write")


def _forms() -> tuple[UploadForm, DemoBatchForm]:
    return UploadForm(prefix="up"), DemoBatchForm(prefix="demo")


def _render_form(entry, upload_form, demo_form, error: str | None = None, status: int = 200):  # type: ignore[no-untyped-def]
    schema = tables.open_meta(entry).latest_schema()
    return render_template("write.html", entry=entry, upload_form=upload_form, demo_form=demo_form, error=error,
                           schema=schema), status


@bp.get("")
@requires(Role.OPERATOR)
def form(name: str):  # type: ignore[no-untyped-def]
    entry = tables.get_table(name)
    up, demo = _forms()
    return _render_form(entry, up, demo)


def _preview(entry, table, filename: str, operation: str):  # type: ignore[no-untyped-def]
    meta = tables.open_meta(entry)
    checked = uploads.check(meta, table, operation)
    stored = uploads.store(checked.table, entry, filename, current_actor())
    cols, rows = uploads.preview_rows(checked.table)
    confirm = ConfirmWriteForm(formdata=None, upload_id=stored.id, operation=operation)
    return render_template("write_preview.html", entry=entry, upload=stored, columns=cols, rows=rows,
                           schema_rows=checked.schema_rows, operation=operation, form=confirm)


@bp.post("/upload")
@requires(Role.OPERATOR)
def upload(name: str):  # type: ignore[no-untyped-def]
    entry = tables.get_table(name)
    up, demo = _forms()
    if not up.validate_on_submit():
        return _render_form(entry, up, demo, "choose a file to upload", 400)
    f = up.file.data
    jobs.check_user_quota(current_actor(), up.operation.data or "upsert")  # before the batch is read and stored
    try:
        table = uploads.parse(f.filename or "", f.stream)
        return _preview(entry, table, f.filename or "upload", up.operation.data or "upsert")
    except uploads.UploadError as exc:
        return _render_form(entry, up, demo, str(exc), exc.status)


@bp.post("/demo")
@requires(Role.OPERATOR)
def demo(name: str):  # type: ignore[no-untyped-def]
    entry = tables.get_table(name)
    up, demo_form = _forms()
    if not demo_form.validate_on_submit():
        return _render_form(entry, up, demo_form, "choose between 1 and 100000 rows", 400)
    try:
        table = uploads.demo_batch(tables.open_meta(entry), rows=demo_form.rows.data or 100)
        return _preview(entry, table, "demo-batch.parquet", demo_form.operation.data or "upsert")
    except uploads.UploadError as exc:
        return _render_form(entry, up, demo_form, str(exc), exc.status)


@bp.post("/confirm")
@requires(Role.OPERATOR)
def confirm(name: str):  # type: ignore[no-untyped-def]
    entry = tables.get_table(name)
    form = ConfirmWriteForm()
    actor = current_actor()
    if not form.validate_on_submit() or form.operation.data not in uploads.OPERATIONS:
        flash("That confirmation is not valid: upload the batch again.", "danger")
        return redirect(url_for("write.form", name=name)), 303
    try:
        stored = uploads.get_upload(form.upload_id.data or "", entry)
    except uploads.UploadError as exc:
        audit.record(actor, form.operation.data or "write", f"refused: {exc}", table=entry.name)
        flash(str(exc), "danger")
        return redirect(url_for("write.form", name=name)), 303
    params = {"upload": stored.id, "rows": stored.rows, "filename": stored.filename}
    job, queued = jobs.enqueue_once(actor, entry, form.operation.data or "upsert", params, f"upload:{stored.id}")
    if not queued:  # the form was submitted twice: the batch is written once
        flash(f"This batch is already queued as job {job.id}: it is written once.", "info")
        return redirect(url_for("jobs.job_page", job_id=job.id))
    audit.record(actor, job.operation, "queued", table=entry.name,
                 params={"rows": stored.rows, "filename": stored.filename}, job_id=job.id)
    return redirect(url_for("jobs.job_page", job_id=job.id))
