"""Rate limiting with Flask-Limiter, counted in the console's own database: `DatabaseStorage`, a
`limits` storage (the extension point Flask-Limiter builds its storage from, by URI scheme) over
the `rate_limits` table; `init_app`, which points Flask-Limiter at it; and `login_limit`, the one
budget per client address that the login page and `POST /api/v1/tokens` share
(`CONSOLE_LOGIN_LIMIT`).

Flask-Limiter's own storages share nothing between gunicorn workers without Redis or memcached,
and the stack has neither; the console's database is already shared by every worker and host.
Only the fixed-window strategy is supported (`RATELIMIT_STRATEGY = "fixed-window"`): one row per
key holds the hits of the current window and when it ends. An increment is one
`INSERT ... ON CONFLICT (key) DO UPDATE ... RETURNING hits` in its own transaction, which starts a
new window when the row's has ended, so concurrent processes never lose a hit (PostgreSQL locks
the row; SQLite serialises writers). SQLite (>= 3.35, for RETURNING) and PostgreSQL only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from flask import Flask, Response, current_app, flash, render_template
from flask_limiter import RequestLimit
from limits.storage import Storage
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine

from webui.extensions import db, limiter
from webui.models import RateLimitWindow

log = logging.getLogger(__name__)

SCHEME = "console-db"
_INSERTS = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


def _naive_utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None)


def _epoch(at: datetime) -> float:
    return at.replace(tzinfo=UTC).timestamp()


class DatabaseStorage(Storage):
    """Fixed-window rate-limit counters in the `rate_limits` table (URI `console-db://`).

    Options (Flask-Limiter's `RATELIMIT_STORAGE_OPTIONS`): `engine`, an SQLAlchemy engine or a
    function returning one at each call (the console passes the current app's engine), or `url`,
    a database URL to open an engine for; `clock`, seconds since the epoch (tests move it);
    `prune_every_s`, how often ended windows are deleted.
    """

    STORAGE_SCHEME = [SCHEME]

    def __init__(self, uri: str | None = None, wrap_exceptions: bool = False, *,
                 engine: Engine | Callable[[], Engine] | None = None, url: str | None = None,
                 clock: Callable[[], float] = time.time, prune_every_s: float = 300.0,
                 **options: Any) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        if (engine is None) == (url is None):
            raise ValueError(f"{SCHEME}: give either engine or url")
        self._engine = engine if engine is not None else sa.create_engine(url)  # type: ignore[arg-type]
        self._clock = clock
        self._prune_every_s = prune_every_s
        self._pruned_at = 0.0
        self._table: sa.Table = RateLimitWindow.__table__  # type: ignore[assignment]

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        return sa.exc.SQLAlchemyError

    @property
    def engine(self) -> Engine:
        return self._engine if isinstance(self._engine, Engine) else self._engine()

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Add `amount` to the key's window (a new one of `expiry` seconds if it has ended) and
        return its hits, atomically across processes."""
        engine = self.engine
        insert = _INSERTS.get(engine.dialect.name)
        if insert is None:
            raise sa.exc.ArgumentError(f"{SCHEME}: no atomic upsert for {engine.dialect.name} (SQLite, PostgreSQL)")
        now_s = self._clock()
        now, ends = _naive_utc(now_s), _naive_utc(now_s + expiry)
        t = self._table
        ended = t.c.expires_at <= now
        statement = insert(t).values(key=key, hits=amount, expires_at=ends)
        statement = statement.on_conflict_do_update(index_elements=[t.c.key], set_={
            # every SET expression sees the row as it was, so both test the old window's end
            "hits": sa.case((ended, amount), else_=t.c.hits + amount),
            "expires_at": sa.case((ended, sa.literal(ends, sa.DateTime())), else_=t.c.expires_at),
        }).returning(t.c.hits)
        with engine.begin() as conn:
            hits = int(conn.execute(statement).scalar_one())
        if now_s - self._pruned_at >= self._prune_every_s:
            self._prune(engine, now)
            self._pruned_at = now_s
        return hits

    def get(self, key: str) -> int:
        """The hits of the key's current window (0 when it has ended or never started)."""
        t = self._table
        with self.engine.connect() as conn:
            hits = conn.execute(sa.select(t.c.hits).where(
                t.c.key == key, t.c.expires_at > _naive_utc(self._clock()))).scalar()
        return int(hits or 0)

    def get_expiry(self, key: str) -> float:
        """When the key's current window ends, in seconds since the epoch (now if there is none)."""
        now_s = self._clock()
        t = self._table
        with self.engine.connect() as conn:
            ends = conn.execute(sa.select(t.c.expires_at).where(
                t.c.key == key, t.c.expires_at > _naive_utc(now_s))).scalar()
        return _epoch(ends) if ends is not None else now_s

    def check(self) -> bool:
        """Whether the database answers."""
        try:
            with self.engine.connect() as conn:
                conn.execute(sa.select(sa.func.count()).select_from(self._table))
        except sa.exc.SQLAlchemyError:
            return False
        return True

    def reset(self) -> int | None:
        """Forget every window; returns how many there were."""
        with self.engine.begin() as conn:
            return conn.execute(sa.delete(self._table)).rowcount

    def clear(self, key: str) -> None:
        """Forget the key's window."""
        with self.engine.begin() as conn:
            conn.execute(sa.delete(self._table).where(self._table.c.key == key))

    def _prune(self, engine: Engine, now: datetime) -> None:
        """Delete windows that ended (an ended row counts for nothing: it is only space). Its own
        transaction, after the increment's, so it never holds a row lock while taking another."""
        try:
            with engine.begin() as conn:
                conn.execute(sa.delete(self._table).where(self._table.c.expires_at <= now))
        except sa.exc.SQLAlchemyError:  # housekeeping only: the next increment's prune retries
            log.warning("rate_limits: could not delete ended windows", exc_info=True)


def _current_engine() -> Engine:
    """The current app's engine. Flask-Limiter keeps one storage per `Limiter`, built by the latest
    `init_app`: a URL fixed there would send every app of a process (tests make many) to the last
    app's database, and a second engine would skip the SQLite pragmas (WAL, busy timeout)."""
    return db.engine


def init_app(app: Flask) -> None:
    """Flask-Limiter on this app, its counters in the app's database (settings may override)."""
    app.config.setdefault("RATELIMIT_STORAGE_URI", f"{SCHEME}://")
    app.config.setdefault("RATELIMIT_STORAGE_OPTIONS", {"engine": _current_engine})
    app.config.setdefault("RATELIMIT_STRATEGY", "fixed-window")
    app.config.setdefault("RATELIMIT_HEADERS_ENABLED", True)  # X-RateLimit-*, and Retry-After on a 429
    limiter.init_app(app)


THROTTLED = "Too many login attempts from your address: wait {wait} s and try again."


def _throttled(limit: RequestLimit) -> Response:
    """The 429 of `login_limit`: the login page with the message, or the API's JSON error
    (Flask-Limiter adds `Retry-After`)."""
    from webui.auth import api_error, is_api_request
    from webui.forms import LoginForm

    message = THROTTLED.format(wait=max(1, limit.reset_at - int(time.time())))
    if is_api_request():
        response, _ = api_error(429, "too_many_requests", message)
        response.status_code = 429
        return response
    flash(message, "danger")
    return current_app.make_response((render_template("login.html", form=LoginForm()), 429))


# no default limits: only the login page (POST) and the token endpoint are limited, on one budget
login_limit = limiter.shared_limit(lambda: current_app.config["CONSOLE_LOGIN_LIMIT"], scope="login",
                                   methods=["POST"], on_breach=_throttled)
