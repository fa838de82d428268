"""The overview's Metadata table card in a browser (issue 35.6): a table Apache Hudi 1.0 wrote
(hudi-rs's `v8_trips_8i3u1d`, five metadata partitions) at desktop and phone width: the card lists
every partition with its badge, says where reads list files from, and the page fits 390 px.
Debian's Chromium via Playwright, gunicorn on 127.0.0.1; no job runner."""

from __future__ import annotations

import os

import pytest

from tests.support import hudi1x
from tests.support.browser import SHOTS, chromium, log_in, new_page, require_chromium, start_gunicorn
from tests.support.console import PASSWORDS, make_app, stop

NAME = "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    require_chromium()
    tmp = tmp_path_factory.mktemp("browser-metadata")
    mp = pytest.MonkeyPatch()
    db_url = f"sqlite:///{tmp / 'console.db'}"
    app = make_app(tmp, mp, db_url)
    fx = hudi1x.fixture(NAME, tmp / "lake")
    with app.app_context():
        from webui.services.tables import register_existing

        register_existing(str(fx.table), "trips8", None)
    env = {**os.environ, "DATABASE_URL": db_url, "CONSOLE_WAREHOUSE_ROOTS": str(tmp / "lake"),
           "CONSOLE_SECRET_KEY": "test-secret-key"}
    log = open(tmp / "gunicorn.log", "w")  # noqa: SIM115
    web, base = start_gunicorn(env, log, workers=1)
    with chromium() as browser:
        yield base, browser
    stop(web)
    mp.undo()


def _card(site, width: int, role: str):  # type: ignore[no-untyped-def]
    """A page logged in as `role` on the table's overview, scrolled to the Metadata table card."""
    base, browser = site
    page, problems = new_page(browser, width, 900)
    log_in(page, base, role, PASSWORDS[role])
    response = page.goto(f"{base}/tables/trips8")
    assert response is not None and response.status == 200
    card = page.locator("[data-testid=metadata-table]")
    card.scroll_into_view_if_needed()
    return page, problems, card


@pytest.mark.parametrize(("width", "shot"), [(1400, "console-metadata-table.png"), (390, "console-phone-metadata-table.png")])
def test_the_metadata_table_card(site, width, shot):
    page, problems, card = _card(site, width, "viewer")
    assert card.is_visible()
    assert "Reads list files through metadata table" in page.locator("[data-testid=metadata-listing]").inner_text()
    rows = page.locator("[data-testid=metadata-partition]")
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    assert [t.split()[0] for t in texts] == [
        "column_stats", "files", "partition_stats", "record_index", "secondary_index_rider_idx"]
    assert ["kept" in t.split("\t")[0] and "dropped" not in t for t in texts] == [False, True, False, True, True]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    card.screenshot(path=str(SHOTS / shot))
    assert problems == []
    page.context.close()


@pytest.mark.parametrize(("width", "shot"), [(1400, "console-metadata-admin.png"), (390, "console-phone-metadata-admin.png")])
def test_admins_get_drop_and_build_actions_on_the_card(site, width, shot):
    """Admins see Drop… on every partition in the card, which still fits the phone; the Drop
    link opens its dry run."""
    page, problems, card = _card(site, width, "admin")
    drops = page.locator("[data-testid^=metadata-drop-]")
    assert drops.count() == 5 and all(drops.nth(i).is_visible() for i in range(5))
    boxes = [drops.nth(i).bounding_box() for i in range(5)]
    assert all(b is not None and b["x"] + b["width"] <= width for b in boxes)  # not cut off by the card
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    card.screenshot(path=str(SHOTS / shot))
    page.locator("[data-testid=metadata-drop-secondary_index_rider_idx]").click()
    page.wait_for_load_state()
    assert "Drop a metadata table partition" in page.content()
    assert page.locator("[data-testid=plan-partitions]").inner_text() == "secondary_index_rider_idx"
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(SHOTS / shot.replace("admin", "drop")), full_page=True)
    assert problems == []
    page.context.close()
