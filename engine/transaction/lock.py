"""`TableLock`: one writer per table at a time, by epoch-numbered lease files.

Layout: `.hoodie/.lock/lock.<epoch>` (the epoch zero-padded to 12 digits), each holding one
`LockInfo` as JSON. The lock belongs to the owner of the highest-epoch file unless that file
says it was released or its lease has expired. The design needs nothing but an atomic,
exclusive create (`Storage.create_exclusive`, a hard link locally, `If-None-Match: *` on S3):

- acquire: read the highest epoch N. If there is none, or lock.N is released or expired,
  create lock.N+1 exclusively; of racing acquirers exactly one wins, the others see it as
  the live holder. Then list again: if a higher epoch already exists, our create filled a
  gap that garbage collection left while we were stalled (a stale claim), so we mark our
  file released and start over. The highest epoch never goes down: a releaser at epoch N
  only deletes epochs below N-1.
- takeover of a dead holder: a holder whose lease still runs but whose process is provably
  dead (same host name, boot id and pid namespace as ours, and its pid gone or now another process: see
  `engine.transaction.liveness`) is taken over at once, exactly as an expired lease: create lock.N+1.
  A holder elsewhere, of another boot, or recorded without boot id and start time (older
  versions, other tools) is waited for until its lease expires.
- renew: only the creator of lock.N ever writes it, so renewing (a daemon thread, every
  lease/4 by default) is a plain overwrite with a later expiry, done after checking that
  no newer epoch exists. Nobody can steal a live lock: a takeover creates lock.N+1, and
  only once lock.N has expired.
- fence: `check()`, which a writer calls right before committing, re-reads the storage. A
  newer epoch, our file no longer being ours, or our own lease having run out by our
  clock (the renewals stalled, so someone may take over at any moment) means the lock is
  lost: ConcurrentWriteError. The renewal thread stops at the first such sign.
- release: rewrite lock.N as released and delete epochs below N-1. A lock we lost is left
  alone: the new holder's files are never written.

Expiry compares the reader's clock with the expiry the holder computed with its own clock,
so a lease must be much longer than the clock skew between writers (the 60 s default is).
Without compare-and-swap on the commit itself one window remains, between a successful
`check()` and the commit write; it is at most the remaining lease (normally >= 3/4 of it).

A lock file that does not parse (edited by hand, written by another tool) counts as held by
"unknown" until its file mtime plus the reader's lease has passed, after which it can be
taken over like any expired lease; if the storage reports no mtime it stays held until
removed by hand. Unparseable content never frees a table by itself.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from types import TracebackType

from engine.errors import ConcurrentWriteError, EngineError
from engine.storage.base import Storage
from engine.transaction.liveness import LocalProc, ProcessId, ProcReader, is_dead_here
from engine.transaction.lock_info import LOCK_DIR, LockInfo, iso_ms, lock_file

__all__ = ["DEFAULT_LEASE", "LOCK_DIR", "LockInfo", "TableLock", "lock_file", "read_holder"]

DEFAULT_LEASE = 60.0  # seconds
_NAME = re.compile(r"^lock\.(\d+)$")
# Kept by garbage collection: the current epoch and the one before it.
_KEEP_EPOCHS = 2
_BACKOFF_FIRST = 0.01
_BACKOFF_MAX = 0.25

_log = logging.getLogger(__name__)


# -- reading the lock directory -------------------------------------------------------


def _epochs(storage: Storage) -> dict[int, int | None]:
    """Epoch -> file mtime (ms) of every lock file; temp files and strays are ignored."""
    found: dict[int, int | None] = {}
    for f in storage.list_dir(LOCK_DIR):
        m = _NAME.match(f.name)
        if m and not f.is_dir:
            found[int(m.group(1))] = f.mtime_ms
    return found


def _read(storage: Storage, epoch: int, mtime_ms: int | None, lease_ms: int) -> LockInfo:
    """The lease in lock file `epoch` (FileNotFoundError if it was deleted meanwhile)."""
    data = storage.read_bytes(lock_file(epoch))
    try:
        return LockInfo.from_json(epoch, data)
    except ValueError as e:
        _log.warning("lock file %s is unreadable (%s); treating it as held", storage.uri(lock_file(epoch)), e)
        return LockInfo.unreadable(epoch, mtime_ms, lease_ms)


def _latest(storage: Storage, lease_ms: int) -> LockInfo | None:
    """The lease in the highest-epoch lock file, None if there is none."""
    while True:
        epochs = _epochs(storage)
        if not epochs:
            return None
        top = max(epochs)
        try:
            return _read(storage, top, epochs[top], lease_ms)
        except FileNotFoundError:
            # Garbage-collected between the listing and the read: a newer epoch exists now.
            continue


def read_holder(
    storage: Storage, *, lease: float = DEFAULT_LEASE, clock: Callable[[], float] = time.time
) -> LockInfo | None:
    """Who holds the table lock now: the live lease, or None if the table is free.

    Never raises for a missing lock directory. `lease` only matters for an unreadable lock
    file, which counts as held until its mtime + `lease` (see the module docstring).
    """
    latest = _latest(storage, _ms(lease))
    if latest is None or not latest.is_held(_ms(clock())):
        return None
    return latest


def _ms(seconds: float) -> int:
    # Rounded, not truncated: 1767225600.123 * 1000 is 1767225600122.9998 in binary floating point.
    return round(seconds * 1000)


# -- the lock -------------------------------------------------------------------------


class TableLock:
    """The single-writer lock of one table; see the module docstring for the protocol.

    `purpose` is recorded for whoever finds the table locked ("upsert", "rollback"...).
    `lease` (seconds) is how long a holder that stops renewing keeps the lock; a daemon
    thread renews every `renew_interval` (default lease/4). `wait` is how long `acquire`
    (and `with lock:`) retries, with backoff, while another writer holds the lock. `clock`
    gives epoch seconds; tests pass a fake one to simulate expiry. `proc` reads /proc, to
    record who we are and to prove a holder dead (tests pass a fake one).

        with TableLock(storage, "upsert") as lock:
            ... write files ...
            lock.check()   # fencing: raises ConcurrentWriteError if the lock was lost
            ... commit ...
    """

    def __init__(
        self,
        storage: Storage,
        purpose: str = "write",
        *,
        lease: float = DEFAULT_LEASE,
        renew_interval: float | None = None,
        wait: float = 0.0,
        clock: Callable[[], float] = time.time,
        proc: ProcReader | None = None,
    ) -> None:
        if lease <= 0:
            raise ValueError(f"lease must be positive, got {lease}")
        renew_interval = lease / 4 if renew_interval is None else renew_interval
        if not 0 < renew_interval < lease:
            raise ValueError(f"renew_interval must be in (0, lease={lease}), got {renew_interval}")
        self.storage = storage
        self.purpose = purpose
        self.lease = lease
        self.renew_interval = renew_interval
        self.wait = wait
        self.clock = clock
        self.proc = proc or LocalProc()
        self._mutex = threading.Lock()  # serialises renewals with check() and release()
        self._info: LockInfo | None = None
        self._lost: ConcurrentWriteError | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.renewals = 0
        self.last_renew_error: BaseException | None = None

    def __repr__(self) -> str:
        return f"TableLock({self.storage.uri('')!r}, purpose={self.purpose!r}, epoch={self.epoch})"

    @property
    def info(self) -> LockInfo | None:
        """Our lease as last written, while we hold (or believe we hold) the lock."""
        return self._info

    @property
    def epoch(self) -> int | None:
        """The epoch of our lease, None when not held."""
        return self._info.epoch if self._info else None

    def _now_ms(self) -> int:
        return _ms(self.clock())

    @property
    def _lease_ms(self) -> int:
        return _ms(self.lease)

    # -- acquire --------------------------------------------------------------------

    def acquire(self, wait: float | None = None) -> LockInfo:
        """Take the lock, retrying up to `wait` seconds (default: the constructor's `wait`).

        Raises ConcurrentWriteError naming the holder if it is still held when the wait is
        over. Returns our lease.
        """
        if self._info is not None:
            raise RuntimeError(f"{self!r} is already held")
        wait = self.wait if wait is None else wait
        deadline = time.monotonic() + wait
        delay = _BACKOFF_FIRST
        while True:
            latest = _latest(self.storage, self._lease_ms)
            now_ms = self._now_ms()
            if latest is not None and latest.is_held(now_ms) and not self._is_dead(latest):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ConcurrentWriteError(
                        f"table {self.storage.uri('')} is locked by {latest.describe()}"
                        + ("" if latest.corrupt else f"; retry after {iso_ms(latest.expires_at_ms)}"),
                        latest,
                    )
                time.sleep(min(remaining, delay * random.uniform(0.5, 1.5)))
                delay = min(delay * 2, _BACKOFF_MAX)
                continue
            if latest is not None and latest.is_held(now_ms):
                _log.warning(
                    "taking over the lock of %s: %s, whose process is gone",
                    self.storage.uri(""),
                    latest.describe(),
                )
            me = ProcessId.current(self.proc)
            mine = LockInfo(
                epoch=1 if latest is None else latest.epoch + 1,
                owner=uuid.uuid4().hex,
                host=me.host,
                pid=me.pid,
                purpose=self.purpose,
                acquired_at_ms=now_ms,
                expires_at_ms=now_ms + self._lease_ms,
                boot_id=me.boot_id,
                start=me.start,
                pid_ns=me.pid_ns,
            )
            try:
                self.storage.create_exclusive(lock_file(mine.epoch), mine.to_json())
            except FileExistsError:
                continue  # another writer took this epoch; the next read names it
            if max(_epochs(self.storage)) > mine.epoch:
                # A stale claim (see the module docstring): give it up, it orders nothing.
                self.storage.write_bytes(lock_file(mine.epoch), replace(mine, released=True).to_json())
                continue
            self._start(mine)
            return mine

    def _is_dead(self, holder: LockInfo) -> bool:
        """Whether the holder's process is provably dead (so its lease need not be waited for)."""
        return not holder.corrupt and is_dead_here(holder.process, self.proc)

    def _start(self, mine: LockInfo) -> None:
        self._info = mine
        self._lost = None
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._renew_loop, args=(self._stop,), name=f"table-lock-{mine.epoch}", daemon=True
        )
        self._thread.start()

    # -- renew and fence ------------------------------------------------------------

    def _renew_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.renew_interval):
            try:
                if not self._renew():
                    return
            except Exception as e:  # a storage hiccup: retry next tick; the lease bounds how long
                self.last_renew_error = e
                _log.warning("renewing %r failed: %s", self, e)

    def _renew(self) -> bool:
        """Extend our lease unless it was lost; False when there is nothing left to renew."""
        with self._mutex:
            info = self._info
            if info is None or self._lost is not None:
                return False
            self._lost = self._find_loss(info)
            if self._lost is not None:
                _log.warning("%s", self._lost)
                return False
            now_ms = self._now_ms()
            renewed = replace(info, expires_at_ms=now_ms + self._lease_ms)
            self.storage.write_bytes(lock_file(info.epoch), renewed.to_json())
            self._info = renewed
            self.renewals += 1
            return True

    def _find_loss(self, info: LockInfo) -> ConcurrentWriteError | None:
        """Why our lease `info` no longer holds the lock, read from the storage; None if it does."""
        epochs = _epochs(self.storage)
        newer = max(epochs, default=0)
        if newer > info.epoch:
            holder = _latest(self.storage, self._lease_ms)
            who = holder.describe() if holder else f"epoch {newer}"
            return ConcurrentWriteError(f"lock lost: taken over by {who}", holder)
        if self._now_ms() >= info.expires_at_ms:
            return ConcurrentWriteError(
                f"lock lost: our lease (epoch {info.epoch}) expired at {iso_ms(info.expires_at_ms)} "
                "before it was renewed; another writer may take over at any moment",
                info,
            )
        try:
            on_disk = _read(self.storage, info.epoch, epochs.get(info.epoch), self._lease_ms)
        except FileNotFoundError:
            return ConcurrentWriteError(f"lock lost: {lock_file(info.epoch)} was removed", None)
        if on_disk.owner != info.owner or on_disk.released:
            return ConcurrentWriteError(
                f"lock lost: {lock_file(info.epoch)} now reads {on_disk.describe()}"
                + (" (released)" if on_disk.released else ""),
                on_disk,
            )
        return None

    def check(self) -> None:
        """Fencing: raise ConcurrentWriteError unless we still hold the lock, read from storage.

        Call it right before committing. Once the lock is found lost it stays lost.
        """
        with self._mutex:
            if self._lost is None:
                if self._info is None:
                    raise ConcurrentWriteError(f"{self!r} is not held", None)
                self._lost = self._find_loss(self._info)
            if self._lost is not None:
                raise ConcurrentWriteError(str(self._lost), self._lost.holder)

    # -- release --------------------------------------------------------------------

    def release(self) -> None:
        """Give the lock up: mark our lease released and drop epochs below ours - 1.

        A lock taken over by another writer is left alone: no file is written or deleted.
        Releasing twice, or without holding, does nothing.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._mutex:
            info, self._info = self._info, None
            if info is None:
                return
            if max(_epochs(self.storage), default=0) > info.epoch:
                return  # taken over: the lock is the new holder's, nothing of ours to release
            # Lost only by our own lease running out: nobody took over, so free the table now.
            self.storage.write_bytes(lock_file(info.epoch), replace(info, released=True).to_json())
            self._collect(info.epoch)

    def _collect(self, epoch: int) -> None:
        for old in sorted(e for e in _epochs(self.storage) if e <= epoch - _KEEP_EPOCHS):
            try:
                self.storage.delete(lock_file(old))
            except EngineError as e:  # leftovers are harmless; the next release retries
                _log.warning("could not delete old lock file %s: %s", lock_file(old), e)

    def __enter__(self) -> TableLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
