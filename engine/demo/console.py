"""Register the demo's table in the admin console's database, so the pages it prints exist.

Uses the console's own registry service (`webui.services.tables`) in a script, with the same
environment as the console (DATABASE_URL, CONSOLE_WAREHOUSE_ROOTS); migrates the database
first, as `hoodie-console db upgrade` does. Without the console package installed it does
nothing and says so. Imports neither pyspark nor webui at import time.
"""

from __future__ import annotations

import importlib
import importlib.util


def register_table(path: str, name: str) -> str:
    """Register the table at `path` as `name` unless it already is; a line saying what happened."""
    if importlib.util.find_spec("webui") is None:
        return "the console is not installed (pip install -e '.[console]'): its pages are not available"
    import sqlalchemy as sa
    from flask_migrate import upgrade

    # imported by name: the engine's type check (mypy engine) stays out of the console's package
    create_app = importlib.import_module("webui").create_app
    db = importlib.import_module("webui.extensions").db
    TableEntry = importlib.import_module("webui.models").TableEntry  # noqa: N806
    audit = importlib.import_module("webui.services.audit")
    tables = importlib.import_module("webui.services.tables")

    # no first admin from here: the console creates it (and prints its password) when it starts
    app = create_app({"CONSOLE_BOOTSTRAP_ADMIN": False})
    with app.app_context():
        upgrade()
        entry = db.session.scalar(sa.select(TableEntry).where(TableEntry.name == name))
        if entry is not None:
            if entry.base_path != path:
                raise RuntimeError(f"the console already has a table named {name!r} at {entry.base_path}; "
                                   f"unregister it or run the demo with another --name")
            return f"table {name} is registered in the console ({_where(app)})"
        entry = tables.register_existing(path, name, None)
        audit.record(None, "table.register", "registered", table=name, params={"path": path, "demo": True})
        return f"registered table {name} in the console ({_where(app)})"


def _where(app) -> str:  # type: ignore[no-untyped-def]
    from sqlalchemy.engine import make_url

    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    return f"database {url.render_as_string(hide_password=True)}"
