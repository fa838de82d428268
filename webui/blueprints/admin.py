"""Users (admins only): create, roles, password resets, deactivation, unlocking."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from flask import Blueprint, abort, flash, redirect, render_template, url_for

from webui.auth import current_actor, requires
from webui.extensions import db
from webui.forms import ActionForm, NewUserForm, ResetPasswordForm, RoleForm
from webui.models import Role, User, utcnow
from webui.services import audit, logins, tokens, users

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
    return render_template("users.html", form=form, users=rows, role_form=RoleForm(), now=utcnow()), status


def _user(user_id: int) -> User:
    user = db.session.get(User, user_id)
    if user is None:
        abort(404, f"no user {user_id}")
    return user


@bp.get("/users/<int:user_id>")
@requires(Role.ADMIN)
def user_page(user_id: int, reset_form: ResetPasswordForm | None = None, status: int = 200):  # type: ignore[no-untyped-def]
    user = _user(user_id)
    return render_template("user.html", user=user, now=utcnow(), reset_form=reset_form or ResetPasswordForm(),
                           action=ActionForm(), tokens=tokens.views(tokens.visible(current_actor(), user.username))), status  # type: ignore[arg-type]


@bp.post("/users/<int:user_id>/password")
@requires(Role.ADMIN)
def reset_password(user_id: int):  # type: ignore[no-untyped-def]
    user = _user(user_id)
    form = ResetPasswordForm()
    if not form.validate_on_submit():
        return user_page(user_id, reset_form=form, status=400)
    try:
        revoked = users.reset_password(current_actor(), user, form.password.data or "")  # type: ignore[arg-type]
    except users.UserError as exc:
        flash(str(exc), "danger")
        return user_page(user_id, reset_form=form, status=400)
    notice = f" {revoked} API token{'s' if revoked != 1 else ''} of theirs {'were' if revoked != 1 else 'was'} revoked." if revoked else ""
    flash(f"{user.username}'s password was reset: they must choose a new one at their next login.{notice}", "success")
    return redirect(url_for("admin.user_page", user_id=user.id))


def _change(user_id: int, change: Callable[[User, User], object], done: str):  # type: ignore[no-untyped-def]
    user = _user(user_id)
    ActionForm().validate_on_submit()  # CSRF is checked by CSRFProtect before we get here
    try:
        change(current_actor(), user)  # type: ignore[arg-type]
    except users.UserError as exc:
        flash(str(exc), "danger")
    else:
        flash(done.format(name=user.username), "success")
    return redirect(url_for("admin.user_page", user_id=user.id))


@bp.post("/users/<int:user_id>/deactivate")
@requires(Role.ADMIN)
def deactivate(user_id: int):  # type: ignore[no-untyped-def]
    return _change(user_id, users.deactivate, "{name} was deactivated: their sessions and tokens no longer work.")


@bp.post("/users/<int:user_id>/reactivate")
@requires(Role.ADMIN)
def reactivate(user_id: int):  # type: ignore[no-untyped-def]
    return _change(user_id, users.reactivate, "{name} was reactivated.")


def _unlock(actor: User, user: User) -> None:
    if not logins.unlock(actor, user):
        raise users.UserError(f"{user.username} is not locked")


@bp.post("/users/<int:user_id>/unlock")
@requires(Role.ADMIN)
def unlock(user_id: int):  # type: ignore[no-untyped-def]
    return _change(user_id, _unlock, "{name} was unlocked.")


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
