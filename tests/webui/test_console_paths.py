"""Table locations in the console (issue 23): only canonical forms are compared with the warehouse
roots, a table never sits at a root itself, above or inside a registered table, or inside a table
on storage. Every refusal names the problem, writes nothing and is audited."""

from __future__ import annotations

import shutil

import pytest

from tests.support import handmade
from tests.support.console import PASSWORDS, audit_rows, csrf
from tests.support.tables import tree_bytes

S3_ROOT = "s3://lakehouse-test/warehouse"

# (location, the message's key phrase); every spelling below once named the root or another folder
TRICKS = [
    (f"{S3_ROOT}/?x", "has a query or fragment"),
    (f"{S3_ROOT}/#x", "has a query or fragment"),
    (f"{S3_ROOT}?x=1", "has a query or fragment"),
    (f"{S3_ROOT}/t?x", "has a query or fragment"),
    (f"{S3_ROOT}/%2E%2E", "percent-encoded separator or dot"),
    (f"{S3_ROOT}/a%2Fb", "percent-encoded separator or dot"),
    (f"{S3_ROOT}/a%5cb", "percent-encoded separator or dot"),
    (f"{S3_ROOT}/../other/t", "contains a '..' segment"),
    (f"{S3_ROOT}/./t", "contains a '.' segment"),
    (f"{S3_ROOT}//t", "has an empty path segment"),
    (S3_ROOT, "is the warehouse root"),
    (f"{S3_ROOT}/", "is the warehouse root"),
    ("s3://lakehouse-test/warehouse-2/t", "is not under a warehouse root"),
    ("s3://lakehouse-test/t", "is not under a warehouse root"),
]


def _local_tricks(root) -> list[tuple[str, str]]:
    return [
        (str(root), "is the warehouse root"),
        (f"{root}/", "is the warehouse root"),
        (f"{root}/./t", "contains a '.' segment"),
        (f"{root}/x/../t", "contains '..'"),
        (f"{root}//t", "empty path segment"),
        (f"file://{root}/t?x", "has a query or fragment"),
        (f"file://{root}/t#x", "has a query or fragment"),
        (f"file://{root}/a%2Ft", "percent-encoded separator or dot"),
    ]


def _post(client, url, data):
    return client.post(url, data={"csrf_token": csrf(client), **data})


def _with_s3_root(console) -> None:
    console.app.config["CONSOLE_WAREHOUSE_ROOTS"] = [str(console.root), S3_ROOT]


def test_every_spelling_trick_is_refused_on_create_and_register(console):
    _with_s3_root(console)
    client = console.client("operator")
    before = tree_bytes(console.root)
    cases = TRICKS + _local_tricks(console.root)
    for n, (path, phrase) in enumerate(cases):
        resp = _post(client, "/tables/new", {"name": f"bad{n}", "record_key": "id", "path": path, "index": "BLOOM",
                                             "table_type": "COPY_ON_WRITE"})
        assert resp.status_code == 403, (path, resp.status_code)
        assert phrase in resp.get_data(as_text=True).replace("&#39;", "'"), path
        resp = _post(client, "/tables/register", {"path": path, "name": f"reg{n}"})
        assert resp.status_code == 403, (path, resp.status_code)
        assert phrase in resp.get_data(as_text=True).replace("&#39;", "'"), path
    assert tree_bytes(console.root) == before
    rows = audit_rows(console.app)
    assert len(rows) == 2 * len(cases)
    assert all(r[5].startswith("refused: ") for r in rows)
    assert [r[1] for r in rows] == ["table.create", "table.register"] * len(cases)


def test_api_refuses_the_same_tricks(console):
    _with_s3_root(console)
    client = console.client()
    token = client.post("/api/v1/tokens", json={"username": "operator", "password": PASSWORDS["operator"]})
    headers = {"Authorization": f"Bearer {token.get_json()['token']}"}
    for path, phrase in TRICKS[:4] + [(S3_ROOT + "/", "is the warehouse root")]:
        resp = client.post("/api/v1/tables", headers=headers, json={"name": "x", "record_key": "id", "path": path})
        assert resp.status_code == 403, path
        assert phrase in resp.get_json()["error"]["message"], path


def test_no_table_inside_above_or_at_a_registered_table(console):
    client = console.client("operator")
    trips = console.table.path  # registered as `trips` by the fixture, at <root>/trips
    before = tree_bytes(console.root)
    resp = _post(client, "/tables/new", {"name": "inner", "record_key": "id", "path": f"{trips}/nested",
                                         "index": "BLOOM", "table_type": "COPY_ON_WRITE"})
    assert resp.status_code == 409
    assert f"{trips}/nested lies inside the registered table &#39;trips&#39; at {trips}" in resp.get_data(as_text=True)
    # a group folder holding a registered table cannot become a table
    group = handmade.create(str(console.root / "group" / "t1"), name="t1")
    handmade.add_commit(group, {"paris": ["new"]})
    assert _post(client, "/tables/register", {"path": group.path, "name": "t1"}).status_code == 302
    before = tree_bytes(console.root)
    resp = _post(client, "/tables/new", {"name": "around", "record_key": "id", "path": str(console.root / "group"),
                                         "index": "BLOOM", "table_type": "COPY_ON_WRITE"})
    assert resp.status_code == 409
    assert f"the registered table &#39;t1&#39; at {group.path} lies inside {console.root / 'group'}" in resp.get_data(as_text=True)
    assert tree_bytes(console.root) == before
    assert not (console.root / "group" / ".hoodie").exists()


def test_unregistered_tables_on_storage_count_too(console):
    client = console.client("operator")
    # an unregistered table at <root>/other; creating inside or around it is refused by the engine
    other = handmade.create(str(console.root / "other"), name="other")
    handmade.add_commit(other, {"paris": ["new"]})
    resp = _post(client, "/tables/new", {"name": "inner", "record_key": "id", "path": str(console.root / "other" / "x"),
                                         "index": "BLOOM", "table_type": "COPY_ON_WRITE"})
    assert resp.status_code == 409
    assert f"lies inside the table at {console.root / 'other'}" in resp.get_data(as_text=True)
    # a table moved into another's folder cannot be registered
    moved = handmade.create(str(console.root / "loose"), name="loose")
    handmade.add_commit(moved, {"rome": ["new"]})
    shutil.move(str(console.root / "loose"), str(console.root / "other" / "loose"))
    resp = _post(client, "/tables/register", {"path": str(console.root / "other" / "loose"), "name": "loose"})
    assert resp.status_code == 409
    assert f"lies inside the table at {console.root / 'other'}; move it out" in resp.get_data(as_text=True)
    names = [r[2] for r in audit_rows(console.app)]
    assert names == ["inner", "loose"]


@pytest.mark.parametrize("path", ["s3://lakehouse-test/warehouse/t", "s3://lakehouse-test/warehouse/a/b"])
def test_canonical_s3_locations_pass_the_root_check(path):
    from webui.paths import resolve_table_path

    assert resolve_table_path(path, [S3_ROOT]) == path
    assert resolve_table_path(path + "/", [S3_ROOT + "/"]) == path
