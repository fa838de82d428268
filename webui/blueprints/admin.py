"""Users (admins only)."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Blueprint, flash, redirect, render_template, url_for

from webui.auth import current_actor, requires
from webui.extensions import db
from webui.forms import NewUserForm, RoleForm
from webui.models import Role, User
from webui.services import audit, users

bp = Blueprint("admin", __name__, url_prefix="/admin")


@bp.route("/users", methods=["GET", "POST"])
@requires(Role.ADMIN)
def users_page():  # type: ignore[no-untyped-def]
    form = NewUserForm()
    status = 200
    if form.validate_on_submit():
        try:
            user = users.create_user(form.username.data or "", form.password.data or "", form.role.data or "viewer")
        except users.UserError as exc:
            flash(str(exc), "danger")
            status = 400
        else:
            audit.record(current_actor(), "user.create", "created", params={"username": user.username, "role": user.role})
            flash(f"Created user {user.username} ({user.role}).", "success")
            return redirect(url_for("admin.users_page"))
    elif form.is_submitted():
        status = 400
    rows = list(db.session.scalars(sa.select(User).order_by(User.username)))
    return render_template("users.html", form=form, users=rows, role_form=RoleForm()), status


@bp.post("/users/<int:user_id>/role")
@requires(Role.ADMIN)
def set_role(user_id: int):  # type: ignore[no-untyped-def]
    form = RoleForm()
    user = db.session.get(User, user_id)
    if user is None:
        flash("no such user", "danger")
        return redirect(url_for("admin.users_page"))
    if form.validate_on_submit():
        before = user.role
        try:
            users.set_role(user, form.role.data or "viewer")
        except users.UserError as exc:
            audit.record(current_actor(), "user.role", f"refused: {exc}", params={"username": user.username})
            flash(str(exc), "danger")
            return redirect(url_for("admin.users_page"))
        audit.record(current_actor(), "user.role", f"{before} -> {user.role}", params={"username": user.username})
        flash(f"{user.username} is now {user.role}.", "success")
    return redirect(url_for("admin.users_page"))
