"""The console on a 390 px phone (issue 34): the navigation collapses behind its toggler and opens
on a tap, and every page of the console fits the viewport without sideways scrolling (wide tables
and long file names scroll or wrap inside their own box). Debian's Chromium via Playwright,
gunicorn on 127.0.0.1, a hand-made table; no job runner."""

from __future__ import annotations

import os

import pytest

from tests.support import handmade
from tests.support.browser import SHOTS, chromium, log_in, new_page, require_chromium, start_gunicorn
from tests.support.console import PASSWORDS, make_app, stop

WIDTH = 390


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    require_chromium()
    tmp = tmp_path_factory.mktemp("browser-phone")
    mp = pytest.MonkeyPatch()
    db_url = f"sqlite:///{tmp / 'console.db'}"
    app = make_app(tmp, mp, db_url)
    table = handmade.create(str(tmp / "lake" / "trips"))
    handmade.add_commit(table, {"paris": ["new", "new"], "rio_de_janeiro_long_partition_name": ["new"]})
    handmade.add_commit(table, {"paris": ["update:0"]})
    with app.app_context():
        from webui.services import jobs
        from webui.services.tables import register_existing

        entry = register_existing(table.path, "trips", None)
        jobs.enqueue(None, entry, "clean", {"note": "a queued job for the job pages"})
    env = {**os.environ, "DATABASE_URL": db_url, "CONSOLE_WAREHOUSE_ROOTS": str(tmp / "lake"),
           "CONSOLE_SECRET_KEY": "test-secret-key"}
    log = open(tmp / "gunicorn.log", "w")  # noqa: SIM115
    web, base = start_gunicorn(env, log, workers=1)
    with chromium() as browser:
        yield base, browser, table
    stop(web)
    mp.undo()


def _pages(table) -> list[str]:
    last = table.instants[-1]
    return [
        "/tables", "/tables/trips", "/tables/trips/timeline", f"/tables/trips/commits/{last}",
        "/tables/trips/file-groups", "/tables/trips/preview", "/tables/trips/write",
        f"/tables/trips/services/rollback?instant={last}", "/tables/trips/services/clean",
        "/tables/trips/services/archive", f"/tables/trips/services/savepoint?instant={last}",
        "/tables/new", "/tables/register", "/jobs", "/jobs/1", "/audit", "/admin/users", "/admin/users/1",
        "/account/password", "/account/tokens",
    ]


def test_every_page_fits_a_phone_and_the_menu_collapses(site):
    base, browser, table = site
    page, problems = new_page(browser, WIDTH, 844)
    page.goto(f"{base}/login")
    wide = [("/login", page.evaluate("document.documentElement.scrollWidth"))]
    log_in(page, base, "admin", PASSWORDS["admin"])
    toggle = page.locator("[data-testid=nav-toggle]")
    menu = page.locator("#nav-main")
    assert toggle.is_visible() and not menu.is_visible()  # collapsed on a phone
    toggle.click()
    page.wait_for_selector("#nav-main.collapse.show")  # Bootstrap's collapse, its transition over
    page.locator("[data-testid=nav-password]").wait_for(state="visible")
    assert page.locator("[data-testid=whoami]").is_visible()
    page.screenshot(path=str(SHOTS / "console-phone-menu.png"))
    for path in _pages(table):
        response = page.goto(f"{base}{path}")
        assert response is not None and response.status == 200, path
        wide.append((path, page.evaluate("document.documentElement.scrollWidth")))
    assert [(path, width) for path, width in wide if width > WIDTH] == []
    page.goto(f"{base}/tables/trips")
    page.screenshot(path=str(SHOTS / "console-phone-overview.png"), full_page=True)
    assert problems == []
    page.context.close()
    # on a desktop the menu is laid out inline, no toggler
    desktop, _problems = new_page(browser, 1400, 900)
    log_in(desktop, base, "admin", PASSWORDS["admin"])
    assert not desktop.locator("[data-testid=nav-toggle]").is_visible()
    assert desktop.locator("[data-testid=nav-password]").is_visible()
    desktop.context.close()
