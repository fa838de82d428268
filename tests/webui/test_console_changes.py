"""A commit's Changes page (issue 37), without Spark: the records a write inserted, updated (before
and after side by side) and deleted, counted per operation, filtered and paged, on the page and in
the API; refusals for bad parameters and unknown instants."""

from __future__ import annotations

import re

from tests.support.console import PASSWORDS


def _auth(client, role: str) -> dict[str, str]:
    resp = client.post("/api/v1/tokens", json={"username": role, "password": PASSWORDS[role]})
    assert resp.status_code == 201
    return {"Authorization": f"Bearer {resp.get_json()['token']}"}


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr data-op="([iud])">', page)


def test_a_commits_changes_page_lists_its_inserts_and_updates(console):
    t = console.table
    first, second = t.instants
    client = console.client("viewer")
    commit = client.get(f"/tables/trips/commits/{second}").get_data(as_text=True)
    assert f'href="/tables/trips/commits/{second}/changes"' in commit and 'data-testid="changes-link"' in commit
    resp = client.get(f"/tables/trips/commits/{first}/changes")
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200
    assert _rows(page) == ["i"] * 9  # three new file groups of three records
    assert 'data-testid="changes-tab-i"' in page and ">Inserts <span class=\"badge text-bg-success\">9</span>" in page
    assert "inferred from the file group versions" in page
    keys = sorted(k for fid in t.groups["paris"] + t.groups["berlin"] for k in t.keys[fid])
    assert sorted(re.findall(r"<td class=\"small text-nowrap\">\s*((?:paris|berlin)-\d-\d)\s*</td>", page)) == keys
    # the second commit rewrote paris's first group: three updates (same values, a new commit)
    page = client.get(f"/tables/trips/commits/{second}/changes").get_data(as_text=True)
    assert _rows(page) == ["u"] * 3
    assert ">Updates <span class=\"badge text-bg-warning\">3</span>" in page and 'class="changed"' not in page
    deletes = client.get(f"/tables/trips/commits/{second}/changes?op=d").get_data(as_text=True)
    assert _rows(deletes) == [] and "This write made no deletes." in deletes
    paged = client.get(f"/tables/trips/commits/{first}/changes?op=i&per_page=4&page=3").get_data(as_text=True)
    assert _rows(paged) == ["i"] and "9 change(s), page 3 of 3" in paged
    api = console.app.test_client()
    doc = api.get(f"/api/v1/tables/trips/commits/{second}/changes", headers=_auth(api, "viewer")).get_json()
    assert doc["counts"] == {"i": 0, "u": 3, "d": 0} and doc["total"] == 3 and doc["source"] == "inferred"
    assert doc["columns"] == ["trip_id", "city", "ts", "fare"]
    assert sorted(r["cells"][0]["after"] for r in doc["rows"]) == sorted(t.keys[t.groups["paris"][0]])
    assert all(r["cells"][2] == {"before": str(n), "after": str(n), "changed": False}
               for r in doc["rows"] for n in [int(r["cells"][0]["after"][-1])])


def test_the_changes_page_refuses_bad_parameters(console):
    client = console.client("viewer")
    first = console.table.instants[0]
    assert client.get(f"/tables/trips/commits/{first}/changes?op=x").status_code == 400
    assert client.get("/tables/trips/commits/20200101000000000/changes").status_code == 404
    assert client.get("/tables/trips/commits/yesterday/changes").status_code == 404
    api = console.app.test_client()
    resp = api.get(f"/api/v1/tables/trips/commits/{first}/changes?op=upsert", headers=_auth(api, "viewer"))
    assert resp.status_code == 400 and "op must be one of i, u, d" in str(resp.get_json())
    anonymous = console.app.test_client()
    assert anonymous.get(f"/tables/trips/commits/{first}/changes").status_code in (302, 401)
