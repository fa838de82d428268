"""The host- and container-side helpers of the stack: the `stack-health` probe every app
container's healthcheck runs, `docker/stack_wait.py` (make up's wait and summary), and the
Makefile's answer when Docker is missing. All against local stand-ins on 127.0.0.1."""

from __future__ import annotations

import http.server
import importlib.util
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.stack_config.stack_checks import REPO, compose_config


def load(name: str):
    """A module of docker/ (not a package: its scripts are copied into images or run on the host)."""
    full = f"stack_docker_{name}"
    spec = importlib.util.spec_from_file_location(full, REPO / "docker" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[full] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


health = load("healthcheck")
wait = load("stack_wait")


@contextmanager
def http_server(routes: dict[str, tuple[int, bytes]]) -> Iterator[str]:
    """A bounded HTTP server on 127.0.0.1 answering `routes` (path -> (status, body))."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            status, body = routes.get(self.path, (404, b"not found"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def probe(*args: str) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, str(REPO / "docker" / "healthcheck.py"), "--timeout", "2", *args],
                          capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout.strip(), done.stderr.strip()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_probe():
    master = json.dumps({"status": "ALIVE", "aliveworkers": 2}).encode()
    with http_server({"/json/": (200, master), "/down": (503, b""), "/text": (200, b"ok")}) as url:
        assert probe("http", f"{url}/json/", "--json", "status=ALIVE", "--json", "aliveworkers=2") == (
            0, f"healthy: {url}/json/ HTTP 200", "")
        assert probe("http", f"{url}/json/", "--json", "status=STANDBY") == (
            1, "", f"unhealthy: {url}/json/: status is 'ALIVE', want 'STANDBY'")
        assert probe("http", f"{url}/down") == (1, "", f"unhealthy: {url}/down answered HTTP 503")
        assert probe("http", f"{url}/text", "--json", "a=b") == (1, "", f"unhealthy: {url}/text did not answer JSON")
        assert probe("http", f"{url}/text") == (0, f"healthy: {url}/text HTTP 200", "")
    code, out, err = probe("http", f"http://127.0.0.1:{closed_port()}/healthz")
    assert (code, out) == (1, "") and err.startswith("unhealthy: ") and "unreachable" in err


def test_tcp_probe():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        open_port = listener.getsockname()[1]
        shut = closed_port()
        assert probe("tcp", f"127.0.0.1:{open_port}") == (0, f"healthy: tcp 127.0.0.1:{open_port}", "")
        code, _, err = probe("tcp", f"127.0.0.1:{open_port}", f"127.0.0.1:{shut}")
        assert code == 1 and err.startswith(f"unhealthy: 127.0.0.1:{shut} refused")
        assert probe("tcp", "nohostport") == (1, "", "unhealthy: not HOST:PORT: 'nohostport'")


def test_proc_probe(tmp_path):
    for pid, args in {"1": [b"/usr/local/bin/python", b"/usr/local/bin/hoodie-console", b"worker"],
                      "42": [b"/usr/local/bin/stack-health", b"proc", b"hoodie-console worker"]}.items():
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(b"\0".join(args) + b"\0")
    assert health.check_proc("hoodie-console worker", tmp_path) == (
        "pid 1: /usr/local/bin/python /usr/local/bin/hoodie-console worker")
    (tmp_path / "1" / "cmdline").write_bytes(b"/usr/local/bin/gunicorn\0webui:create_app()\0")
    with pytest.raises(health.Unhealthy, match="no process runs 'hoodie-console worker'"):
        health.check_proc("hoodie-console worker", tmp_path)  # the probe's own command line does not count


# -- make up's wait -------------------------------------------------------------------------------

def row(service, name, state, health="", code=0, publishers=()):
    return {"Service": service, "Name": name, "State": state, "Health": health, "ExitCode": code,
            "Publishers": [{"URL": u, "TargetPort": t, "PublishedPort": p, "Protocol": "tcp"} for u, t, p in publishers]}


def all_up() -> list[dict]:
    return [
        row("console", "hoodie-console-1", "running", "healthy", publishers=[("127.0.0.1", 8000, 8000)]),
        row("console-migrate", "hoodie-console-migrate-1", "exited", code=0),
        row("hbase", "hoodie-hbase-1", "running", "healthy",
            publishers=[("127.0.0.1", 9090, 9090), ("127.0.0.1", 16010, 16010)]),
        row("minio", "hoodie-minio-1", "running", "healthy",
            publishers=[("127.0.0.1", 9000, 9000), ("127.0.0.1", 9001, 9001)]),
        row("minio-init", "hoodie-minio-init-1", "exited", code=0),
        row("postgres", "hoodie-postgres-1", "running", "healthy"),
        row("spark-master", "hoodie-spark-master-1", "running", "healthy",
            publishers=[("127.0.0.1", 8080, 8080), ("127.0.0.1", 7077, 7077)]),
        row("spark-worker", "hoodie-spark-worker-1", "running", "healthy", publishers=[("127.0.0.1", 8081, 8081)]),
        row("spark-worker", "hoodie-spark-worker-2", "running", "healthy", publishers=[("127.0.0.1", 8081, 8082)]),
        row("worker", "hoodie-worker-1", "running", "healthy"),
    ]


def test_services_of_the_compose_file():
    assert [(s.name, s.replicas, s.long_running) for s in wait.services_of(compose_config())] == [
        ("console", 1, True), ("console-migrate", 1, False), ("hbase", 1, True), ("minio", 1, True),
        ("minio-init", 1, False), ("postgres", 1, True), ("spark-master", 1, True), ("spark-worker", 2, True),
        ("worker", 1, True),
    ]


def test_assess():
    services = wait.services_of(compose_config())
    up = wait.assess(services, all_up())
    assert (up.ready, up.waiting, up.failed) == (True, [], [])

    starting = [r for r in all_up() if r["Name"] != "hoodie-spark-worker-2"]
    starting[0] = row("console", "hoodie-console-1", "running", "starting")
    starting[1] = row("console-migrate", "hoodie-console-migrate-1", "running")
    s = wait.assess(services, starting)
    assert (s.ready, s.failed) == (False, [])
    assert s.waiting == ["hoodie-console-1: running starting", "hoodie-console-migrate-1: running",
                         "spark-worker: 1 of 2 containers"]

    broken = all_up()
    broken[4] = row("minio-init", "hoodie-minio-init-1", "exited", code=1)
    broken[2] = row("hbase", "hoodie-hbase-1", "running", "unhealthy")
    assert wait.assess(services, broken).failed == ["hoodie-hbase-1: running unhealthy",
                                                    "hoodie-minio-init-1: exited with status 1"]
    assert wait.assess(services, []).waiting[:2] == ["console: 0 of 1 containers", "console-migrate: not started"]


def test_parse_ps_reads_both_output_forms():
    rows = all_up()[:2]
    assert wait.parse_ps("\n".join(json.dumps(r) for r in rows) + "\n") == rows  # Compose >= 2.21
    assert wait.parse_ps(json.dumps(rows)) == rows  # older: one array
    assert wait.parse_ps("") == []


def test_summary_prints_the_urls_and_the_login():
    assert wait.summary(compose_config(), all_up()) == [
        "  console           http://127.0.0.1:8000",
        "  Spark master UI   http://127.0.0.1:8080",
        "  Spark worker UI   http://127.0.0.1:8081",
        "  Spark worker UI   http://127.0.0.1:8082",
        "  Spark master      spark://127.0.0.1:7077",
        "  MinIO console     http://127.0.0.1:9001",
        "  MinIO S3 API      http://127.0.0.1:9000",
        "  HBase master UI   http://127.0.0.1:16010",
        "  HBase Thrift      127.0.0.1:9090",
        "  console login     admin / hoodie-admin-dev   (CONSOLE_ADMIN_USER / CONSOLE_ADMIN_PASSWORD in .env)",
    ]


# -- make without Docker ---------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["up", "down", "logs", "ps", "stack-test"])
def test_make_fails_with_one_clear_line_when_docker_is_missing(target):
    done = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), target, "DOCKER=/nonexistent/docker"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[0] == (
        "make: '/nonexistent/docker' not found: the local lakehouse needs Docker Engine with the Compose plugin "
        "(see docs/lakehouse.md)")


def test_make_up_fails_with_one_clear_line_when_no_engine_answers(tmp_path):
    fake = tmp_path / "docker"  # a client whose engine is down, as on our machines
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(0o755)
    done = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "up", f"DOCKER={fake}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[0] == (
        f"make: no Docker engine answers ('{fake} info' failed): start Docker, then retry")
