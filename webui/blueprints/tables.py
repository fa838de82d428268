"""Tables: list, create a new one, register an existing one."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for

from engine.facade import EngineError
from webui.auth import current_actor, requires
from webui.forms import CreateTableForm, RegisterTableForm
from webui.models import Role
from webui.services import audit, tables
from webui.services.browse import overview
from webui.services.snapshot import TableSnapshot

bp = Blueprint("tables", __name__)


@bp.get("/")
@requires(Role.VIEWER)
def index():  # type: ignore[no-untyped-def]
    return redirect(url_for("tables.list_tables"))


@bp.get("/tables")
@requires(Role.VIEWER)
def list_tables():  # type: ignore[no-untyped-def]
    rows = []
    for entry in tables.list_tables():
        row = {"entry": entry, "error": None, "overview": None}
        try:
            row["overview"] = overview(TableSnapshot.load(tables.open_meta(entry)))
        except EngineError as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
    return render_template("tables.html", rows=rows, roots=tables.roots())


@bp.route("/tables/new", methods=["GET", "POST"])
@requires(Role.OPERATOR)
def create():  # type: ignore[no-untyped-def]
    form = CreateTableForm()
    status = 200
    if form.validate_on_submit():
        spec = tables.NewTable(
            name=form.name.data or "", record_key=form.record_key.data or "",
            partition_fields=form.partition_fields.data or "", precombine_field=form.precombine_field.data or None,
            table_type=form.table_type.data or "COPY_ON_WRITE", index=form.index.data or tables.DEFAULT_INDEX_NAME,
            path=form.path.data or None, hive_style=bool(form.hive_style.data),
            table_version=int(form.table_version.data or 6),
            cdc_mode=form.cdc_mode.data or None,
        )
        actor = current_actor()
        try:
            entry = tables.create_table(spec, actor)
        except tables.RegistryError as exc:
            audit.record(actor, "table.create", f"refused: {exc}", table=spec.name, params=_spec_params(spec))
            flash(str(exc), "danger")
            status = exc.status
        else:
            audit.record(actor, "table.create", "created", table=entry.name,
                         params={**_spec_params(spec), "path": entry.base_path})
            flash(f"Created table {entry.name} at {entry.base_path}.", "success")
            return redirect(url_for("browse.overview_page", name=entry.name))
    elif form.is_submitted():
        status = 400
    return render_template("table_new.html", form=form, roots=tables.roots()), status


@bp.route("/tables/register", methods=["GET", "POST"])
@requires(Role.OPERATOR)
def register():  # type: ignore[no-untyped-def]
    form = RegisterTableForm()
    status = 200
    if form.validate_on_submit():
        actor = current_actor()
        try:
            entry = tables.register_existing(form.path.data or "", form.name.data or None, actor)
        except tables.RegistryError as exc:
            audit.record(actor, "table.register", f"refused: {exc}", table=form.name.data or None,
                         params={"path": form.path.data})
            flash(str(exc), "danger")
            status = exc.status
        else:
            audit.record(actor, "table.register", "registered", table=entry.name, params={"path": entry.base_path})
            flash(f"Registered table {entry.name}.", "success")
            return redirect(url_for("browse.overview_page", name=entry.name))
    elif form.is_submitted():
        status = 400
    return render_template("table_register.html", form=form, roots=tables.roots()), status


def _spec_params(spec: tables.NewTable) -> dict:
    return {"record_key": spec.record_key, "partition_fields": spec.partition_fields,
            "precombine_field": spec.precombine_field, "table_type": spec.table_type, "index": spec.index,
            "path": spec.path, "hive_style": spec.hive_style, "table_version": spec.table_version,
            "cdc_mode": spec.cdc_mode}
