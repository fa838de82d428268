"""The console's Cluster action (issue 36), without Spark: the server-side plan (groups, slices and
bytes in, file groups out, expected file size, sort columns and curve), its fingerprinted
confirmation queueing one job, and the refusals. The job itself runs in
`test_console_worker.py::test_clustering_jobs_rewrite_the_small_groups`."""

from __future__ import annotations

import re

from tests.support.console import PASSWORDS, audit_rows, csrf, jobs_rows
from tests.support.tables import tree_bytes

URL = "/tables/trips/services/clustering"


def _hidden(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" type="hidden" value="([^"]*)"', page)
    assert found, name
    return found.group(1)


def _confirm(client, page: str):
    return client.post(URL, data={k: _hidden(page, k) for k in (
        "csrf_token", "instant", "comment", "sort_columns", "layout", "fingerprint", "plan_hash")})


def test_the_clustering_preview_shows_the_plan_and_a_confirmation_queues_one_job(console):
    from webui.filters import human_bytes

    client = console.client("operator")
    before = tree_bytes(console.table.path)
    page = client.get("/tables/trips").get_data(as_text=True)
    assert 'data-testid="nav-clustering"' in page
    resp = client.get(f"{URL}?sort_columns=fare,ts&layout=z-order")
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200
    # the hand-made table: paris has two file groups (one with two slices), berlin one
    t = console.table
    assert 'data-testid="plan-groups">2<' in page and 'data-testid="plan-slices">3<' in page
    assert 'data-testid="plan-output-groups">2<' in page
    assert ('Sorted by <code>fare</code>, <code>ts</code> on a <strong>z-order</strong> curve' in page)
    groups = re.findall(r"<tr><td><code>(\w+)</code></td><td class=\"text-end\">(\d+)</td><td class=\"text-end\">(\d+)</td>",
                        page)
    assert sorted(groups) == [("berlin", "1", "1"), ("paris", "2", "2")]
    view = t.meta.file_system_view(t.meta.timeline())
    paths = sorted(s.base_file.path for s in view.latest_slices())
    sizes = {p: (console.root / "trips" / p).stat().st_size for p in paths}
    assert f'data-testid="plan-bytes">{human_bytes(sum(sizes.values()))}<' in page
    for p in paths:
        assert f"<code>{p}</code>" in page
    assert _hidden(page, "sort_columns") == "fare,ts" and _hidden(page, "layout") == "z-order"
    assert "It holds the table lock while it runs: other writes to this table are refused until it finishes" in page
    console.app.config["CONSOLE_CONCURRENCY_MODE"] = "OPTIMISTIC_CONCURRENCY_CONTROL"
    assert "Writers can keep writing meanwhile: the plan leaves out file groups being written" in client.get(
        f"{URL}?sort_columns=fare,ts&layout=z-order").get_data(as_text=True)
    console.app.config["CONSOLE_CONCURRENCY_MODE"] = "SINGLE_WRITER"
    assert tree_bytes(console.table.path) == before and jobs_rows(console.app) == []
    resp = _confirm(client, page)
    assert resp.status_code == 302 and resp.headers["Location"] == "/jobs/1"
    assert jobs_rows(console.app) == [(1, "clustering", "queued", 2)]
    assert audit_rows(console.app) == [("operator", "clustering", "trips", {"sort_columns": "fare,ts", "layout": "z-order"},
                                        True, "queued", 1)]
    assert _confirm(client, page).status_code == 302 and len(jobs_rows(console.app)) == 1  # the same plan: one job
    # without sort columns: ordered by record key, and a different plan
    plain = client.get(URL).get_data(as_text=True)
    assert "Ordered by record key (no sort columns)" in plain and _hidden(plain, "plan_hash") != _hidden(page, "plan_hash")
    assert tree_bytes(console.table.path) == before


def test_the_clustering_preview_refuses_what_it_cannot_plan(console):
    viewer = console.client("viewer")
    assert viewer.get(URL).status_code == 403
    resp = viewer.post(URL, data={"csrf_token": csrf(viewer)})
    assert resp.status_code == 403 and "needs the operator role" in resp.get_data(as_text=True)
    client = console.client("operator")
    bad = client.get(f"{URL}?sort_columns=fare;drop")
    assert bad.status_code == 400 and "sort columns must be up to 8 column names" in bad.get_data(as_text=True)
    unknown = client.get(f"{URL}?sort_columns=nope")
    assert unknown.status_code == 409 and "InvalidInputError: sort columns [&#39;nope&#39;] are not columns" in unknown.get_data(as_text=True)
    layout = client.get(f"{URL}?sort_columns=fare&layout=spiral")
    assert layout.status_code == 400 and "layout must be one of linear, z-order, hilbert" in layout.get_data(as_text=True)
    missing = client.get(f"{URL}?instant=20200101000000000")
    assert missing.status_code == 404 and "no pending clustering 20200101000000000" in missing.get_data(as_text=True)
    # a stale confirmation: a write started after the plan was shown
    page = client.get(URL).get_data(as_text=True)
    (console.root / "trips" / ".hoodie" / "29990101000000000.commit.requested").write_bytes(b"")
    resp = _confirm(client, page)
    assert resp.status_code == 409 and "the table changed since this plan was shown" in resp.get_data(as_text=True)
    assert jobs_rows(console.app) == []


def test_the_api_plans_and_queues_a_clustering_and_refuses_an_empty_table(console):
    from tests.support import handmade

    client = console.client()
    token = client.post("/api/v1/tokens", json={"username": "operator", "password": PASSWORDS["operator"]}).get_json()["token"]
    h = {"Authorization": f"Bearer {token}"}
    plan = client.get("/api/v1/tables/trips/plans/clustering?sort_columns=ts&layout=hilbert", headers=h)
    assert plan.status_code == 200
    doc = plan.get_json()
    assert doc["params"] == {"sort_columns": "ts", "layout": "hilbert"} and doc["summary"]["slices"] == 3
    assert doc["plan"]["mode"] == "schedule" and doc["plan"]["plans"][0]["sort_columns"] == ["ts"]
    resp = client.post("/api/v1/tables/trips/services/clustering", headers=h, json={"sort_columns": "ts", "layout": "hilbert"})
    assert resp.status_code == 202 and resp.get_json()["plan"]["hash"] == doc["hash"]
    assert jobs_rows(console.app) == [(1, "clustering", "queued", 2)]
    empty = handmade.create(str(console.root / "empty"), name="empty")
    with console.app.app_context():
        from webui.services.tables import register_existing

        register_existing(empty.path, "empty", None)
    page = console.client("operator").get("/tables/empty/services/clustering").get_data(as_text=True)
    assert 'data-testid="nothing-to-do">Nothing to do: the table needs no clustering now. No file slice is under the small-file limit.' in page
    refused = client.post("/api/v1/tables/empty/services/clustering", headers=h, json={})
    assert refused.status_code == 409 and "nothing to cluster" in refused.get_json()["error"]["message"]
    assert len(jobs_rows(console.app)) == 1
