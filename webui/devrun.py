"""`make run`: the console and its job runner on the embedded defaults, in the foreground.

Migrates the SQLite database, creates the admin (password kept in the instance folder so that
every `make run` can print it), seeds the demo table, starts gunicorn and the job runner, prints
the URL and the login, and stops both on Ctrl-C or SIGTERM within STOP_S seconds: gunicorn
finishes its requests (its graceful timeout), the job runner cancels a running job or marks it
interrupted (`webui.jobs.runner`), and whatever is left after that is killed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time

STOP_S = 4.0  # seconds Ctrl-C waits for gunicorn and the job runner before killing what is left


def _dev_password(instance: str) -> str:
    path = os.path.join(instance, "dev-admin-password")
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    os.makedirs(instance, exist_ok=True)
    value = secrets.token_urlsafe(9)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value)
    return value


def run(host: str, port: int | None) -> int:
    from webui.config import Settings

    settings = Settings.from_env()
    port = port or settings.port
    user = os.environ.setdefault("CONSOLE_ADMIN_USER", "admin")
    password = os.environ.get("CONSOLE_ADMIN_PASSWORD") or _dev_password(settings.instance_dir)
    os.environ["CONSOLE_ADMIN_PASSWORD"] = password

    from flask_migrate import upgrade

    from webui import create_app

    app = create_app({"CONSOLE_BOOTSTRAP_ADMIN": False})
    with app.app_context():
        upgrade()
        from webui.services.demo import seed_demo
        from webui.services.users import bootstrap_admin, find

        bootstrap_admin(app)
        admin = find(user)
        password_ok = admin is not None and admin.check_password(password)
        print(seed_demo(), flush=True)

    def _terminate(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops both children like Ctrl-C

    signal.signal(signal.SIGTERM, _terminate)
    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable)) or "gunicorn"
    # each child in a process group of its own: Ctrl-C reaches this process only, which stops them
    # in order (a terminal's SIGINT to every process at once had gunicorn, its workers, the job
    # runner and its JVM all shutting down over each other)
    web = subprocess.Popen([gunicorn, "-b", f"{host}:{port}", "-w", "2", "--threads", "4", "--access-logfile", "-",
                            "--graceful-timeout", str(int(STOP_S)), "webui:create_app()"], start_new_session=True)
    worker = subprocess.Popen([sys.executable, "-m", "webui.cli", "worker"], start_new_session=True)
    time.sleep(1.5)
    print("\n" + "=" * 64)
    print(f"  hoodie console:  http://{host}:{port}/")
    if password_ok:
        print(f"  log in as:       {user} / {password}")
    else:
        print(f"  log in as:       {user} (its password was changed or set before; not shown)")
    print("  job runner:      running (local Spark); Ctrl-C stops both")
    print("=" * 64 + "\n", flush=True)
    try:
        while web.poll() is None and worker.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the shutdown short
    stop_children((web, worker), STOP_S)
    print("hoodie console stopped", flush=True)
    return 0


def stop_children(procs: tuple[subprocess.Popen, ...], grace: float) -> None:
    """SIGTERM each child's process group (gunicorn and its workers; the job runner and its JVM),
    wait up to `grace` seconds in all, then SIGKILL what is left."""
    for proc in procs:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
    for proc in procs:  # whatever the children left in their groups (Spark's Python workers)
        _signal_group(proc, signal.SIGKILL)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
