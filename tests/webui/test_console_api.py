"""The JSON API (bearer tokens, same services as the pages), its OpenAPI document, the audit log's
append-only rule, and the web process never importing pyspark."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
import sqlalchemy as sa

from tests.support.console import PASSWORDS, audit_rows, jobs_rows


def _auth(client, role: str) -> dict[str, str]:
    resp = client.post("/api/v1/tokens", json={"username": role, "password": PASSWORDS[role]})
    assert resp.status_code == 201
    return {"Authorization": f"Bearer {resp.get_json()['token']}"}


def test_token_stored_as_hash_only(console):
    client = console.client()
    assert client.post("/api/v1/tokens", json={"username": "admin", "password": "wrong"}).status_code == 401
    headers = _auth(client, "viewer")
    token = headers["Authorization"].split()[1]
    from webui.extensions import db
    from webui.models import ApiToken

    with console.app.app_context():
        stored = db.session.scalars(sa.select(ApiToken.token_hash)).all()
    assert stored == [ApiToken.hash(token)] and token not in stored
    assert client.get("/api/v1/tables", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_browse_through_the_api(console):
    client = console.client()
    h = _auth(client, "viewer")
    t = console.table
    tables = client.get("/api/v1/tables", headers=h).get_json()["tables"]
    assert [(x["name"], x["record_key"], x["partition_fields"], x["precombine_field"], x["index"]) for x in tables] == [
        ("trips", "trip_id", ["city"], "ts", "BLOOM")]
    commits = client.get("/api/v1/tables/trips/commits", headers=h).get_json()
    assert [(r["time"], r["action"], r["state"], r["stats"]["inserts"], r["stats"]["updates"]) for r in commits["rows"]] == [
        (t.instants[1], "commit", "completed", 0, 3), (t.instants[0], "commit", "completed", 9, 0)]
    assert commits["total"] == 2 and commits["pages"] == 1
    paged = client.get("/api/v1/tables/trips/commits?per_page=1&page=2", headers=h).get_json()
    assert [r["time"] for r in paged["rows"]] == [t.instants[0]] and paged["pages"] == 2
    fg = client.get("/api/v1/tables/trips/file-groups?partition=berlin", headers=h).get_json()
    assert [(g["partition"], g["file_id"], [s["records"] for s in g["slices"]]) for g in fg["groups"]] == [
        ("berlin", t.groups["berlin"][0], [3])]
    detail = client.get(f"/api/v1/tables/trips/commits/{t.instants[1]}", headers=h).get_json()
    assert [(f["partition"], f["file_id"], f["updates"], f["prev_commit"]) for f in detail["files"]] == [
        ("paris", t.groups["paris"][0], 3, t.instants[0])]
    assert client.get("/api/v1/tables/nope/commits", headers=h).status_code == 404


def test_write_jobs_through_the_api(console):
    client = console.client()
    h = _auth(client, "operator")
    resp = client.post("/api/v1/tables/trips/jobs", headers=h, json={
        "operation": "upsert", "records": [{"trip_id": "a1", "city": "oslo", "ts": 1, "fare": 3.0}]})
    assert resp.status_code == 202 and resp.get_json() == {"job_id": 1}
    bad = client.post("/api/v1/tables/trips/jobs", headers=h, json={
        "operation": "upsert", "records": [{"trip_id": None, "city": "oslo", "ts": 1, "fare": 3.0}]})
    assert bad.status_code == 422
    assert bad.get_json()["error"]["message"] == "1 row(s) have a null or empty record key (trip_id); every row needs a key"
    multipart = client.post("/api/v1/tables/trips/jobs", headers=h, content_type="multipart/form-data", data={
        "operation": "insert", "file": (io.BytesIO(b"trip_id,city,ts,fare\nz1,rome,2,1.0\n"), "b.csv")})
    assert multipart.status_code == 202 and multipart.get_json() == {"job_id": 2}
    job = client.get("/api/v1/jobs/2", headers=h).get_json()
    assert (job["operation"], job["state"], job["params"], job["created_by"]) == (
        "insert", "queued", {"rows": 1, "filename": "b.csv"}, "operator")
    cancelled = client.post("/api/v1/jobs/2/cancel", headers=h)
    assert cancelled.status_code == 202 and cancelled.get_json()["state"] == "cancelled"
    assert jobs_rows(console.app) == [(1, "upsert", "queued", 2), (2, "insert", "cancelled", 2)]
    assert audit_rows(console.app) == [
        ("operator", "token.create", None, {"id": 1, "via": "api"}, False, "issued", None),
        ("operator", "upsert", "trips", {"rows": 1, "filename": "records.json"}, False, "queued", 1),
        ("operator", "upsert", "trips", {"filename": "records"}, False,
         "refused: 1 row(s) have a null or empty record key (trip_id); every row needs a key", None),
        ("operator", "insert", "trips", {"rows": 1, "filename": "b.csv"}, False, "queued", 2),
        ("operator", "job.cancel", "trips", {"operation": "insert"}, False, "requested", 2),
    ]


def test_rollback_through_the_api_with_a_plan(console):
    client = console.client()
    h = _auth(client, "admin")
    last = console.table.instants[-1]
    plan = client.get(f"/api/v1/tables/trips/plans/rollback?instant={last}", headers=h).get_json()
    assert plan["summary"]["file_count"] == 1 and plan["params"] == {"instant": last}
    stale = client.post("/api/v1/tables/trips/rollback", headers=h,
                        json={"instant": last, "fingerprint": "0" * 24, "plan_hash": plan["hash"]})
    assert stale.status_code == 409 and stale.get_json()["error"]["code"] == "stale_plan"
    assert stale.get_json()["error"]["plan"]["fingerprint"] == plan["fingerprint"]
    ok = client.post("/api/v1/tables/trips/rollback", headers=h,
                     json={"instant": last, "fingerprint": plan["fingerprint"], "plan_hash": plan["hash"]})
    assert ok.status_code == 202 and ok.get_json()["job_id"] == 1
    assert jobs_rows(console.app) == [(1, "rollback", "queued", 1)]


def test_create_table_through_the_api(console):
    client = console.client()
    h = _auth(client, "operator")
    resp = client.post("/api/v1/tables", headers=h, json={"name": "orders", "record_key": ["order_id", "line"],
                                                          "partition_fields": ["day"], "precombine_field": "ts",
                                                          "table_type": "COPY_ON_WRITE", "index": "GLOBAL_BLOOM"})
    assert resp.status_code == 201
    body = resp.get_json()
    assert (body["name"], body["path"], body["record_key"], body["index"]) == (
        "orders", str(console.root / "orders"), "order_id,line", "GLOBAL_BLOOM")
    outside = client.post("/api/v1/tables", headers=h, json={"name": "x", "record_key": "id", "path": "/tmp/x"})
    assert outside.status_code == 403 and "is not under a warehouse root" in outside.get_json()["error"]["message"]


def test_openapi_document_is_valid(console):
    from openapi_spec_validator import validate

    client = console.client()
    doc = client.get("/api/v1/openapi.json", headers=_auth(client, "viewer")).get_json()
    validate(doc)
    documented = {"/api/v1" + p.replace("{", "<").replace("}", ">") for p in doc["paths"]}
    routes = {r.rule.replace("<int:", "<") for r in console.app.url_map.iter_rules() if r.rule.startswith("/api/v1")}
    assert routes == documented


def test_audit_log_is_append_only(console):
    from webui.extensions import db
    from webui.models import AuditEntry, AuditLogIsAppendOnly
    from webui.services import audit

    client = console.client("viewer")
    assert client.get("/audit").status_code == 200
    with console.app.app_context():
        audit.record(None, "test.action", "done")
        mine = sa.select(AuditEntry).where(AuditEntry.action == "test.action")  # not the viewer's login row
        entry = db.session.scalars(mine).one()
        entry.outcome = "changed"
        with pytest.raises(AuditLogIsAppendOnly):
            db.session.commit()
        db.session.rollback()
        with pytest.raises(AuditLogIsAppendOnly):
            db.session.delete(db.session.scalars(mine).one())
            db.session.commit()
        db.session.rollback()
        with pytest.raises(AuditLogIsAppendOnly):
            db.session.execute(sa.update(AuditEntry).values(outcome="x"))
        db.session.rollback()
        with pytest.raises(AuditLogIsAppendOnly):
            db.session.execute(sa.delete(AuditEntry))
        db.session.rollback()
        # and below the ORM, the database's triggers refuse it
        for statement in ("UPDATE audit_log SET outcome = 'x'", "DELETE FROM audit_log"):
            with pytest.raises(sa.exc.DatabaseError, match="append-only"), db.engine.begin() as conn:
                conn.execute(sa.text(statement))
        assert [(e.action, e.outcome) for e in db.session.scalars(sa.select(AuditEntry))] == [
            ("auth.login", "succeeded"), ("test.action", "done")]


def test_audit_page_shows_own_entries_to_non_admins(console):
    from webui.services import audit
    from webui.services.users import find

    with console.app.app_context():
        audit.record(find("operator"), "clean", "queued", table="trips")
        audit.record(find("admin"), "rollback", "queued", table="trips")
    op = console.client("operator").get("/audit").get_data(as_text=True)
    admin = console.client("admin").get("/audit").get_data(as_text=True)
    # each client's login is an entry too: the operator's own (clean, login), every one for the admin
    assert "<code>clean</code>" in op and "<code>rollback</code>" not in op and "your own actions · 2 entries" in op
    assert op.count("<code>auth.login</code>") == 1
    assert "<code>clean</code>" in admin and "<code>rollback</code>" in admin and "every user&#39;s actions · 4 entries" in admin
    assert admin.count("<code>auth.login</code>") == 2


PAGES = ["/tables", "/tables/trips", "/tables/trips/timeline", "/tables/trips/file-groups", "/tables/trips/write",
         "/tables/trips/preview", "/jobs", "/audit", "/admin/users", "/healthz", "/tables/trips/services/clean",
         "/tables/trips/services/archive", "/tables/new", "/tables/register"]


def test_web_process_never_imports_pyspark(tmp_path):
    """Exercise every page (and a dry run of each service) in a fresh interpreter; pyspark stays out."""
    script = f"""
