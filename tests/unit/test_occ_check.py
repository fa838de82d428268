"""The commit check of optimistic concurrency control (`engine.transaction.occ.check`) on hand-made
tables: what completed since a writer started, compaction plans, and rollbacks of what it read."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.errors import WriteConflictError
from engine.services.maintenance import Maintenance
from engine.timeline.instant import Action, format_instant_time
from engine.transaction import occ
from tests.support import handmade


def _table(tmp_path):
    t = handmade.create(str(tmp_path / "t"))
    handmade.add_commit(t, {"paris": ["new"], "rome": ["new"]})
    return t


def _group(t, partition: str) -> tuple[str, str]:
    return partition, t.groups[partition][0]


def test_a_write_completed_since_the_start_conflicts_only_on_a_common_file_group(tmp_path):
    t = _table(tmp_path)
    seen = occ.seen(t.meta.timeline())
    mine = handmade.add_pending(t, datetime(2026, 1, 1, 1, tzinfo=UTC))
    other = handmade.add_commit(t, {"rome": ["update:0"]}, at=datetime(2026, 1, 1, 2, tzinfo=UTC))
    # paris: untouched by the other write; the other write is reported for the index's key check
    res = occ.check(t.meta, mine, Action.COMMIT, "upsert", {_group(t, "paris")}, seen)
    assert res.concurrent_writes == (other,)
    with pytest.raises(WriteConflictError) as err:
        occ.check(t.meta, mine, Action.COMMIT, "upsert", {_group(t, "paris"), _group(t, "rome")}, seen)
    assert (err.value.instant, err.value.other, err.value.groups) == (mine, other, (_group(t, "rome"),))
    assert f"write {mine} conflicts with upsert {other} (commit, completed)" in str(err.value)
    # started after the other completed (it is in what the writer saw): no conflict, nothing concurrent
    later = occ.seen(t.meta.timeline())
    assert occ.check(t.meta, mine, Action.COMMIT, "upsert", {_group(t, "rome")}, later).concurrent_writes == ()


def test_an_earlier_started_write_that_completes_later_is_caught(tmp_path):
    """Apache Hudi 0.x's "completed after my last completed instant" would miss it: its instant
    time is earlier than the last completed instant the writer saw."""
    t = _table(tmp_path)
    slow = handmade.add_pending(t, datetime(2026, 1, 1, 1, tzinfo=UTC))  # started first, still running
    handmade.add_commit(t, {"paris": ["update:0"]}, at=datetime(2026, 1, 1, 2, tzinfo=UTC))
    seen = occ.seen(t.meta.timeline())  # our start: `slow` is pending
    mine = handmade.add_pending(t, datetime(2026, 1, 1, 3, tzinfo=UTC))
    # `slow` completes now, having written rome
    from engine.table.lifecycle import complete_instant
    from engine.timeline.commit_metadata import CommitMetadata, WriteStat

    stat = WriteStat(fileId=t.groups["rome"][0], path=None, partitionPath="rome")
    complete_instant(t.meta, slow, Action.COMMIT, CommitMetadata({"rome": [stat]}, "upsert").to_bytes())
    with pytest.raises(WriteConflictError) as err:
        occ.check(t.meta, mine, Action.COMMIT, "upsert", {_group(t, "rome")}, seen)
    assert err.value.other == slow


def test_a_rollback_of_a_commit_the_writer_read_conflicts_one_of_a_failed_write_does_not(tmp_path):
    t = _table(tmp_path)
    read = handmade.add_commit(t, {"paris": ["update:0"]}, at=datetime(2026, 1, 1, 1, tzinfo=UTC))
    failed = handmade.add_pending(t, datetime(2026, 1, 1, 2, tzinfo=UTC))
    seen = occ.seen(t.meta.timeline())
    mine = format_instant_time(datetime(2026, 1, 1, 3, tzinfo=UTC))  # our instant (no files needed here)
    report = Maintenance(t.meta).repair()  # a failed write rolled back beside us: harmless
    assert report.failed_writes_rolled_back == [failed]
    assert occ.check(t.meta, mine, Action.COMMIT, "upsert", {_group(t, "rome")}, seen).concurrent_writes == ()
    Maintenance(t.meta).rollback(read)  # a commit we may have merged from: our files would bring it back
    rollback = max(i.time for i in t.meta.timeline().instants if i.action is Action.ROLLBACK)
    with pytest.raises(WriteConflictError) as err:
        occ.check(t.meta, mine, Action.COMMIT, "upsert", {_group(t, "rome")}, seen)
    assert err.value.other == rollback and f"undid {read}" in str(err.value)


def test_the_concurrency_mode_option_and_its_lock_wait():
    from engine.config.write_config import WriteConfig
    from engine.errors import InvalidConfigError

    single = WriteConfig.from_options({})
    assert (single.optimistic, single.lock_wait_seconds) == (False, 0.0)
    occ_cfg = WriteConfig.from_options({"hoodie.write.concurrency.mode": "optimistic_concurrency_control"})
    assert (occ_cfg.concurrency_mode, occ_cfg.optimistic, occ_cfg.lock_wait_seconds) == (
        "OPTIMISTIC_CONCURRENCY_CONTROL", True, 60.0)
    assert WriteConfig.from_options({"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
                                     "hoodie.write.lock.wait_time_ms": "0"}).lock_wait_seconds == 0.0
    with pytest.raises(InvalidConfigError, match="NON_BLOCKING_CONCURRENCY_CONTROL needs table version 8"):
        WriteConfig.from_options({"hoodie.write.concurrency.mode": "non_blocking_concurrency_control"})
    with pytest.raises(InvalidConfigError, match="must be one of SINGLE_WRITER, OPTIMISTIC_CONCURRENCY_CONTROL"):
        WriteConfig.from_options({"hoodie.write.concurrency.mode": "pessimistic"})


def test_a_write_rolled_back_or_with_an_expired_heartbeat_may_not_complete(tmp_path):
    import time as _time

    from engine.errors import ConcurrentWriteError
    from engine.transaction.heartbeat import Heartbeat

    t = _table(tmp_path)
    mine = handmade.add_pending(t, datetime(2026, 1, 1, 1, tzinfo=UTC))
    Heartbeat(t.meta.storage, mine, 60.0, clock=_time.time).beat()
    occ.check_still_ours(t.meta, mine, Action.COMMIT, 60_000, 2)  # inflight, fresh beat: fine
    stale = Heartbeat(t.meta.storage, mine, 60.0, clock=lambda: _time.time() - 600)
    stale.beat()  # the last beat 10 minutes ago: expired after 2 x 60 s
    with pytest.raises(ConcurrentWriteError, match="heartbeat .* expired"):
        occ.check_still_ours(t.meta, mine, Action.COMMIT, 60_000, 2)
    Maintenance(t.meta).repair()  # another writer's repair rolls it back
    with pytest.raises(ConcurrentWriteError, match="no longer inflight"):
        occ.check_still_ours(t.meta, mine, Action.COMMIT, 60_000, 2)


def test_an_aborted_concurrent_write_keeps_every_partition_it_created(tmp_path):
    """Issue 33.4: under optimistic concurrency a failed write leaves the partitions it created,
    even empty ones: another writer may create its file there between any emptiness check and the
    delete, then commit a file that no longer exists. A single writer (the lock held throughout)
    still removes an empty partition it created."""
    from engine.constants import PARTITION_METADATA_FILE
    from engine.table.meta_client import write_partition_metadata
    from engine.write import commit as commit_protocol
    from engine.write.operation import Operation
    from engine.write.planner import WritePlan

    t = _table(tmp_path)
    mine = handmade.add_pending(t, datetime(2026, 1, 1, 1, tzinfo=UTC))
    write_partition_metadata(t.meta.storage, "lyon", mine)
    pending = commit_protocol.PendingCommit(mine, Action.COMMIT, Operation.UPSERT, WritePlan((), {}, 100),
                                            created_partitions=["lyon", "oslo"])
    write_partition_metadata(t.meta.storage, "oslo", mine)
    t.meta.storage.write_bytes("lyon/other-writer-file.parquet", b"x")  # another writer's file, in flight
    commit_protocol.abort(t.meta, pending, concurrent=True)
    assert t.meta.storage.exists(f"lyon/{PARTITION_METADATA_FILE}")
    assert t.meta.storage.exists(f"oslo/{PARTITION_METADATA_FILE}")
    assert sorted(p.name for p in (tmp_path / "t" / "oslo").iterdir()) == [PARTITION_METADATA_FILE]
    assert mine not in {i.time for i in t.meta.timeline().instants}

    single = handmade.add_pending(t, datetime(2026, 1, 1, 2, tzinfo=UTC))
    write_partition_metadata(t.meta.storage, "riga", single)
    pending = commit_protocol.PendingCommit(single, Action.COMMIT, Operation.UPSERT, WritePlan((), {}, 100),
                                            created_partitions=["riga"])
    commit_protocol.abort(t.meta, pending, concurrent=False)
    assert not (tmp_path / "t" / "riga").exists()
    assert single not in {i.time for i in t.meta.timeline().instants}
