"""Logins: the lockout per account, kept in the database (`LoginAttempt` rows), so that every
gunicorn worker and every host that shares the console's database sees the same failures.

`attempt()` is the one path for the login page and the API's token endpoint (both already past
the rate limit per address, which Flask-Limiter counts: `webui.ratelimit`):

1. the attempt is recorded;
2. a locked account is refused whatever the password (the answer never says if it was right);
3. a wrong password (or a deactivated user) is a failure; `lockout_attempts` failures within
   `lockout_window` since the last success, lock or unlock lock the account for `lockout_for`.

Every outcome is audited.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from werkzeug.security import check_password_hash, generate_password_hash

from webui.extensions import db
from webui.models import LoginAttempt, User, utcnow
from webui.services import audit


class Verdict(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOCKED = "locked"


@dataclass(frozen=True)
class LoginPolicy:
    """The lockout of `attempt()`, from the console's settings."""

    lockout_attempts: int  # failures that lock an account (0: never locked)
    lockout_window: timedelta
    lockout_for: timedelta

    @classmethod
    def from_config(cls, config: Any) -> LoginPolicy:
        return cls(lockout_attempts=int(config["CONSOLE_LOCKOUT_ATTEMPTS"]),
                   lockout_window=timedelta(minutes=int(config["CONSOLE_LOCKOUT_WINDOW_MIN"])),
                   lockout_for=timedelta(minutes=int(config["CONSOLE_LOCKOUT_MIN"])))


@dataclass(frozen=True)
class LoginResult:
    verdict: Verdict
    user: User | None = None
    locked_until: datetime | None = None

    @property
    def message(self) -> str:
        """What the login page or the API says (never whether the password was right)."""
        if self.verdict is Verdict.LOCKED:
            until = self.locked_until.strftime("%Y-%m-%d %H:%M UTC") if self.locked_until else "later"
            return (f"This account is locked after repeated failed logins. Try again after {until}, "
                    "or ask an admin to unlock it.")
        if self.verdict is Verdict.FAILED:
            return "Wrong user name or password."
        return "Logged in."


_DUMMY_HASH: list[str] = []


def _burn_hash_time(password: str) -> None:
    """Check a password against a throwaway hash, so an unknown user name answers as slowly as
    a known one (the timing must not tell which names exist)."""
    if not _DUMMY_HASH:
        _DUMMY_HASH.append(generate_password_hash("not-a-password"))
    check_password_hash(_DUMMY_HASH[0], password)


def attempt(username: str, password: str, remote_addr: str, channel: str, policy: LoginPolicy,
            now: datetime | None = None) -> LoginResult:
    """Check one login (see the module's docstring); records and audits it."""
    now = now or utcnow()
    username = (username or "")[:80]
    remote_addr = (remote_addr or "unknown")[:64]
    row = LoginAttempt(at=now, username=username, remote_addr=remote_addr, channel=channel, outcome="pending")
    db.session.add(row)
    db.session.commit()
    _prune(now, policy)

    user = db.session.scalar(sa.select(User).where(User.username == username))
    params = {"username": username, "remote_addr": remote_addr, "via": channel}
    locked_until = _locked_until(user, username, now, policy)
    if locked_until is not None:
        row.outcome = Verdict.LOCKED.value
        audit.record(user, "auth.login_failed", "refused: account locked", params=params, commit=False,
                     who=username)
        db.session.commit()
        return LoginResult(Verdict.LOCKED, user, locked_until)

    if user is None:
        _burn_hash_time(password)
        ok = False
    else:
        ok = user.check_password(password) and user.active
    if ok:
        row.outcome = Verdict.SUCCEEDED.value
        audit.record(user, "auth.login", "succeeded", params=params, commit=False)
        db.session.commit()
        return LoginResult(Verdict.SUCCEEDED, user)

    row.outcome = Verdict.FAILED.value
    audit.record(user, "auth.login_failed", "wrong user name or password", params=params, commit=False,
                 who=username)
    db.session.commit()
    locked_until = _lock_if_due(user, username, now, policy)
    if locked_until is not None:
        return LoginResult(Verdict.LOCKED, user, locked_until)
    return LoginResult(Verdict.FAILED, user)


def _failures_since(user: User | None, now: datetime, policy: LoginPolicy, username: str) -> datetime:
    """Failures count from the latest of: the window's start, the account's last success, and
    its last lock's end (or an admin's unlock)."""
    since = now - policy.lockout_window
    last_ok = db.session.scalar(sa.select(sa.func.max(LoginAttempt.at)).where(
        LoginAttempt.username == username, LoginAttempt.outcome == Verdict.SUCCEEDED.value))
    if last_ok is not None and last_ok > since:
        since = last_ok
    if user is not None and user.locked_until is not None and user.locked_until > since:
        since = user.locked_until
    return since


def _failures(username: str, since: datetime) -> int:
    return db.session.scalar(sa.select(sa.func.count(LoginAttempt.id)).where(
        LoginAttempt.username == username, LoginAttempt.outcome == Verdict.FAILED.value,
        LoginAttempt.at >= since)) or 0


def _locked_until(user: User | None, username: str, now: datetime, policy: LoginPolicy) -> datetime | None:
    if policy.lockout_attempts <= 0:
        return None
    if user is not None:
        return user.locked_until if user.is_locked(now) else None
    # an unknown name "locks" like a real account, so the answer does not tell which names exist
    since = _failures_since(None, now, policy, username)
    if _failures(username, since) >= policy.lockout_attempts:
        last = db.session.scalar(sa.select(sa.func.max(LoginAttempt.at)).where(
            LoginAttempt.username == username, LoginAttempt.outcome == Verdict.FAILED.value))
        return (last or now) + policy.lockout_for
    return None


def _lock_if_due(user: User | None, username: str, now: datetime, policy: LoginPolicy) -> datetime | None:
    if policy.lockout_attempts <= 0:
        return None
    since = _failures_since(user, now, policy, username)
    failures = _failures(username, since)
    if failures < policy.lockout_attempts:
        return None
    until = now + policy.lockout_for
    if user is not None:
        user.locked_until = until
        audit.record(user, "user.lock", f"locked until {until:%Y-%m-%d %H:%M:%S} UTC after {failures} failed logins",
                     params={"username": user.username}, commit=False, who="system")
        db.session.commit()
    return until


def _prune(now: datetime, policy: LoginPolicy) -> None:
    """Forget attempts the lockout no longer counts (kept at least a day)."""
    keep = max(timedelta(days=1), policy.lockout_window + policy.lockout_for)
    db.session.execute(sa.delete(LoginAttempt).where(LoginAttempt.at < now - keep))
    db.session.commit()


def unlock(actor: User, user: User, now: datetime | None = None) -> bool:
    """An admin lifts a lock (failures before now no longer count). False: it was not locked."""
    now = now or utcnow()
    was_locked = user.is_locked(now)
    if was_locked:
        user.locked_until = now
        audit.record(actor, "user.unlock", "unlocked", params={"username": user.username}, commit=False)
    db.session.commit()
    return was_locked