import pathlib, sys
from _pytest.monkeypatch import MonkeyPatch
from tests.support.console import make_console, csrf
c = make_console(pathlib.Path({str(tmp_path)!r}), MonkeyPatch())
from tests.support.console import mor_table
from tests.support.mor_tables import I
from webui.services.tables import register_existing
with c.app.app_context():
    register_existing(str(mor_table(c.root / "rides").path), "rides", None)
client = c.client("admin")
last, first = c.table.instants[-1], c.table.instants[0]
pages = {PAGES!r} + [f"/tables/trips/commits/{{last}}", f"/tables/trips/services/rollback?instant={{last}}",
         f"/tables/trips/services/restore?instant={{first}}", f"/tables/trips/services/savepoint?instant={{first}}"]
pages += [p.replace("trips", "rides") for p in {PAGES!r} if "trips" in p] + [
    f"/tables/rides/commits/{{I[2]}}", f"/tables/rides/commits/{{I[4]}}", "/tables/rides/services/compaction",
    f"/tables/rides/services/compaction?instant={{I[4]}}"]
for url in pages:
    assert client.get(url).status_code == 200, url
import io
r = client.post("/tables/trips/write/upload", data={{"up-csrf_token": csrf(client, "/tables/trips/write"),
    "up-operation": "upsert", "up-file": (io.BytesIO(b"trip_id,city,ts,fare\\nq,paris,1,2.0\\n"), "b.csv")}},
    content_type="multipart/form-data")
assert r.status_code == 200
print(sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j")))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
