"""Table-service confirmations: the server-side dry-run plan, fingerprints, stale plans refused."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import sqlalchemy as sa

from tests.support import handmade
from tests.support.console import audit_rows, jobs_rows
from tests.support.tables import tree_bytes


def _hidden(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" type="hidden" value="([^"]*)"', page)
    assert found, name
    return found.group(1)


def _confirm(client, page: str, url: str, **extra):
    data = {k: _hidden(page, k) for k in ("csrf_token", "instant", "comment", "fingerprint", "plan_hash")}
    data.update(extra)
    return client.post(url, data=data)


def test_rollback_preview_shows_the_plan_and_queues_a_job(console):
    t = console.table
    last = t.instants[-1]
    client = console.client("admin")
    before = tree_bytes(t.path)
    resp = client.get(f"/tables/trips/services/rollback?instant={last}")
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200
    fid = t.groups["paris"][0]
    rolled = f"paris/{fid}_0-0-0_{last}.parquet"
    assert 'data-testid="plan-instants">1<' in page and 'data-testid="plan-files">1<' in page
    assert f"<code>{rolled}</code>" in page
    assert f"<tr><td><code>{last}</code></td><td>commit</td><td>completed</td>" in page
    assert tree_bytes(t.path) == before  # a dry run changes nothing
    assert audit_rows(console.app) == [] and jobs_rows(console.app) == []  # and is not an action
    fingerprint = _hidden(page, "fingerprint")
    resp = _confirm(client, page, "/tables/trips/services/rollback")
    assert resp.status_code == 302 and resp.headers["Location"] == "/jobs/1"
    assert jobs_rows(console.app) == [(1, "rollback", "queued", 1)]
    rows = audit_rows(console.app)
    assert rows == [("admin", "rollback", "trips", {"instant": last}, True, "queued", 1)]
    from webui.extensions import db
    from webui.models import AuditEntry, Job

    with console.app.app_context():
        job = db.session.get(Job, 1)
        entry = db.session.scalars(sa.select(AuditEntry).where(AuditEntry.action == "rollback")).one()
        assert job.params == {"instant": last, "fingerprint": fingerprint, "plan_hash": entry.plan_hash, "user": "admin"}
        assert entry.plan_hash == _hidden(page, "plan_hash")
    assert tree_bytes(t.path) == before
    # the same confirmation again (a double click): the queued job stands, nothing new is queued
    again = _confirm(client, page, "/tables/trips/services/rollback")
    assert again.status_code == 302 and again.headers["Location"] == "/jobs/1"
    assert "This rollback is already queued as job 1." in client.get("/jobs/1").get_data(as_text=True)
    assert jobs_rows(console.app) == [(1, "rollback", "queued", 1)] and len(audit_rows(console.app)) == 1
    # once that job has finished (failed, say), the same plan may be confirmed again
    with console.app.app_context():
        db.session.execute(sa.update(Job).where(Job.id == 1).values(state="failed"))
        db.session.commit()
    third = _confirm(client, page, "/tables/trips/services/rollback")
    assert third.status_code == 302 and third.headers["Location"] == "/jobs/2"
    assert jobs_rows(console.app) == [(1, "rollback", "failed", 1), (2, "rollback", "queued", 1)]


def test_stale_fingerprint_is_refused_and_the_new_plan_shown(console):
    t = console.table
    client = console.client("admin")
    page = client.get(f"/tables/trips/services/restore?instant={t.instants[0]}").get_data(as_text=True)
    assert 'data-testid="plan-instants">1<' in page
    old = _hidden(page, "fingerprint")
    newer = handmade.add_commit(t, {"berlin": ["new"]})  # someone writes meanwhile
    before = tree_bytes(t.path)
    resp = _confirm(client, page, "/tables/trips/services/restore", confirm_name="trips")
    fresh = resp.get_data(as_text=True)
    assert resp.status_code == 409
    assert "the table changed since this plan was shown" in fresh
    assert 'data-testid="plan-instants">2<' in fresh and f"<code>{newer}</code>" in fresh
    assert _hidden(fresh, "fingerprint") != old
    assert jobs_rows(console.app) == [] and tree_bytes(t.path) == before
    assert audit_rows(console.app) == [("admin", "restore", "trips", {"instant": t.instants[0], "comment": ""}, True,
                                        "refused: stale plan", None)]
    # confirming the re-shown plan works
    resp = _confirm(client, fresh, "/tables/trips/services/restore", confirm_name="trips")
    assert resp.status_code == 302
    assert jobs_rows(console.app) == [(1, "restore", "queued", 1)]


def test_restore_needs_the_table_name_typed(console):
    client = console.client("admin")
    page = client.get(f"/tables/trips/services/restore?instant={console.table.instants[0]}").get_data(as_text=True)
    for typed in ("", "trip", "TRIPS"):
        resp = _confirm(client, page, "/tables/trips/services/restore", confirm_name=typed)
        assert resp.status_code == 400
        assert "type the table name &#39;trips&#39; to confirm the restore" in resp.get_data(as_text=True)
    assert jobs_rows(console.app) == [] and audit_rows(console.app) == []


def test_forged_plan_hash_is_refused(console):
    client = console.client("operator")
    page = client.get(f"/tables/trips/services/savepoint?instant={console.table.instants[0]}").get_data(as_text=True)
    assert "clean will keep these 3 base file(s) while the savepoint exists" in page
    resp = _confirm(client, page.replace(_hidden(page, "plan_hash"), "0" * 64), "/tables/trips/services/savepoint")
    assert resp.status_code == 409 and "the plan is not the one that was shown" in resp.get_data(as_text=True)
    assert jobs_rows(console.app) == []


def test_refused_plans_say_why(console):
    client = console.client("admin")
    first = console.table.instants[0]
    resp = client.get(f"/tables/trips/services/rollback?instant={first}")
    text = resp.get_data(as_text=True)
    assert resp.status_code == 409
    assert "RollbackRefusedError" in text and console.table.instants[1] in text
    resp = client.get("/tables/trips/services/rollback?instant=123")
    assert resp.status_code == 400 and "instant must be an instant time yyyyMMddHHmmssSSS" in resp.get_data(as_text=True)
    resp = client.get("/tables/trips/services/format_disk")
    assert resp.status_code == 404


def test_clean_and_archive_with_nothing_to_do(console):
    client = console.client("operator")
    for op in ("clean", "archive"):
        page = client.get(f"/tables/trips/services/{op}").get_data(as_text=True)
        assert f"Nothing to do: the table needs no {op} now." in page
        assert 'data-testid="confirm-service" disabled' in page


def test_browse_pages_show_the_table(console):
    t = console.table
    client = console.client("viewer")
    ov = client.get("/tables/trips").get_data(as_text=True)
    assert 'data-testid="stat-records">9<' in ov and 'data-testid="stat-groups">3<' in ov
    assert 'data-testid="stat-partitions">2<' in ov and 'data-testid="stat-instants">2<' in ov
    assert f'data-testid="latest-commit">{t.instants[-1]}<' in ov
    assert "healthy" in ov and 'data-kind="commits"' in ov and 'data-kind="sizes"' in ov
    tl = client.get("/tables/trips/timeline").get_data(as_text=True)
    assert tl.index(f'data-instant="{t.instants[1]}"') < tl.index(f'data-instant="{t.instants[0]}"')
    assert 'data-testid="timeline-total">2 instant(s)<' in tl and 'class="visual-timeline"' in tl
    paged = client.get("/tables/trips/timeline?per_page=1&action=commit&page=2").get_data(as_text=True)
    assert f'data-instant="{t.instants[0]}"' in paged and f'data-instant="{t.instants[1]}"' not in paged
    assert '<a class="page-link" href="/tables/trips/timeline?per_page=1&amp;action=commit&amp;page=1">1</a>' in paged
    assert '<li class="page-item active"><a class="page-link" href="/tables/trips/timeline?per_page=1&amp;action=commit&amp;page=2">2</a>' in paged
    filtered = client.get("/tables/trips/timeline?state=inflight").get_data(as_text=True)
    assert 'data-testid="timeline-total">0 instant(s)<' in filtered
    commit = client.get(f"/tables/trips/commits/{t.instants[0]}").get_data(as_text=True)
    assert commit.count('<span class="badge text-bg-success">added</span>') == 3
    assert "<td><code>fare</code></td><td class=\"small\">double</td>" in commit
    fg = client.get("/tables/trips/file-groups?partition=paris").get_data(as_text=True)
    assert 'data-testid="groups-total">2 file group(s)<' in fg
    assert fg.count('<span class="badge text-bg-success">latest</span>') == 2
    assert fg.count('class="older-slice"') == 1
    fg_paged = client.get("/tables/trips/file-groups?per_page=1&page=3").get_data(as_text=True)
    assert 'data-testid="groups-total">3 file group(s)<' in fg_paged and fg_paged.count("rowspan=") == 2
    assert 'href="/tables/trips/file-groups?per_page=1&amp;page=1">1</a>' in fg_paged


def test_health_panel_finds_stuck_instants(console):
    handmade.add_pending(console.table, datetime(2026, 1, 1, 2, 0, tzinfo=UTC))
    ov = console.client("viewer").get("/tables/trips").get_data(as_text=True)
    assert "commit 20260101020000000 stuck inflight for" in ov
    assert "The next write, or repair, rolls it back once its heartbeat has expired." in ov


def test_health_panel_finds_small_files(console):
    handmade.add_commit(console.table, {"lisbon": ["new"] * 12})
    ov = console.client("viewer").get("/tables/trips").get_data(as_text=True)
    assert "12 more small files than needed" in ov
    assert "15 of 15 latest base files are under the small-file limit (100 MB)" in ov
