"""The user's own account: change the password, list and revoke API tokens (admins: anyone's)."""

from __future__ import annotations

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from flask_login import login_user

from webui.auth import current_actor, requires
from webui.forms import ActionForm, ChangePasswordForm
from webui.models import Role
from webui.services import tokens, users

bp = Blueprint("account", __name__, url_prefix="/account")


@bp.route("/password", methods=["GET", "POST"])
@requires(Role.VIEWER)
def password():  # type: ignore[no-untyped-def]
    actor = current_actor()
    form = ChangePasswordForm()
    status = 200
    if form.validate_on_submit():
        try:
            revoked = users.change_own_password(actor, form.current.data or "",  # type: ignore[arg-type]
                                                form.new.data or "", form.confirm.data or "")
        except users.UserError as exc:
            flash(str(exc), "danger")
            status = 400
        else:
            login_user(actor)  # type: ignore[arg-type]  # the session's stamp follows the new password
            flash("Your password was changed." + _revoked_notice(revoked), "success")
            return redirect(url_for("tables.index"))
    elif form.is_submitted():
        status = 400
    return render_template("account_password.html", form=form, forced=actor.must_change_password), status  # type: ignore[union-attr]


def _revoked_notice(count: int) -> str:
    """What a password change did to the user's API tokens (issued with the old password)."""
    if not count:
        return ""
    if count == 1:
        return " Your API token was revoked: issue a new one under API tokens."
    return f" Your {count} API tokens were revoked: issue new ones under API tokens."


@bp.get("/tokens")
@requires(Role.VIEWER)
def tokens_page():  # type: ignore[no-untyped-def]
    """Your tokens; admins may pass ?user=NAME or ?all=1."""
    actor = current_actor()
    username = request.args.get("user") or None
    everyone = request.args.get("all") in ("1", "true")
    is_admin = actor.can(Role.ADMIN)  # type: ignore[union-attr]
    rows = tokens.visible(actor, username, everyone)  # type: ignore[arg-type]
    scope = ("every user's tokens" if is_admin and everyone else f"{username}'s tokens" if is_admin and username
             else "your tokens")
    return render_template("tokens.html", rows=tokens.views(rows), scope=scope, is_admin=is_admin,
                           action=ActionForm(), new_token=None,
                           lifetime=current_app.config["CONSOLE_TOKEN_LIFETIME_DAYS"])


@bp.post("/tokens/new")
@requires(Role.VIEWER)
def new_token():  # type: ignore[no-untyped-def]
    actor = current_actor()
    ActionForm().validate_on_submit()  # CSRF is checked by CSRFProtect before we get here
    token, _row = tokens.issue(actor, int(current_app.config["CONSOLE_TOKEN_LIFETIME_DAYS"]), via="page")  # type: ignore[arg-type]
    rows = tokens.visible(actor)  # type: ignore[arg-type]
    return render_template("tokens.html", rows=tokens.views(rows), scope="your tokens",
                           is_admin=actor.can(Role.ADMIN), action=ActionForm(), new_token=token,  # type: ignore[union-attr]
                           lifetime=current_app.config["CONSOLE_TOKEN_LIFETIME_DAYS"]), 201


@bp.post("/tokens/<int:token_id>/revoke")
@requires(Role.VIEWER)
def revoke_token(token_id: int):  # type: ignore[no-untyped-def]
    actor = current_actor()
    try:
        row = tokens.get_for(actor, token_id)  # type: ignore[arg-type]
    except tokens.TokenError as exc:
        abort(exc.status, exc.message)
    owner = row.user.username
    if tokens.revoke(actor, row, via="page"):  # type: ignore[arg-type]
        flash(f"Token {token_id} of {owner} was revoked.", "success")
    else:
        flash(f"Token {token_id} was already revoked.", "info")
    back = request.form.get("back") or ""
    if not back.startswith(("/account/tokens", "/admin/users/")) or "//" in back or "\\" in back:
        back = url_for("account.tokens_page")
    return redirect(back)
