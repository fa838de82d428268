"""The console's database on SQLite and on a real PostgreSQL 15: the migrations make the schema,
the audit log refuses changes, job claims are atomic (two runners never claim the same job),
and a dead runner's jobs are failed with a reason while queued ones survive."""

from __future__ import annotations

import os
import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from tests.support.console import make_app
from tests.support.postgres import fresh_database, postgres_server


@pytest.fixture(scope="module")
def pg_server():
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def app(request, tmp_path, monkeypatch):
    url = None
    if request.param == "postgresql":
        url = fresh_database(request.getfixturevalue("pg_server"), f"t_{os.getpid()}_{abs(hash(request.node.name)) % 10**8}")
    app = make_app(tmp_path, monkeypatch, url)
    yield app
    from webui.extensions import db

    with app.app_context():
        db.engine.dispose()


def _queue(app, n: int) -> list[int]:
    from webui.services import jobs

    with app.app_context():
        return [jobs.enqueue(None, None, "clean", {"n": i}).id for i in range(n)]


def test_schema_comes_from_the_migrations(app):
    from webui.extensions import db

    with app.app_context():
        names = set(sa.inspect(db.engine).get_table_names())
        version = db.session.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one()
    assert names == {"alembic_version", "api_tokens", "audit_log", "jobs", "login_attempts", "rate_limits", "tables",
                     "uploads", "users", "workers"}
    assert version == "0005"
    with app.app_context():
        worker_columns = [c["name"] for c in sa.inspect(db.engine).get_columns("workers")]
        job_columns = [c["name"] for c in sa.inspect(db.engine).get_columns("jobs")]
        job_uniques = [u["column_names"] for u in sa.inspect(db.engine).get_unique_constraints("jobs")]
    assert worker_columns == ["id", "host", "pid", "started_at", "heartbeat_at", "stopped", "process_start"]
    assert job_columns[-1] == "dedupe_key" and job_uniques == [["dedupe_key"]]


