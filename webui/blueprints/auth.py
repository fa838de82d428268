"""Login and logout (throttled by Flask-Limiter)."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from flask_login import login_user, logout_user

from webui.extensions import limiter
from webui.forms import ActionForm, LoginForm
from webui.services import users

bp = Blueprint("auth", __name__)


def _login_limit() -> str:
    return current_app.config["CONSOLE_LOGIN_LIMIT"]


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(_login_limit, methods=["POST"])
def login():  # type: ignore[no-untyped-def]
    form = LoginForm()
    if form.validate_on_submit():
        user = users.find(form.username.data or "")
        if user is not None and user.active and user.check_password(form.password.data or ""):
            login_user(user)
            target = request.args.get("next") or ""
            parts = urlsplit(target)
            if not target.startswith("/") or target.startswith("//") or parts.netloc or parts.scheme:
                target = url_for("tables.index")
            return redirect(target)
        flash("Wrong user name or password.", "danger")
        return render_template("login.html", form=form), 401
    return render_template("login.html", form=form), (400 if request.method == "POST" else 200)


@bp.post("/logout")
def logout():  # type: ignore[no-untyped-def]
    ActionForm().validate_on_submit()  # CSRF is checked by CSRFProtect before we get here
    logout_user()
    return redirect(url_for("auth.login"))
