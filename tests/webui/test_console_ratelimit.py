"""`webui.ratelimit.DatabaseStorage`, Flask-Limiter's storage in the console's database: fixed
windows counted and ended by a clock the tests move, clear and reset, one count seen through
separate engines and processes (2 processes x N hits are exactly 2N hits, each count handed out
once), on SQLite and PostgreSQL; and Flask-Limiter finding it by its URI scheme."""

from __future__ import annotations

import multiprocessing
from datetime import datetime

import pytest
import sqlalchemy as sa

from tests.support.console import make_app

T0 = 1_780_000_000.0  # 2026-05-28 20:26:40 UTC
KEY = "LIMITER/127.0.0.1/login/4/1/minute"


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def pg_server():
    from tests.support.postgres import postgres_server

    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path, monkeypatch) -> str:
    """The URL of a database migrated to head (the table comes from migration 0004)."""
    from webui.extensions import db

    url = None
    if request.param == "postgresql":
        from tests.support.postgres import fresh_database

        url = fresh_database(request.getfixturevalue("pg_server"), f"t_rl_{request.node.name[:40].lower()}"
                             .replace("[", "_").replace("]", ""))
    app = make_app(tmp_path, monkeypatch, url)
    with app.app_context():
        found = db.engine.url.render_as_string(hide_password=False)
        db.engine.dispose()
    return found


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(url, connect_args={"timeout": 30} if url.startswith("sqlite") else {})


def _rows(url: str) -> list[tuple[str, int, datetime]]:
    from webui.models import RateLimitWindow

    t = RateLimitWindow.__table__
    engine = _engine(url)
    with engine.connect() as conn:
        rows = [tuple(r) for r in conn.execute(sa.select(t.c.key, t.c.hits, t.c.expires_at).order_by(t.c.key))]
    engine.dispose()
    return rows  # type: ignore[return-value]


@pytest.fixture
def make_storage():  # type: ignore[no-untyped-def]
    """Storages on engines of their own, disposed after the test (PostgreSQL drops no database
    that has open connections)."""
    from webui.ratelimit import DatabaseStorage

    engines: list[sa.Engine] = []

    def make(url: str, clock: Clock, **options):  # type: ignore[no-untyped-def]
        engines.append(_engine(url))
        return DatabaseStorage("console-db://", engine=engines[-1], clock=clock, **options)

    yield make
    for engine in engines:
        engine.dispose()


def test_hits_within_a_window_count_up_and_keep_its_end(database, make_storage):
    clock = Clock()
    storage = make_storage(database, clock)
    assert (storage.get(KEY), storage.get_expiry(KEY)) == (0, T0)  # no window: nothing spent, ends now
    assert storage.incr(KEY, 60) == 1
    clock.now = T0 + 59.5
    assert storage.incr(KEY, 60) == 2
    assert storage.incr(KEY, 60, amount=3) == 5
    assert storage.get(KEY) == 5
    assert storage.get_expiry(KEY) == T0 + 60  # the window's end is set by its first hit only
    assert _rows(database) == [(KEY, 5, datetime(2026, 5, 28, 20, 27, 40))]


def test_an_ended_window_counts_nothing_and_the_next_hit_starts_a_new_one(database, make_storage):
    clock = Clock()
    storage = make_storage(database, clock)
    for _ in range(4):
        storage.incr(KEY, 60)
    clock.now = T0 + 60  # the end itself is past
    assert (storage.get(KEY), storage.get_expiry(KEY)) == (0, T0 + 60)
    assert storage.incr(KEY, 60) == 1
    assert (storage.get(KEY), storage.get_expiry(KEY)) == (1, T0 + 120)
    assert _rows(database) == [(KEY, 1, datetime(2026, 5, 28, 20, 28, 40))]


def test_ended_windows_are_deleted_by_a_later_hit(database, make_storage):
    clock = Clock()
    storage = make_storage(database, clock, prune_every_s=300)
    storage.incr("a", 60)
    storage.incr("b", 600)
    clock.now = T0 + 299
    storage.incr("c", 60)  # within prune_every_s of the first prune: "a" stays, though ended
    assert [r[0] for r in _rows(database)] == ["a", "b", "c"]
    clock.now = T0 + 300
    storage.incr("d", 60)
    assert [(r[0], r[1]) for r in _rows(database)] == [("b", 1), ("c", 1), ("d", 1)]  # "c" ends at T0 + 359


def test_clear_forgets_one_key_and_reset_every_key(database, make_storage):
    clock = Clock()
    storage = make_storage(database, clock)
    for key, hits in (("a", 2), ("b", 3), ("c", 1)):
        storage.incr(key, 60, amount=hits)
    storage.clear("b")
    assert [storage.get(k) for k in ("a", "b", "c")] == [2, 0, 1]
    assert storage.get_expiry("b") == T0
    assert storage.incr("b", 60) == 1
    assert storage.reset() == 3
    assert [storage.get(k) for k in ("a", "b", "c")] == [0, 0, 0]
    assert _rows(database) == []
    assert storage.check() is True


