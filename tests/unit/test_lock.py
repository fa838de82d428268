"""The single-writer table lock: leases, takeover only after expiry, fencing, real contention."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import pickle
import queue as queue_module
import socket
import time
from pathlib import Path

import pytest

from engine import CommitConflictError, ConcurrentWriteError, TableLock
from engine.storage import Storage, storage_for
from engine.transaction import lock as lock_module
from engine.transaction.liveness import ProcessId
from engine.transaction.lock import LOCK_DIR, LockInfo, lock_file, read_holder
from tests.support.moto_s3 import MotoS3

ME = ProcessId.current()  # this process: its lock records name it
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z, in epoch seconds


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "local":
        return storage_for(str(tmp_path / "table"))
    server: MotoS3 = request.getfixturevalue("s3_server")
    bucket = server.create_bucket()
    return storage_for(f"s3://{bucket}/warehouse/table", server.storage_options())


@pytest.fixture
def local(tmp_path: Path) -> Storage:
    return storage_for(str(tmp_path / "table"))


def _lock_names(storage: Storage) -> list[str]:
    return [f.name for f in storage.list_dir(LOCK_DIR)]


def _on_disk(storage: Storage, epoch: int) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(storage.read_bytes(lock_file(epoch)))
    return loaded


# -- acquire / release ----------------------------------------------------------------


def test_acquire_writes_epoch_one_and_release_marks_it_released(storage: Storage) -> None:
    clock = FakeClock()
    lock = TableLock(storage, "upsert", lease=30.0, clock=clock)
    info = lock.acquire()
    assert info == LockInfo(
        epoch=1,
        owner=info.owner,
        host=socket.gethostname(),
        pid=os.getpid(),
        purpose="upsert",
        acquired_at_ms=1_767_225_600_000,
        expires_at_ms=1_767_225_630_000,
        boot_id=ME.boot_id,
        start=ME.start,
        pid_ns=ME.pid_ns,
    )
    assert len(info.owner) == 32
    assert _lock_names(storage) == ["lock.000000000001"]
    assert _on_disk(storage, 1) == {
        "epoch": 1,
        "owner": info.owner,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "purpose": "upsert",
        "acquired_at_ms": 1_767_225_600_000,
        "expires_at_ms": 1_767_225_630_000,
        "released": False,
        "boot_id": ME.boot_id,
        "start": ME.start,
        "pid_ns": ME.pid_ns,
    }
    assert read_holder(storage, clock=clock) == info
    lock.check()

    lock.release()
    assert _on_disk(storage, 1)["released"] is True
    assert read_holder(storage, clock=clock) is None
    assert lock.info is None
    lock.release()  # twice is a no-op
    with pytest.raises(ConcurrentWriteError, match="is not held"):
        lock.check()


def test_reacquire_takes_the_next_epoch_and_keeps_only_the_last_two(storage: Storage) -> None:
    lock = TableLock(storage, "upsert", clock=FakeClock())
    owners = []
    for expected_epoch in (1, 2, 3, 4):
        info = lock.acquire()
        assert info.epoch == expected_epoch
        owners.append(info.owner)
        lock.release()
    assert len(set(owners)) == 4  # a fresh owner id per acquisition
    assert _lock_names(storage) == ["lock.000000000003", "lock.000000000004"]
    assert _on_disk(storage, 3)["released"] is True
    assert _on_disk(storage, 4)["released"] is True


def test_context_manager_holds_inside_and_releases_on_error(local: Storage) -> None:
    clock = FakeClock()
    with pytest.raises(ZeroDivisionError):
        with TableLock(local, "rollback", clock=clock) as lock:
            assert read_holder(local, clock=clock) == lock.info
            1 / 0  # noqa: B018
    assert read_holder(local, clock=clock) is None
    assert _on_disk(local, 1)["released"] is True


def test_read_holder_of_a_table_without_lock_files_is_none(storage: Storage) -> None:
    assert read_holder(storage) is None


def test_acquiring_twice_on_one_object_is_a_programming_error(local: Storage) -> None:
    lock = TableLock(local, clock=FakeClock())
    lock.acquire()
    with pytest.raises(RuntimeError, match="already held"):
        lock.acquire()
    lock.release()


def test_bad_lease_settings_are_rejected(local: Storage) -> None:
    with pytest.raises(ValueError, match="lease must be positive"):
        TableLock(local, lease=0)
    with pytest.raises(ValueError, match="renew_interval must be in"):
        TableLock(local, lease=1.0, renew_interval=1.0)


# -- contention between two locks ---------------------------------------------------------


def test_second_acquirer_gets_an_error_naming_the_holder(storage: Storage) -> None:
    clock = FakeClock()
    first = TableLock(storage, "upsert", lease=60.0, clock=clock)
    held = first.acquire()
    clock.now += 59.999  # one millisecond before expiry: still held
    with pytest.raises(ConcurrentWriteError) as err:
        TableLock(storage, "rollback", clock=clock).acquire()
    e = err.value
    assert isinstance(e, CommitConflictError)
    assert (e.owner, e.host, e.pid, e.purpose) == (held.owner, socket.gethostname(), os.getpid(), "upsert")
    assert (e.acquired_at_ms, e.expires_at_ms) == (1_767_225_600_000, 1_767_225_660_000)
    assert e.holder == held
    assert str(e) == (
        f"table {storage.uri('')} is locked by owner={held.owner} host={socket.gethostname()} "
        f"pid={os.getpid()} purpose=upsert acquired_at=2026-01-01T00:00:00.000+00:00 "
        "lease_expires=2026-01-01T00:01:00.000+00:00; retry after 2026-01-01T00:01:00.000+00:00"
    )
    assert _lock_names(storage) == ["lock.000000000001"]
    first.check()
    first.release()


def test_error_keeps_the_holder_through_pickling(local: Storage) -> None:
    clock = FakeClock()
    first = TableLock(local, "upsert", clock=clock)
    first.acquire()
    with pytest.raises(ConcurrentWriteError) as err:
        TableLock(local, clock=clock).acquire()
    clone = pickle.loads(pickle.dumps(err.value))
    assert str(clone) == str(err.value)
    assert clone.holder == first.info
    assert first.info is not None and clone.owner == first.info.owner
    first.release()


def test_a_live_lock_cannot_be_taken_even_when_waiting(local: Storage) -> None:
    holder = TableLock(local, "upsert")
    holder.acquire()
    before = local.read_bytes(lock_file(1))
    started = time.monotonic()
    with pytest.raises(ConcurrentWriteError, match="is locked by owner="):
        TableLock(local, "rollback").acquire(wait=0.3)
    assert 0.3 <= time.monotonic() - started < 2.0
    assert local.read_bytes(lock_file(1)) == before
    assert _lock_names(local) == ["lock.000000000001"]
    holder.check()
    holder.release()


def test_a_waiting_acquirer_gets_the_lock_once_it_is_released(local: Storage) -> None:
    import threading

    holder = TableLock(local, "upsert")
    holder.acquire()
    threading.Timer(0.2, holder.release).start()
    waiter = TableLock(local, "rollback", wait=5.0)
    info = waiter.acquire()
    assert info.epoch == 2
    assert _on_disk(local, 1)["released"] is True
    waiter.release()


def test_an_expired_lease_is_taken_over_with_the_next_epoch(storage: Storage) -> None:
    clock = FakeClock()
    first = TableLock(storage, "upsert", lease=10.0, clock=clock)
    first.acquire()
    clock.now += 10.0  # expiry is exclusive: at expires_at the lease no longer holds
    second = TableLock(storage, "rollback", lease=10.0, clock=clock)
    taken = second.acquire()
    assert taken.epoch == 2
    assert read_holder(storage, clock=clock) == taken
    assert _lock_names(storage) == ["lock.000000000001", "lock.000000000002"]
    second.release()
    first.release()


# -- fencing: a lost lock ---------------------------------------------------------------


def test_check_detects_a_takeover_and_names_the_new_holder(storage: Storage) -> None:
    slow_clock = FakeClock()
    fast_clock = FakeClock(T0 + 61)
    first = TableLock(storage, "upsert", clock=slow_clock)
    first.acquire()
    second = TableLock(storage, "rollback", clock=fast_clock)
    taken = second.acquire()
    with pytest.raises(ConcurrentWriteError) as err:
        first.check()
    assert str(err.value).startswith(f"lock lost: taken over by owner={taken.owner} ")
    assert err.value.holder == taken
    assert err.value.purpose == "rollback"
    # Lost stays lost, even if the new holder lets go.
    second.release()
    with pytest.raises(ConcurrentWriteError, match="lock lost: taken over"):
        first.check()
    first.release()


def test_check_fails_once_our_own_lease_ran_out(local: Storage) -> None:
    clock = FakeClock()
    lock = TableLock(local, "upsert", lease=10.0, clock=clock)
    lock.acquire()
    clock.now += 9.999
    lock.check()
    clock.now += 0.001
    with pytest.raises(
        ConcurrentWriteError, match=r"lock lost: our lease \(epoch 1\) expired at 2026-01-01T00:00:10"
    ):
        lock.check()
    # Nobody took over, so releasing still frees the table for the next writer at once.
    lock.release()
    assert _on_disk(local, 1)["released"] is True
    clock.now -= 5  # even at a time when the lease would still run
    with TableLock(local, clock=clock) as again:
        assert again.epoch == 2


def test_releasing_a_lost_lock_leaves_the_new_holders_files_intact(storage: Storage) -> None:
    first = TableLock(storage, "upsert", clock=FakeClock())
    first.acquire()
    second = TableLock(storage, "rollback", clock=FakeClock(T0 + 61))
    taken = second.acquire()
    ours_before = storage.read_bytes(lock_file(1))
    theirs_before = storage.read_bytes(lock_file(2))
    first.release()  # no check() first: release itself must notice
    assert storage.read_bytes(lock_file(1)) == ours_before
    assert storage.read_bytes(lock_file(2)) == theirs_before
    assert read_holder(storage, clock=FakeClock(T0 + 61)) == taken
    second.check()
    second.release()


def test_the_renewal_thread_extends_the_lease(local: Storage) -> None:
    lock = TableLock(local, "upsert", lease=0.4, renew_interval=0.05)
    first = lock.acquire()
    time.sleep(1.0)  # 2.5 leases: without renewals it would have expired
    assert lock.renewals >= 5
    on_disk = _on_disk(local, 1)
    assert on_disk["owner"] == first.owner
    assert isinstance(on_disk["expires_at_ms"], int) and on_disk["expires_at_ms"] > first.expires_at_ms + 500
    lock.check()
    with pytest.raises(ConcurrentWriteError):
        TableLock(local, "rollback").acquire()
    lock.release()
    assert lock.last_renew_error is None


def test_the_renewal_thread_stops_after_a_takeover(local: Storage) -> None:
    # A frozen clock makes every renewal write the same expiry, which the other clock has passed.
    first = TableLock(local, "upsert", lease=1.0, renew_interval=0.05, clock=FakeClock())
    first.acquire()
    time.sleep(0.2)
    assert first.renewals >= 1
    taken = TableLock(local, "rollback", clock=FakeClock(T0 + 2)).acquire()
    time.sleep(0.3)
    renewals, ours = first.renewals, local.read_bytes(lock_file(1))
    time.sleep(0.3)
    assert (first.renewals, local.read_bytes(lock_file(1))) == (renewals, ours)
    with pytest.raises(ConcurrentWriteError) as err:
        first.check()
    assert err.value.holder == taken
    first.release()


def test_a_stale_claim_into_a_collected_gap_is_given_up(
    local: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An acquirer that read "epoch 1, released" and stalled while epochs 2-4 came and went
    (epoch 2 garbage-collected) must not hold the lock by creating lock.2."""
    clock = FakeClock()
    for _ in range(3):
        with TableLock(local, clock=clock):
            pass
    holder = TableLock(local, "upsert", clock=clock)
    live = holder.acquire()
    assert (_lock_names(local), live.epoch) == (
        ["lock.000000000002", "lock.000000000003", "lock.000000000004"],
        4,
    )
    local.delete(lock_file(2))  # as the next release's collection would
    stale = LockInfo(1, "gone", "h", 1, "upsert", 0, 0, released=True)
    real_latest = lock_module._latest
    views = iter([stale])
    monkeypatch.setattr(
        lock_module, "_latest", lambda s, lease_ms: next(views, None) or real_latest(s, lease_ms)
    )

    with pytest.raises(ConcurrentWriteError) as err:
        TableLock(local, "rollback", clock=clock).acquire()
    assert err.value.holder == live
    assert _on_disk(local, 2)["released"] is True  # the stale claim, given up
    assert read_holder(local, clock=clock) == live
    holder.check()
    holder.release()


