"""Console settings: the one place that reads the environment.

Every variable is documented in README.md ("Console configuration"). `Settings.from_env()`
reads them once; `create_app(config)` takes a mapping of overrides (tests) on top.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PORT = 8000
DEFAULT_ROOTS = "./lakehouse"
# one upload, once decoded (a small compressed file may hold far more), and queued/running
# preview or write jobs per user (each kind counted on its own)
DEFAULT_MAX_UPLOAD_ROWS = 1_000_000
DEFAULT_MAX_UPLOAD_DECODED_MB = 256
DEFAULT_MAX_JOBS_PER_USER = 4

# the engine's own variables, passed through untouched to the worker's engine calls
ENGINE_VARIABLES = (
    "SPARK_MASTER",
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "HBASE_THRIFT_HOST",
    "HBASE_THRIFT_PORT",
)


def _bool(value: str | None, default: bool = False) -> bool:
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def _int(value: str | None, default: int) -> int:
    """A whole number of at least 0 (empty: the default)."""
    if value is None or value.strip() == "":
        return default
    number = int(value)
    if number < 0:
        raise ValueError(f"expected a number >= 0, got {value!r}")
    return number


def _concurrency_mode(value: str | None) -> str:
    """CONSOLE_CONCURRENCY_MODE: SINGLE_WRITER (default) or OPTIMISTIC_CONCURRENCY_CONTROL, as
    the engine's `hoodie.write.concurrency.mode` takes it (a bad value stops the console at start)."""
    from engine.facade import CONCURRENCY_MODES, SINGLE_WRITER

    mode = (value or SINGLE_WRITER).strip().upper()
    if mode not in CONCURRENCY_MODES:
        raise ValueError(f"CONSOLE_CONCURRENCY_MODE must be one of {', '.join(CONCURRENCY_MODES)}, not {value!r}")
    return mode


def split_roots(value: str) -> list[str]:
    """`CONSOLE_WAREHOUSE_ROOTS`: comma-separated local paths or s3://bucket/prefix URIs.

    Local roots are made absolute (not resolved through symlinks here: `paths.py` does that
    when it checks a table path against them)."""
    out = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        if "://" in part and not part.startswith("file://"):
            out.append(part.rstrip("/"))
        else:
            local = part[len("file://"):] if part.startswith("file://") else part
            out.append(os.path.abspath(os.path.expanduser(local)))
    return out


