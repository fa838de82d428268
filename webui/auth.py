"""Who is asking and what they may do: sessions (pages), bearer tokens (API), roles.

Pages authenticate with the Flask-Login session cookie; the JSON API only with bearer tokens
(never the cookie: the API is exempt from CSRF, so a cookie must not be enough there).
`requires(role)` guards a view for both; `authorize(actor, role)` is the service-level check.

The session holds the user's id and a stamp of the password hash (`User.get_id`), so a password
change or reset ends older sessions; a deactivated user's session and tokens stop at once. A user
who must change the password (the first admin's one-time password, an admin's reset) is sent to
the change-password page from every page, and the API refuses their tokens with 403.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from flask import Flask, g, jsonify, redirect, request, url_for
from flask_login import current_user
from werkzeug.exceptions import Forbidden, Unauthorized

from webui.extensions import db, login_manager
from webui.models import Role, User

F = TypeVar("F", bound=Callable[..., Any])

PUBLIC_ENDPOINTS = {"health.healthz", "static", "auth.login", "api.create_token"}
# what a user who must change the password may still open
CHANGE_PASSWORD_ENDPOINTS = {"account.password", "auth.logout"}


def init_app(app: Flask) -> None:
    login_manager.login_view = "auth.login"
    login_manager.login_message = "Please log in."
    login_manager.session_protection = "strong"

    @login_manager.user_loader
    def _load_user(session_id: str) -> User | None:
        user_id, _, stamp = session_id.partition(":")
        try:
            user = db.session.get(User, int(user_id))
        except ValueError:
            return None
        if user is None or not user.active or stamp != user.session_stamp:
            return None
        return user

    @app.before_request
    def _require_login():  # type: ignore[no-untyped-def]
        endpoint = request.endpoint or ""
        if endpoint in PUBLIC_ENDPOINTS or endpoint.startswith("static"):
            return None
        if is_api_request():
            from webui.services.tokens import TokenRefused

            try:
                user = user_from_bearer()
            except TokenRefused as exc:
                return api_error(exc.status, exc.code, exc.message)
            if user is None:
                return api_error(401, "unauthorized", "a valid bearer token is required (POST /api/v1/tokens)")
            g.api_user = user
            return None
        if not current_user.is_authenticated:
            return redirect(url_for("auth.login", next=request.full_path if request.method == "GET" else None))
        if current_user.must_change_password and endpoint not in CHANGE_PASSWORD_ENDPOINTS:
            return redirect(url_for("account.password"))
        return None


def is_api_request() -> bool:
    return request.path.startswith("/api/")


def user_from_bearer() -> User | None:
    """The bearer token's user; None without a bearer; `TokenRefused` says why a token is refused."""
    from webui.services import tokens

    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return tokens.authenticate(token.strip())


def current_actor() -> User | None:
    """The authenticated user of this request: the token's user on the API, else the session's."""
    if is_api_request():
        return g.get("api_user")
    return current_user if current_user.is_authenticated else None  # type: ignore[return-value]


def authorize(actor: User | None, needed: Role) -> User:
    """The service-level role check shared by pages and the API."""
    if actor is None:
        raise Unauthorized("log in first")
    if not actor.can(needed):
        raise Forbidden(f"this needs the {needed.value} role; you are {actor.role}")
    return actor


def requires(role: Role) -> Callable[[F], F]:
    """Guard a view (page or API) with `authorize(current_actor(), role)`."""

    def wrap(view: F) -> F:
        @functools.wraps(view)
        def inner(*args: Any, **kwargs: Any) -> Any:
            authorize(current_actor(), role)
            return view(*args, **kwargs)

        inner.required_role = role  # type: ignore[attr-defined]  # read by the route-coverage tests
        return inner  # type: ignore[return-value]

    return wrap


def api_error(status: int, code: str, message: str, **extra: Any):  # type: ignore[no-untyped-def]
    body = {"error": {"code": code, "message": message, **extra}}
    return jsonify(body), status
