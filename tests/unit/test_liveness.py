"""A dead writer on this host is proven dead (host, boot id, pid, start time) and not waited for:
its table lock is taken over at once and its pending write counts as failed; a holder that
cannot be proven dead (another host or boot, an older record, no /proc) is waited for as before.

Fake /proc readers for the cases a machine cannot stage; real child processes, killed with
SIGKILL, for the rest.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import ConcurrentWriteError, TableLock
from engine.storage import Storage, storage_for
from engine.transaction.heartbeat import Heartbeat, heartbeat_file
from engine.transaction.liveness import (
    BOOT_ID_PATH,
    PID_NS_PATH,
    LocalProc,
    ProcessId,
    is_dead_here,
    process_start,
    start_ticks,
)
from engine.transaction.lock import LockInfo, lock_file, read_holder
from engine.transaction.lock_info import iso_ms

ROOT = Path(__file__).resolve().parents[2]
HOST = socket.gethostname()
BOOT = "11111111-2222-3333-4444-555555555555"
NS = "pid:[4026531836]"
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
T0_MS = 1_767_225_600_000


class FakeProc:
    """A /proc with the given boot id and processes (pid -> (state, start ticks)); `hidden` pids
    run but their stat files cannot be read (`/proc` mounted hidepid=2, another user's)."""

    def __init__(
        self, boot: str | None = BOOT, processes: dict[int, tuple[str, int]] | None = None, ns: str = NS,
        hidden: frozenset[int] = frozenset(),
    ) -> None:
        self.boot = boot
        self.processes = processes or {}
        self.ns = ns
        self.hidden = hidden

    def pid_exists(self, pid: int) -> bool | None:
        return pid in self.processes or pid in self.hidden

    def read(self, path: str) -> str | None:
        if self.boot is None:  # no /proc at all
            return None
        if path == BOOT_ID_PATH:
            return self.boot + "\n"
        if path == PID_NS_PATH:
            return self.ns
        for pid, (state, start) in self.processes.items():
            if path == f"/proc/{pid}/stat" and pid not in self.hidden:
                # the command name may hold spaces and parentheses: the parser splits after the last ')'
                rest = " ".join(["1"] * 18)
                return f"{pid} (a (b) c) {state} {rest} {start} 4096 100\n"
        return None


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return storage_for(str(tmp_path / "table"))


# -- proving a process dead ---------------------------------------------------------------


def test_start_ticks_is_field_22_of_stat_even_with_parentheses_in_the_name() -> None:
    proc = FakeProc(processes={42: ("S", 987654)})
    assert start_ticks(42, proc) == 987654
    assert start_ticks(43, proc) is None
    assert process_start(42, proc) == f"{BOOT}:987654"
    assert process_start(43, proc) is None


def test_the_real_proc_names_this_process() -> None:
    me = ProcessId.current()
    assert (me.host, me.pid) == (HOST, os.getpid())
    assert me.boot_id == Path(BOOT_ID_PATH).read_text().strip()
    stat = Path(f"/proc/{os.getpid()}/stat").read_text()
    assert me.start == int(stat[stat.rfind(")") + 2 :].split()[19])
    assert process_start(os.getpid()) == f"{me.boot_id}:{me.start}"
    assert me.pid_ns == os.readlink("/proc/self/ns/pid")
    assert not is_dead_here(me)


@pytest.mark.parametrize(
    ("who", "proc", "dead"),
    [
        # same host, boot and pid namespace: the pid is gone, reused by a later process, a zombie -> dead
        (ProcessId(HOST, 42, BOOT, 1000, NS), FakeProc(processes={}), True),
        (ProcessId(HOST, 42, BOOT, 1000, NS), FakeProc(processes={42: ("S", 2000)}), True),
        (ProcessId(HOST, 42, BOOT, 1000, NS), FakeProc(processes={42: ("Z", 1000)}), True),
        # the same process still runs
        (ProcessId(HOST, 42, BOOT, 1000, NS), FakeProc(processes={42: ("S", 1000)}), False),
        # nothing can be proven: another host, boot or pid namespace, fields missing, no /proc
        (ProcessId("elsewhere", 42, BOOT, 1000, NS), FakeProc(processes={}), False),
        (ProcessId(HOST, 42, "another-boot", 1000, NS), FakeProc(processes={}), False),
        (ProcessId(HOST, 42, BOOT, 1000, "pid:[4026532000]"), FakeProc(processes={}), False),
        (ProcessId(HOST, 42, None, 1000, NS), FakeProc(processes={}), False),
        (ProcessId(HOST, 42, BOOT, None, NS), FakeProc(processes={}), False),
        (ProcessId(HOST, 42, BOOT, 1000, None), FakeProc(processes={}), False),
        (ProcessId(HOST, 42, BOOT, 1000, NS), FakeProc(boot=None), False),
        # a stat file we may not read (hidepid): alive by kill(pid, 0), never proven dead
        (ProcessId(HOST, 42, BOOT, 1000, NS), FakeProc(processes={42: ("S", 1000)}, hidden=frozenset({42})), False),
        (ProcessId(HOST, 42, BOOT, 1000, NS), FakeProc(hidden=frozenset({42})), False),
    ],
)
def test_is_dead_here(who: ProcessId, proc: FakeProc, dead: bool) -> None:
    assert is_dead_here(who, proc) is dead


# -- the lock: holders in real processes ----------------------------------------------------


def _hold_lock_in_child(path: str) -> subprocess.Popen[str]:
    """A child process that takes the table lock through the engine, says so, and sleeps."""
    code = (
        "import sys, time\n"
        "from engine.storage import storage_for\n"
        "from engine.transaction.lock import TableLock\n"
        f"TableLock(storage_for({path!r}), 'upsert').acquire()\n"
        "print('held', flush=True)\n"
        "time.sleep(600)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_a_lock_held_by_a_sigkilled_process_is_taken_over_at_once(storage: Storage) -> None:
    child = _hold_lock_in_child(storage.uri(""))
    held = read_holder(storage)
    assert held is not None and held.pid == child.pid and held.epoch == 1
    assert held.boot_id == ProcessId.current().boot_id and held.start == start_ticks(child.pid, LocalProc())
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    # the dead holder's lease still runs (60 s): only its death frees the table
    assert read_holder(storage) == held
    started = time.monotonic()
    lock = TableLock(storage, "upsert", wait=0)
    mine = lock.acquire()
    assert time.monotonic() - started < 1.0
    # the takeover of an expired lease: the next epoch, the dead holder's file left as it was
    assert (mine.epoch, mine.pid) == (2, os.getpid())
    assert LockInfo.from_json(1, storage.read_bytes(lock_file(1))) == held
    assert sorted(f.name for f in storage.list_dir(".hoodie/.lock")) == ["lock.000000000001", "lock.000000000002"]
    lock.check()
    lock.release()


def test_a_lock_held_by_a_live_process_is_not_taken(storage: Storage) -> None:
    child = _hold_lock_in_child(storage.uri(""))
    try:
        held = read_holder(storage)
        assert held is not None
        with pytest.raises(ConcurrentWriteError) as err:
            TableLock(storage, "upsert").acquire(wait=0.2)
        assert err.value.holder == held
        assert f"host={HOST} pid={child.pid} purpose=upsert" in str(err.value)
        assert str(err.value).endswith(f"; retry after {iso_ms(held.expires_at_ms)}")
        assert sorted(f.name for f in storage.list_dir(".hoodie/.lock")) == ["lock.000000000001"]
    finally:
        child.kill()
        child.wait()


# -- the lock: records that prove nothing are waited for --------------------------------------


def _write_record(storage: Storage, **fields: object) -> None:
    record = {
        "owner": "dead-writer", "host": HOST, "pid": 42, "purpose": "upsert",
        "acquired_at_ms": T0_MS, "expires_at_ms": T0_MS + 60_000, "released": False,
        **fields,
    }
    storage.write_bytes(lock_file(1), json.dumps({k: v for k, v in record.items() if v is not None}).encode())


@pytest.mark.parametrize(
    "record",
    [
        {"host": "another-host", "boot_id": BOOT, "start": 1000, "pid_ns": NS},
        {"boot_id": "another-boot", "start": 1000, "pid_ns": NS},
        {"boot_id": BOOT, "start": 1000, "pid_ns": "pid:[4026532000]"},
        {},  # written by an older version: no boot id, start time or pid namespace
    ],
    ids=["another-host", "another-boot", "another-pid-namespace", "older-record"],
)
def test_a_holder_not_provably_dead_is_waited_for_until_its_lease_expires(
    storage: Storage, record: dict[str, object]
) -> None:
    _write_record(storage, **record)
    clock = FakeClock(T0 + 59.999)
    proc = FakeProc(processes={})  # pid 42 does not exist here
    with pytest.raises(ConcurrentWriteError) as err:
        TableLock(storage, "upsert", clock=clock, proc=proc).acquire(wait=0)
    assert str(err.value).endswith("; retry after 2026-01-01T00:01:00.000+00:00")
    assert sorted(f.name for f in storage.list_dir(".hoodie/.lock")) == ["lock.000000000001"]
    clock.now = T0 + 60.0  # the lease expired: the usual takeover
    lock = TableLock(storage, "upsert", clock=clock, proc=proc)
    assert lock.acquire(wait=0).epoch == 2
    lock.release()


def test_a_pid_reused_by_a_process_with_another_start_time_counts_as_dead(storage: Storage) -> None:
    _write_record(storage, boot_id=BOOT, start=1000, pid_ns=NS)
    clock = FakeClock(T0 + 1)
    # the same pid with the recorded start time is the holder itself: it keeps the lock
    with pytest.raises(ConcurrentWriteError):
        TableLock(storage, "upsert", clock=clock, proc=FakeProc(processes={42: ("S", 1000)})).acquire(wait=0)
    lock = TableLock(storage, "upsert", clock=clock, proc=FakeProc(processes={42: ("S", 5000)}))
    assert lock.acquire(wait=0).epoch == 2
    lock.release()


def test_a_holder_whose_stat_we_may_not_read_keeps_the_lock_until_its_lease_expires(storage: Storage) -> None:
    """Issue 33.3: with /proc mounted hidepid, another user's live holder has no readable stat file;
    that is no proof of death (kill(pid, 0) answers EPERM): the lease decides."""
    _write_record(storage, boot_id=BOOT, start=1000, pid_ns=NS)
    hidden = FakeProc(processes={42: ("S", 1000)}, hidden=frozenset({42}))
    clock = FakeClock(T0 + 1)
    with pytest.raises(ConcurrentWriteError):
        TableLock(storage, "upsert", clock=clock, proc=hidden).acquire(wait=0)
    assert sorted(f.name for f in storage.list_dir(".hoodie/.lock")) == ["lock.000000000001"]
    clock.now = T0 + 60.0
    lock = TableLock(storage, "upsert", clock=clock, proc=hidden)
    assert lock.acquire(wait=0).epoch == 2
    lock.release()


def test_the_real_proc_settles_an_unreadable_stat_file_with_kill() -> None:
    """LocalProc.pid_exists: this process exists, pid 1 exists even when it is not ours to signal
    (EPERM counts as alive), and a pid past pid_max exists nowhere."""
    proc = LocalProc()
    assert proc.pid_exists(os.getpid()) is True
    assert proc.pid_exists(1) is True
    limit = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert proc.pid_exists(limit + 1) is False


def test_an_older_record_without_the_new_fields_still_parses() -> None:
    info = LockInfo.from_json(
        3,
        b'{"owner": "o", "host": "h", "pid": 7, "purpose": "upsert", "acquired_at_ms": 1, '
        b'"expires_at_ms": 2, "released": false}',
    )
    assert (info.boot_id, info.start, info.pid_ns) == (None, None, None)
    assert info.process == ProcessId("h", 7, None, None, None)
    assert json.loads(info.to_json()) == {
        "owner": "o", "host": "h", "pid": 7, "purpose": "upsert", "acquired_at_ms": 1, "expires_at_ms": 2,
        "released": False, "epoch": 3,
    }


# -- the heartbeat: who writes an instant ----------------------------------------------------


INSTANT = "20260101000000000"


def test_a_heartbeat_naming_a_dead_process_means_its_write_failed_at_once(storage: Storage) -> None:
    from engine.transaction.heartbeat import is_writer_gone

    who = {"host": HOST, "pid": 42, "boot_id": BOOT, "start": 1000, "pid_ns": NS}
    storage.write_bytes(heartbeat_file(INSTANT), f"{int(time.time() * 1000)}\n{json.dumps(who)}\n".encode())
    assert Heartbeat.writer(storage, INSTANT) == ProcessId(HOST, 42, BOOT, 1000, NS)
    assert not Heartbeat.is_expired(storage, INSTANT, 60.0, 2)  # fresh: waited for until now
    assert is_writer_gone(storage, INSTANT, 60_000, 2, FakeProc(processes={}))
    assert is_writer_gone(storage, INSTANT, 60_000, 2, FakeProc(processes={42: ("S", 2000)}))
    assert not is_writer_gone(storage, INSTANT, 60_000, 2, FakeProc(processes={42: ("S", 1000)}))
    assert not is_writer_gone(storage, INSTANT, 60_000, 2, FakeProc(boot="another-boot", processes={}))
    assert not is_writer_gone(storage, INSTANT, 60_000, 2, FakeProc(processes={}, ns="pid:[4026532000]"))
    # a live writer whose stat file is hidden from us (hidepid) is waited for, not rolled back
    hidden = FakeProc(processes={42: ("S", 1000)}, hidden=frozenset({42}))
    assert not is_writer_gone(storage, INSTANT, 60_000, 2, hidden)


def test_a_heartbeat_of_an_older_version_names_nobody_and_is_waited_for(storage: Storage) -> None:
    from engine.transaction.heartbeat import is_writer_gone

    storage.write_bytes(heartbeat_file(INSTANT), str(int(time.time() * 1000)).encode())
    assert Heartbeat.writer(storage, INSTANT) is None
    assert not is_writer_gone(storage, INSTANT, 60_000, 2, FakeProc(processes={}))
