"""`LockInfo`: the content of one table lock file (`.hoodie/.lock/lock.<epoch>`), and its path.

Pure data (no storage access): `engine.transaction.lock` reads and writes these, and `engine.errors`
names one in `ConcurrentWriteError.holder`, so it lives apart from both.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TypeVar

from engine.constants import LOCK_FOLDER, METAFOLDER
from engine.transaction.liveness import ProcessId

__all__ = ["FOREVER_MS", "LOCK_DIR", "UNKNOWN_HOLDER", "LockInfo", "iso_ms", "lock_file"]

LOCK_DIR = f"{METAFOLDER}/{LOCK_FOLDER}"
_EPOCH_DIGITS = 12
UNKNOWN_HOLDER = "unknown"
FOREVER_MS = sys.maxsize
_T = TypeVar("_T")


def lock_file(epoch: int) -> str:
    """The storage path of the lock file for `epoch`."""
    return f"{LOCK_DIR}/lock.{epoch:0{_EPOCH_DIGITS}d}"


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as an ISO-8601 UTC time (for messages)."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class LockInfo:
    """The content of one lock file: who took epoch `epoch`, for what, and until when.

    Times are epoch milliseconds. `corrupt` marks a file that did not parse; its owner,
    host and purpose are then "unknown" and its expiry is derived from the file mtime.
    `boot_id`, `start` and `pid_ns` (the holder's boot id, process start ticks and pid namespace, see
    `engine.transaction.liveness`) are optional on disk: records of older versions lack them, and
    then the holder can never be proven dead, only outlived by its lease.
    """

    epoch: int
    owner: str
    host: str
    pid: int
    purpose: str
    acquired_at_ms: int
    expires_at_ms: int
    released: bool = False
    corrupt: bool = False
    boot_id: str | None = None
    start: int | None = None
    pid_ns: str | None = None

    @property
    def process(self) -> ProcessId:
        """The holder's process, for `engine.transaction.liveness.is_dead_here`."""
        return ProcessId(host=self.host, pid=self.pid, boot_id=self.boot_id, start=self.start, pid_ns=self.pid_ns)

    def is_held(self, now_ms: int) -> bool:
        """Whether this lease still holds the lock at `now_ms` (not released, not expired)."""
        return not self.released and now_ms < self.expires_at_ms

    def describe(self) -> str:
        """One line naming the holder, for error messages and the console."""
        if self.corrupt:
            return (
                f"an unknown writer (unreadable lock file {lock_file(self.epoch)}, "
                f"modified {iso_ms(self.acquired_at_ms)}, counts as held until "
                + (
                    "removed by hand)"
                    if self.expires_at_ms >= FOREVER_MS
                    else f"{iso_ms(self.expires_at_ms)})"
                )
            )
        return (
            f"owner={self.owner} host={self.host} pid={self.pid} purpose={self.purpose} "
            f"acquired_at={iso_ms(self.acquired_at_ms)} lease_expires={iso_ms(self.expires_at_ms)}"
        )

    def to_json(self) -> bytes:
        """The lock file content."""
        fields = asdict(self)
        del fields["corrupt"]
        for optional in ("boot_id", "start", "pid_ns"):
            if fields[optional] is None:
                del fields[optional]
        return json.dumps(fields, sort_keys=True).encode()

    @classmethod
    def from_json(cls, epoch: int, data: bytes) -> LockInfo:
        """Parse a lock file's content; ValueError if it is not a lock record.

        The epoch comes from the file name, which is what orders leases.
        """
        try:
            raw = json.loads(data)
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
            info = cls(
                epoch=epoch,
                owner=_typed(raw, "owner", str),
                host=_typed(raw, "host", str),
                pid=_typed(raw, "pid", int),
                purpose=_typed(raw, "purpose", str),
                acquired_at_ms=_typed(raw, "acquired_at_ms", int),
                expires_at_ms=_typed(raw, "expires_at_ms", int),
                released=_typed(raw, "released", bool),
                boot_id=_optional(raw, "boot_id", str),
                start=_optional(raw, "start", int),
                pid_ns=_optional(raw, "pid_ns", str),
            )
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"not JSON: {e}") from e
        return info

    @classmethod
    def unreadable(cls, epoch: int, mtime_ms: int | None, lease_ms: int) -> LockInfo:
        """The stand-in for a lock file that did not parse: held until mtime + lease."""
        expires = FOREVER_MS if mtime_ms is None else mtime_ms + lease_ms
        return cls(
            epoch=epoch,
            owner=UNKNOWN_HOLDER,
            host=UNKNOWN_HOLDER,
            pid=-1,
            purpose=UNKNOWN_HOLDER,
            acquired_at_ms=0 if mtime_ms is None else mtime_ms,
            expires_at_ms=expires,
            corrupt=True,
        )


def _typed(raw: dict[str, object], key: str, kind: type[_T]) -> _T:
    value = raw.get(key)
    # bool is an int subclass; a pid or a time must not be a bool.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"field {key!r} is missing or not {kind.__name__}: {value!r}")
    return value


def _optional(raw: dict[str, object], key: str, kind: type[_T]) -> _T | None:
    return None if raw.get(key) is None else _typed(raw, key, kind)
