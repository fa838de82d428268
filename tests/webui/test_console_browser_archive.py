"""The archive confirmation page in a real browser (Debian's Chromium via Playwright, gunicorn on
127.0.0.1): the files archival moves into the archive and the failed writes' files it deletes,
as rollback's preview lists its files. A hand-made table; no job runner (nothing is confirmed)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from tests.support import handmade
from tests.support.browser import SHOTS, chromium, log_in, new_page, require_chromium, start_gunicorn
from tests.support.console import PASSWORDS, make_app, stop


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    require_chromium()
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
    env = {**os.environ, "DATABASE_URL": db_url, "CONSOLE_WAREHOUSE_ROOTS": str(tmp / "lake"),
           "CONSOLE_SECRET_KEY": "test-secret-key"}
    log = open(tmp / "gunicorn.log", "w")  # noqa: SIM115
    web, base = start_gunicorn(env, log, workers=1)
    with chromium() as browser:
        yield base, browser, table, debris
    stop(web)
    mp.undo()


def test_archive_preview_lists_the_files_in_the_browser(site):
    base, browser, table, debris = site
    page, problems = new_page(browser, 1400, 1000)
    log_in(page, base, "operator", PASSWORDS["operator"])

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
    page.context.close()
