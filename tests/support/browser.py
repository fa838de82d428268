"""The console in a real browser: Debian's Chromium driven by Playwright, gunicorn on 127.0.0.1.

Shared by the browser test modules (one gunicorn and one browser per module). Chromium is
Debian's (`apt-get install -y chromium`); never `playwright install`. Without it the calling test
is skipped with the reason, unless `CI=true`, where it fails. Screenshots go to
`artifacts/screenshots/` (the documentation's images in docs/img/ are copied from there).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "artifacts" / "screenshots"


def require_chromium() -> None:
    """Skip (fail with CI=true) without Debian's Chromium or Playwright."""
    if not os.path.exists(CHROMIUM):
        message = "Debian's chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    pytest.importorskip("playwright")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(env: Mapping[str, str], log: IO[str], workers: int = 2, timeout: float = 60) -> tuple[subprocess.Popen, str]:
    """gunicorn serving `webui:create_app()` with `env` on a free port of 127.0.0.1, once it
    accepts connections (or `timeout` passed): (process, base URL). Stop it with `console.stop`."""
    port = free_port()
    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable)) or "gunicorn"
    web = subprocess.Popen([gunicorn, "-b", f"127.0.0.1:{port}", "-w", str(workers), "--threads", "2",
                            "webui:create_app()"],
                           env=dict(env), cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    return web, f"http://127.0.0.1:{port}"


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser (Playwright), closed on exit."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Any, width: int = 1400, height: int = 900) -> tuple[Any, list[str]]:
    """A page in a fresh context, and the list its console errors are collected into."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    return page, problems


def submit_login(page: Any, base: str, user: str, password: str) -> None:
    """Send the login form (whatever the answer: a refused login stays on /login)."""
    page.goto(f"{base}/login")
    page.fill("#username", user)
    page.fill("#password", password)
    page.click("main button[type=submit]")
    page.wait_for_load_state()


def log_in(page: Any, base: str, user: str, password: str, landing: str = "/tables") -> None:
    """Log in and wait for the page a successful login lands on."""
    submit_login(page, base, user, password)
    page.wait_for_url(f"{base}{landing}")
