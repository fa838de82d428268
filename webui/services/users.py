"""Users: the first admin, creating users, roles, passwords, deactivation.

The credential changes here (own password change, an admin's reset, deactivate, reactivate)
write their audit row in the same commit as the change."""

from __future__ import annotations

import secrets
import sys

import sqlalchemy as sa
from flask import Flask
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from webui.extensions import db
from webui.models import Role, User
from webui.services import audit, tokens

MIN_PASSWORD = 8


class UserError(ValueError):
    pass


def create_user(username: str, password: str, role: str) -> User:
    username = (username or "").strip()
    if not username or len(username) > 80 or not username.replace("_", "").replace("-", "").replace(".", "").isalnum():
        raise UserError("a user name has 1-80 letters, digits, '.', '_' or '-'")
    try:
        role_value = Role(role).value
    except ValueError as exc:
        raise UserError(f"role must be one of {', '.join(r.value for r in Role)}") from exc
    _check_password_rules(password)
    if db.session.scalar(sa.select(User.id).where(User.username == username)) is not None:
        raise UserError(f"user {username!r} already exists")
    user = User(username=username, role=role_value)
    user.set_password(password)
    db.session.add(user)
    db.session.commit()
    return user


def _check_password_rules(password: str | None) -> None:
    if len(password or "") < MIN_PASSWORD:
        raise UserError(f"a password has at least {MIN_PASSWORD} characters")
    if len(password or "") > 256:
        raise UserError("a password has at most 256 characters")


def change_own_password(user: User, current: str, new: str, confirm: str) -> int:
    """The user's own change: the current password, and the new one twice. Clears
    must_change_password; other sessions of the user end (their session stamp changes) and their
    API tokens are revoked. Returns how many tokens were revoked."""
    if not user.check_password(current or ""):
        audit.record(user, "user.password", "refused: wrong current password", params={"username": user.username})
        raise UserError("The current password is wrong.")
    if new != confirm:
        raise UserError("The new password and its confirmation differ.")
    _check_password_rules(new)
    if user.check_password(new):
        raise UserError("The new password must differ from the current one.")
    user.set_password(new)
    user.must_change_password = False
    audit.record(user, "user.password", "changed", params={"username": user.username}, commit=False)
    revoked = tokens.revoke_all_of(user, user, "password change")
    db.session.commit()
    return revoked


def reset_password(actor: User, user: User, new: str) -> int:
    """An admin sets a temporary password: the user must change it at the next login, their
    sessions end and their API tokens are revoked. Returns how many tokens were revoked."""
    _check_password_rules(new)
    user.set_password(new)
    user.must_change_password = True
    audit.record(actor, "user.password_reset", "reset; must change at next login",
                 params={"username": user.username}, commit=False)
    revoked = tokens.revoke_all_of(actor, user, "password reset")
    db.session.commit()
    return revoked


def _active_admins() -> int:
    return db.session.scalar(sa.select(sa.func.count(User.id)).where(User.role == Role.ADMIN.value, User.active)) or 0


def deactivate(actor: User, user: User) -> None:
    """The user can no longer log in; their session and tokens stop working at once."""
    if user.id == actor.id:
        raise UserError("you cannot deactivate yourself")
    if not user.active:
        raise UserError(f"{user.username} is already deactivated")
    if user.role == Role.ADMIN.value and _active_admins() <= 1:
        raise UserError(f"{user.username} is the last active admin")
    user.active = False
    audit.record(actor, "user.deactivate", "deactivated", params={"username": user.username}, commit=False)
    db.session.commit()


def reactivate(actor: User, user: User) -> None:
    if user.active:
        raise UserError(f"{user.username} is already active")
    user.active = True
    audit.record(actor, "user.reactivate", "reactivated", params={"username": user.username}, commit=False)
    db.session.commit()


def set_role(user: User, role: str) -> None:
    try:
        new = Role(role).value
    except ValueError as exc:
        raise UserError(f"role must be one of {', '.join(r.value for r in Role)}") from exc
    if user.role == Role.ADMIN.value and new != Role.ADMIN.value:
        if _active_admins() <= 1:
            raise UserError(f"{user.username} is the last admin: make someone else admin first")
    user.role = new
    db.session.commit()


def find(username: str) -> User | None:
    return db.session.scalar(sa.select(User).where(User.username == username))


def bootstrap_admin(app: Flask) -> str | None:
    """Create the first admin when there are no users: CONSOLE_ADMIN_USER/PASSWORD, else
    `admin` with a one-time password printed once on stderr. Returns the name created."""
    try:
        if db.session.scalar(sa.select(sa.func.count(User.id))):
            return None
    except (OperationalError, ProgrammingError):
        db.session.rollback()  # no schema yet: `db upgrade` has not run
        return None
    name = app.config.get("CONSOLE_ADMIN_USER") or "admin"
    password = app.config.get("CONSOLE_ADMIN_PASSWORD")
    generated = not password
    if generated:
        password = secrets.token_urlsafe(12)
    # a generated one-time password was printed on stderr (logs keep it): it must be changed at
    # the first login; a password the operator chose (CONSOLE_ADMIN_PASSWORD) need not
    user = User(username=name, role=Role.ADMIN.value, must_change_password=generated)
    user.set_password(password)
    db.session.add(user)
    try:
        db.session.commit()
    except IntegrityError:  # another process created it first
        db.session.rollback()
        return None
    if generated:
        print(f"hoodie-console: created the first admin {name!r} with the one-time password: {password}",
              file=sys.stderr, flush=True)
    return name
