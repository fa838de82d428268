"""Credentials in a real browser (Debian's Chromium driven by Playwright) against gunicorn with
two workers on a fresh database: the first start's one-time admin password must be changed at
the first login, a user changes their password through the form, a token is revoked on its page,
and repeated failed logins lock an account (shared by both workers through the database).
Screenshots go to artifacts/screenshots/."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.support.browser import SHOTS, chromium, new_page, require_chromium, start_gunicorn, submit_login
from tests.support.console import PASSWORDS, stop

STATE: dict[str, str] = {}  # the admin's password, once the first test changed it


def _one_time_password(log: Path, deadline: float) -> str:
    while time.monotonic() < deadline:
        found = re.search(r"created the first admin 'admin' with the one-time password: (\S+)", log.read_text())
        if found:
            return found.group(1)
        time.sleep(0.2)
    raise AssertionError(f"no one-time password in the gunicorn log:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    require_chromium()
    tmp = tmp_path_factory.mktemp("browser-credentials")
    (tmp / "lake").mkdir()
    db_url = f"sqlite:///{tmp / 'console.db'}"
    env = {**os.environ, "DATABASE_URL": db_url, "CONSOLE_WAREHOUSE_ROOTS": str(tmp / "lake"),
           "CONSOLE_SECRET_KEY": "test-secret-key", "CONSOLE_LOGIN_LIMIT": "60 per minute"}
    for name in ("CONSOLE_ADMIN_USER", "CONSOLE_ADMIN_PASSWORD", "CONSOLE_TEST_HOLD_AT"):
        env.pop(name, None)
    # the schema only, no users: the app's first start creates the admin and prints its password
    mp = pytest.MonkeyPatch()
    for key in ("DATABASE_URL", "CONSOLE_WAREHOUSE_ROOTS", "CONSOLE_SECRET_KEY"):
        mp.setenv(key, env[key])
    from flask_migrate import upgrade

    from webui import create_app

    app = create_app({"CONSOLE_BOOTSTRAP_ADMIN": False})
    with app.app_context():
        upgrade()
    log_path = tmp / "gunicorn.log"
    log = open(log_path, "w")  # noqa: SIM115
    web, base = start_gunicorn(env, log, workers=2)
    deadline = time.monotonic() + 60
    one_time = _one_time_password(log_path, deadline)
    with app.app_context():
        from webui.services.users import create_user

        for role in ("operator", "viewer"):
            create_user(role, PASSWORDS[role], role)
        create_user("dave", "dave-pass-123", "viewer")
    with chromium() as browser:
        yield base, browser, one_time
    stop(web)
    log.close()
    mp.undo()


def _change_password(page, current: str, new: str, confirm: str) -> None:  # type: ignore[no-untyped-def]
    """Fill in and send the change-password form."""
    page.fill("#current", current)
    page.fill("#new", new)
    page.fill("#confirm", confirm)
    page.click("[data-testid=password-submit]")


def _page(browser):  # type: ignore[no-untyped-def]
    return new_page(browser, 1300, 800)


def _alerts(page) -> list[str]:  # type: ignore[no-untyped-def]
    return [t.strip() for t in page.locator("[role=alert]").all_inner_texts()]


def test_first_login_forces_a_password_change(site):
    base, browser, one_time = site
    page, problems = _page(browser)
    submit_login(page, base, "admin", one_time)
    assert page.url == f"{base}/account/password"
    assert "choose your own before you continue" in page.locator("[data-testid=must-change]").inner_text()
    page.goto(f"{base}/tables")  # any page leads back here until the password is changed
    assert page.url == f"{base}/account/password"
    assert page.locator("[data-testid=nav-tokens]").count() == 0
    page.screenshot(path=str(SHOTS / "console-first-login.png"), full_page=True)
    _change_password(page, one_time, "admin-own-pass-1", "admin-own-pass-1")
    page.wait_for_url(f"{base}/tables")
    assert _alerts(page) == ["Your password was changed."]
    STATE["admin"] = "admin-own-pass-1"
    page.goto(f"{base}/admin/users")
    assert page.locator("[data-testid=state-admin]").inner_text().strip() == "active"
    # the API refused a token before the change; now it gives one
    resp = page.request.post(f"{base}/api/v1/tokens", data={"username": "admin", "password": "admin-own-pass-1"})
    assert resp.status == 201
    assert [p for p in problems if "Content Security Policy" in p or "Refused" in p] == []


def test_password_change_through_the_form(site):
    base, browser, _ = site
    page, problems = _page(browser)
    submit_login(page, base, "viewer", PASSWORDS["viewer"])
    page.wait_for_url(f"{base}/tables")
    page.click("[data-testid=nav-password]")
    page.wait_for_url(f"{base}/account/password")
    _change_password(page, "not-my-password", "viewer-new-pass-2", "viewer-new-pass-2")
    page.wait_for_load_state()
    assert _alerts(page) == ["The current password is wrong."]
    _change_password(page, PASSWORDS["viewer"], "viewer-new-pass-2", "viewer-new-pass-3")
    page.wait_for_load_state()
    assert _alerts(page) == ["The new password and its confirmation differ."]
    page.screenshot(path=str(SHOTS / "console-password-mismatch.png"), full_page=True)
    _change_password(page, PASSWORDS["viewer"], "viewer-new-pass-2", "viewer-new-pass-2")
    page.wait_for_url(f"{base}/tables")
    assert _alerts(page) == ["Your password was changed."]
    page.click("nav button[type=submit]")  # log out
    page.wait_for_url(f"{base}/login")
    submit_login(page, base, "viewer", PASSWORDS["viewer"])
    assert page.url == f"{base}/login" and _alerts(page) == ["Wrong user name or password."]
    submit_login(page, base, "viewer", "viewer-new-pass-2")
    page.wait_for_url(f"{base}/tables")
    assert page.locator("[data-testid=whoami]").inner_text() == "viewer"
    assert [p for p in problems if "Content Security Policy" in p or "Refused" in p] == []


def test_token_revoked_on_its_page(site):
    base, browser, _ = site
    page, problems = _page(browser)
    submit_login(page, base, "operator", PASSWORDS["operator"])
    page.wait_for_url(f"{base}/tables")
    page.click("[data-testid=nav-tokens]")
    page.wait_for_url(f"{base}/account/tokens")
    page.click("[data-testid=new-token-submit]")
    page.wait_for_selector("[data-testid=new-token]")
    token = page.locator("[data-testid=new-token]").inner_text()
    assert token.startswith("hc_")
    auth = {"Authorization": f"Bearer {token}"}
    assert page.request.get(f"{base}/api/v1/tables", headers=auth).status == 200
    page.goto(f"{base}/account/tokens")
    token_id = page.locator("tr[data-token]").first.get_attribute("data-token")
    assert page.locator(f"[data-testid=token-state-{token_id}]").inner_text() == "active"
    assert page.locator(f"[data-testid=token-used-{token_id}]").inner_text() != "never"  # last use written
    page.screenshot(path=str(SHOTS / "console-tokens.png"), full_page=True)
    page.click(f"[data-testid=revoke-{token_id}]")
    page.wait_for_url(f"{base}/account/tokens")
    assert _alerts(page) == [f"Token {token_id} of operator was revoked."]
    assert page.locator(f"[data-testid=token-state-{token_id}]").inner_text() == "revoked"
    assert page.locator(f"[data-testid=revoke-{token_id}]").count() == 0
    page.screenshot(path=str(SHOTS / "console-token-revoked.png"), full_page=True)
    refused = page.request.get(f"{base}/api/v1/tables", headers=auth)
    assert refused.status == 401 and refused.json()["error"]["code"] == "token_revoked"
    assert [p for p in problems if "Content Security Policy" in p or "Refused" in p] == []


def test_lockout_on_the_login_page_and_for_admins(site):
    base, browser, _ = site
    assert "admin" in STATE, "the first test changes the admin's password"
    page, _problems = _page(browser)
    for _ in range(4):  # the requests land on either gunicorn worker: they count together
        submit_login(page, base, "dave", "wrong-password")
        assert _alerts(page) == ["Wrong user name or password."]
    submit_login(page, base, "dave", "wrong-password")
    locked = _alerts(page)
    assert len(locked) == 1 and locked[0].startswith("This account is locked after repeated failed logins.")
    submit_login(page, base, "dave", "dave-pass-123")  # the right password: the same answer
    assert _alerts(page) == locked and page.url == f"{base}/login"
    page.screenshot(path=str(SHOTS / "console-login-locked.png"), full_page=True)

    admin, _ = _page(browser)
    submit_login(admin, base, "admin", STATE["admin"])
    admin.wait_for_url(f"{base}/tables")
    admin.goto(f"{base}/admin/users")
    assert admin.locator("[data-testid=state-dave]").inner_text().strip() == "locked"
    admin.screenshot(path=str(SHOTS / "console-users.png"), full_page=True)
    admin.click("[data-testid=manage-dave]")
    admin.wait_for_selector("[data-testid=unlock]")
    admin.screenshot(path=str(SHOTS / "console-user-locked.png"), full_page=True)
    admin.click("[data-testid=unlock]")
    admin.wait_for_load_state()
    assert _alerts(admin) == ["dave was unlocked."]
    submit_login(page, base, "dave", "dave-pass-123")
    page.wait_for_url(f"{base}/tables")
    admin.goto(f"{base}/audit")
    who = admin.locator("[data-testid=audit] tbody tr td:nth-child(2)").all_inner_texts()
    actions = admin.locator("[data-testid=audit] tbody tr td:nth-child(3)").all_inner_texts()
    rows = list(zip(who, actions, strict=True))
    assert rows[:3] == [("dave", "auth.login"), ("admin", "user.unlock"), ("admin", "auth.login")]
    assert rows.count(("dave", "auth.login_failed")) == 6 and rows.count(("system", "user.lock")) == 1
    admin.screenshot(path=str(SHOTS / "console-audit-credentials.png"), full_page=True)
