"""A throwaway PostgreSQL 15 server on 127.0.0.1 for the console's database tests.

The server binaries come from Debian's `postgresql` package (/usr/lib/postgresql/15/bin). The
server refuses to run as root, so as root it is initialised and started as the `postgres`
system user (`runuser -u postgres --`), in a temporary folder that user owns. Without the
binaries the tests are skipped, unless CI=true, where their absence is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

BIN_DIRS = ("/usr/lib/postgresql/15/bin",)


def _bin_dir() -> str | None:
    for d in BIN_DIRS:
        if os.path.exists(os.path.join(d, "initdb")) and os.path.exists(os.path.join(d, "pg_ctl")):
            return d
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_postgres() -> str:
    found = _bin_dir()
    if found is None:
        message = "PostgreSQL 15 server binaries not found in /usr/lib/postgresql/15/bin (apt-get install -y postgresql)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server; yields a SQLAlchemy URL (postgresql+psycopg://) of an empty database."""
    bindir = require_postgres()
    as_root = os.geteuid() == 0
    folder = tempfile.mkdtemp(prefix="console-pg-")
    data = os.path.join(folder, "data")
    prefix: list[str] = []
    if as_root:
        shutil.chown(folder, user="postgres", group="postgres")
        os.chmod(folder, 0o700)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()

    def run(*cmd: str) -> None:
        subprocess.run([*prefix, *cmd], check=True, capture_output=True, timeout=120)

    run(f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
    run(f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(folder, "server.log"), "-w", "-t", "60", "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off", "start")
    try:
        run(f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "console_test")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/console_test"
    finally:
        subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def fresh_database(url: str, name: str) -> str:
    """A new empty database on the same server (each test gets its own schema)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return url.rsplit("/", 1)[0] + "/" + name
