"""The local lakehouse's roles as plain processes on 127.0.0.1 (CI has no Docker engine).

`docker-compose.yml` runs the real services in containers; this runs stand-ins for the same
roles and hands a command the same environment variables the compose file sets, so
`tests/stack` runs unchanged against either:

  role                   compose service          here
  Spark master + worker  spark-master/-worker     pip's `spark-class` (tests/support/spark_cluster.py)
  S3                     minio (+ minio-init)     a moto server (tests/support/moto_s3.py); the
                                                  bucket of CONSOLE_WAREHOUSE_ROOTS is created
  HBase Thrift1          hbase                    the in-memory stand-in (tests/support/hbase_server.py)
  PostgreSQL             postgres                 initdb + postgres in a temp dir (as the `postgres`
                                                  user when run as root: it refuses to run as root)
  console, job runner    console(-migrate)/worker gunicorn + `hoodie-console worker`, only when the
                                                  console package (`webui`) is importable

Values (bucket, keys, console login) are read from `.env.example`, whose defaults the compose
file shares (tests/stack_config checks they agree). Every process is bounded: start-up steps
time out, the command gets --timeout seconds, and everything is stopped on the way out.

What `docker compose kill worker` / `docker compose start worker` do to the stack, a small HTTP
server on 127.0.0.1 does to these processes (`STACK_CONTROL_URL`, used through
tests/support/stack_control.py): `POST /services/worker/kill` SIGKILLs the job runner's process
group (the runner, its JVM, its Python workers), `POST /services/worker/start` starts a new one.

    python -m tests.support.process_stack [--timeout S] [--no-console] -- COMMAND [ARG...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.spark_cluster import free_port, spark_cluster, stop_process_group, wait_group_gone

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120.0


class StackError(RuntimeError):
    """A role did not come up; the message carries what its log said."""


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a .env file (comments and blank lines skipped; no quoting rules)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            if not sep:
                raise ValueError(f"{path}: not KEY=VALUE: {line!r}")
            out[key.strip()] = value.strip()
    return out


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


def _wait(what: str, check, proc: subprocess.Popen | None, log: Path | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc is not None and proc.poll() is not None:
            raise StackError(f"{what}: exited with {proc.returncode}\n{_tail(log) if log else ''}")
        if time.monotonic() > deadline:
            raise StackError(f"{what}: not up after {timeout:.0f}s\n{_tail(log) if log else ''}")
        time.sleep(0.3)


# -- PostgreSQL -------------------------------------------------------------------------------

def find_pg_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin holding `postgres`, else pg_config's bindir."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if versions:
        return versions[-1].parent
    pg_config = shutil.which("pg_config")
    if pg_config:
        bindir = Path(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip())
        if (bindir / "postgres").is_file():
            return bindir
    return None


@dataclass
class Postgres:
    url: str
    port: int
    root: Path
    bindir: Path
    as_user: list[str]
    proc: subprocess.Popen | None = None

    def stop(self) -> None:
        if self.proc is None:
            return
        subprocess.run([*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"),
                        "stop", "-m", "fast", "-w", "-t", "20"], capture_output=True, timeout=30)
        stop_process_group(self.proc, grace=5.0)
        self.proc = None


@contextmanager
def postgres_server(user: str, password: str, database: str, timeout: float = START_TIMEOUT) -> Iterator[Postgres]:
    """A PostgreSQL server on 127.0.0.1 (free port) with `database` owned by `user`."""
    bindir = find_pg_bindir()
    if bindir is None:
        raise StackError("PostgreSQL not found (apt-get install -y postgresql)")
    root = Path(tempfile.mkdtemp(prefix="hoodie-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root: run it as the postgres system user
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres", "postgres")
    (root / "pw").write_text(password + "\n")
    if as_user:
        shutil.chown(root / "pw", "postgres", "postgres")
    port = free_port()
    server = Postgres(f"postgresql+psycopg://{user}:{password}@127.0.0.1:{port}/{database}",
                      port, root, bindir, as_user)
    log = root / "postgres.log"
    try:
        init = subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(root / "data"), "-U", user,
                               f"--pwfile={root / 'pw'}", "--auth=scram-sha-256", "--no-sync",
                               "--encoding=UTF8", "--no-locale"],
                              capture_output=True, text=True, timeout=timeout)
        if init.returncode != 0:
            raise StackError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
        with log.open("wb") as out:
            server.proc = subprocess.Popen(
                [*as_user, str(bindir / "postgres"), "-D", str(root / "data"), "-h", "127.0.0.1",
                 "-p", str(port), "-k", str(root), "-c", "fsync=off", "-c", "full_page_writes=off"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        env = {**os.environ, "PGPASSWORD": password}

        def ready() -> bool:
            probe = [str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port), "-U", user, "-d", "postgres"]
            return subprocess.run(probe, capture_output=True, env=env).returncode == 0

        _wait("postgres", ready, server.proc, log, timeout)
        made = subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", user, database],
                              capture_output=True, text=True, env=env, timeout=30)
        if made.returncode != 0:
            raise StackError(f"createdb failed: {made.stderr}")
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


# -- the console (only once the console package exists) --------------------------------------

def console_available() -> bool:
    return importlib.util.find_spec("webui") is not None


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class Processes:
    """Long-running children, each in its own process group with its log in `root`; each can be
    killed and started again (as `docker compose kill` / `start` do to a service)."""

    root: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    specs: dict[str, tuple[list[str], dict[str, str]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, name: str, args: list[str], env: Mapping[str, str]) -> subprocess.Popen:
        mode = "ab" if name in self.specs else "wb"  # a restart appends to the service's log
        with (self.root / f"{name}.log").open(mode) as log:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    cwd=self.root, env=dict(env), start_new_session=True)
        self.procs[name] = proc
        self.specs[name] = (list(args), dict(env))
        return proc

    def log(self, name: str) -> Path:
        return self.root / f"{name}.log"

    def kill(self, name: str) -> int:
        """SIGKILL the service's whole process group and reap it; its pid."""
        with self.lock:
            proc = self.procs[name]
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(30)
                wait_group_gone(proc.pid, 10.0)  # its JVM and Python workers too, as a killed container
            return proc.pid

    def start_again(self, name: str) -> tuple[int, bool]:
        """Start the service if it is not running (as `docker compose start`); (pid, started)."""
        with self.lock:
            proc = self.procs[name]
            if proc.poll() is None:
                return proc.pid, False
            args, env = self.specs[name]
            return self.start(name, args, env).pid, True

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            stop_process_group(self.procs.pop(name), grace=15.0)


