"""Errors answer JSON on the API and a page elsewhere (413 for too-large uploads, CSRF as 400)."""

from __future__ import annotations

from flask import Flask, render_template
from flask_limiter import RateLimitExceeded
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException

from webui.auth import api_error, is_api_request
from webui.services.jobs import QueueFullError

MESSAGES = {
    400: "The request was not valid.",
    401: "Log in first.",
    403: "Your role does not allow this.",
    404: "Not found.",
    405: "This address does not accept that method.",
    409: "Conflict.",
    413: "The upload is too large.",
    429: "Too many attempts: wait a minute and try again.",
    500: "Something went wrong on the server.",
}


def register(app: Flask) -> None:
    @app.errorhandler(CSRFError)
    def _csrf(exc: CSRFError):  # type: ignore[no-untyped-def]
        message = f"The form's security token is missing or expired ({exc.description}). Reload the page and try again."
        return _answer(400, message)

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException):  # type: ignore[no-untyped-def]
        if isinstance(exc, RateLimitExceeded) and exc.response is not None:
            return exc.response  # the limit's own answer (`ratelimit._throttled`)
        code = exc.code or 500
        message = exc.description if code not in (500,) else MESSAGES[500]
        if code == 413:
            limit = app.config.get("MAX_CONTENT_LENGTH") or 0
            from webui.filters import human_bytes

            message = f"The upload is larger than the limit of {human_bytes(limit)} (CONSOLE_MAX_UPLOAD_MB)."
        if code == 429 and not isinstance(exc, QueueFullError):  # Flask-Limiter's: say it plainly
            message = MESSAGES[429]
        return _answer(code, message)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):  # type: ignore[no-untyped-def]
        app.logger.exception("unexpected error")
        return _answer(500, MESSAGES[500])


def _answer(code: int, message: str):  # type: ignore[no-untyped-def]
    if is_api_request():
        return api_error(code, {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                                405: "method_not_allowed", 409: "conflict", 413: "too_large", 429: "too_many_requests"}
                         .get(code, "error"), message)
    return render_template("error.html", code=code, title=MESSAGES.get(code, "Error"), message=message), code