def test_two_engines_spend_one_window(database, make_storage):
    clock = Clock()
    first, second = make_storage(database, clock), make_storage(database, clock)  # two pools
    assert [s.incr(KEY, 60) for s in (first, second, first, second)] == [1, 2, 3, 4]
    assert (first.get(KEY), second.get(KEY)) == (4, 4)
    second.clear(KEY)
    assert first.get(KEY) == 0


def _hit_many(url: str, n: int, ready, go, out) -> None:  # type: ignore[no-untyped-def]
    """One process: its own engine, `n` hits as soon as `go` is set; the counts it was given."""
    from webui.ratelimit import DatabaseStorage

    storage = DatabaseStorage("console-db://", engine=_engine(url))
    ready.set()
    go.wait(60)
    out.put([storage.incr("shared", 3600) for _ in range(n)])
    storage.engine.dispose()


def test_two_processes_lose_no_hit(database):
    """2 processes x 60 concurrent hits: the window holds 120 and each count from 1 to 120 was
    handed out exactly once (an increment is atomic across processes)."""
    n = 60
    ctx = multiprocessing.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    readies = [ctx.Event() for _ in range(2)]
    procs = [ctx.Process(target=_hit_many, args=(database, n, ready, go, out)) for ready in readies]
    for p in procs:
        p.start()
    for ready in readies:
        assert ready.wait(120)
    go.set()
    counts = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert sorted(counts[0] + counts[1]) == list(range(1, 2 * n + 1))
    assert all(c == sorted(c) for c in counts)
    assert [(r[0], r[1]) for r in _rows(database)] == [("shared", 2 * n)]


def test_flask_limiter_builds_it_from_the_uri_and_limits_with_it(database):
    """`storage_from_string` (what Flask-Limiter calls) finds the class by its scheme, and the
    fixed-window strategy refuses the 5th hit of "4 per minute"."""
    from limits import parse
    from limits.storage import storage_from_string
    from limits.strategies import FixedWindowRateLimiter

    from webui.ratelimit import DatabaseStorage

    storage = storage_from_string("console-db://", url=database)
    assert isinstance(storage, DatabaseStorage)
    limiter = FixedWindowRateLimiter(storage)
    limit = parse("4 per minute")
    assert [limiter.hit(limit, "10.0.0.1") for _ in range(5)] == [True] * 4 + [False]
    assert limiter.hit(limit, "10.0.0.2") is True  # another address, another window
    assert limiter.get_window_stats(limit, "10.0.0.1").remaining == 0
    storage.engine.dispose()


def test_database_errors_are_limits_storage_errors_when_asked(tmp_path):
    """`base_exceptions`: with wrap_exceptions a database without the table raises limits' StorageError."""
    from limits.errors import StorageError

    from webui.ratelimit import DatabaseStorage

    url = f"sqlite:///{tmp_path / 'empty.db'}"
    wrapped = DatabaseStorage("console-db://", wrap_exceptions=True, url=url)
    with pytest.raises(StorageError):
        wrapped.incr(KEY, 60)
    with pytest.raises(sa.exc.OperationalError):
        DatabaseStorage("console-db://", url=url).get(KEY)
    assert wrapped.check() is False


def test_each_app_counts_in_its_own_database(tmp_path, monkeypatch):
    """Flask-Limiter keeps one storage per Limiter (the latest init_app's): the storage asks the
    current app for its engine, so an app made earlier in the same process still counts in its
    own database, not in the newest app's."""
    from tests.support.console import PASSWORDS, csrf
    from webui.extensions import db
    from webui.models import RateLimitWindow

    settings = {"CONSOLE_LOGIN_LIMIT": "2 per minute", "CONSOLE_LOCKOUT_ATTEMPTS": 0}
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = make_app(tmp_path / "one", monkeypatch, **settings)
    second = make_app(tmp_path / "two", monkeypatch, **settings)

    def attempt(app):  # type: ignore[no-untyped-def]
        client = app.test_client()
        return client.post("/login", data={"csrf_token": csrf(client, "/login"), "username": "viewer",
                                           "password": PASSWORDS["viewer"]}).status_code

    assert [attempt(first) for _ in range(3)] == [302, 302, 429]
    assert [attempt(second) for _ in range(2)] == [302, 302]
    for app, hits in ((first, 3), (second, 2)):
        with app.app_context():
            assert [w.hits for w in db.session.scalars(sa.select(RateLimitWindow))] == [hits]
            db.engine.dispose()
