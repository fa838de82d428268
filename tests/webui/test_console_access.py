"""Who may do what: login everywhere but /healthz and static, roles on every mutation, CSRF."""

from __future__ import annotations

import pytest

from tests.support.console import PASSWORDS, audit_rows, csrf, jobs_rows

PUBLIC = {"/healthz", "/login", "/api/v1/tokens"}
ARGS = {"name": "trips", "instant": "20260101000000000", "job_id": 1, "operation": "clean", "user_id": 1,
        "filename": "console.css", "token_id": 1}

# every mutating route, with the lowest role allowed (the test below checks the list is complete)
MUTATIONS = [
    ("/tables/new", "operator"),
    ("/tables/register", "operator"),
    ("/tables/trips/write/upload", "operator"),
    ("/tables/trips/write/demo", "operator"),
    ("/tables/trips/write/confirm", "operator"),
    ("/tables/trips/services/rollback", "admin"),
    ("/tables/trips/services/restore", "admin"),
    ("/tables/trips/services/savepoint", "operator"),
    ("/tables/trips/services/savepoint_delete", "operator"),
    ("/tables/trips/services/clean", "operator"),
    ("/tables/trips/services/archive", "operator"),
    ("/tables/trips/services/compaction", "operator"),
    ("/admin/users", "admin"),
    ("/admin/users/1/role", "admin"),
    ("/admin/users/3/password", "admin"),
    ("/admin/users/3/deactivate", "admin"),
    ("/admin/users/3/reactivate", "admin"),
    ("/admin/users/3/unlock", "admin"),
    ("/account/password", "viewer"),
    ("/account/tokens/new", "viewer"),
    ("/account/tokens/1/revoke", "viewer"),
    ("/tables/trips/preview", "viewer"),
    ("/jobs/1/cancel", "viewer"),
    ("/logout", "viewer"),
]
API_MUTATIONS = [
    ("/api/v1/tables", "operator", {"name": "t2", "record_key": "id"}),
    ("/api/v1/tables/trips/jobs", "operator", {"operation": "upsert", "records": [{"trip_id": "a"}]}),
    ("/api/v1/tables/trips/rollback", "admin", {"instant": "20260101000000000"}),
    ("/api/v1/tables/trips/restore", "admin", {"instant": "20260101000000000"}),
    ("/api/v1/tables/trips/services/clean", "operator", {}),
    ("/api/v1/tables/trips/compaction", "operator", {}),
    ("/api/v1/jobs/1/cancel", "viewer", {}),
    ("/api/v1/tokens/999/revoke", "viewer", {}),  # no such token: 404 for every role (ownership: test_console_credentials)
]
RANK = {"viewer": 0, "operator": 1, "admin": 2}


def _url(rule) -> str:  # type: ignore[no-untyped-def]
    return rule.build({k: ARGS[k] for k in rule.arguments}, append_unknown=False)[1]


def test_every_route_requires_login(console):
    client = console.client()
    checked = 0
    for rule in console.app.url_map.iter_rules():
        url = _url(rule)
        if rule.endpoint == "static" or url in PUBLIC:
            continue
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            resp = client.open(url, method=method)
            if url.startswith("/api/"):
                assert resp.status_code == 401, (method, url, resp.status_code)
                assert resp.get_json()["error"]["code"] == "unauthorized"
            elif method == "GET":
                assert resp.status_code == 302 and "/login" in resp.headers["Location"], (method, url, resp.status_code)
            else:  # a POST without a session fails CSRF (400) or login (302): never runs
                assert resp.status_code in (302, 400), (method, url, resp.status_code)
            checked += 1
    assert checked >= 35
    assert client.get("/healthz").status_code == 200
    assert client.get("/static/console.css").status_code == 200


def test_mutation_list_covers_every_post_route(console):
    posts = {r.endpoint for r in console.app.url_map.iter_rules() if "POST" in r.methods}
    adapter = console.app.url_map.bind("localhost")
    urls = [u for u, _r in MUTATIONS] + [u for u, _r, _b in API_MUTATIONS] + ["/login", "/api/v1/tokens"]
    listed = {adapter.match(u, method="POST")[0] for u in urls}
    assert posts == listed


@pytest.mark.parametrize("url,needed", MUTATIONS)
def test_pages_refuse_lower_roles_and_missing_csrf(console, url, needed):
    for role in ("viewer", "operator", "admin"):
        client = console.client(role)
        token = csrf(client)
        resp = client.post(url, data={"csrf_token": token})
        if RANK[role] < RANK[needed]:
            assert resp.status_code == 403, (role, url, resp.status_code)
            assert f"needs the {needed} role" in resp.get_data(as_text=True)
        else:
            assert resp.status_code != 403, (role, url)
            if url == "/logout":
                client = console.client(role)
            no_csrf = client.post(url, data={})
            assert no_csrf.status_code == 400, (role, url, no_csrf.status_code)
            assert "security token is missing" in no_csrf.get_data(as_text=True)
    assert jobs_rows(console.app) == [] or all(j[1] == "preview" for j in jobs_rows(console.app))


