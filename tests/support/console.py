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
from typing import Any

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


SESSION_ACTIONS = ("auth.login", "auth.login_failed", "auth.logout")


def audit_rows(app: Flask, sessions: bool = False) -> list[tuple]:
    """(user, action, table, params, plan hash set?, outcome, job id) of every audit row, oldest first;
    logins, failed logins and logouts only with `sessions` (the other tests' logins are not their subject)."""
    import sqlalchemy as sa

    from webui.extensions import db
    from webui.models import AuditEntry

    with app.app_context():
        q = sa.select(AuditEntry).order_by(AuditEntry.id)
        if not sessions:
            q = q.where(AuditEntry.action.not_in(SESSION_ACTIONS))
        rows = db.session.scalars(q).all()
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




@dataclass
class MorFixture:
    """A merge-on-read table made by hand (`mor_table`): instants, the two file ids, file paths."""

    path: Path
    files: dict[str, str]  # label -> path relative to the table


def mor_table(path: Path, name: str = "rides") -> MorFixture:
    """A MERGE_ON_READ table (key id, ordering ts) built file by file with the engine's log-block
    encoders (`tests.support.mor_tables`), no Spark:

    - I1 deltacommit: base files of FID (a, b, c) and FID2 (d, e);
    - I2 deltacommit: log file v1 on FID (a, b updated; c deleted);
    - I3 deltacommit: log file v2 on FID (a updated);
    - I4 compaction requested: FID's slice (the base file and both log files), planned by the engine;
    - I5 deltacommit: log v1 of FID's new slice at I4 (b updated) and log v1 on FID2 (d updated).

    Snapshot: a3, b5, d5, e1. Read-optimized now: a1, b1, c1, d1, e1; after I4 runs: a3, b2, d1, e1.
    """
    from engine.services.compaction import plan_compaction
    from engine.table.compaction_plan import PLAN_MODEL
    from engine.table.meta_client import MetaClient
    from engine.timeline import avro_models
    from tests.support.mor_tables import FID2, I, MorTable

    t = MorTable(path, name=name)
    f: dict[str, str] = {}

    def sized(rel: str, **stat: Any) -> dict[str, Any]:
        size = (path / rel).stat().st_size
        return {"totalWriteBytes": size, "fileSizeInBytes": size, **stat}

    f["base"] = t.base_file(I[1], [("a", 1, "a1"), ("b", 1, "b1"), ("c", 1, "c1")])
    f["base2"] = t.base_file(I[1], [("d", 1, "d1"), ("e", 1, "e1")], file_id=FID2)
    t.commit(I[1], [f["base"], f["base2"]], stats={
        f["base"]: sized(f["base"], numWrites=3, numInserts=3), f["base2"]: sized(f["base2"], numWrites=2, numInserts=2)})
    base_name = f["base"].rpartition("/")[2]
    f["log1"] = t.log_file([t.parquet_block(I[2], [("a", 2, "a2"), ("b", 2, "b2")]), t.delete_block(I[2], ["c"])],
                           base_instant=I[1], version=1)
    t.commit(I[2], [f["log1"]], stats={f["log1"]: sized(
        f["log1"], numWrites=2, numUpdateWrites=2, numDeletes=1, prevCommit=I[1], logVersion=1, baseFile=base_name,
        logFiles=[f["log1"].rpartition("/")[2]])})
    f["log2"] = t.log_file([t.parquet_block(I[3], [("a", 3, "a3")])], base_instant=I[1], version=2)
    t.commit(I[3], [f["log2"]], stats={f["log2"]: sized(
        f["log2"], numWrites=1, numUpdateWrites=1, prevCommit=I[1], logVersion=2, baseFile=base_name,
        logFiles=[f["log1"].rpartition("/")[2], f["log2"].rpartition("/")[2]])})
    meta = MetaClient.open(str(path))
    plan = plan_compaction(meta, meta.timeline(), I[4])
    (path / ".hoodie" / f"{I[4]}.compaction.requested").write_bytes(avro_models.serialize(PLAN_MODEL, plan.to_record()))
    f["log3"] = t.log_file([t.parquet_block(I[5], [("b", 5, "b5")])], base_instant=I[4], version=1)
    f["log4"] = t.log_file([t.parquet_block(I[5], [("d", 5, "d5")], file_id=FID2)], base_instant=I[1], version=1,
                           file_id=FID2)
    t.commit(I[5], [f["log3"], f["log4"]], stats={
        f["log3"]: sized(f["log3"], numWrites=1, numUpdateWrites=1, prevCommit=I[4], logVersion=1, baseFile="",
                         logFiles=[f["log3"].rpartition("/")[2]]),
        f["log4"]: sized(f["log4"], numWrites=1, numUpdateWrites=1, prevCommit=I[1], logVersion=1,
                         baseFile=f["base2"].rpartition("/")[2], logFiles=[f["log4"].rpartition("/")[2]])})
    return MorFixture(path, f)
