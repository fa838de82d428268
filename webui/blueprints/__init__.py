"""Thin views: parse the request, call a service, render (HTML) or answer (JSON)."""

from __future__ import annotations

from flask import Flask


def register(app: Flask) -> None:
    from webui.blueprints import (
        account,
        admin,
        api,
        audit,
        auth,
        browse,
        errors,
        health,
        jobs,
        services,
        tables,
        write,
    )
    from webui.extensions import csrf

    for module in (health, auth, tables, browse, write, services, jobs, audit, account, admin):
        app.register_blueprint(module.bp)
    csrf.exempt(api.bp)  # bearer tokens only (never the session cookie), so no CSRF exposure
    app.register_blueprint(api.bp)
    errors.register(app)
