"""Users: the first admin, creating users and changing roles."""

from __future__ import annotations

import secrets
import sys

import sqlalchemy as sa
from flask import Flask
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from webui.extensions import db
from webui.models import Role, User


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
    if len(password or "") < 8:
        raise UserError("a password has at least 8 characters")
    if db.session.scalar(sa.select(User.id).where(User.username == username)) is not None:
        raise UserError(f"user {username!r} already exists")
    user = User(username=username, role=role_value)
    user.set_password(password)
    db.session.add(user)
    db.session.commit()
    return user


def set_role(user: User, role: str) -> None:
    try:
        new = Role(role).value
    except ValueError as exc:
        raise UserError(f"role must be one of {', '.join(r.value for r in Role)}") from exc
    if user.role == Role.ADMIN.value and new != Role.ADMIN.value:
        admins = db.session.scalar(sa.select(sa.func.count(User.id)).where(User.role == Role.ADMIN.value, User.active))
        if (admins or 0) <= 1:
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
    user = User(username=name, role=Role.ADMIN.value)
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