@dataclass(frozen=True)
class Settings:
    """The console's configuration (read from the environment by `from_env`)."""

    database_url: str = field(repr=False)  # may hold a password
    secret_key: str = field(repr=False)
    secret_key_generated: bool
    warehouse_roots: tuple[str, ...]
    admin_user: str | None
    admin_password: str | None = field(repr=False)
    max_upload_mb: int
    max_upload_rows: int
    max_upload_decoded_mb: int
    max_jobs_per_user: int
    spark_master: str
    secure_cookies: bool
    instance_dir: str
    login_limit: str
    port: int
    token_lifetime_days: int = 30
    lockout_attempts: int = 5
    lockout_window_min: int = 15
    lockout_min: int = 15
    # hoodie.write.concurrency.mode of the console's writes and services (engine.config.write_config)
    concurrency_mode: str = "SINGLE_WRITER"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        roots = tuple(split_roots(env.get("CONSOLE_WAREHOUSE_ROOTS") or DEFAULT_ROOTS))
        if not roots:
            roots = tuple(split_roots(DEFAULT_ROOTS))
        instance = env.get("CONSOLE_INSTANCE_DIR")
        if not instance:
            first_local = next((r for r in roots if "://" not in r), None)
            instance = os.path.join(first_local, ".console") if first_local else os.path.abspath("instance")
        database_url = env.get("DATABASE_URL") or f"sqlite:///{os.path.join(instance, 'console.db')}"
        secret, generated = resolve_secret(env.get("CONSOLE_SECRET_KEY") or "", env.get("CONSOLE_BIND") or "", instance)
        return cls(
            database_url=database_url,
            secret_key=secret,
            secret_key_generated=generated,
            warehouse_roots=roots,
            admin_user=env.get("CONSOLE_ADMIN_USER") or None,
            admin_password=env.get("CONSOLE_ADMIN_PASSWORD") or None,
            max_upload_mb=int(env.get("CONSOLE_MAX_UPLOAD_MB") or 64),
            max_upload_rows=int(env.get("CONSOLE_MAX_UPLOAD_ROWS") or DEFAULT_MAX_UPLOAD_ROWS),
            max_upload_decoded_mb=int(env.get("CONSOLE_MAX_UPLOAD_DECODED_MB") or DEFAULT_MAX_UPLOAD_DECODED_MB),
            max_jobs_per_user=int(env.get("CONSOLE_MAX_JOBS_PER_USER") or DEFAULT_MAX_JOBS_PER_USER),
            spark_master=env.get("SPARK_MASTER") or "local[*]",
            secure_cookies=_bool(env.get("CONSOLE_SECURE_COOKIES")),
            instance_dir=instance,
            login_limit=env.get("CONSOLE_LOGIN_LIMIT") or "10 per minute",
            port=int(env.get("CONSOLE_PORT") or DEFAULT_PORT),
            token_lifetime_days=_int(env.get("CONSOLE_TOKEN_LIFETIME_DAYS"), 30),
            lockout_attempts=_int(env.get("CONSOLE_LOCKOUT_ATTEMPTS"), 5),
            lockout_window_min=_int(env.get("CONSOLE_LOCKOUT_WINDOW_MIN"), 15),
            lockout_min=_int(env.get("CONSOLE_LOCKOUT_MIN"), 15),
            concurrency_mode=_concurrency_mode(env.get("CONSOLE_CONCURRENCY_MODE")),
        )

    def flask_config(self) -> dict[str, object]:
        """The Flask/extension settings derived from these."""
        engine_options: dict[str, object] = {"pool_pre_ping": True}
        if self.database_url.startswith("sqlite"):
            engine_options = {"connect_args": {"timeout": 30}}
        return {
            "SECRET_KEY": self.secret_key,
            "SQLALCHEMY_DATABASE_URI": self.database_url,
            "SQLALCHEMY_ENGINE_OPTIONS": engine_options,
            "MAX_CONTENT_LENGTH": self.max_upload_mb * 1024 * 1024,
            "SESSION_COOKIE_HTTPONLY": True,
            "SESSION_COOKIE_SAMESITE": "Lax",
            "SESSION_COOKIE_SECURE": self.secure_cookies,
            "REMEMBER_COOKIE_HTTPONLY": True,
            "REMEMBER_COOKIE_SAMESITE": "Lax",
            "REMEMBER_COOKIE_SECURE": self.secure_cookies,
            "WTF_CSRF_TIME_LIMIT": None,
            "CONSOLE_WAREHOUSE_ROOTS": list(self.warehouse_roots),
            "CONSOLE_INSTANCE_DIR": self.instance_dir,
            "CONSOLE_LOGIN_LIMIT": self.login_limit,
            "CONSOLE_TOKEN_LIFETIME_DAYS": self.token_lifetime_days,
            "CONSOLE_LOCKOUT_ATTEMPTS": self.lockout_attempts,
            "CONSOLE_LOCKOUT_WINDOW_MIN": self.lockout_window_min,
            "CONSOLE_LOCKOUT_MIN": self.lockout_min,
            "CONSOLE_ADMIN_USER": self.admin_user,
            "CONSOLE_ADMIN_PASSWORD": self.admin_password,
            "CONSOLE_SPARK_MASTER": self.spark_master,
            "CONSOLE_MAX_UPLOAD_ROWS": self.max_upload_rows,
            "CONSOLE_MAX_UPLOAD_DECODED_MB": self.max_upload_decoded_mb,
            "CONSOLE_MAX_JOBS_PER_USER": self.max_jobs_per_user,
            "CONSOLE_CONCURRENCY_MODE": self.concurrency_mode,
        }


# CONSOLE_SECRET_KEY values published in this repository (.env.example, docker-compose.yml):
# anyone can sign a session cookie with them, so they are only ever used on a loopback bind
PUBLISHED_SECRET_KEYS = frozenset({"change-me-local-dev-only"})
_log = logging.getLogger(__name__)


def is_loopback(bind: str) -> bool:
    """Whether a host address (`CONSOLE_BIND`) only this machine reaches: 127.0.0.0/8, ::1,
    localhost. An empty value is the console's own default bind (127.0.0.1: make run, make console)."""
    host = bind.strip().strip("[]")
    if not host or host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def resolve_secret(given: str, bind: str, instance: str) -> tuple[str, bool]:
    """(secret key, generated?): the given key, unless it is missing, or a published default
    while the console is published beyond loopback (`CONSOLE_BIND`, the compose file's
    STACK_BIND); then a random key kept in the instance folder (a volume in the stack), reused
    on every restart and by every gunicorn worker."""
    if given and (given not in PUBLISHED_SECRET_KEYS or is_loopback(bind)):
        return given, False
    if given:
        _log.warning(
            "CONSOLE_SECRET_KEY is the published default and the console is published on %s (not loopback): "
            "using a random key kept in %s instead. Set CONSOLE_SECRET_KEY to a long random value.",
            bind, os.path.join(instance, "secret_key"))
    return _instance_secret(instance), True


def _instance_secret(instance: str) -> str:
    """A random secret kept in the instance folder (0600), so sessions survive restarts and
    gunicorn workers agree on it when CONSOLE_SECRET_KEY is not set.

    Created atomically: the key is written and synced to a temporary file first, then hard-linked
    to its name, which fails if another process won the race. So the file is never seen empty or
    half written, and every process uses the one key that won."""
    path = Path(instance) / "secret_key"
    try:
        kept = path.read_text().strip()
    except FileNotFoundError:
        kept = None
    if kept:
        return kept
    if kept == "":  # left empty by an older version that created the file before filling it
        path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(48)
    tmp = path.with_name(f".secret_key.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(value)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:  # another process won the race: use its (complete) secret
            return path.read_text().strip()
    finally:
        tmp.unlink(missing_ok=True)
    return value


def env_flag(name: str) -> str | None:
    """A raw variable for the rare reader outside Settings (the worker's test hold point)."""
    return os.environ.get(name)
