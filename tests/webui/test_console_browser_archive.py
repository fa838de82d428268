"""The archive confirmation page in a real browser (Debian's Chromium via Playwright, gunicorn on
127.0.0.1): the files archival moves into the archive and the failed writes' files it deletes,
as rollback's preview lists its files. A hand-made table; no job runner (nothing is confirmed)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support import handmade
from tests.support.console import PASSWORDS, make_app, stop

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "artifacts" / "screenshots"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        message = "Debian's chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    pytest.importorskip("playwright")
    tmp = tmp_path_factory.mktemp("browser-archive")
    mp = pytest.MonkeyPatch()
    db_url = f"sqlite:///{tmp / 'console.db'}"
    app = make_app(tmp, mp, db_url)
    table = handmade.create(str(tmp / "lake" / "trips"))
    for _ in range(32):  # above hoodie.keep.max.commits (30): the oldest 12 go
        handmade.add_commit(table, {"paris": ["new"]})
    debris = handmade.add_failed_write(table, datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=2, seconds=30),
                                       "paris")
    with app.app_context():
        from webui.services.tables import register_existing

        register_existing(table.path, "trips", None)
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": db_url, "CONSOLE_WAREHOUSE_ROOTS": str(tmp / "lake"),
           "CONSOLE_SECRET_KEY": "test-secret-key"}
    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable)) or "gunicorn"
    log = open(tmp / "gunicorn.log", "w")  # noqa: SIM115
    web = subprocess.Popen([gunicorn, "-b", f"127.0.0.1:{port}", "-w", "1", "--threads", "2", "webui:create_app()"],
                           env=env, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    SHOTS.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield f"http://127.0.0.1:{port}", browser, table, debris
        browser.close()
    stop(web)
    mp.undo()


def test_archive_preview_lists_the_files_in_the_browser(site):
    base, browser, table, debris = site
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.goto(f"{base}/login")
    page.fill("#username", "operator")
    page.fill("#password", PASSWORDS["operator"])
    page.click("main button[type=submit]")
    page.wait_for_url(f"{base}/tables")

    page.goto(f"{base}/tables/trips/services/archive")
    assert page.locator("[data-testid=plan-instants]").inner_text() == "12"
    assert page.locator("[data-testid=plan-files]").inner_text() == "37"
    summary = page.locator("[data-testid=plan-file-summary]")
    assert summary.inner_text() == ("37 file(s): 36 timeline file(s) moved into the archive, "
                                    "1 failed-write file(s) deleted")
    items = page.locator("[data-testid=plan-file-list] li")
    assert not items.first.is_visible()  # folded, as rollback's list
    summary.click()
    assert items.first.is_visible()
    listed = [(li.get_attribute("data-fate"), li.locator("code").inner_text()) for li in items.all()]
    expected = [("archived", f".hoodie/{t}{suffix}") for t in table.instants[:12]
                for suffix in (".commit.requested", ".inflight", ".commit")] + [("deleted", debris)]
    assert listed == expected
    deleted = page.locator("[data-testid=plan-file-list] li[data-fate=deleted]")
    assert deleted.locator(".badge").inner_text() == "deleted"
    deleted.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "console-archive-preview.png"), full_page=True)
    assert page.locator("[data-testid=confirm-service]").is_enabled()
    assert problems == []
    context.close()
