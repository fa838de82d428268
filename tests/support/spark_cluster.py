"""A real Spark standalone cluster (one master, one worker) on 127.0.0.1 for tests.

Both daemons run in the foreground through pip's `spark-class`, each in its own process
group (so the executors and Python workers they fork go down with them), with logs in
a temp dir and every wait bounded by a timeout: a broken cluster fails the test, it
never hangs it.

Also here: `isolated_python`, a PYSPARK_PYTHON for executors that sees the venv's
packages but not the editable install of `engine`, so a test can prove the executors
import the engine from the zip the driver ships.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT = 120.0

# Environment variables that must not leak from the test process into the cluster: a
# PYTHONPATH pointing at the repo would make `engine` importable without shipping it.
_SCRUBBED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "SPARK_MASTER", "PYSPARK_SUBMIT_ARGS")


class ClusterError(RuntimeError):
    """The cluster did not come up (or a process died); the message carries the log tails."""


def find_spark_class() -> Path | None:
    """pip's `spark-class` next to this interpreter, else one on PATH; None if there is none."""
    local = Path(sys.executable).parent / "spark-class"
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which("spark-class")
    return Path(found) if found else None


def java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return True
    return shutil.which("java") is not None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """os.environ without Python/Spark path overrides, plus `extra`; pins Spark to 127.0.0.1."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.update(extra or {})
    return env


def isolated_python(directory: str | Path) -> Path:
    """Write and return an executable wrapper: this venv's interpreter without the editable `engine`.

    The venv has `engine` installed in editable mode: a `.pth` file in site-packages
    installs a meta-path finder that maps `engine` to the repo, from any cwd. So the plain
    venv interpreter would import the repo's `engine` on the executors whether or not the
    driver shipped it, and a test could not tell. Options considered:

    * `PYTHONNOUSERSITE` / `-s`: only drops the *user* site dir; the .pth is in the venv's.
    * `-I`: also implies `-E`, which ignores PYTHONPATH; Spark puts pyspark.zip/py4j and
      its own paths there, so the Python workers would not start.
    * A second venv without the editable install: honest but slow (minutes of pip).
    * `-S` (do not import `site`) and the venv's site-packages appended to PYTHONPATH: a
      PYTHONPATH entry is a plain sys.path entry, `.pth` files are only processed by
      `site.addsitedir`, so pyspark/pyarrow/pandas import as usual but the editable finder
      is never installed. Spark's PYTHONPATH entries stay first. This is the one used; the
      only other .pth in the venv is setuptools' distutils shim, which workers don't need.

    With this interpreter `engine` is importable only if something puts it on sys.path,
    which on an executor is the `engine.zip` that `ship_engine` adds with addPyFile.
    """
    paths = sysconfig.get_paths()
    site_dirs = list(dict.fromkeys([paths["purelib"], paths["platlib"]]))
    wrapper = Path(directory) / "python-no-editable"
    wrapper.write_text(
        "#!/bin/sh\n"
        "# The venv's python with its site-packages on PYTHONPATH but without running `site`,\n"
        "# so the editable install's .pth (which maps `engine` to the repo) is never processed.\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{":".join(site_dirs)}"\n'
        "export PYTHONPATH\n"
        f'exec "{sys.executable}" -S "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def _fetch_json(url: str, timeout: float = 5.0) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


def stop_process_group(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM the process group of `proc` (started with start_new_session), wait, then SIGKILL."""
    pgid = proc.pid  # start_new_session: the child leads its own group, so pgid == pid
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; give its children (executors, python daemons) time to follow
        wait_group_gone(pgid, wait)
        break
    try:  # stragglers that outlived the leader
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=10.0)
    except subprocess.TimeoutExpired:
        pass


