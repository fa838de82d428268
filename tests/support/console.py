"""Console test helpers: an app on a fresh database made by the migrations, three users (one per
role), logged-in test clients, a hand-made table registered as `trips`, CSRF tokens, rows."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.support import handmade

PASSWORDS = {"admin": "admin-pass-1", "operator": "operator-pass-1", "viewer": "viewer-pass-1"}
_CSRF = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')


@dataclass
class Console:
    app: Flask
    root: Path
    table: handmade.Handmade

    def client(self, role: str | None = None) -> FlaskClient:
        client = self.app.test_client()
        if role is not None:
            login(client, role, PASSWORDS[role])
        return client


def csrf(client: FlaskClient, url: str = "/tables") -> str:
    page = client.get(url)
    found = _CSRF.search(page.get_data(as_text=True))
    assert found, f"no CSRF token on {url} ({page.status_code})"
    return found.group(1)


def login(client: FlaskClient, user: str, password: str) -> None:
    token = csrf(client, "/login")
    resp = client.post("/login", data={"csrf_token": token, "username": user, "password": password})
    assert resp.status_code == 302, resp.get_data(as_text=True)[:500]


def make_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str | None = None, **config) -> Flask:
    from flask_migrate import upgrade

    from webui import create_app
    from webui.services.snapshot import clear_cache

    clear_cache()
    root = tmp_path / "lake"
    root.mkdir(exist_ok=True)
    monkeypatch.setenv("CONSOLE_WAREHOUSE_ROOTS", str(root))
    monkeypatch.setenv("CONSOLE_SECRET_KEY", "test-secret-key")
    monkeypatch.setenv("DATABASE_URL", database_url or f"sqlite:///{tmp_path / 'console.db'}")
    monkeypatch.delenv("CONSOLE_ADMIN_USER", raising=False)
    monkeypatch.delenv("CONSOLE_ADMIN_PASSWORD", raising=False)
    app = create_app({"CONSOLE_BOOTSTRAP_ADMIN": False, "TESTING": True, **config})
    with app.app_context():
        upgrade()  # the schema comes from the migrations, never create_all
        from webui.services.users import create_user

        for role, password in PASSWORDS.items():
            create_user(role, password, role)
    return app


def make_console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str | None = None) -> Console:
    app = make_app(tmp_path, monkeypatch, database_url)
    table = handmade.create(str(tmp_path / "lake" / "trips"))
    handmade.add_commit(table, {"paris": ["new", "new"], "berlin": ["new"]})
    handmade.add_commit(table, {"paris": ["update:0"]})
    with app.app_context():
        from webui.services.tables import register_existing

        register_existing(table.path, "trips", None)
    return Console(app, tmp_path / "lake", table)


def audit_rows(app: Flask) -> list[tuple]:
    """(user, action, table, params, plan hash set?, outcome, job id) of every audit row, oldest first."""
    import sqlalchemy as sa

    from webui.extensions import db
    from webui.models import AuditEntry

    with app.app_context():
        rows = db.session.scalars(sa.select(AuditEntry).order_by(AuditEntry.id)).all()
        return [(r.username, r.action, r.table_name, r.params, r.plan_hash is not None, r.outcome, r.job_id) for r in rows]


def jobs_rows(app: Flask) -> list[tuple]:
    import sqlalchemy as sa

    from webui.extensions import db
    from webui.models import Job

    with app.app_context():
        return [(j.id, j.operation, j.state, j.created_by) for j in db.session.scalars(sa.select(Job).order_by(Job.id))]


def start_worker(tmp: Path, db_url: str, hold: str | None = None, *args: str) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": db_url, "CONSOLE_WAREHOUSE_ROOTS": str(tmp / "lake"),
           "CONSOLE_SECRET_KEY": "test-secret-key", "PYSPARK_PYTHON": sys.executable}
    env.pop("CONSOLE_TEST_HOLD_AT", None)
    if hold:
        env["CONSOLE_TEST_HOLD_AT"] = hold
    log = open(tmp / f"worker-{time.monotonic_ns()}.log", "w")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen([sys.executable, "-m", "webui.cli", "worker", "--master", "local[2]", "--poll", "0.2", *args],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            cwd=str(Path(__file__).resolve().parents[2]))


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