class ControlServer:
    """`POST /services/<name>/kill|start` on 127.0.0.1 for the stack's long-running processes
    (tests/support/stack_control.py is the client). Answers JSON: {service, pid, started}."""

    def __init__(self, processes: Processes) -> None:
        procs = processes

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                parts = self.path.strip("/").split("/")
                if len(parts) != 3 or parts[0] != "services" or parts[2] not in ("kill", "start"):
                    return self._answer(404, {"error": f"no such control: {self.path}"})
                name, verb = parts[1], parts[2]
                if name not in procs.procs:
                    return self._answer(404, {"error": f"no such service: {name}"})
                if verb == "kill":
                    return self._answer(200, {"service": name, "pid": procs.kill(name), "started": False})
                pid, started = procs.start_again(name)
                return self._answer(200, {"service": name, "pid": pid, "started": started})

            def _answer(self, status: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="stack-control", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def start_console(env: dict[str, str], processes: Processes, timeout: float = START_TIMEOUT) -> str:
    """Migrate the database, start gunicorn and the job runner; return the console's URL."""
    bindir = Path(sys.executable).parent
    migrate = subprocess.run([str(bindir / "hoodie-console"), "db", "upgrade"], env=env, cwd=processes.root,
                             capture_output=True, text=True, timeout=timeout)
    if migrate.returncode != 0:
        raise StackError(f"hoodie-console db upgrade failed:\n{migrate.stdout}\n{migrate.stderr}")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    gunicorn = processes.start("console", [str(bindir / "gunicorn"), "webui:create_app()", "-b", f"127.0.0.1:{port}",
                                           "-w", "2", "--threads", "4"], env)
    _wait("console /healthz", lambda: _http_ok(f"{url}/healthz"), gunicorn, processes.log("console"), timeout)
    worker = processes.start("worker", [str(bindir / "hoodie-console"), "worker"], env)
    time.sleep(1.0)
    if worker.poll() is not None:
        raise StackError(f"hoodie-console worker exited with {worker.returncode}\n{_tail(processes.log('worker'))}")
    return url


# -- the stack --------------------------------------------------------------------------------

@contextmanager
def process_stack(with_console: bool | None = None, timeout: float = START_TIMEOUT) -> Iterator[dict[str, str]]:
    """Start every role; yield the environment variables that point at them (compose's names)."""
    from tests.support.hbase_server import HBaseStandIn
    from tests.support.moto_s3 import start_moto_s3

    defaults = read_env_file(REPO / ".env.example")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's per-request lines
    if with_console is None:
        with_console = console_available()
    python = sys.executable
    root = Path(tempfile.mkdtemp(prefix="hoodie-stack-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, root, True)
        s3 = start_moto_s3()
        stack.callback(s3.stop)
        s3.access_key, s3.secret_key = defaults["LAKEHOUSE_ACCESS_KEY"], defaults["LAKEHOUSE_SECRET_KEY"]
        s3.region = defaults["LAKEHOUSE_REGION"]
        s3.create_bucket(defaults["LAKEHOUSE_BUCKET"])  # what minio-init does

        hbase = HBaseStandIn()
        stack.callback(hbase.stop)

        pg = stack.enter_context(postgres_server(defaults["POSTGRES_USER"], defaults["POSTGRES_PASSWORD"],
                                                 defaults["POSTGRES_DB"], timeout))

        # Apps get one core each by default (as SPARK_MASTER_OPTS does in the compose file), so
        # the job runner and a test driver can run side by side.
        cores = 2 if with_console else 1
        cluster = stack.enter_context(spark_cluster(
            cores=cores, memory=f"{cores}g", timeout=timeout,
            env={"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python,
                 "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false -Dspark.deploy.defaultCores=1"}))

        env = {
            "SPARK_MASTER": cluster.master_url,
            "PYSPARK_PYTHON": python,
            "PYSPARK_DRIVER_PYTHON": python,
            "SPARK_LOCAL_IP": "127.0.0.1",  # process stack only: drivers bind to loopback
            **s3.env(),
            "HBASE_THRIFT_HOST": hbase.host,
            "HBASE_THRIFT_PORT": str(hbase.port),
            "DATABASE_URL": pg.url,
            "CONSOLE_SECRET_KEY": defaults["CONSOLE_SECRET_KEY"],
            "CONSOLE_WAREHOUSE_ROOTS": f"s3://{defaults['LAKEHOUSE_BUCKET']}/warehouse",
            "CONSOLE_ADMIN_USER": defaults["CONSOLE_ADMIN_USER"],
            "CONSOLE_ADMIN_PASSWORD": defaults["CONSOLE_ADMIN_PASSWORD"],
            "CONSOLE_MAX_UPLOAD_MB": defaults["CONSOLE_MAX_UPLOAD_MB"],
        }
        if with_console:
            processes = Processes(root)
            stack.callback(processes.stop)
            env["CONSOLE_URL"] = start_console({**os.environ, **env}, processes, timeout)
            control = ControlServer(processes)
            stack.callback(control.stop)
            env["STACK_CONTROL_URL"] = control.url
        yield env


def run_command(command: list[str], env: Mapping[str, str], timeout: float) -> int:
    """Run `command` in its own process group; on timeout stop the group and return 124."""
    proc = subprocess.Popen(command, env=dict(env), start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"process_stack: {command[0]} timed out after {timeout:.0f}s", file=sys.stderr)
        stop_process_group(proc, grace=10.0)
        return 124
    except KeyboardInterrupt:
        stop_process_group(proc, grace=10.0)
        raise


def _interrupt(signum, frame) -> None:
    """SIGTERM (a CI timeout, `kill`) unwinds the stack as Ctrl-C does: every role is stopped."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.process_stack", description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds the command may run (default 900)")
    parser.add_argument("--no-console", action="store_true", help="do not start the console even if webui imports")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    with process_stack(with_console=False if args.no_console else None) as env:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(env.items()) 
                          if not any(word in k for word in ("PASSWORD", "SECRET", "DATABASE_URL")))
        print(f"process_stack: up in {time.monotonic() - started:.0f}s: {shown}", flush=True)
        return run_command(command, {**os.environ, **env}, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
