"""`Heartbeat`: a writer's "still alive" signal for one write instant, as Apache Hudi keeps it.

A running write refreshes `.hoodie/.heartbeat/<instantTime>` every `interval`; a heartbeat
is expired when it has not been refreshed for more than `interval * tolerable_misses`
(Hudi's `HoodieHeartbeatClient`/`HoodieHeartbeatUtils` rule: `now - last > interval * misses`,
strictly greater, with `hoodie.client.heartbeat.interval_in_ms` = 60000 and
`hoodie.client.heartbeat.tolerable.misses` = 2 by default, so 120 s). A missing heartbeat
file counts as expired, as in Hudi: an inflight instant without one belongs to a writer that
finished or died, and its cleanup (rollback of a failed write) may proceed.

Where the last beat comes from: the file content, the beat time in epoch milliseconds as
decimal text, written by the beating process. Hudi writes empty files and reads the file
modification time instead; we read the content because S3's Last-Modified is second-granular
and stamped by the server, so sub-second intervals (tests) could not be told apart and the
time would not come from the clock the writer was given. Files without a number in them
(written by Java Hudi) fall back to the mtime, so either writer's heartbeats are understood.
Either way the reader compares against its own clock: the skew between writer (or server)
and reader must stay well under `interval * misses`.

Who beats: after the beat time, a second line holds the writing process as JSON (`host`,
`pid`, `boot_id`, `start`, `pid_ns`; `engine.transaction.liveness`), so that a writer on the same
host, boot and pid namespace can prove a crashed writer dead at once instead of waiting for
the heartbeat to expire
(`Heartbeat.writer`). Files without that line (older versions of this engine, Java Hudi) name
nobody, and their writer is only ever outlived. Versions of this engine before that line read
such a file's mtime, as they do Java Hudi's.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

from engine.constants import HEARTBEAT_DIR, heartbeat_file
from engine.storage.base import Storage
from engine.transaction.liveness import ProcessId, ProcReader, is_dead_here

__all__ = [
    "is_writer_gone",
    "DEFAULT_INTERVAL",
    "DEFAULT_TOLERABLE_MISSES",
    "HEARTBEAT_DIR",
    "INTERVAL_KEY",
    "TOLERABLE_MISSES_KEY",
    "Heartbeat",
    "heartbeat_file",
]

INTERVAL_KEY = "hoodie.client.heartbeat.interval_in_ms"
TOLERABLE_MISSES_KEY = "hoodie.client.heartbeat.tolerable.misses"
DEFAULT_INTERVAL = 60.0  # seconds (Hudi: 60000 ms)
DEFAULT_TOLERABLE_MISSES = 2

_log = logging.getLogger(__name__)


class Heartbeat:
    """The heartbeat of one write instant; build it with `Heartbeat.start`.

    Times passed in and out of the API: `interval` in seconds, `clock()`/`now` in epoch
    seconds, beats (`last_beat`, `last_beat_ms`) in epoch milliseconds, as on disk.
    """

    def __init__(
        self,
        storage: Storage,
        instant: str,
        interval: float,
        clock: Callable[[], float] = time.time,
        proc: ProcReader | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"heartbeat interval must be positive, got {interval}")
        self.storage = storage
        self.instant = instant
        self.path = heartbeat_file(instant)
        self.interval = interval
        self.clock = clock
        self.process = ProcessId.current(proc)
        self._who = json.dumps(
            {
                "host": self.process.host,
                "pid": self.process.pid,
                "boot_id": self.process.boot_id,
                "start": self.process.start,
                "pid_ns": self.process.pid_ns,
            },
            sort_keys=True,
        )
        self.beats = 0
        self.last_beat_ms: int | None = None
        self.last_error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"Heartbeat({self.storage.uri(self.path)!r}, interval={self.interval})"

    @classmethod
    def start(
        cls,
        storage: Storage,
        instant: str,
        interval: float = DEFAULT_INTERVAL,
        *,
        clock: Callable[[], float] = time.time,
        proc: ProcReader | None = None,
    ) -> Heartbeat:
        """Beat once now (errors propagate), then every `interval` seconds from a daemon thread."""
        heartbeat = cls(storage, instant, interval, clock, proc)
        # Synchronous first beat: the thread may not get to run before someone checks.
        heartbeat.beat()
        heartbeat._thread = threading.Thread(target=heartbeat._run, name=f"heartbeat-{instant}", daemon=True)
        heartbeat._thread.start()
        return heartbeat

    def beat(self) -> None:
        """Write the heartbeat file with the current time."""
        now_ms = _ms(self.clock())
        self.storage.write_bytes(self.path, f"{now_ms}\n{self._who}\n".encode())
        self.last_beat_ms = now_ms
        self.beats += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.beat()
            except Exception as e:  # a storage hiccup: the next beat may succeed before expiry
                self.last_error = e
                _log.warning("%r: beat failed: %s", self, e)

    def stop(self) -> None:
        """Stop beating and delete the heartbeat file; calling it again does nothing."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()  # a beat in flight must not recreate the file after the delete
            self._thread = None
        self.storage.delete(self.path)

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- reading other writers' heartbeats ----------------------------------------------

    @staticmethod
    def last_beat(storage: Storage, instant: str) -> int | None:
        """The last beat of `instant` in epoch ms (content, else file mtime); None if there is none."""
        path = heartbeat_file(instant)
        try:
            data = storage.read_bytes(path)
        except FileNotFoundError:
            return None
        text = data.decode("ascii", errors="replace").strip().split("\n", 1)[0].strip()
        if text.isdigit():
            return int(text)
        # Java Hudi's heartbeats are empty files whose mtime is the beat.
        for f in storage.list_dir(HEARTBEAT_DIR):
            if f.name == instant and not f.is_dir:
                return f.mtime_ms
        return None

    @staticmethod
    def writer(storage: Storage, instant: str) -> ProcessId | None:
        """The process that beats for `instant`, as its heartbeat file names it; None if the file
        is missing or names nobody (older versions, Java Hudi) or does not parse."""
        try:
            data = storage.read_bytes(heartbeat_file(instant))
        except FileNotFoundError:
            return None
        lines = data.decode("utf-8", errors="replace").strip().split("\n", 1)
        if len(lines) < 2:
            return None
        try:
            raw = json.loads(lines[1])
        except json.JSONDecodeError:
            return None
        if not isinstance(raw, dict):
            return None
        host, pid, boot, start, ns = (raw.get(k) for k in ("host", "pid", "boot_id", "start", "pid_ns"))
        if not isinstance(host, str) or type(pid) is not int:
            return None
        return ProcessId(
            host=host,
            pid=pid,
            boot_id=boot if isinstance(boot, str) else None,
            start=start if type(start) is int else None,
            pid_ns=ns if isinstance(ns, str) else None,
        )

    @staticmethod
    def expires_at_ms(
        storage: Storage,
        instant: str,
        interval: float = DEFAULT_INTERVAL,
        misses: int = DEFAULT_TOLERABLE_MISSES,
    ) -> int | None:
        """When the heartbeat of `instant` expires if no beat follows (epoch ms); None if it has none."""
        last = Heartbeat.last_beat(storage, instant)
        return None if last is None else last + _ms(interval) * misses

    @staticmethod
    def is_expired(
        storage: Storage,
        instant: str,
        interval: float = DEFAULT_INTERVAL,
        misses: int = DEFAULT_TOLERABLE_MISSES,
        now: float | None = None,
    ) -> bool:
        """Whether the writer of `instant` counts as dead: no beat for more than interval * misses.

        `now` is epoch seconds (default: the current time). A missing heartbeat is expired.
        """
        last = Heartbeat.last_beat(storage, instant)
        if last is None:
            return True
        now_ms = _ms(time.time() if now is None else now)
        return now_ms - last > _ms(interval) * misses

    @staticmethod
    def list_instants(storage: Storage) -> list[str]:
        """The instants that have a heartbeat file, sorted (Hudi's getAllExistingHeartbeatInstants)."""
        return [
            f.name for f in storage.list_dir(HEARTBEAT_DIR) if not f.is_dir and not f.name.startswith(".")
        ]


