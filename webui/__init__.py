"""hoodie admin console: a Flask app to browse Hudi tables and act on them safely.

`create_app(config=None)` builds the app (gunicorn: `gunicorn 'webui:create_app()'`).
Web requests never import pyspark: browsing reads metadata through the engine's Spark-free
modules, and everything that needs Spark (writes, data previews) or changes a table (table
services) is a job that the job runner (`hoodie-console worker`) executes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask

from webui.config import Settings

log = logging.getLogger("webui")

CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The console app; `config` overrides the settings read from the environment."""
    settings = Settings.from_env()
    app = Flask(__name__, instance_path=settings.instance_dir, instance_relative_config=False)
    app.config.update(settings.flask_config())
    app.config["CONSOLE_BOOTSTRAP_ADMIN"] = True
    if config:
        app.config.update(config)

    from webui.extensions import csrf, db, login_manager, migrate

    db.init_app(app)
    migrate.init_app(app, db, directory=_migrations_dir(), render_as_batch=True)
    login_manager.init_app(app)
    csrf.init_app(app)
    _sqlite_pragmas(app)
    from webui import ratelimit

    ratelimit.init_app(app)  # after CSRFProtect: a POST without a valid token is refused before it counts

    from webui import auth, blueprints, commands, filters

    auth.init_app(app)
    blueprints.register(app)
    filters.register(app)
    commands.register_flask_commands(app)

    @app.after_request
    def _security_headers(response):  # type: ignore[no-untyped-def]
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    if app.config.get("CONSOLE_BOOTSTRAP_ADMIN"):
        with app.app_context():
            from webui.services.users import bootstrap_admin

            bootstrap_admin(app)
    return app


def _migrations_dir() -> str:
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations")


def _sqlite_pragmas(app: Flask) -> None:
    """SQLite: WAL (the web process reads while the worker writes) and foreign keys."""
    if not str(app.config["SQLALCHEMY_DATABASE_URI"]).startswith("sqlite"):
        return
    import os

    from sqlalchemy import event

    from webui.extensions import db

    uri = str(app.config["SQLALCHEMY_DATABASE_URI"])
    path = uri.split(":///", 1)[1] if ":///" in uri else ""
    if path and path != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with app.app_context():
        engine = db.engine

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()
