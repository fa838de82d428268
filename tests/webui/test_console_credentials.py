"""Credentials (issue 23, items 6 and 7): own password change, admin reset / deactivate /
reactivate / unlock, API tokens (list, revoke, expiry, last use), the forced first-login change,
account lockout, the login rate limit shared by two apps on one database, and the audit rows of
each. Users from tests/support/console.py: admin (id 1), operator (2), viewer (3)."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.support.console import PASSWORDS, audit_rows, csrf, login, make_app

LOCKED = ("This account is locked after repeated failed logins. Try again after {until}, "
          "or ask an admin to unlock it.")


def _login(client, user: str, password: str):  # type: ignore[no-untyped-def]
    return client.post("/login", data={"csrf_token": csrf(client, "/login"), "username": user, "password": password})


def _token(client, user: str, password: str | None = None):  # type: ignore[no-untyped-def]
    return client.post("/api/v1/tokens", json={"username": user, "password": password or PASSWORDS[user]})


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _flash(resp) -> list[str]:  # type: ignore[no-untyped-def]
    return re.findall(r'role="alert">([^<]*)</div>', resp.get_data(as_text=True))


def _change(client, current: str, new: str, confirm: str | None = None):  # type: ignore[no-untyped-def]
    return client.post("/account/password", data={"csrf_token": csrf(client, "/account/password"), "current": current,
                                                   "new": new, "confirm": new if confirm is None else confirm})


def _user(app, name: str):  # type: ignore[no-untyped-def]
    from webui.extensions import db
    from webui.models import User

    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.username == name))
        db.session.expunge(user)
        return user


def _tokens(app) -> list[tuple]:  # type: ignore[no-untyped-def]
    from webui.extensions import db
    from webui.models import ApiToken

    with app.app_context():
        return [(t.id, t.user.username, t.revoked, t.revoked_at is not None)
                for t in db.session.scalars(sa.select(ApiToken).order_by(ApiToken.id))]


def _sql(app, statement: str, **params) -> None:  # type: ignore[no-untyped-def]
    from webui.extensions import db

    with app.app_context():
        db.session.execute(sa.text(statement), params)
        db.session.commit()


# ---- own password ---------------------------------------------------------------------------------
def test_change_own_password(console):
    app = console.app
    client = console.client("viewer")
    other = console.client("viewer")  # a second session of the same user
    token = _token(client, "viewer").get_json()["token"]  # issued with the old password
    wrong = _change(client, "not-my-password", "viewer-new-pass-2")
    assert wrong.status_code == 400 and _flash(wrong) == ["The current password is wrong."]
    mismatch = _change(client, PASSWORDS["viewer"], "viewer-new-pass-2", "viewer-new-pass-3")
    assert mismatch.status_code == 400 and _flash(mismatch) == ["The new password and its confirmation differ."]
    short = _change(client, PASSWORDS["viewer"], "short")
    assert short.status_code == 400 and _flash(short) == ["a password has at least 8 characters"]
    same = _change(client, PASSWORDS["viewer"], PASSWORDS["viewer"])
    assert same.status_code == 400 and _flash(same) == ["The new password must differ from the current one."]
    assert _user(app, "viewer").check_password(PASSWORDS["viewer"])  # nothing changed so far

    done = _change(client, PASSWORDS["viewer"], "viewer-new-pass-2")
    assert done.status_code == 302 and done.headers["Location"] == "/"
    after = client.get("/tables")
    assert after.status_code == 200  # this session goes on...
    assert _flash(after) == ["Your password was changed. Your API token was revoked: issue a new one under API tokens."]
    revoked = client.get("/api/v1/tables", headers=_bearer(token))
    assert revoked.status_code == 401 and revoked.get_json()["error"]["code"] == "token_revoked"
    ended = other.get("/tables")  # ...the other one ended with the old password
    assert ended.status_code == 302 and ended.headers["Location"].startswith("/login")
    fresh = console.app.test_client()
    old = _login(fresh, "viewer", PASSWORDS["viewer"])
    assert old.status_code == 401 and _flash(old) == ["Wrong user name or password."]
    assert _login(fresh, "viewer", "viewer-new-pass-2").status_code == 302
    assert [r[:6] for r in audit_rows(app)] == [
        ("viewer", "token.create", None, {"id": 1, "via": "api"}, False, "issued"),
        ("viewer", "user.password", None, {"username": "viewer"}, False, "refused: wrong current password"),
        ("viewer", "user.password", None, {"username": "viewer"}, False, "changed"),
        ("viewer", "token.revoke", None, {"id": 1, "owner": "viewer", "via": "password change"}, False, "revoked"),
    ]
    page = client.get("/audit").get_data(as_text=True)
    assert "viewer-new-pass-2" not in page and PASSWORDS["viewer"] not in page


def test_password_change_needs_csrf(console):
    client = console.client("viewer")
    resp = client.post("/account/password", data={"current": PASSWORDS["viewer"], "new": "viewer-new-pass-2",
                                                  "confirm": "viewer-new-pass-2"})
    assert resp.status_code == 400 and "security token is missing" in resp.get_data(as_text=True)
    assert _user(console.app, "viewer").check_password(PASSWORDS["viewer"])


# ---- admin actions ----------------------------------------------------------------------------------
def test_admin_reset_forces_a_change_and_ends_sessions(console):
    app = console.app
    viewer = console.client("viewer")
    token = _token(viewer, "viewer").get_json()["token"]
    admin = console.client("admin")
    short = admin.post("/admin/users/3/password", data={"csrf_token": csrf(admin, "/admin/users/3"), "password": "x"})
    assert short.status_code == 400 and "Field must be between 8 and 256 characters long." in short.get_data(as_text=True)
    resp = admin.post("/admin/users/3/password", data={"csrf_token": csrf(admin, "/admin/users/3"),
                                                       "password": "temporary-1"})
    assert resp.status_code == 302 and resp.headers["Location"] == "/admin/users/3"
    assert [html.unescape(m) for m in _flash(admin.get("/admin/users/3"))] == [
        "viewer's password was reset: they must choose a new one at their next login. 1 API token of theirs was revoked."]
    assert _user(app, "viewer").must_change_password is True
    assert "must change password" in admin.get("/admin/users/3").get_data(as_text=True)

    assert viewer.get("/tables").headers["Location"].startswith("/login")  # the old session ended
    refused = viewer.get("/api/v1/tables", headers=_bearer(token))
    assert refused.status_code == 401 and refused.get_json()["error"]["code"] == "token_revoked"
    no_token = _token(viewer, "viewer", "temporary-1")
    assert no_token.status_code == 403 and no_token.get_json()["error"]["code"] == "password_change_required"

    first = _login(viewer, "viewer", "temporary-1")
    assert first.status_code == 302 and first.headers["Location"] == "/account/password"
    for url in ("/tables", "/audit", "/account/tokens", "/tables/trips"):
        assert viewer.get(url).headers["Location"] == "/account/password", url
    assert 'data-testid="must-change"' in viewer.get("/account/password").get_data(as_text=True)
    assert _change(viewer, "temporary-1", "viewer-own-pass-1").status_code == 302
    assert viewer.get("/tables").status_code == 200
    # the reset revoked the token issued with the old password: it stays revoked
    revoked = viewer.get("/api/v1/tables", headers=_bearer(token))
    assert revoked.status_code == 401 and revoked.get_json()["error"]["code"] == "token_revoked"
    assert _user(app, "viewer").must_change_password is False
    assert [r[:6] for r in audit_rows(app)] == [
        ("viewer", "token.create", None, {"id": 1, "via": "api"}, False, "issued"),
        ("admin", "user.password_reset", None, {"username": "viewer"}, False, "reset; must change at next login"),
        ("admin", "token.revoke", None, {"id": 1, "owner": "viewer", "via": "password reset"}, False, "revoked"),
        ("viewer", "token.create", None, {}, False, "refused: password change required"),
        ("viewer", "user.password", None, {"username": "viewer"}, False, "changed"),
    ]


def test_deactivate_and_reactivate(console):
    app = console.app
    viewer = console.client("viewer")
    token = _token(viewer, "viewer").get_json()["token"]
    admin = console.client("admin")
    resp = admin.post("/admin/users/3/deactivate", data={"csrf_token": csrf(admin, "/admin/users/3")},
                      follow_redirects=True)
    assert _flash(resp) == ["viewer was deactivated: their sessions and tokens no longer work."]
    assert 'data-testid="user-deactivated"' in resp.get_data(as_text=True)
    assert viewer.get("/tables").headers["Location"].startswith("/login")
    refused = viewer.get("/api/v1/tables", headers=_bearer(token))
    assert refused.status_code == 401 and refused.get_json()["error"] == {
        "code": "user_deactivated", "message": "user viewer is deactivated"}
    again = _login(console.app.test_client(), "viewer", PASSWORDS["viewer"])
    assert again.status_code == 401 and _flash(again) == ["Wrong user name or password."]
    assert _token(console.app.test_client(), "viewer").status_code == 401

    myself = admin.post("/admin/users/1/deactivate", data={"csrf_token": csrf(admin, "/admin/users/1")},
                        follow_redirects=True)
    assert _flash(myself) == ["you cannot deactivate yourself"] and _user(app, "admin").active

    resp = admin.post("/admin/users/3/reactivate", data={"csrf_token": csrf(admin, "/admin/users/3")},
                      follow_redirects=True)
    assert _flash(resp) == ["viewer was reactivated."]
    assert viewer.get("/api/v1/tables", headers=_bearer(token)).status_code == 200
    login(viewer, "viewer", PASSWORDS["viewer"])
    assert viewer.get("/tables").status_code == 200
    assert [r[1:6] for r in audit_rows(app) if r[0] == "admin"] == [
        ("user.deactivate", None, {"username": "viewer"}, False, "deactivated"),
        ("user.reactivate", None, {"username": "viewer"}, False, "reactivated"),
    ]


ADMIN_ACTIONS = ["/admin/users/3/password", "/admin/users/3/deactivate", "/admin/users/3/reactivate",
                 "/admin/users/3/unlock"]


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_non_admins_cannot_reach_admin_actions(console, role):
    client = console.client(role)
    assert client.get("/admin/users/3").status_code == 403
    for url in ADMIN_ACTIONS:
        resp = client.post(url, data={"csrf_token": csrf(client), "password": "temporary-1"})
        assert resp.status_code == 403, url
        assert "this needs the admin role" in resp.get_data(as_text=True)
    assert client.get("/account/tokens?all=1").get_data(as_text=True).count('data-testid="tokens-all"') == 0
    viewer = _user(console.app, "viewer")
    assert (viewer.active, viewer.must_change_password, viewer.check_password(PASSWORDS["viewer"])) == (True, False, True)
    assert audit_rows(console.app) == []


# ---- API tokens -------------------------------------------------------------------------------------
def test_token_list_and_revoke(console):
    app = console.app
    client = console.client()
    viewer_token = _token(client, "viewer").get_json()
    operator_token = _token(client, "operator").get_json()
    admin_token = _token(client, "admin").get_json()
    assert (viewer_token["id"], operator_token["id"], admin_token["id"]) == (1, 2, 3)

    def ids(token: str, query: str = "") -> list[tuple]:
        resp = client.get(f"/api/v1/tokens{query}", headers=_bearer(token))
        assert resp.status_code == 200
        return [(t["id"], t["user"], t["state"]) for t in resp.get_json()["tokens"]]

    unauthenticated = client.get("/api/v1/tokens")
    assert unauthenticated.status_code == 401 and unauthenticated.get_json()["error"]["code"] == "unauthorized"
    assert ids(viewer_token["token"]) == [(1, "viewer", "active")]
    assert ids(viewer_token["token"], "?all=1") == [(1, "viewer", "active")]  # not an admin: own only
    assert ids(admin_token["token"]) == [(3, "admin", "active")]
    assert ids(admin_token["token"], "?all=1") == [(3, "admin", "active"), (2, "operator", "active"),
                                                    (1, "viewer", "active")]
    assert ids(admin_token["token"], "?user=operator") == [(2, "operator", "active")]

    # someone else's token: refused on the API and on the page
    other = client.post("/api/v1/tokens/2/revoke", headers=_bearer(viewer_token["token"]))
    assert other.status_code == 403 and other.get_json()["error"] == {
        "code": "forbidden", "message": "you may revoke only your own tokens (admins: anyone's)"}
    assert client.post("/api/v1/tokens/99/revoke", headers=_bearer(viewer_token["token"])).status_code == 404
    viewer_page = console.client("viewer")
    assert viewer_page.post("/account/tokens/2/revoke", data={"csrf_token": csrf(viewer_page)}).status_code == 403

    # the owner revokes on the page; the token stops working with a clear message
    operator = console.client("operator")
    page = operator.get("/account/tokens").get_data(as_text=True)
    assert 'data-testid="revoke-2"' in page and 'data-testid="revoke-1"' not in page
    resp = operator.post("/account/tokens/2/revoke", data={"csrf_token": csrf(operator, "/account/tokens")},
                         follow_redirects=True)
    assert _flash(resp) == ["Token 2 of operator was revoked."]
    assert 'data-testid="token-state-2">revoked</span>' in resp.get_data(as_text=True)
    refused = client.get("/api/v1/tables", headers=_bearer(operator_token["token"]))
    assert refused.status_code == 401 and refused.get_json()["error"]["code"] == "token_revoked"
    assert re.fullmatch(r"this bearer token was revoked at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; "
                        r"get a new one with POST /api/v1/tokens", refused.get_json()["error"]["message"])
    again = operator.post("/account/tokens/2/revoke", data={"csrf_token": csrf(operator, "/account/tokens")},
                          follow_redirects=True)
    assert _flash(again) == ["Token 2 was already revoked."]

    # an admin revokes anyone's through the API; a token may revoke itself
    resp = client.post("/api/v1/tokens/1/revoke", headers=_bearer(admin_token["token"]))
    assert resp.status_code == 200 and (resp.get_json()["state"], resp.get_json()["revoked"]) == ("revoked", True)
    assert client.post("/api/v1/tokens/3/revoke", headers=_bearer(admin_token["token"])).status_code == 200
    assert client.get("/api/v1/tables", headers=_bearer(admin_token["token"])).status_code == 401
    assert _tokens(app) == [(1, "viewer", True, True), (2, "operator", True, True), (3, "admin", True, True)]
    assert [r[:6] for r in audit_rows(app) if r[1] == "token.revoke"] == [
        ("operator", "token.revoke", None, {"id": 2, "owner": "operator", "via": "page"}, False, "revoked"),
        ("admin", "token.revoke", None, {"id": 1, "owner": "viewer", "via": "api"}, False, "revoked"),
        ("admin", "token.revoke", None, {"id": 3, "owner": "admin", "via": "api"}, False, "revoked"),
    ]


def test_token_issued_on_the_page_and_admin_views(console):
    viewer = console.client("viewer")
    resp = viewer.post("/account/tokens/new", data={"csrf_token": csrf(viewer, "/account/tokens")})
    assert resp.status_code == 201
    token = re.search(r'data-testid="new-token">(hc_[^<]+)</code>', resp.get_data(as_text=True)).group(1)
    assert viewer.get("/api/v1/tables", headers=_bearer(token)).status_code == 200
    assert token not in viewer.get("/account/tokens").get_data(as_text=True)  # shown once
    admin = console.client("admin")
    everyone = admin.get("/account/tokens?all=1").get_data(as_text=True)
    assert "every user&#39;s tokens" in everyone and '<tr data-token="1"><td>1</td><td>viewer</td>' in everyone
    assert "viewer&#39;s tokens" in admin.get("/account/tokens?user=viewer").get_data(as_text=True)
    user_page = admin.get("/admin/users/3").get_data(as_text=True)
    assert '<tr data-token="1">' in user_page and 'data-testid="revoke-1"' in user_page
    assert [r[:6] for r in audit_rows(console.app)] == [
        ("viewer", "token.create", None, {"id": 1, "via": "page"}, False, "issued")]


def test_tokens_expire(tmp_path, monkeypatch):
    from webui.extensions import db
    from webui.models import ApiToken

    app = make_app(tmp_path, monkeypatch, CONSOLE_TOKEN_LIFETIME_DAYS=7)
    client = app.test_client()
    body = _token(client, "viewer").get_json()
    with app.app_context():
        row = db.session.get(ApiToken, body["id"])
        assert row.expires_at - row.created_at == timedelta(days=7)
        assert body["expires_at"] == row.expires_at.isoformat() + "Z"
    _sql(app, "UPDATE api_tokens SET expires_at = :at WHERE id = :id", at="2026-01-02 03:04:05", id=body["id"])
    refused = client.get("/api/v1/tables", headers=_bearer(body["token"]))
    assert refused.status_code == 401 and refused.get_json()["error"] == {
        "code": "token_expired",
        "message": "this bearer token expired at 2026-01-02 03:04:05 UTC; get a new one with POST /api/v1/tokens"}
    listed = _token(client, "viewer").get_json()["token"]
    states = [(t["id"], t["state"]) for t in client.get("/api/v1/tokens", headers=_bearer(listed)).get_json()["tokens"]]
    assert states == [(2, "active"), (1, "expired")]
    unknown = client.get("/api/v1/tables", headers=_bearer("hc_not-a-token"))
    assert unknown.status_code == 401 and unknown.get_json()["error"]["code"] == "unauthorized"


def test_tokens_without_expiry_when_the_lifetime_is_zero(tmp_path, monkeypatch):
    app = make_app(tmp_path, monkeypatch, CONSOLE_TOKEN_LIFETIME_DAYS=0)
    body = _token(app.test_client(), "viewer").get_json()
    assert body["expires_at"] is None


def test_last_used_at_is_written_at_most_once_a_minute(console):
    from webui.extensions import db
    from webui.models import ApiToken

    app = console.app
    client = console.client()
    body = _token(client, "viewer").get_json()

    def last_used():  # type: ignore[no-untyped-def]
        with app.app_context():
            return db.session.get(ApiToken, body["id"]).last_used_at

    assert last_used() is None
    assert client.get("/api/v1/tables", headers=_bearer(body["token"])).status_code == 200
    first = last_used()
    assert first is not None
    assert client.get("/api/v1/tables", headers=_bearer(body["token"])).status_code == 200
    assert last_used() == first  # within the minute: not written again
    _sql(app, "UPDATE api_tokens SET last_used_at = :at WHERE id = :id", at=first - timedelta(minutes=2), id=body["id"])
    assert client.get("/api/v1/tables", headers=_bearer(body["token"])).status_code == 200
    assert last_used() > first
    listed = client.get("/api/v1/tokens", headers=_bearer(body["token"])).get_json()["tokens"]
    assert listed[0]["last_used_at"] == last_used().isoformat() + "Z"


# ---- first login ------------------------------------------------------------------------------------
def _first_start(tmp_path, monkeypatch, capsys, **env):  # type: ignore[no-untyped-def]
    from flask_migrate import upgrade

    from webui import create_app
    from webui.services.users import bootstrap_admin

    monkeypatch.setenv("CONSOLE_WAREHOUSE_ROOTS", str(tmp_path / "lake"))
    monkeypatch.setenv("CONSOLE_SECRET_KEY", "test-secret-key")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'console.db'}")
    app = create_app({"CONSOLE_BOOTSTRAP_ADMIN": False, "TESTING": True, **env})
    with app.app_context():
        upgrade()
        capsys.readouterr()
        assert bootstrap_admin(app) == "admin"
    return app, capsys.readouterr().err


def test_first_login_must_change_the_one_time_password(tmp_path, monkeypatch, capsys):
    app, err = _first_start(tmp_path, monkeypatch, capsys)
    password = re.search(r"the one-time password: (\S+)", err).group(1)
    assert _user(app, "admin").must_change_password is True
    client = app.test_client()
    refused = _token(client, "admin", password)
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "password_change_required"
    resp = _login(client, "admin", password)
    assert resp.status_code == 302 and resp.headers["Location"] == "/account/password"
    for url in ("/tables", "/admin/users", "/jobs", "/account/tokens"):
        assert client.get(url).headers["Location"] == "/account/password", url
    page = client.get("/account/password").get_data(as_text=True)
    assert 'data-testid="must-change"' in page and 'data-testid="nav-tokens"' not in page
    assert _change(client, password, "my-own-admin-pass").status_code == 302
    assert client.get("/admin/users").status_code == 200
    assert _token(client, "admin", "my-own-admin-pass").status_code == 201
    via = {"username": "admin", "remote_addr": "127.0.0.1"}
    assert [r[1:6] for r in audit_rows(app, sessions=True)] == [
        ("auth.login", None, {**via, "via": "api"}, False, "succeeded"),
        ("token.create", None, {}, False, "refused: password change required"),
        ("auth.login", None, {**via, "via": "page"}, False, "succeeded"),
        ("user.password", None, {"username": "admin"}, False, "changed"),
        ("auth.login", None, {**via, "via": "api"}, False, "succeeded"),
        ("token.create", None, {"id": 1, "via": "api"}, False, "issued"),
    ]


def test_first_admin_with_a_chosen_password_need_not_change_it(tmp_path, monkeypatch, capsys):
    app, err = _first_start(tmp_path, monkeypatch, capsys, CONSOLE_ADMIN_PASSWORD="chosen-admin-pass")
    assert err == "" and _user(app, "admin").must_change_password is False
    client = app.test_client()
    login(client, "admin", "chosen-admin-pass")
    assert client.get("/tables").status_code == 200


# ---- lockout ----------------------------------------------------------------------------------------
@pytest.fixture
def strict(tmp_path, monkeypatch):
    return make_app(tmp_path, monkeypatch, CONSOLE_LOCKOUT_ATTEMPTS=3, CONSOLE_LOCKOUT_WINDOW_MIN=15,
                    CONSOLE_LOCKOUT_MIN=15, CONSOLE_LOGIN_LIMIT="100 per minute")


def test_lockout_after_repeated_failures_and_unlock(strict):
    app = strict
    client = app.test_client()
    for _ in range(2):
        resp = _login(client, "operator", "wrong-password")
        assert resp.status_code == 401 and _flash(resp) == ["Wrong user name or password."]
    third = _login(client, "operator", "wrong-password")
    locked_until = _user(app, "operator").locked_until
    assert locked_until is not None
    message = LOCKED.format(until=locked_until.strftime("%Y-%m-%d %H:%M UTC"))
    assert third.status_code == 403 and _flash(third) == [message]
    # the right password gets the very same answer: the page never tells if it was right
    right = _login(client, "operator", PASSWORDS["operator"])
    assert right.status_code == 403 and _flash(right) == [message]
    api = _token(client, "operator")
    assert api.status_code == 403 and api.get_json()["error"] == {"code": "account_locked", "message": message}
    assert client.get("/tables").status_code == 302  # not logged in

    admin = app.test_client()
    login(admin, "admin", PASSWORDS["admin"])
    listing = admin.get("/admin/users").get_data(as_text=True)
    assert re.search(r'data-testid="state-operator"><span class="badge text-bg-danger">locked</span>', listing)
    page = admin.get("/admin/users/2").get_data(as_text=True)
    assert f"locked until {locked_until:%Y-%m-%d %H:%M} UTC" in page and 'data-testid="unlock"' in page
    resp = admin.post("/admin/users/2/unlock", data={"csrf_token": csrf(admin, "/admin/users/2")}, follow_redirects=True)
    assert _flash(resp) == ["operator was unlocked."] and 'data-testid="unlock"' not in resp.get_data(as_text=True)
    not_locked = admin.post("/admin/users/2/unlock", data={"csrf_token": csrf(admin, "/admin/users/2")},
                            follow_redirects=True)
    assert _flash(not_locked) == ["operator is not locked"]
    # failures before the unlock no longer count: one more wrong password does not lock again
    assert _login(client, "operator", "wrong-password").status_code == 401
    assert _login(client, "operator", PASSWORDS["operator"]).status_code == 302

    rows = [(r[0], r[1], r[3], r[5]) for r in audit_rows(app, sessions=True) if r[1] != "auth.login" or r[0] != "admin"]
    failed = {"username": "operator", "remote_addr": "127.0.0.1", "via": "page"}
    assert rows == [
        ("operator", "auth.login_failed", failed, "wrong user name or password"),
        ("operator", "auth.login_failed", failed, "wrong user name or password"),
        ("operator", "auth.login_failed", failed, "wrong user name or password"),
        ("system", "user.lock", {"username": "operator"},
         f"locked until {locked_until:%Y-%m-%d %H:%M:%S} UTC after 3 failed logins"),
        ("operator", "auth.login_failed", failed, "refused: account locked"),
        ("operator", "auth.login_failed", {**failed, "via": "api"}, "refused: account locked"),
        ("admin", "user.unlock", {"username": "operator"}, "unlocked"),
        ("operator", "auth.login_failed", failed, "wrong user name or password"),
        ("operator", "auth.login", failed, "succeeded"),
    ]
    text = str(audit_rows(app, sessions=True))
    assert "wrong-password" not in text and PASSWORDS["operator"] not in text


def test_a_lock_ends_by_itself_and_a_success_resets_the_count(strict):
    app = strict
    client = app.test_client()
    for _ in range(2):
        assert _login(client, "viewer", "wrong-password").status_code == 401
    assert _login(client, "viewer", PASSWORDS["viewer"]).status_code == 302
    client = app.test_client()
    for _ in range(2):  # 2 after the success: not 4 in the window
        assert _login(client, "viewer", "wrong-password").status_code == 401
    assert _user(app, "viewer").locked_until is None
    assert _login(client, "viewer", "wrong-password").status_code == 403
    _sql(app, "UPDATE users SET locked_until = :at WHERE username = 'viewer'", at="2026-01-01 00:00:00")
    assert _login(client, "viewer", PASSWORDS["viewer"]).status_code == 302


def test_unknown_names_lock_like_real_ones(strict):
    client = strict.test_client()
    answers = [_login(client, "nobody", "wrong-password") for _ in range(4)]
    assert [a.status_code for a in answers] == [401, 401, 403, 403]
    assert _flash(answers[3])[0].startswith("This account is locked after repeated failed logins. Try again after ")
    assert [(r[0], r[1], r[3]["username"]) for r in audit_rows(strict, sessions=True)] == [
        ("nobody", "auth.login_failed", "nobody")] * 4


def test_logins_and_logouts_are_audited(console):
    client = console.client()
    login(client, "viewer", PASSWORDS["viewer"])
    client.post("/logout", data={"csrf_token": csrf(client)})
    assert client.get("/tables").status_code == 302
    assert [r[:6] for r in audit_rows(console.app, sessions=True)] == [
        ("viewer", "auth.login", None, {"username": "viewer", "remote_addr": "127.0.0.1", "via": "page"}, False,
         "succeeded"),
        ("viewer", "auth.logout", None, {"remote_addr": "127.0.0.1"}, False, "logged out"),
    ]


# ---- the rate limit, shared through the database ---------------------------------------------------
@pytest.fixture(scope="module")
def pg_server():
    from tests.support.postgres import postgres_server

    with postgres_server() as url:
        yield url


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_rate_limit_is_shared_by_two_apps_on_one_database(tmp_path, monkeypatch, request, backend):
    """Two apps (two gunicorn workers) on the same database spend one budget per address: 4 per
    minute in all, not 4 in each."""
    from webui import create_app
    from webui.extensions import db
    from webui.models import LoginAttempt, RateLimitWindow

    url = None
    if backend == "postgresql":
        from tests.support.postgres import fresh_database

        url = fresh_database(request.getfixturevalue("pg_server"), "t_rate_limit")
    settings = {"CONSOLE_LOGIN_LIMIT": "4 per minute", "CONSOLE_LOCKOUT_ATTEMPTS": 0}
    first = make_app(tmp_path, monkeypatch, url, **settings)
    second = create_app({"CONSOLE_BOOTSTRAP_ADMIN": False, "TESTING": True, **settings})  # the same DATABASE_URL
    with first.app_context():
        first_url = db.engine.url.render_as_string(hide_password=False)
    with second.app_context():
        assert db.engine.url.render_as_string(hide_password=False) == first_url
    assert first_url == (url or f"sqlite:///{tmp_path / 'console.db'}")
    a, b = first.test_client(), second.test_client()
    answers = [_login(c, "viewer", "wrong-password").status_code for c in (a, b, a, b)]
    assert answers == [401, 401, 401, 401]
    throttled = _login(b, "viewer", PASSWORDS["viewer"])  # b has seen 2 attempts only, yet refuses the 5th
    assert throttled.status_code == 429 and throttled.headers["Retry-After"].isdigit()
    assert _flash(throttled)[0].startswith("Too many login attempts from your address: wait ")
    api = _token(a, "viewer")  # the token endpoint spends the same budget
    assert api.status_code == 429 and api.get_json()["error"]["code"] == "too_many_requests"
    # the attempts that reached the password check are the lockout's rows; the refused ones are
    # only Flask-Limiter's hits, in the one window both apps count in
    with second.app_context():
        outcomes = [(r.remote_addr, r.channel, r.outcome) for r in db.session.scalars(
            sa.select(LoginAttempt).order_by(LoginAttempt.id))]
        windows = [(w.key, w.hits) for w in db.session.scalars(sa.select(RateLimitWindow))]
    assert outcomes == [("127.0.0.1", "page", "failed")] * 4
    assert windows == [("LIMITER/127.0.0.1/login/4/1/minute", 6)]
    # a minute later (the window has ended) the budget is back
    _sql(first, "UPDATE rate_limits SET expires_at = :at", at="2026-01-01 00:00:00")
    assert _login(b, "viewer", PASSWORDS["viewer"]).status_code == 302
    for app in (first, second):
        with app.app_context():
            db.engine.dispose()