def wait_group_gone(pgid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


@dataclass
class SparkCluster:
    """A running standalone master + worker; `master_url` is what a driver connects to."""

    master_url: str
    webui_url: str
    root: Path  # temp dir: logs/, work/ (worker), local/ (executor scratch, SparkFiles)
    env: dict[str, str]
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @property
    def work_dir(self) -> Path:
        return self.root / "work"

    @property
    def local_dir(self) -> Path:
        return self.root / "local"

    def state(self) -> dict[str, Any] | None:
        """The master's JSON status (workers, apps), or None if it does not answer."""
        return _fetch_json(f"{self.webui_url}/json/")

    def logs(self, lines: int = 40) -> str:
        """The tail of every log in the cluster (daemons and executors), for failure messages."""
        parts = [f"--- {p.relative_to(self.root)} ---\n{_tail(p, lines)}"
                 for p in sorted(self.log_dir.glob("*.log")) + sorted(self.work_dir.rglob("std*"))]
        return "\n".join(parts)

    def wait_until(self, what: str, check: Callable[[], bool], timeout: float = DEFAULT_TIMEOUT) -> None:
        """Poll `check` until true; fail with the logs if it times out or a daemon dies."""
        deadline = time.monotonic() + timeout
        while True:
            if check():
                return
            dead = {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}
            if dead:
                raise ClusterError(f"while waiting for {what}: {dead} exited\n{self.logs()}")
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}\n{self.logs()}")
            time.sleep(0.5)

    def start(self, name: str, spark_class: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        log = (self.log_dir / f"{name}.log").open("wb")
        try:
            self.processes[name] = subprocess.Popen(
                [str(spark_class), *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.root, env={**self.env, **(env or {})}, start_new_session=True,
            )
        finally:
            log.close()  # the child holds its own descriptor

    def stop(self) -> None:
        """Worker first (it stops its executors), then the master; safe to call twice."""
        for name in sorted(self.processes, key=lambda n: n != "worker"):
            stop_process_group(self.processes.pop(name))


@contextmanager
def spark_cluster(
    *,
    cores: int = 1,
    memory: str = "1g",
    daemon_memory: str = "256m",
    timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    spark_class: Path | None = None,
) -> Iterator[SparkCluster]:
    """Start a master and one worker (`cores`, `memory`) on 127.0.0.1; tear both down on exit.

    `env` is added to the daemons' environment (e.g. PYSPARK_PYTHON). Raises ClusterError
    if the master does not report an alive worker within `timeout` seconds.
    """
    spark_class = spark_class or find_spark_class()
    if spark_class is None:
        raise ClusterError("spark-class not found")
    root = Path(tempfile.mkdtemp(prefix="hoodie-cluster-"))
    for sub in ("logs", "work", "local", "conf"):
        (root / sub).mkdir()
    master_port, master_ui, worker_ui = free_port(), free_port(), free_port()
    cluster = SparkCluster(
        master_url=f"spark://127.0.0.1:{master_port}",
        webui_url=f"http://127.0.0.1:{master_ui}",
        root=root,
        env=clean_env({
            "SPARK_CONF_DIR": str(root / "conf"),  # empty: no stray spark-defaults.conf
            "SPARK_LOCAL_DIRS": str(root / "local"),
            "SPARK_DAEMON_MEMORY": daemon_memory,
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            **(env or {}),
        }),
    )
    try:
        cluster.start("master", spark_class, "org.apache.spark.deploy.master.Master",
                      "--host", "127.0.0.1", "--port", str(master_port), "--webui-port", str(master_ui))
        cluster.wait_until("the master web UI", lambda: (cluster.state() or {}).get("status") == "ALIVE",
                           timeout)
        cluster.start("worker", spark_class, "org.apache.spark.deploy.worker.Worker", cluster.master_url,
                      "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                      "--webui-port", str(worker_ui), "--work-dir", str(cluster.work_dir))
        cluster.wait_until("an alive worker", lambda: (cluster.state() or {}).get("aliveworkers", 0) >= 1,
                           timeout)
        yield cluster
    finally:
        cluster.stop()
        if os.environ.get("HOODIE_KEEP_CLUSTER_LOGS"):
            print(f"spark cluster logs kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


def run_driver(
    args: list[str], *, env: Mapping[str, str], cwd: str | Path, timeout: float = DEFAULT_TIMEOUT
) -> subprocess.CompletedProcess:
    """Run a driver process in its own process group; on timeout kill the group and raise."""
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cwd, env=dict(env), text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_process_group(proc, grace=5.0)
        out, err = proc.communicate()
        raise ClusterError(f"driver timed out after {timeout:.0f}s\nstdout:\n{out}\nstderr:\n{err[-8000:]}") from None
    return subprocess.CompletedProcess(args, proc.returncode, out, err)