# -- unreadable lock files --------------------------------------------------------------


def test_an_unreadable_lock_file_is_held_by_unknown_until_mtime_plus_lease(local: Storage) -> None:
    local.write_bytes(lock_file(7), b"{not json")
    [entry] = local.list_dir(LOCK_DIR)
    assert entry.mtime_ms is not None
    mtime = entry.mtime_ms / 1000

    just_before = FakeClock(mtime + 59.999)
    holder = read_holder(local, clock=just_before)
    assert holder == LockInfo(
        7, "unknown", "unknown", -1, "unknown", entry.mtime_ms, entry.mtime_ms + 60_000, corrupt=True
    )
    with pytest.raises(
        ConcurrentWriteError,
        match=r"locked by an unknown writer \(unreadable lock file .hoodie/.lock/lock.000000000007",
    ):
        TableLock(local, clock=just_before).acquire()

    after = FakeClock(mtime + 60.0)
    assert read_holder(local, clock=after) is None
    with TableLock(local, "upsert", clock=after) as lock:
        assert lock.epoch == 8
    assert local.read_bytes(lock_file(7)) == b"{not json"


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"[]",
        b'{"owner": "x"}',
        json.dumps(
            {
                "epoch": 1,
                "owner": "o",
                "host": "h",
                "pid": True,
                "purpose": "p",
                "acquired_at_ms": 1,
                "expires_at_ms": 2,
                "released": False,
            }
        ).encode(),
    ],
    ids=["empty", "list", "missing-fields", "bool-pid"],
)
def test_lock_records_that_do_not_fit_are_unreadable(content: bytes) -> None:
    with pytest.raises(ValueError):
        LockInfo.from_json(1, content)


