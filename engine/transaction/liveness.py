"""Liveness of a process named in a record: who wrote a lock file or a heartbeat, and whether
that process is provably dead.

A pid names a process only until it exits, and the same host name comes back after a reboot
or in a restarted container. So a record names its process by five things: the host name, the
boot id (`/proc/sys/kernel/random/boot_id`, new at every boot), the pid namespace
(`/proc/self/ns/pid`: containers sharing the host's name, as with host networking, still see
other pids), the pid, and the process's start time (clock ticks since boot, field 22 of
`/proc/<pid>/stat`). A reader on the same host, boot and pid namespace proves the process dead
when no process has the pid, or the one that has it started at another time (the pid was
reused), or it is a zombie. Anything else - another host, another boot, a record
without these fields (older versions of this engine, other tools), no /proc, a stat file it may
not read (`/proc` mounted `hidepid=1/2` hides other users' processes) - proves nothing: the
caller waits for the lease or heartbeat as before. An unreadable stat file is settled by
`kill(pid, 0)`: ESRCH is a dead process, EPERM or success a live one.

Pure apart from reading /proc through a `ProcReader`, which tests replace with a fake.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "BOOT_ID_PATH", "PID_NS_PATH", "LocalProc", "ProcReader", "ProcessId", "boot_id", "is_dead_here", "pid_namespace", "process_start", "start_ticks"
]

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
PID_NS_PATH = "/proc/self/ns/pid"  # a symlink: its target ("pid:[4026531836]") names the namespace
_START_FIELD = 22  # starttime in /proc/<pid>/stat, 1-based as proc(5) numbers it


class ProcReader(Protocol):
    """Reads /proc: `read(path)` is the file's text (a symlink's target), None when unreadable;
    `pid_exists(pid)` whether a process has the pid (True, False, or None when it cannot tell)."""

    def read(self, path: str) -> str | None: ...

    def pid_exists(self, pid: int) -> bool | None: ...


class LocalProc:
    """The /proc of this machine."""

    def read(self, path: str) -> str | None:
        try:
            if path == PID_NS_PATH:
                return os.readlink(path)
            with open(path, "rb") as f:
                return f.read().decode("ascii", "replace")
        except OSError:
            return None

    def pid_exists(self, pid: int) -> bool | None:
        """`kill(pid, 0)`: ESRCH means no process has the pid; EPERM (another user's) or success
        means one does."""
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        except OSError:
            return None
        return True


def boot_id(proc: ProcReader) -> str | None:
    """This boot's id, None without /proc."""
    text = proc.read(BOOT_ID_PATH)
    return text.strip() or None if text is not None else None


def pid_namespace(proc: ProcReader) -> str | None:
    """The reader's pid namespace ("pid:[inode]"), None without /proc."""
    text = proc.read(PID_NS_PATH)
    return text.strip() or None if text is not None else None


def _stat(pid: int, proc: ProcReader) -> tuple[str, int] | None:
    """(state, start ticks) of process `pid` from /proc/<pid>/stat; None if gone or unreadable."""
    if pid <= 0:
        return None
    stat = proc.read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after the last ')'
    fields = stat[stat.rfind(")") + 2 :].split()
    index = _START_FIELD - 3  # fields[0] is field 3 (the state)
    if len(fields) <= index or not fields[index].isdigit():
        return None
    return fields[0], int(fields[index])


def start_ticks(pid: int, proc: ProcReader) -> int | None:
    """When process `pid` started (clock ticks since boot); None if it is gone or without /proc."""
    stat = _stat(pid, proc)
    return None if stat is None else stat[1]


def process_start(pid: int, proc: ProcReader | None = None) -> str | None:
    """`<boot id>:<start ticks>` of process `pid`, one string (the console stores it so);
    None if it is gone or there is no /proc."""
    proc = proc or LocalProc()
    boot, ticks = boot_id(proc), start_ticks(pid, proc)
    if boot is None or ticks is None:
        return None
    return f"{boot}:{ticks}"


@dataclass(frozen=True)
class ProcessId:
    """A process named beyond its pid: host, pid, boot id, start ticks and pid namespace (None
    when unknown, as in records older versions wrote)."""

    host: str
    pid: int
    boot_id: str | None = None
    start: int | None = None
    pid_ns: str | None = None

    @classmethod
    def current(cls, proc: ProcReader | None = None) -> ProcessId:
        """This process."""
        proc = proc or LocalProc()
        pid = os.getpid()
        return cls(
            host=socket.gethostname(),
            pid=pid,
            boot_id=boot_id(proc),
            start=start_ticks(pid, proc),
            pid_ns=pid_namespace(proc),
        )


def is_dead_here(who: ProcessId, proc: ProcReader | None = None, my_host: str | None = None) -> bool:
    """Whether process `who` is provably dead: same host name (`my_host`, default this host's),
    boot and pid namespace as the reader, and its pid is gone, a zombie, or started at another
    time.

    False whenever it cannot be proven: another host, boot or pid namespace, a missing boot id,
    start time or namespace (older records, other tools), or no /proc here."""
    proc = proc or LocalProc()
    if who.boot_id is None or who.start is None or who.pid_ns is None or who.pid <= 0:
        return False
    if who.host != (socket.gethostname() if my_host is None else my_host):
        return False
    here = boot_id(proc)
    if here is None or here != who.boot_id or pid_namespace(proc) != who.pid_ns:
        return False
    stat = _stat(who.pid, proc)
    if stat is None:
        # gone, or hidden from us (hidepid): only a pid no process has is proof
        return proc.pid_exists(who.pid) is False
    # a zombie (Z) or dying (X) process holds nothing any more; it only waits to be reaped
    return stat[1] != who.start or stat[0] in ("Z", "X")