def _ms(seconds: float) -> int:
    # Rounded, not truncated: 1767225600.123 * 1000 is 1767225600122.9998 in binary floating point.
    return round(seconds * 1000)


def is_running(storage: Storage, instant: str, heartbeat_interval_ms: int, tolerable_misses: int) -> bool:
    """Whether a live process runs pending `instant`: it keeps a heartbeat, and that process is not
    gone (`is_writer_gone`). A table service picked beside writers is left to it."""
    return storage.exists(heartbeat_file(instant)) and not is_writer_gone(
        storage, instant, heartbeat_interval_ms, tolerable_misses)


def is_writer_gone(
    storage: Storage,
    instant: str,
    heartbeat_interval_ms: int,
    tolerable_misses: int,
    proc: ProcReader | None = None,
) -> bool:
    """Whether the writer of pending `instant` is gone: its heartbeat expired, or the process its
    heartbeat names is provably dead (same host and boot, pid gone or reused)."""
    if Heartbeat.is_expired(storage, instant, heartbeat_interval_ms / 1000, tolerable_misses):
        return True
    writer = Heartbeat.writer(storage, instant)
    if writer is not None and is_dead_here(writer, proc):
        _log.warning(
            "the writer of %s (host=%s pid=%s) is dead: its write fails now", instant, writer.host, writer.pid
        )
        return True
    return False
