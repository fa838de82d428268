"""Archival's preview lists its files as rollback's does: the timeline files that move into the
archive and the failed writes' files it deletes first (page and API), and the files that hold
it back. Hand-made tables: only files and timeline metadata are needed."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from tests.support import handmade
from tests.support.console import PASSWORDS
from tests.support.tables import tree_bytes

START = datetime(2026, 1, 1, tzinfo=UTC)


def _grow(console, commits: int = 30) -> None:
    """32 completed commits in all (the fixture's 2 + 30): above hoodie.keep.max.commits (30), so
    archival takes the oldest 12 and keeps hoodie.keep.min.commits (20)."""
    for _ in range(commits):
        handmade.add_commit(console.table, {"paris": ["new"]})


def _expected_timeline_files(t, times: list[str]) -> list[dict]:
    out = []
    for time in times:
        for name in (f"{time}.commit.requested", f"{time}.inflight", f"{time}.commit"):
            rel = f".hoodie/{name}"
            out.append({"path": rel, "size": t.meta.storage.size(rel), "fate": "archived"})
    return out


def _auth(client, role: str) -> dict[str, str]:
    resp = client.post("/api/v1/tokens", json={"username": role, "password": PASSWORDS[role]})
    assert resp.status_code == 201
    return {"Authorization": f"Bearer {resp.get_json()['token']}"}


def test_archive_preview_lists_timeline_files_and_the_debris_it_deletes(console):
    t = console.table
    _grow(console)
    debris = handmade.add_failed_write(t, START + timedelta(minutes=2, seconds=30), "paris")
    archived = t.instants[:12]
    before = tree_bytes(t.path)
    expected = _expected_timeline_files(t, archived) + [
        {"path": debris, "size": t.meta.storage.size(debris), "fate": "deleted"}]

    client = console.client("operator")
    api = client.get("/api/v1/tables/trips/plans/archive", headers=_auth(client, "operator"))
    assert api.status_code == 200
    doc = api.get_json()
    assert [i["time"] for i in doc["plan"]["instants"]] == archived
    assert doc["plan"]["debris"] == [debris] and doc["plan"]["held_back"] == []
    s = doc["summary"]
    assert s["files"] == expected
    assert (s["file_count"], s["archived_files"], s["deleted_files"]) == (37, 36, 1)
    assert s["bytes"] == sum(f["size"] for f in expected)
    assert [i["time"] for i in s["instants"]] == archived and s["nothing_to_do"] is False

    page = client.get("/tables/trips/services/archive")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'data-testid="plan-files">37<' in html and 'data-testid="plan-instants">12<' in html
    assert ('data-testid="plan-file-summary">37 file(s): 36 timeline file(s) moved into the archive, '
            "1 failed-write file(s) deleted<") in html
    listed = re.findall(r'<li data-fate="(\w+)"><code>([^<]+)</code>', html)
    assert listed == [(f["fate"], f["path"]) for f in expected]
    assert "First, 1 file(s) of failed writes in that range are deleted" in html
    assert tree_bytes(t.path) == before  # a preview changes nothing


def test_archive_preview_names_the_files_that_hold_it_back(console):
    t = console.table
    _grow(console)
    stranger = handmade.add_failed_write(t, START + timedelta(minutes=5, seconds=30), "paris", known=False)
    client = console.client("operator")
    doc = client.get("/api/v1/tables/trips/plans/archive", headers=_auth(client, "operator")).get_json()
    # archival stops at the last completed write before the unknown file's instant (minute 5)
    assert [i["time"] for i in doc["plan"]["instants"]] == t.instants[:5]
    assert doc["plan"]["held_back"] == [stranger] and doc["plan"]["debris"] == []
    assert doc["summary"]["held_back"] == [stranger]
    assert doc["summary"]["files"] == _expected_timeline_files(t, t.instants[:5])
    html = client.get("/tables/trips/services/archive").get_data(as_text=True)
    assert re.search(r'data-testid="plan-held-back">.*<code>' + re.escape(stranger) + "</code>", html, re.S)
    assert 'data-fate="deleted"' not in html


def test_archive_preview_files_are_the_files_the_job_removes(console):
    """What the preview lists as archived/deleted is exactly what archival takes away."""
    from engine.services.maintenance import Maintenance
    from engine.table.meta_client import MetaClient

    t = console.table
    _grow(console)
    handmade.add_failed_write(t, START + timedelta(minutes=2, seconds=30), "paris")
    client = console.client("operator")
    listed = {f["path"] for f in client.get("/api/v1/tables/trips/plans/archive",
                                            headers=_auth(client, "operator")).get_json()["summary"]["files"]}
    before = set(tree_bytes(t.path))
    Maintenance(MetaClient.open(t.path)).archive()
    after = set(tree_bytes(t.path))
    gone = before - after
    assert gone == listed
