"""The console in a real browser: Debian's Chromium driven by Playwright, against gunicorn on
127.0.0.1 and a real job runner. Screenshots go to artifacts/screenshots/ (the documentation's
images in docs/img/ are copied from there)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support.browser import SHOTS, chromium, log_in, new_page, require_chromium, start_gunicorn
from tests.support.console import PASSWORDS, make_app, start_worker, stop

pytestmark = pytest.mark.spark

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    require_chromium()
    tmp = tmp_path_factory.mktemp("browser")
    mp = pytest.MonkeyPatch()
    db_url = f"sqlite:///{tmp / 'console.db'}"
    make_app(tmp, mp, db_url)  # schema through the migrations, and the three users
    env = {**os.environ, "DATABASE_URL": db_url, "CONSOLE_WAREHOUSE_ROOTS": str(tmp / "lake"),
           "CONSOLE_SECRET_KEY": "test-secret-key"}
    env.pop("CONSOLE_TEST_HOLD_AT", None)
    log = open(tmp / "gunicorn.log", "w")  # noqa: SIM115
    web, base = start_gunicorn(env, log, workers=2)
    worker = start_worker(tmp, db_url)
    with chromium() as browser:
        yield base, browser, tmp
    stop(worker)
    stop(web)
    mp.undo()


def _login(browser, base: str, user: str):  # type: ignore[no-untyped-def]
    page, problems = new_page(browser)
    log_in(page, base, user, PASSWORDS[user])
    return page, problems


def _wait_job_done(page) -> str:  # type: ignore[no-untyped-def]
    page.wait_for_function("() => ['succeeded','failed','cancelled'].includes("
                           "document.querySelector('[data-testid=job-state]').textContent.trim())", timeout=180_000)
    page.wait_for_load_state()
    return page.locator("[data-testid=job-state]").inner_text().strip()


def _upload(page, base: str, tmp: Path, name: str, csv: str, table: str = "trips") -> str:  # type: ignore[no-untyped-def]
    path = tmp / name
    path.write_text(csv)
    page.goto(f"{base}/tables/{table}/write")
    page.set_input_files("#up-file", str(path))
    page.click("[data-testid=upload-submit]")
    page.wait_for_selector("[data-testid=confirm-write]")
    return path.name


def test_operator_journey_and_viewer_limits(site):
    base, browser, tmp = site
    page, problems = _login(browser, base, "admin")

    # create a table
    page.click("[data-testid=create-table]")
    page.fill("#name", "trips")
    page.fill("#record_key", "trip_id")
    page.fill("#partition_fields", "city")
    page.fill("#precombine_field", "ts")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{base}/tables/trips")
    assert page.locator("[data-testid=table-name]").inner_text() == "trips"

    # upload a batch, preview it, queue it, watch the job finish
    rows = ["trip_id,city,ts,fare,rider"] + [f"t{i:03d},{c},{i},{10 + i}.5,rider-{i % 7}"
                                             for i, c in enumerate(["paris", "berlin", "lisbon", "oslo"] * 10)]
    _upload(page, base, tmp, "batch1.csv", "\n".join(rows) + "\n")
    assert page.locator("[data-testid=preview-rows]").inner_text() == "40"
    page.screenshot(path=str(SHOTS / "console-write-preview.png"), full_page=True)
    page.click("[data-testid=confirm-write]")
    page.wait_for_url(re.compile(r".*/jobs/\d+$"))
    assert _wait_job_done(page) == "succeeded"
    first = page.locator("[data-testid=result-instant]").inner_text()
    page.screenshot(path=str(SHOTS / "console-job.png"), full_page=True)

    # a second batch updates some trips
    _upload(page, base, tmp, "batch2.csv", "trip_id,city,ts,fare,rider\nt000,paris,100,99.5,rider-0\nt001,berlin,100,77.5,rider-1\n")
    page.click("[data-testid=confirm-write]")
    page.wait_for_url(re.compile(r".*/jobs/\d+$"))
    assert _wait_job_done(page) == "succeeded"
    second = page.locator("[data-testid=result-instant]").inner_text()

    # the commits are on the timeline; open one, then the file groups
    page.goto(f"{base}/tables/trips/timeline")
    assert page.locator(f"tr[data-instant='{first}']").count() == 1
    assert page.locator(f"tr[data-instant='{second}']").count() == 1
    page.screenshot(path=str(SHOTS / "console-timeline.png"), full_page=True)
    page.click(f"tr[data-instant='{first}'] a >> nth=0")
    assert page.locator("[data-testid=commit-instant]").inner_text() == first
    assert page.locator("[data-testid=commit-files] tbody tr").count() == 4
    page.screenshot(path=str(SHOTS / "console-commit.png"), full_page=True)
    page.goto(f"{base}/tables/trips/file-groups")
    assert page.locator("[data-testid=groups-total]").inner_text() == "4 file group(s)"
    page.screenshot(path=str(SHOTS / "console-file-groups.png"), full_page=True)

    # the second commit's changes: two updates, each changed cell before -> after
    page.goto(f"{base}/tables/trips/commits/{second}")
    page.click("[data-testid=changes-link]")
    page.wait_for_url(f"{base}/tables/trips/commits/{second}/changes")
    assert page.locator("[data-testid=changes-table] tbody tr[data-op=u]").count() == 2
    assert sorted(page.locator("[data-testid=changes-table] strong.changed").all_inner_texts()) == [
        "100", "100", "77.5", "99.5"]
    page.screenshot(path=str(SHOTS / "console-changes.png"), full_page=True)

    # data preview before the rollback
    def preview_fares() -> dict[str, str]:
        page.goto(f"{base}/tables/trips/preview")
        page.click("[data-testid=preview-submit]")
        page.wait_for_url(re.compile(r".*/jobs/\d+$"))
        assert _wait_job_done(page) == "succeeded"
        headers = page.locator("[data-testid=preview-rows] thead th").all_inner_texts()
        out = {}
        for tr in page.locator("[data-testid=preview-rows] tbody tr").all():
            cells = tr.locator("td").all_inner_texts()
            out[cells[headers.index("trip_id")]] = cells[headers.index("fare")]
        return out

    before = preview_fares()
    assert len(before) == 40 and before["t000"] == "99.5" and before["t001"] == "77.5" and before["t002"] == "12.5"
    page.screenshot(path=str(SHOTS / "console-data-preview.png"), full_page=True)

    # roll the second commit back through its preview
    page.goto(f"{base}/tables/trips/timeline")
    page.click(f"[data-testid=rollback-{second}]")
    assert page.locator("[data-testid=plan-instants]").inner_text() == "1"
    assert page.locator("[data-testid=plan-files]").inner_text() == "2"
    page.screenshot(path=str(SHOTS / "console-rollback-preview.png"), full_page=True)
    page.click("[data-testid=confirm-service]")
    page.wait_for_url(re.compile(r".*/jobs/\d+$"))
    assert _wait_job_done(page) == "succeeded"
    page.goto(f"{base}/tables/trips/timeline")
    assert page.locator(f"tr[data-instant='{second}']").count() == 0
    assert page.locator(f"tr[data-instant='{first}']").count() == 1
    after = preview_fares()
    assert after["t000"] == "10.5" and after["t001"] == "11.5" and len(after) == 40
    page.goto(f"{base}/tables/trips")
    page.wait_for_function("() => document.querySelectorAll('canvas.js-chart').length === 2 && "
                           "[...document.querySelectorAll('canvas.js-chart')].every(c => c.width > 0)")
    assert page.locator("[data-testid=stat-records]").inner_text() == "40"
    page.screenshot(path=str(SHOTS / "console-overview.png"), full_page=True)
    page.goto(f"{base}/audit")
    page.screenshot(path=str(SHOTS / "console-audit.png"), full_page=True)
    assert [p for p in problems if "Content Security Policy" in p or "Refused" in p] == []

    # a viewer sees no action buttons, and posting anyway is refused
    viewer, _ = _login(browser, base, "viewer")
    viewer.goto(f"{base}/tables/trips/timeline")
    assert viewer.locator(f"tr[data-instant='{first}']").count() == 1
    assert viewer.locator("text=Roll back").count() == 0 and viewer.locator("[data-testid=nav-write]").count() == 0
    viewer.screenshot(path=str(SHOTS / "console-viewer-timeline.png"), full_page=True)
    token = viewer.locator("input[name=csrf_token]").first.get_attribute("value")
    resp = viewer.request.post(f"{base}/tables/trips/services/rollback", form={"csrf_token": token, "instant": first})
    assert resp.status == 403
    resp = viewer.request.post(f"{base}/tables/trips/write/demo", form={"demo-csrf_token": token, "demo-rows": "5"})
    assert resp.status == 403
    viewer.goto(f"{base}/tables/trips/services/rollback?instant={first}")
    assert "needs the admin role" in viewer.locator("[data-testid=error-message]").inner_text()


def test_merge_on_read_journey(site):
    """Create a MERGE_ON_READ table, write a batch and then updates (log files), see them on the
    file-groups page, compact through the preview, and see the new base files."""
    base, browser, tmp = site
    page, problems = _login(browser, base, "operator")
    page.click("[data-testid=create-table]")
    page.fill("#name", "rides")
    page.fill("#record_key", "ride_id")
    page.fill("#partition_fields", "city")
    page.fill("#precombine_field", "ts")
    page.select_option("#table_type", "MERGE_ON_READ")
    page.click("main button[type=submit]")
    page.wait_for_url(f"{base}/tables/rides")
    assert page.locator("[data-testid=table-type]").inner_text() == "MERGE_ON_READ"

    rows = ["ride_id,city,ts,fare"] + [f"r{i:02d},{c},{i},{5 + i}.0" for i, c in enumerate(["paris", "oslo"] * 6)]
    for name, csv in (("rides1.csv", "\n".join(rows) + "\n"),
                      ("rides2.csv", "ride_id,city,ts,fare\nr00,paris,50,1.0\nr01,oslo,50,2.0\nr02,paris,50,3.0\n")):
        _upload(page, base, tmp, name, csv, table="rides")
        page.click("[data-testid=confirm-write]")
        page.wait_for_url(re.compile(r".*/jobs/\d+$"))
        assert _wait_job_done(page) == "succeeded"
    updates = page.locator("[data-testid=result-instant]").inner_text()

    # the updates went to log files of the two groups' slices
    page.goto(f"{base}/tables/rides/file-groups")
    assert page.locator("[data-testid=groups-total]").inner_text() == "2 file group(s)"
    assert page.locator("[data-testid=log-file]").count() == 2
    assert page.locator(f"[data-testid=log-file] a:text('{updates}')").count() == 2
    page.screenshot(path=str(SHOTS / "console-file-groups-mor.png"), full_page=True)
    page.goto(f"{base}/tables/rides")
    assert page.locator("[data-testid=stat-log-records]").inner_text() == "3"
    assert page.locator("[data-testid=stat-records]").inner_text() == "12"
    page.screenshot(path=str(SHOTS / "console-overview-mor.png"), full_page=True)

    # compact through the preview
    page.click("[data-testid=mor-panel] [data-testid=compact]")
    assert page.locator("[data-testid=plan-slices]").inner_text() == "2"
    assert page.locator("[data-testid=plan-log-files]").inner_text() == "2"
    page.screenshot(path=str(SHOTS / "console-compaction-preview.png"), full_page=True)
    page.click("[data-testid=confirm-service]")
    page.wait_for_url(re.compile(r".*/jobs/\d+$"))
    assert _wait_job_done(page) == "succeeded"
    compaction = page.locator("[data-testid=result-instant]").inner_text()

    # each group's latest slice is now a base file written by the compaction, with no log files
    page.goto(f"{base}/tables/rides/file-groups")
    assert page.locator(f"tr[data-slice='{compaction}']").count() == 2
    names = page.locator(f"tr[data-slice='{compaction}'] .fname").all_inner_texts()
    assert len(names) == 2 and all(n.endswith(f"_{compaction}.parquet\nby {compaction}") for n in names), names
    page.screenshot(path=str(SHOTS / "console-file-groups-mor-compacted.png"), full_page=True)
    page.goto(f"{base}/tables/rides/file-groups?logs=1")
    assert page.locator("[data-testid=groups-total]").inner_text() == "0 file group(s)"
    page.goto(f"{base}/tables/rides/timeline")
    assert page.locator(f"tr[data-instant='{compaction}'] td").nth(2).inner_text() == "commit"
    assert "COMPACT" in page.locator(f"tr[data-instant='{compaction}'] td").nth(4).inner_text()
    page.screenshot(path=str(SHOTS / "console-timeline-mor.png"), full_page=True)
    page.goto(f"{base}/tables/rides/commits/{compaction}")
    assert page.locator("[data-testid=logs-compacted]").inner_text() == "2"
    page.screenshot(path=str(SHOTS / "console-compaction-commit.png"), full_page=True)

    # cluster through the Cluster tab: sort columns and a Z-order layout chosen on the page
    page.click("[data-testid=nav-clustering]")
    page.fill("#sort_columns", "fare,ts")
    page.select_option("#layout", "z-order")
    page.click("[data-testid=clustering-replan]")
    page.wait_for_selector("[data-testid=plan-clustering-groups]")
    assert page.locator("[data-testid=plan-groups]").inner_text() == "2"
    assert page.locator("[data-testid=plan-output-groups]").inner_text() == "2"
    assert "on a z-order curve" in page.locator("[data-testid=plan-order]").inner_text()
    page.screenshot(path=str(SHOTS / "console-clustering-preview.png"), full_page=True)
    page.click("[data-testid=confirm-service]")
    page.wait_for_url(re.compile(r".*/jobs/\d+$"))
    assert _wait_job_done(page) == "succeeded"
    clustering = page.locator("[data-testid=result-instant]").inner_text()
    page.goto(f"{base}/tables/rides/file-groups")
    assert page.locator(f"tr[data-slice='{clustering}']").count() == 2
    page.goto(f"{base}/tables/rides")
    assert page.locator("[data-testid=stat-records]").inner_text() == "12"
    assert [p for p in problems if "Content Security Policy" in p or "Refused" in p] == []