def test_an_unreadable_lock_file_without_mtime_is_held_until_removed() -> None:
    info = LockInfo.unreadable(3, None, 60_000)
    assert info.is_held(2**62)
    assert info.describe() == (
        "an unknown writer (unreadable lock file .hoodie/.lock/lock.000000000003, "
        "modified 1970-01-01T00:00:00.000+00:00, counts as held until removed by hand)"
    )


# -- real contention between processes ---------------------------------------------------


def _contend(uri: str, options: dict[str, str], rounds: int, out) -> None:
    storage = storage_for(uri, options)
    intervals = []
    for _ in range(rounds):
        with TableLock(storage, f"worker-{os.getpid()}", wait=30.0) as lock:
            start = time.time()
            value = int(storage.read_bytes("counter"))
            time.sleep(0.002)
            storage.write_bytes("counter", str(value + 1).encode())
            lock.check()
            intervals.append((start, time.time(), lock.epoch))
    out.put(intervals)


def _run_contention(
    uri: str, options: dict[str, str], procs: int, rounds: int
) -> list[tuple[float, float, int]]:
    storage_for(uri, options).write_bytes("counter", b"0")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    workers = [ctx.Process(target=_contend, args=(uri, options, rounds, queue)) for _ in range(procs)]
    for w in workers:
        w.start()
    results = []
    try:
        deadline = time.monotonic() + 60
        while len(results) < procs:  # fail fast, not at the timeout, if a worker dies
            assert time.monotonic() < deadline, "workers did not finish"
            assert all(w.exitcode in (None, 0) for w in workers), [w.exitcode for w in workers]
            try:
                results.append(queue.get(timeout=0.5))
            except queue_module.Empty:
                pass
        for w in workers:
            w.join(timeout=30)
            assert w.exitcode == 0
    finally:
        for w in workers:
            if w.is_alive():
                w.terminate()
                w.join(timeout=5)
    assert int(storage_for(uri, options).read_bytes("counter")) == procs * rounds  # no lost update
    intervals = sorted(i for r in results for i in r)
    assert len(intervals) == procs * rounds
    for (_, end, _), (start, _, _) in zip(intervals, intervals[1:], strict=False):
        assert end <= start, "two processes held the lock at once"
    epochs = [e for _, _, e in intervals]
    assert epochs == list(range(1, procs * rounds + 1))  # one epoch per hold, in time order
    return intervals


def test_processes_contending_for_the_lock_never_overlap(tmp_path: Path) -> None:
    _run_contention(str(tmp_path / "table"), {}, procs=4, rounds=15)
    # Collection kept only the last two epochs.
    assert _lock_names(storage_for(str(tmp_path / "table"))) == ["lock.000000000059", "lock.000000000060"]


@pytest.mark.s3
def test_processes_contending_on_s3_never_overlap(s3_server: MotoS3) -> None:
    bucket = s3_server.create_bucket()
    _run_contention(f"s3://{bucket}/warehouse/table", s3_server.storage_options(), procs=3, rounds=6)
