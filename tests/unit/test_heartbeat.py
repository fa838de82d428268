"""Per-instant heartbeats: beats advance, stop deletes, Hudi's expiry rule, missing = expired."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.storage import Storage, storage_for
from engine.transaction.heartbeat import HEARTBEAT_DIR, Heartbeat, heartbeat_file
from engine.transaction.liveness import ProcessId
from tests.support.moto_s3 import MotoS3

INSTANT = "20260101000000000"
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z in epoch seconds
T0_MS = 1_767_225_600_000


class FakeClock:
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


def test_start_writes_the_first_beat_before_returning(storage: Storage) -> None:
    hb = Heartbeat.start(storage, INSTANT, interval=60.0, clock=FakeClock())
    try:
        me = ProcessId.current()
        assert storage.read_bytes(".hoodie/.heartbeat/20260101000000000") == (
            b'1767225600000\n{"boot_id": "%s", "host": "%s", "pid": %d, "pid_ns": "%s", "start": %d}\n'
            % (str(me.boot_id).encode(), me.host.encode(), me.pid, str(me.pid_ns).encode(), me.start or -1)
        )
        assert Heartbeat.writer(storage, INSTANT) == me
        assert Heartbeat.last_beat(storage, INSTANT) == T0_MS
        assert (hb.beats, hb.last_beat_ms) == (1, T0_MS)
        assert Heartbeat.list_instants(storage) == [INSTANT]
    finally:
        hb.stop()


def test_beats_advance_and_stop_deletes_the_file(storage: Storage) -> None:
    hb = Heartbeat.start(storage, INSTANT, interval=0.05)
    first = Heartbeat.last_beat(storage, INSTANT)
    assert first is not None
    time.sleep(0.4)
    later = Heartbeat.last_beat(storage, INSTANT)
    assert later is not None and later >= first + 100
    assert hb.beats >= 3
    assert not Heartbeat.is_expired(storage, INSTANT, interval=0.05, misses=20)  # 1 s: beats every 50 ms, late under load

    hb.stop()
    assert storage.exists(heartbeat_file(INSTANT)) is False
    beats = hb.beats
    time.sleep(0.15)  # the thread is gone: nothing recreates the file
    assert storage.exists(heartbeat_file(INSTANT)) is False
    assert hb.beats == beats
    assert Heartbeat.last_beat(storage, INSTANT) is None
    assert Heartbeat.list_instants(storage) == []
    hb.stop()  # twice is a no-op
    assert hb.last_error is None


def test_context_manager_stops_the_heartbeat(local: Storage) -> None:
    with Heartbeat.start(local, INSTANT, interval=60.0):
        assert local.exists(heartbeat_file(INSTANT))
    assert not local.exists(heartbeat_file(INSTANT))


def test_expiry_follows_hudi_interval_times_misses_strictly(local: Storage) -> None:
    hb = Heartbeat.start(local, INSTANT, interval=60.0, clock=FakeClock())
    try:
        # 60 s x 2 misses: expired only once *more* than 120 s passed since the last beat.
        assert not Heartbeat.is_expired(local, INSTANT, 60.0, 2, now=T0)
        assert not Heartbeat.is_expired(local, INSTANT, 60.0, 2, now=T0 + 120.0)
        assert Heartbeat.is_expired(local, INSTANT, 60.0, 2, now=T0 + 120.001)
        assert not Heartbeat.is_expired(local, INSTANT, 60.0, 3, now=T0 + 180.0)
        assert Heartbeat.is_expired(local, INSTANT, 60.0, 3, now=T0 + 180.001)
        # The defaults are Hudi's: 60000 ms and 2 misses.
        assert not Heartbeat.is_expired(local, INSTANT, now=T0 + 120.0)
        assert Heartbeat.is_expired(local, INSTANT, now=T0 + 120.001)
    finally:
        hb.stop()


def test_a_new_beat_resets_expiry(local: Storage) -> None:
    clock = FakeClock()
    hb = Heartbeat.start(local, INSTANT, interval=60.0, clock=clock)
    try:
        clock.now = T0 + 100
        hb.beat()
        assert Heartbeat.last_beat(local, INSTANT) == T0_MS + 100_000
        assert not Heartbeat.is_expired(local, INSTANT, 60.0, 2, now=T0 + 220.0)
        assert Heartbeat.is_expired(local, INSTANT, 60.0, 2, now=T0 + 220.001)
    finally:
        hb.stop()


def test_expiry_is_exact_to_the_millisecond_despite_float_seconds(local: Storage) -> None:
    """1767225600.001 + 120.001 seconds is 1767225720001.9998 ms in floating point."""
    local.write_bytes(heartbeat_file(INSTANT), b"1767225600001")
    assert not Heartbeat.is_expired(local, INSTANT, 60.0, 2, now=1767225600.001 + 120.0)
    assert Heartbeat.is_expired(local, INSTANT, 60.0, 2, now=1767225600.001 + 120.001)


def test_a_missing_heartbeat_counts_as_expired(storage: Storage) -> None:
    assert Heartbeat.last_beat(storage, INSTANT) is None
    assert Heartbeat.is_expired(storage, INSTANT, 60.0, 2, now=T0)
    assert Heartbeat.list_instants(storage) == []


def test_an_empty_heartbeat_file_written_by_java_hudi_uses_its_mtime(storage: Storage) -> None:
    storage.write_bytes(heartbeat_file(INSTANT), b"")
    [entry] = storage.list_dir(HEARTBEAT_DIR)
    assert entry.mtime_ms is not None
    assert Heartbeat.last_beat(storage, INSTANT) == entry.mtime_ms
    mtime = entry.mtime_ms / 1000
    assert not Heartbeat.is_expired(storage, INSTANT, 60.0, 2, now=mtime + 120.0)
    assert Heartbeat.is_expired(storage, INSTANT, 60.0, 2, now=mtime + 120.001)


def test_bad_arguments_are_rejected(local: Storage) -> None:
    with pytest.raises(ValueError, match="interval must be positive"):
        Heartbeat.start(local, INSTANT, interval=0)
    with pytest.raises(ValueError, match="not an instant time"):
        Heartbeat.start(local, "../x", interval=1.0)
    assert local.list_files_recursive("") == []
