"""The JVM's start-up noise: the lines dropped from its stderr, and the filter that drops them.

Spark's log lines are silenced by configuration (`log4j2.properties`, see `session.py`). What no
configuration reaches is printed by the JVM itself, before Spark or log4j runs: Spark's launcher
always passes `--add-modules=jdk.incubator.vector`, and the JVM then announces it. The gateway
JVM's stderr is therefore a pipe read by a `StderrFilter`: lines equal to one in `NOISE` are
dropped, every other byte goes on to this process's stderr (file descriptor 2) unchanged. The
JVM's stderr also carries what the Python workers write to theirs (Spark copies it there), so
their output passes the same filter.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Iterable, Iterator

# whole lines (without their line break), compared exactly; nothing else is ever dropped
NOISE: frozenset[bytes] = frozenset({
    # the JVM's module system, on the option Spark's launcher always passes (JavaModuleOptions)
    b"WARNING: Using incubator modules: jdk.incubator.vector",
})


def is_noise(line: bytes) -> bool:
    """Whether `line` (with or without its trailing line break) is one of the `NOISE` lines."""
    return line.rstrip(b"\r\n") in NOISE


def drop_noise(lines: Iterable[bytes]) -> Iterator[bytes]:
    """`lines` without the noise lines; the others unchanged, line breaks included."""
    return (line for line in lines if not is_noise(line))


class StderrFilter:
    """Copies what arrives on `read_fd` (a pipe's read end) to `target_fd` without the noise lines.

    A daemon thread reads until end of file (every writer closed the pipe) and then closes
    `read_fd`. It keeps reading when the target cannot be written (a closed stderr): a JVM whose
    stderr pipe is full would block. Lines are forwarded whole, so a line still unfinished waits
    for its line break, the end of file or `flush`.
    """

    def __init__(self, read_fd: int, target_fd: int = 2) -> None:
        self.read_fd = read_fd
        self.target_fd = target_fd
        self._wake_read, self._wake_write = os.pipe()
        self._flushed = threading.Event()
        self._lock = threading.Lock()  # the wake pipe is closed under it, when the input ends
        self._ended = False
        self._pending = b""
        self._thread = threading.Thread(target=self._run, name="jvm-stderr", daemon=True)

    def start(self) -> StderrFilter:
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the end of the input; whether it came within `timeout` seconds."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def flush(self, timeout: float = 2.0) -> bool:
        """Forward everything written to the pipe so far, an unfinished last line included; whether
        that was done within `timeout` seconds (at once if the input has ended)."""
        with self._lock:
            if self._ended:
                return True
            self._flushed.clear()
            os.write(self._wake_write, b".")
        return self._flushed.wait(timeout)

    def _run(self) -> None:
        try:
            while True:
                readable, _, _ = select.select([self.read_fd, self._wake_read], [], [])
                if self.read_fd in readable and not self._take(os.read(self.read_fd, 65536)):
                    break
                if self._wake_read in readable:
                    os.read(self._wake_read, 64)
                    while select.select([self.read_fd], [], [], 0)[0]:
                        if not self._take(os.read(self.read_fd, 65536)):
                            return
                    self._write_pending()
                    self._flushed.set()
        finally:
            self._write_pending()
            with self._lock:
                self._ended = True
                for fd in (self.read_fd, self._wake_read, self._wake_write):
                    os.close(fd)
            self._flushed.set()

    def _take(self, chunk: bytes) -> bool:
        """Forward the complete lines of `chunk` (after what is pending); False at end of file."""
        if not chunk:
            return False
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        self._write(b"".join(drop_noise(line + b"\n" for line in lines)))
        return True

    def _write_pending(self) -> None:
        pending, self._pending = self._pending, b""
        if pending and not is_noise(pending):
            self._write(pending)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.target_fd, view):]
        except OSError:
            pass