def test_the_models_match_the_migrations(app):
    """Alembic's autogenerate finds nothing to add: every model column (0003's credentials
    columns and login_attempts included) exists in the migrated schema, with its type and nullability."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from webui.extensions import db

    with app.app_context(), db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), db.metadata)
    assert diff == []


def test_0003_keeps_every_row_both_ways(app):
    """Down to 0002 and up again on a database with users and tokens: no row is lost (on SQLite
    a rebuilt `users` table would cascade-delete the tokens), existing users need no password
    change and are not locked, and existing tokens never expire (expires_at stays null)."""
    from flask_migrate import downgrade, upgrade

    from webui.extensions import db

    insert = ("INSERT INTO api_tokens (user_id, token_hash, created_at, revoked) "
              "VALUES (1, :h, '2026-01-01 00:00:00', false)")
    with app.app_context():
        db.session.execute(sa.text(insert), {"h": "h1"})
        db.session.commit()
        db.session.close()
        downgrade(revision="0002")
        assert db.session.execute(sa.text("SELECT token_hash FROM api_tokens")).scalars().all() == ["h1"]
        db.session.execute(sa.text(insert), {"h": "h2"})
        db.session.commit()
        db.session.close()
        upgrade()
        users = db.session.execute(sa.text("SELECT username, must_change_password, locked_until FROM users "
                                           "ORDER BY id")).all()
        tokens = db.session.execute(sa.text("SELECT token_hash, expires_at, revoked_at FROM api_tokens "
                                            "ORDER BY id")).all()
    assert [(u[0], bool(u[1]), u[2]) for u in users] == [
        ("admin", False, None), ("operator", False, None), ("viewer", False, None)]
    assert [tuple(t) for t in tokens] == [("h1", None, None), ("h2", None, None)]


def test_audit_rows_cannot_be_changed_below_the_orm(app):
    from webui.extensions import db
    from webui.services import audit

    with app.app_context():
        audit.record(None, "x", "done")
        for statement in ("UPDATE audit_log SET outcome = 'changed'", "DELETE FROM audit_log"):
            with pytest.raises(sa.exc.DatabaseError, match="append-only"), db.engine.begin() as conn:
                conn.execute(sa.text(statement))
        assert db.session.execute(sa.text("SELECT outcome FROM audit_log")).scalars().all() == ["done"]


def test_two_runners_never_claim_the_same_job(app):
    from webui.extensions import db
    from webui.jobs.claim import claim_next

    ids = _queue(app, 120)
    with app.app_context():
        engine = db.engine
    claims: dict[str, list[int]] = {}
    start = threading.Barrier(4)

    def runner(name: str) -> None:
        mine: list[int] = []
        start.wait()
        with Session(engine) as session:
            while (job_id := claim_next(session, name)) is not None:
                mine.append(job_id)
        claims[name] = mine

    threads = [threading.Thread(target=runner, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    claimed = [j for mine in claims.values() for j in mine]
    assert sorted(claimed) == ids  # every job once, none twice
    with app.app_context():
        rows = db.session.execute(sa.text("SELECT id, state, worker_id FROM jobs ORDER BY id")).all()
    owner = {j: name for name, mine in claims.items() for j in mine}
    assert [(r[0], r[1], r[2]) for r in rows] == [(j, "running", owner[j]) for j in ids]
    assert len(claims) == 4


def test_dead_runner_jobs_fail_and_queued_jobs_survive(app):
    from webui.extensions import db
    from webui.jobs.claim import claim_next, fail_orphans
    from webui.models import Job, Worker, utcnow

    ids = _queue(app, 3)
    with app.app_context():
        db.session.add(Worker(id="dead-local", host=__import__("socket").gethostname(), pid=2**22 + 7))
        db.session.add(Worker(id="silent", host="elsewhere", pid=1, heartbeat_at=utcnow() - timedelta(minutes=5)))
        db.session.add(Worker(id="alive", host="elsewhere", pid=1, heartbeat_at=utcnow()))
        db.session.commit()
        assert claim_next(db.session, "dead-local") == ids[0]
        assert claim_next(db.session, "silent") == ids[1]
        # the third stays queued; a runner on another host that still beats keeps its job
        alive_job = _queue(app, 1)[0]
        db.session.execute(sa.update(Job).where(Job.id == alive_job).values(state="running", worker_id="alive"))
        db.session.commit()
        assert fail_orphans(db.session, me="new") == [ids[0], ids[1]]
        jobs = {j.id: (j.state, j.error) for j in db.session.scalars(sa.select(Job))}
    assert jobs[ids[0]][0] == "failed" and jobs[ids[0]][1].startswith(
        f"its job runner dead-local (pid {2**22 + 7}) died while the job was running.")
    assert jobs[ids[1]][0] == "failed" and jobs[ids[1]][1].startswith("its job runner silent stopped beating at ")
    assert jobs[ids[2]] == ("queued", None)
    assert jobs[alive_job] == ("running", None)


def test_a_pid_reused_after_a_restart_does_not_keep_a_dead_runners_job(app):
    """A restarted container runs its runner under its predecessor's pid on the same host name:
    the live pid belongs to another process (here: this one), so the job fails at once, without
    waiting for the heartbeat to go stale; the process that really has the pid keeps its job."""
    import socket

    from webui.extensions import db
    from webui.jobs.claim import claim_next, fail_orphans, process_start
    from webui.models import Job, Worker, utcnow

    me, host = os.getpid(), socket.gethostname()
    mine = process_start(me)
    assert mine is not None and mine.count(":") == 1
    boot, ticks = mine.split(":")
    ids = _queue(app, 2)
    with app.app_context():
        db.session.add(Worker(id="predecessor", host=host, pid=me, process_start=f"{boot}:{int(ticks) - 1}",
                              heartbeat_at=utcnow()))
        db.session.add(Worker(id="the-real-one", host=host, pid=me, process_start=mine, heartbeat_at=utcnow()))
        db.session.commit()
        assert claim_next(db.session, "predecessor") == ids[0]
        assert claim_next(db.session, "the-real-one") == ids[1]
        assert fail_orphans(db.session, me="successor") == [ids[0]]
        jobs = {j.id: (j.state, j.error) for j in db.session.scalars(sa.select(Job))}
    assert jobs[ids[0]][0] == "failed" and jobs[ids[0]][1].startswith(
        f"its job runner predecessor (pid {me}, now another process) died while the job was running.")
    assert jobs[ids[1]] == ("running", None)


def test_process_start_is_none_for_a_pid_nobody_has():
    from webui.jobs.claim import process_start

    assert process_start(2**22 + 7) is None
