"""Login and logout. Attempts are rate-limited per client address by Flask-Limiter
(`webui.ratelimit.login_limit`, shared with the token endpoint) and lock accounts after repeated
failures (`webui.services.logins`); both are counted in the database, shared by every worker."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user, login_user, logout_user

from webui.forms import ActionForm, LoginForm
from webui.ratelimit import login_limit
from webui.services import audit, logins

bp = Blueprint("auth", __name__)

STATUS = {logins.Verdict.FAILED: 401, logins.Verdict.LOCKED: 403}


@bp.route("/login", methods=["GET", "POST"])
@login_limit  # POST only; over the limit, a 429 with the login page (`ratelimit._throttled`)
def login():  # type: ignore[no-untyped-def]
    form = LoginForm()
    if form.validate_on_submit():
        result = logins.attempt(form.username.data or "", form.password.data or "", request.remote_addr or "",
                                "page", logins.LoginPolicy.from_config(current_app.config))
        if result.verdict is logins.Verdict.SUCCEEDED and result.user is not None:
            login_user(result.user)
            if result.user.must_change_password:
                return redirect(url_for("account.password"))
            target = request.args.get("next") or ""
            parts = urlsplit(target)
            if not target.startswith("/") or target.startswith("//") or parts.netloc or parts.scheme:
                target = url_for("tables.index")
            return redirect(target)
        flash(result.message, "danger")
        return render_template("login.html", form=form), STATUS[result.verdict]
    return render_template("login.html", form=form), (400 if request.method == "POST" else 200)


@bp.post("/logout")
def logout():  # type: ignore[no-untyped-def]
    ActionForm().validate_on_submit()  # CSRF is checked by CSRFProtect before we get here
    if current_user.is_authenticated:
        audit.record(current_user, "auth.logout", "logged out", params={"remote_addr": request.remote_addr or ""})  # type: ignore[arg-type]
    logout_user()
    return redirect(url_for("auth.login"))