def _token(client, role: str) -> str:
    resp = client.post("/api/v1/tokens", json={"username": role, "password": PASSWORDS[role]})
    assert resp.status_code == 201
    return resp.get_json()["token"]


@pytest.mark.parametrize("url,needed,body", API_MUTATIONS)
def test_api_refuses_lower_roles(console, url, needed, body):
    client = console.client()
    for role in ("viewer", "operator", "admin"):
        token = _token(client, role)
        resp = client.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
        if RANK[role] < RANK[needed]:
            assert resp.status_code == 403, (role, url, resp.status_code)
            assert resp.get_json()["error"]["code"] == "forbidden"
        else:
            assert resp.status_code != 403, (role, url, resp.get_json())


def test_api_ignores_the_session_cookie(console):
    client = console.client("admin")  # logged in with a cookie, but no bearer token
    assert client.get("/api/v1/tables").status_code == 401
    assert client.post("/api/v1/tables/trips/rollback", json={"instant": console.table.instants[-1]}).status_code == 401


def test_wrong_password_and_throttling(tmp_path, monkeypatch):
    from tests.support.console import make_app

    app = make_app(tmp_path, monkeypatch, CONSOLE_LOGIN_LIMIT="3 per minute")
    client = app.test_client()
    for _ in range(3):
        token = csrf(client, "/login")
        resp = client.post("/login", data={"csrf_token": token, "username": "admin", "password": "nope"})
        assert resp.status_code == 401
        assert "Wrong user name or password." in resp.get_data(as_text=True)
    token = csrf(client, "/login")
    resp = client.post("/login", data={"csrf_token": token, "username": "admin", "password": PASSWORDS["admin"]})
    assert resp.status_code == 429
    assert client.get("/tables").status_code == 302


def test_secure_headers_and_cookies(console):
    client = console.client()
    resp = client.get("/login")
    assert resp.headers["Content-Security-Policy"].startswith("default-src 'self';")
    assert "script-src 'self';" in resp.headers["Content-Security-Policy"]
    assert resp.headers["X-Frame-Options"] == "DENY"
    token = csrf(client, "/login")
    resp = client.post("/login", data={"csrf_token": token, "username": "viewer", "password": PASSWORDS["viewer"]})
    cookie = [h for h in resp.headers.getlist("Set-Cookie") if h.startswith("session=")][0]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    page = client.get("/tables").get_data(as_text=True)
    assert "<script>" not in page and " style=" not in page and "onclick" not in page
    assert PASSWORDS["viewer"] not in page and "test-secret-key" not in page


def test_viewer_sees_no_action_buttons(console):
    viewer = console.client("viewer").get("/tables/trips/timeline").get_data(as_text=True)
    admin = console.client("admin").get("/tables/trips/timeline").get_data(as_text=True)
    last = console.table.instants[-1]
    assert f'data-testid="rollback-{last}"' in admin and "Savepoint</a>" in admin
    assert "Roll back" not in viewer and "Savepoint</a>" not in viewer and "Restore to" not in viewer
    assert 'data-testid="nav-write"' not in viewer
    # and posting anyway is refused, with nothing queued and nothing audited
    client = console.client("viewer")
    resp = client.post("/tables/trips/services/rollback", data={"csrf_token": csrf(client), "instant": last})
    assert resp.status_code == 403
    assert jobs_rows(console.app) == [] and audit_rows(console.app) == []


def test_healthz_without_login(console):
    resp = console.client().get("/healthz")
    assert resp.status_code == 200
    assert resp.get_json() == {"status": "ok", "database": "ok", "worker_heartbeat_age_s": None}


def test_admin_manages_users_and_roles(console):
    from tests.support.console import audit_rows, login

    admin = console.client("admin")
    resp = admin.post("/admin/users", data={"csrf_token": csrf(admin), "username": "carol", "password": "carol-pass-1",
                                            "role": "operator"})
    assert resp.status_code == 302
    carol = console.app.test_client()
    login(carol, "carol", "carol-pass-1")
    assert carol.get("/tables/trips/write").status_code == 200
    assert carol.get("/admin/users").status_code == 403
    resp = admin.post("/admin/users/4/role", data={"csrf_token": csrf(admin), "role": "viewer"})
    assert resp.status_code == 302
    assert carol.get("/tables/trips/write").status_code == 403  # the role is checked on every request
    resp = admin.post("/admin/users/1/role", data={"csrf_token": csrf(admin), "role": "viewer"}, follow_redirects=True)
    assert "admin is the last admin: make someone else admin first" in resp.get_data(as_text=True)
    assert [(r[1], r[3], r[5]) for r in audit_rows(console.app)] == [
        ("user.create", {"username": "carol", "role": "operator"}, "created"),
        ("user.role", {"username": "carol"}, "operator -> viewer"),
        ("user.role", {"username": "admin"}, "refused: admin is the last admin: make someone else admin first"),
    ]
    page = admin.get("/admin/users").get_data(as_text=True)
    assert "carol-pass-1" not in page and "scrypt" not in page and "pbkdf2" not in page
