"""API tokens: issue (shown once, stored hashed), authenticate a bearer, list, revoke.

A token expires `CONSOLE_TOKEN_LIFETIME_DAYS` after it is issued (0: never). Each use writes
`last_used_at`, at most once a minute per token (a conditional UPDATE, so concurrent requests
on several workers write it once). Issuing and revoking are audited here.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from webui.extensions import db
from webui.models import ApiToken, Role, User, utcnow
from webui.services import audit

LAST_USED_EVERY = timedelta(minutes=1)
PREFIX = "hc_"


class TokenRefused(Exception):
    """A bearer the API refuses: `status` 401 (no such, revoked, expired, deactivated user) or
    403 (the user must change the first-login password first)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class TokenError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


MUST_CHANGE = ("user {name} must change the password set by an admin or at first start before using the API: "
               "log in to the console, which asks for a new password, then use the token again")


def issue(user: User, lifetime_days: int, actor: User | None = None, via: str = "api",
          now: datetime | None = None) -> tuple[str, ApiToken]:
    """A new bearer token for `user` (shown once; only its hash is stored), audited."""
    now = now or utcnow()
    token = PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(user_id=user.id, token_hash=ApiToken.hash(token), created_at=now,
                   expires_at=now + timedelta(days=lifetime_days) if lifetime_days > 0 else None)
    db.session.add(row)
    db.session.flush()
    params: dict[str, Any] = {"id": row.id, "via": via}
    if actor is not None and actor.id != user.id:
        params["owner"] = user.username
    audit.record(actor or user, "token.create", "issued", params=params, commit=False)
    db.session.commit()
    return token, row


def authenticate(raw: str, now: datetime | None = None) -> User:
    """The user of a bearer token, or TokenRefused with the reason; writes last_used_at."""
    now = now or utcnow()
    row = db.session.scalar(sa.select(ApiToken).where(ApiToken.token_hash == ApiToken.hash(raw)))
    if row is None:
        raise TokenRefused(401, "unauthorized", "this bearer token is not known (POST /api/v1/tokens gives one)")
    if row.revoked:
        raise TokenRefused(401, "token_revoked", f"this bearer token was revoked at {_when(row.revoked_at)}; "
                                                 "get a new one with POST /api/v1/tokens")
    if row.expires_at is not None and row.expires_at <= now:
        raise TokenRefused(401, "token_expired", f"this bearer token expired at {_when(row.expires_at)}; "
                                                 "get a new one with POST /api/v1/tokens")
    user = row.user
    if not user.active:
        raise TokenRefused(401, "user_deactivated", f"user {user.username} is deactivated")
    if user.must_change_password:
        raise TokenRefused(403, "password_change_required", MUST_CHANGE.format(name=user.username))
    if row.last_used_at is None or row.last_used_at <= now - LAST_USED_EVERY:
        db.session.execute(sa.update(ApiToken).where(
            ApiToken.id == row.id,
            sa.or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at <= now - LAST_USED_EVERY),
        ).values(last_used_at=now))
        db.session.commit()
    return user


def _when(at: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC" if at is not None else "an unknown time"


def visible(actor: User, username: str | None = None, everyone: bool = False) -> list[ApiToken]:
    """The tokens `actor` may see: their own; an admin's choice of one user's or everyone's."""
    q = sa.select(ApiToken).join(User).order_by(ApiToken.id.desc())
    if actor.can(Role.ADMIN) and everyone:
        pass
    elif actor.can(Role.ADMIN) and username:
        q = q.where(User.username == username)
    else:
        q = q.where(ApiToken.user_id == actor.id)
    return list(db.session.scalars(q))


def get_for(actor: User, token_id: int) -> ApiToken:
    """A token its owner or an admin may act on (404: none; 403: someone else's)."""
    row = db.session.get(ApiToken, token_id)
    if row is None:
        raise TokenError(404, f"no token {token_id}")
    if row.user_id != actor.id and not actor.can(Role.ADMIN):
        raise TokenError(403, "you may revoke only your own tokens (admins: anyone's)")
    return row


def revoke(actor: User, row: ApiToken, via: str, now: datetime | None = None) -> bool:
    """Revoke a token (audited). False: it was revoked already (nothing changes)."""
    if row.revoked:
        return False
    row.revoked = True
    row.revoked_at = now or utcnow()
    audit.record(actor, "token.revoke", "revoked", params={"id": row.id, "owner": row.user.username, "via": via},
                 commit=False)
    db.session.commit()
    return True


def revoke_all_of(actor: User, user: User, via: str, now: datetime | None = None) -> int:
    """Revoke every live token of `user` (a password change or reset: whoever knew the old password
    may have issued one), audited in the caller's commit. Returns how many were revoked."""
    now = now or utcnow()
    rows = list(db.session.scalars(sa.select(ApiToken).where(ApiToken.user_id == user.id, ApiToken.revoked.is_(False))))
    for row in rows:
        row.revoked = True
        row.revoked_at = now
        audit.record(actor, "token.revoke", "revoked", params={"id": row.id, "owner": user.username, "via": via},
                     commit=False)
    return len(rows)


def describe(row: ApiToken, now: datetime | None = None) -> dict[str, Any]:
    now = now or utcnow()

    def iso(at: datetime | None) -> str | None:
        return at.isoformat() + "Z" if at is not None else None

    return {"id": row.id, "user": row.user.username, "state": row.state(now), "created_at": iso(row.created_at),
            "expires_at": iso(row.expires_at), "last_used_at": iso(row.last_used_at), "revoked": row.revoked,
            "revoked_at": iso(row.revoked_at)}


@dataclass(frozen=True)
class TokenView:
    """A token as the pages show it."""

    id: int
    user: str
    state: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None


def views(rows: list[ApiToken], now: datetime | None = None) -> list[TokenView]:
    now = now or utcnow()
    return [TokenView(r.id, r.user.username, r.state(now), r.created_at, r.expires_at, r.last_used_at, r.revoked_at)
            for r in rows]
