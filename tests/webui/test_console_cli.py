"""The `hoodie-console` commands the Compose stack relies on: db upgrade, create-user, the first
admin (from the environment, or a one-time password printed once), and settings defaults."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[2]


def _run(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webui.cli", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=str(REPO), timeout=120)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSOLE_") and k != "DATABASE_URL"}
    env.update({"CONSOLE_WAREHOUSE_ROOTS": str(tmp_path / "lake"), **extra})
    return env


def _users(db_path: Path) -> list[tuple[str, str]]:
    engine = sa.create_engine(f"sqlite:///{db_path}")
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT username, role FROM users ORDER BY id")).all()
    engine.dispose()
    return [tuple(r) for r in rows]


def test_upgrade_then_first_admin_printed_once_then_create_user(tmp_path):
    env = _env(tmp_path)
    up = _run(["db", "upgrade"], env)
    assert up.returncode == 0, up.stderr
    db_path = tmp_path / "lake" / ".console" / "console.db"  # the default: under the first warehouse root
    assert db_path.exists()
    assert oct((tmp_path / "lake" / ".console" / "secret_key").stat().st_mode & 0o777) == "0o600"
    first = _run(["create-user", "bob", "--role", "viewer"], env, stdin="bob-password-1\n")
    assert first.returncode == 0, first.stderr
    assert "created user 'bob' (viewer)" in first.stdout
    assert "created the first admin 'admin' with the one-time password: " in first.stderr
    again = _run(["create-user", "eve", "--role", "operator"], env, stdin="short\n")
    assert again.returncode != 0 and "a password has at least 8 characters" in again.stderr
    assert "one-time password" not in again.stderr  # printed once, at the first start only
    assert _users(db_path) == [("admin", "admin"), ("bob", "viewer")]


def test_admin_from_the_environment_and_flask_cli(tmp_path):
    env = _env(tmp_path, CONSOLE_ADMIN_USER="root", CONSOLE_ADMIN_PASSWORD="root-password-1",
               DATABASE_URL=f"sqlite:///{tmp_path / 'c.db'}")
    flask = subprocess.run([sys.executable, "-m", "flask", "--app", "webui", "db", "upgrade"], capture_output=True,
                           text=True, env=env, cwd=str(REPO), timeout=120)
    assert flask.returncode == 0, flask.stderr
    made = _run(["create-user", "ops", "--role", "operator"], {**env, "CONSOLE_NEW_PASSWORD": "ops-password-1"})
    assert made.returncode == 0, made.stderr
    assert "one-time password" not in made.stderr and "root-password-1" not in made.stderr + made.stdout
    assert _users(tmp_path / "c.db") == [("root", "admin"), ("ops", "operator")]


def test_settings_defaults_and_roots():
    from webui.config import Settings, split_roots

    s = Settings.from_env({"CONSOLE_WAREHOUSE_ROOTS": "/data/a, s3://bucket/pre/ ,/data/b", "CONSOLE_SECRET_KEY": "k",
                           "CONSOLE_MAX_UPLOAD_MB": "5"})
    assert s.warehouse_roots == ("/data/a", "s3://bucket/pre", "/data/b")
    assert s.database_url == "sqlite:////data/a/.console/console.db"
    assert s.flask_config()["MAX_CONTENT_LENGTH"] == 5 * 1024 * 1024
    assert s.spark_master == "local[*]" and s.port == 8000 and s.secure_cookies is False
    s3_only = Settings.from_env({"CONSOLE_WAREHOUSE_ROOTS": "s3://b/p", "CONSOLE_SECRET_KEY": "k",
                                 "DATABASE_URL": "postgresql+psycopg://u:pw@db/console", "CONSOLE_SECURE_COOKIES": "true"})
    assert s3_only.database_url == "postgresql+psycopg://u:pw@db/console"
    assert s3_only.flask_config()["SESSION_COOKIE_SECURE"] is True
    with_admin = Settings.from_env({"CONSOLE_SECRET_KEY": "very-secret-key", "CONSOLE_ADMIN_PASSWORD": "admin-pw-123",
                                    "DATABASE_URL": "postgresql+psycopg://u:db-pw-456@db/console"})
    text = repr(with_admin)
    assert "very-secret-key" not in text and "admin-pw-123" not in text and "db-pw-456" not in text
    assert split_roots("./lakehouse") == [os.path.abspath("./lakehouse")]


def test_worker_health_follows_this_hosts_runner_in_the_database(tmp_path):
    """`hoodie-console worker-health` (the worker container's healthcheck): exit 1 until a runner
    of this host that runs (pid and start time) has beaten within --max-age, then 0."""
    import socket
    from datetime import UTC, datetime, timedelta

    from webui.jobs.claim import process_start

    db_path = tmp_path / "c.db"
    env = _env(tmp_path, DATABASE_URL=f"sqlite:///{db_path}", CONSOLE_SECRET_KEY="k")
    assert _run(["db", "upgrade"], env).returncode == 0
    host = socket.gethostname()
    none = _run(["worker-health"], env)
    assert (none.returncode, none.stderr.strip()) == (1, f"no live job runner of host {host} in the database")

    engine = sa.create_engine(f"sqlite:///{db_path}")
    now = datetime.now(UTC).replace(tzinfo=None)
    insert = sa.text("INSERT INTO workers (id, host, pid, process_start, started_at, heartbeat_at, stopped) "
                     "VALUES (:id, :host, :pid, :start, :at, :beat, 0)")
    with engine.begin() as conn:  # a runner whose pid is ours but whose process is not: a restart
        conn.execute(insert, {"id": "before-restart", "host": host, "pid": os.getpid(), "start": "other-boot:1",
                              "at": now - timedelta(minutes=2), "beat": now})
    stale = _run(["worker-health"], env)
    assert (stale.returncode, stale.stderr.strip()) == (1, f"no live job runner of host {host} in the database")
    with engine.begin() as conn:  # this process, 40 s silent
        conn.execute(insert, {"id": "silent", "host": host, "pid": os.getpid(), "start": process_start(os.getpid()),
                              "at": now - timedelta(minutes=1), "beat": now - timedelta(seconds=40)})
    silent = _run(["worker-health"], env)  # (each run takes a second or two: 40 s and a little)
    assert silent.returncode == 1
    assert re.fullmatch(r"job runner silent runs but its last heartbeat is 4[0-9]s old", silent.stderr.strip())
    relaxed = _run(["worker-health", "--max-age", "60"], env)
    assert relaxed.returncode == 0 and re.fullmatch(r"job runner silent beat 4[0-9]s ago", relaxed.stdout.strip())
    engine.dispose()


def test_serve_answers_healthz_and_the_login_page(tmp_path):
    """`hoodie-console serve` really serves (it used to return at once: Flask ignores app.run()
    under its own CLI)."""
    import socket
    import time
    import urllib.error
    import urllib.request

    env = _env(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'c.db'}")
    assert _run(["db", "upgrade"], env).returncode == 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "webui.cli", "serve", "--port", str(port)], env=env, cwd=str(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=5) as resp:
                    status, body = resp.status, resp.read().decode()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.3)
        assert proc.poll() is None, f"serve exited with {proc.returncode}: {proc.stdout.read() if proc.stdout else ''}"
        assert status == 200 and "<form" in body
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
            health = 200
        except urllib.error.HTTPError as exc:  # 503 without a job runner: still an answer
            health = exc.code
        assert health in (200, 503)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
