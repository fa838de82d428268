"""Table services on local Spark: rollback, restore, savepoints, clean, archival, repair.

Every test asserts exact rows (ours and hudi-rs), exact instant states and exact files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Table
from engine.errors import ConcurrentWriteError, InstantNotFoundError, RollbackRefusedError
from engine.services import archive as archive_service
from engine.services.rollback import RollbackPlan, RollbackResult
from engine.table.lifecycle import read_avro
from engine.timeline.instant import Action, Instant, State
from engine.transaction.heartbeat import Heartbeat
from tests.support import hudi_rs
from tests.support.tables import rows, tree_bytes

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
MANUAL = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def make(spark, tmp_path: Path, **kw) -> Table:
    args = dict(name="trips", record_key="id", partition_fields="city", precombine_field="ts")
    args.update(kw)
    return Table.create(spark, str(tmp_path / "t"), **args)


def df(spark, data):
    return spark.createDataFrame(data, SCHEMA)


def data(table: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(table.read()))


def oracle(table: Table, as_of: str | None = None) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(table.path, as_of))


def data_files(table: Table) -> dict[str, bytes]:
    """Every file outside .hoodie/ (data files and partition metadata)."""
    return {k: v for k, v in tree_bytes(table.path).items() if not k.startswith(".hoodie/")}


def timeline_files(table: Table) -> list[str]:
    return sorted(p.name for p in (Path(table.path) / ".hoodie").iterdir() if p.is_file() and p.name[0].isdigit())


def upsert(table, spark, batch, **opts):
    return table.upsert(df(spark, batch), options={**MANUAL, **opts})


# ---- rollback ---------------------------------------------------------------------------------
def test_rollback_of_the_latest_commit_restores_the_previous_snapshot(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = upsert(t, spark, [(1, "a", "paris", 1), (2, "b", "rome", 1)])
    before = data_files(t)
    r2 = upsert(t, spark, [(1, "a2", "paris", 2), (3, "c", "oslo", 2)])
    assert data(t) == [(1, "a2", "paris", 2), (2, "b", "rome", 1), (3, "c", "oslo", 2)]

    res = t.maintenance.rollback(r2.instant)
    assert isinstance(res, RollbackResult) and res.target == r2.instant
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (2, "b", "rome", 1)]
    assert data_files(t) == before  # the oslo partition r2 created is gone too
    assert len(res.deleted) == 2
    # timeline: r2 vanished; the rollback instant went requested -> inflight -> completed
    rb = res.instant
    assert timeline_files(t) == sorted(
        [f"{r1.instant}.commit", f"{r1.instant}.commit.requested", f"{r1.instant}.inflight",
         f"{rb}.rollback", f"{rb}.rollback.inflight", f"{rb}.rollback.requested"]
    )
    meta = read_avro(t.meta, Instant(rb, Action.ROLLBACK, State.COMPLETED), "HoodieRollbackMetadata")
    assert meta["commitsRollback"] == [r2.instant] and meta["totalFilesDeleted"] == 2
    assert meta["instantsRollback"] == [{"commitTime": r2.instant, "action": "commit"}]
    plan = read_avro(t.meta, Instant(rb, Action.ROLLBACK, State.REQUESTED), "HoodieRollbackPlan")
    assert plan["instantToRollback"] == {"commitTime": r2.instant, "action": "commit"}
    # the table keeps working: the rolled-back keys can be written again
    upsert(t, spark, [(3, "c3", "oslo", 3)])
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c3", "oslo", 3)]


def test_rollback_refused_when_a_later_commit_rewrote_its_file_groups(spark, tmp_path):
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1)])
    r2 = upsert(t, spark, [(2, "b", "paris", 2)])
    r3 = upsert(t, spark, [(1, "a3", "paris", 3)])
    snapshot = tree_bytes(t.path)
    with pytest.raises(RollbackRefusedError) as err:
        t.maintenance.rollback(r2.instant)
    assert err.value.dependents == (r3.instant,)
    assert r3.instant in str(err.value) and "restore" in str(err.value)
    assert tree_bytes(t.path) == snapshot  # nothing touched (not even a lock file left behind)


def test_rollback_of_an_independent_older_commit_is_allowed(spark, tmp_path):
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1)])
    r2 = upsert(t, spark, [(2, "b", "rome", 2)])
    upsert(t, spark, [(1, "a3", "paris", 3)])  # touches paris only
    t.maintenance.rollback(r2.instant)
    assert data(t) == oracle(t) == [(1, "a3", "paris", 3)]


def test_rollback_refused_when_a_later_commit_wrote_again_a_key_it_deleted(spark, tmp_path):
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1), (2, "b", "paris", 1)])
    r2 = t.delete(spark.createDataFrame([(1, "paris")], "id int, city string"), options=MANUAL)
    # bulk_insert skips the index and small files: key 1 lands in a new file group of paris
    r3 = t.bulk_insert(df(spark, [(1, "a3", "paris", 3)]), options=MANUAL)
    snapshot = tree_bytes(t.path)
    with pytest.raises(RollbackRefusedError) as err:
        t.maintenance.rollback(r2.instant)
    assert err.value.dependents == (r3.instant,)
    assert f"later commit(s) {r3.instant} wrote again (1)" in str(err.value)
    assert tree_bytes(t.path) == snapshot
    assert data(t) == oracle(t) == [(1, "a3", "paris", 3), (2, "b", "paris", 1)]
    t.maintenance.rollback(r3.instant)  # newest first, then the delete: nothing is kept twice
    t.maintenance.rollback(r2.instant)
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (2, "b", "paris", 1)]


def test_rollback_refused_when_a_global_index_placed_a_deleted_key_in_another_partition(spark, tmp_path):
    t = make(spark, tmp_path, index="GLOBAL_SIMPLE")
    upsert(t, spark, [(1, "a", "paris", 1), (2, "b", "paris", 1)])
    r2 = t.delete(spark.createDataFrame([(1, "paris")], "id int, city string"), options=MANUAL)
    r3 = upsert(t, spark, [(1, "a3", "rome", 3)])  # absent now: inserted in rome
    r4 = upsert(t, spark, [(7, "g", "oslo", 4)])  # unrelated
    snapshot = tree_bytes(t.path)
    with pytest.raises(RollbackRefusedError) as err:
        t.maintenance.rollback(r2.instant)
    assert err.value.dependents == (r3.instant,)
    assert tree_bytes(t.path) == snapshot
    assert r4.instant not in str(err.value)


def test_rollback_of_a_delete_whose_keys_nobody_wrote_again_is_allowed(spark, tmp_path):
    t = make(spark, tmp_path, index="GLOBAL_SIMPLE")
    upsert(t, spark, [(1, "a", "paris", 1), (2, "b", "paris", 1)])
    r2 = t.delete(spark.createDataFrame([(1, "paris")], "id int, city string"), options=MANUAL)
    upsert(t, spark, [(3, "c", "rome", 3)])
    t.maintenance.rollback(r2.instant)
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (2, "b", "paris", 1), (3, "c", "rome", 3)]


def test_rollback_dry_run_changes_nothing(spark, tmp_path):
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1)])
    r2 = upsert(t, spark, [(2, "b", "paris", 2)])
    snapshot = tree_bytes(t.path)
    plan = t.maintenance.rollback(r2.instant, dry_run=True)
    assert isinstance(plan, RollbackPlan) and plan.instant is None
    assert [p.rpartition("_")[2] for p in plan.files] == [f"{r2.instant}.parquet"]
    assert tree_bytes(t.path) == snapshot


def test_rollback_unknown_instant_is_a_typed_error(spark, tmp_path):
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1)])
    snapshot = tree_bytes(t.path)
    with pytest.raises(InstantNotFoundError):
        t.maintenance.rollback("20990101000000000")
    assert tree_bytes(t.path) == snapshot


# ---- savepoints and restore -------------------------------------------------------------------
def test_savepoint_blocks_rollback_and_restore_returns_to_it(spark, tmp_path):
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1), (2, "b", "rome", 1)])
    r2 = upsert(t, spark, [(1, "a2", "paris", 2)])
    sp = t.maintenance.create_savepoint(r2.instant, comment="before the big change")
    assert [s.time for s in t.maintenance.savepoints()] == [r2.instant]
    assert sp.files == tuple(sorted(b.path for b in t.file_system_view(as_of=r2.instant).latest_base_files()))
    expected = data(t)
    r3 = upsert(t, spark, [(1, "a3", "paris", 3), (3, "c", "oslo", 3)])
    upsert(t, spark, [(2, "b4", "rome", 4)])
    with pytest.raises(RollbackRefusedError, match="savepoint"):
        t.maintenance.rollback(r2.instant)
    res = t.maintenance.restore(r2.instant)
    assert res.rolled_back[0] > r3.instant and res.rolled_back[1] == r3.instant
    assert data(t) == oracle(t) == expected
    assert Path(t.path, f".hoodie/{res.instant}.restore").exists()
    restored = read_avro(t.meta, Instant(res.instant, Action.RESTORE, State.COMPLETED), "HoodieRestoreMetadata")
    assert restored["instantsToRollback"] == res.rolled_back
    assert not Path(t.path, "oslo").exists()
    # the savepoint of the target survives; writing continues
    assert [s.time for s in t.maintenance.savepoints()] == [r2.instant]
    upsert(t, spark, [(3, "c5", "oslo", 5)])
    assert data(t) == oracle(t) == expected + [(3, "c5", "oslo", 5)]


def test_restore_dry_run_lists_instants_newest_first(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = upsert(t, spark, [(1, "a", "paris", 1)])
    r2 = upsert(t, spark, [(1, "b", "paris", 2)])
    r3 = upsert(t, spark, [(1, "c", "paris", 3)])
    snapshot = tree_bytes(t.path)
    plan = t.maintenance.restore(r1.instant, dry_run=True)
    assert [i.time for i in plan.instants] == [r3.instant, r2.instant]
    assert tree_bytes(t.path) == snapshot


def test_delete_savepoint(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = upsert(t, spark, [(1, "a", "paris", 1)])
    t.maintenance.create_savepoint(r1.instant)
    assert Path(t.path, f".hoodie/{r1.instant}.savepoint").exists()
    t.maintenance.delete_savepoint(r1.instant)
    assert t.maintenance.savepoints() == []
    assert not Path(t.path, f".hoodie/{r1.instant}.savepoint.inflight").exists()
    with pytest.raises(InstantNotFoundError):
        t.maintenance.delete_savepoint(r1.instant)


# ---- clean -----------------------------------------------------------------------------------
def _versions(table: Table, partition: str) -> list[str]:
    return sorted(p.name.rpartition("_")[2][:17] for p in Path(table.path, partition).glob("*.parquet"))


def test_clean_keep_latest_commits_keeps_the_retained_snapshots_readable(spark, tmp_path):
    t = make(spark, tmp_path)
    instants, states = [], {}
    for i in range(5):
        r = upsert(t, spark, [(1, f"v{i}", "paris", i)])
        instants.append(r.instant)
        states[r.instant] = data(t)
    opts = {**MANUAL, "hoodie.cleaner.policy": "KEEP_LATEST_COMMITS", "hoodie.cleaner.commits.retained": "2"}
    from engine.services.maintenance import Maintenance

    m = Maintenance(t.meta, opts)
    plan = m.clean(dry_run=True)
    assert plan.earliest_retained == instants[3]
    res = m.clean()
    assert len(res.deleted) == 3
    assert _versions(t, "paris") == instants[3:]
    for inst in instants[3:]:  # time travel inside the retention window still works
        assert data_of(t, inst) == states[inst] == oracle(t, inst)
    # before it, the cleaned snapshot is refused (it used to read 0 rows), the table untouched
    before = data_files(t)
    for inst in instants[:3]:
        with pytest.raises(InstantNotFoundError, match=f"as_of {inst} is older than the earliest commit the "
                                                       f"cleaner retains \\({instants[3]}\\)"):
            t.read(as_of=inst)
    assert data_files(t) == before
    # so does an incremental read of the commits in the window
    incr = sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(t.read_incremental(instants[2])))
    assert incr == [(1, "v4", "paris", 4)]
    assert sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.incremental(t.path, instants[2])) == incr
    cm = read_avro(t.meta, Instant(res.instant, Action.CLEAN, State.COMPLETED), "HoodieCleanMetadata")
    assert cm["earliestCommitToRetain"] == instants[3] and cm["totalFilesDeleted"] == 3
    assert m.clean() is None  # nothing left to clean: no instant written


def test_time_travel_to_a_savepoint_the_cleaner_passed_still_reads(spark, tmp_path):
    t = make(spark, tmp_path)
    instants = [upsert(t, spark, [(1, f"v{i}", "paris", i)]).instant for i in range(4)]
    t.maintenance.create_savepoint(instants[0])
    from engine.services.maintenance import Maintenance

    Maintenance(t.meta, {**MANUAL, "hoodie.cleaner.policy": "KEEP_LATEST_COMMITS",
                         "hoodie.cleaner.commits.retained": "1"}).clean()
    assert data_of(t, instants[0]) == [(1, "v0", "paris", 0)] == oracle(t, instants[0])
    with pytest.raises(InstantNotFoundError, match="older than the earliest commit the cleaner retains"):
        t.read(as_of=instants[1])
    assert data_of(t, instants[3]) == [(1, "v3", "paris", 3)]


def data_of(table: Table, as_of: str) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(table.read(as_of=as_of)))


def test_clean_never_deletes_a_savepointed_slice_and_restore_still_works(spark, tmp_path):
    t = make(spark, tmp_path)
    instants = [upsert(t, spark, [(1, f"v{i}", "paris", i)]).instant for i in range(4)]
    t.maintenance.create_savepoint(instants[0])
    from engine.services.maintenance import Maintenance

    m = Maintenance(t.meta, {**MANUAL, "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                             "hoodie.cleaner.fileversions.retained": "1"})
    m.clean()
    assert _versions(t, "paris") == [instants[0], instants[3]]
    # the versions between were cleaned: restoring to instants[1] is refused, to the savepoint works
    with pytest.raises(RollbackRefusedError, match="cleaned"):
        t.maintenance.restore(instants[1])
    with pytest.raises(RollbackRefusedError, match="cleaned"):
        t.maintenance.rollback(instants[3])
    t.maintenance.restore(instants[0])
    assert data(t) == oracle(t) == [(1, "v0", "paris", 0)]


def test_automatic_clean_after_commits(spark, tmp_path):
    t = make(spark, tmp_path)
    opts = {"hoodie.cleaner.commits.retained": "1", "hoodie.keep.min.commits": "5", "hoodie.keep.max.commits": "6"}
    results = [t.upsert(df(spark, [(1, f"v{i}", "paris", i)]), options=opts) for i in range(3)]
    assert results[0].services == {}
    assert results[1].services["clean"]["deleted"] == 1
    assert _versions(t, "paris") == [results[2].instant]
    assert data(t) == oracle(t) == [(1, "v2", "paris", 2)]


# ---- archival --------------------------------------------------------------------------------
def test_archival_keeps_the_active_timeline_bounded_and_history_browsable(spark, tmp_path):
    t = make(spark, tmp_path)
    opts = {"hoodie.cleaner.commits.retained": "1", "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}
    results = [t.upsert(df(spark, [(i, f"v{i}", "paris" if i % 2 else "rome", i)]), options=opts) for i in range(6)]
    tl = t.timeline()
    writes = [i.time for i in tl.completed_writes]
    assert 2 <= len(writes) <= 3 and writes == [r.instant for r in results][-len(writes):]
    archived = archive_service.archived_instants(t.meta)
    assert [i.time for i in archived if i.action is Action.COMMIT] == [r.instant for r in results][: 6 - len(writes)]
    files = list(Path(t.path, ".hoodie/archived").iterdir())
    assert files and all(f.name.startswith(".commits_.archive.") for f in files)
    assert data(t) == oracle(t) == sorted((i, f"v{i}", "paris" if i % 2 else "rome", i) for i in range(6))
    entries = archive_service.read_archived_entries(t.meta)
    first = next(e for e in entries if e["commitTime"] == results[0].instant)
    assert first["actionType"] == "commit" and first["hoodieCommitMetadata"]["operationType"] == "UPSERT"


def test_archival_deletes_debris_of_a_write_that_never_completed_before_archiving_past_it(spark, tmp_path):
    import shutil

    t = make(spark, tmp_path)
    r1 = upsert(t, spark, [(1, "a", "paris", 1)])
    r2 = upsert(t, spark, [(2, "b", "rome", 2)])
    # a straggler task of an aborted write (its instant between r1 and r2, gone from the timeline,
    # recorded as failed when it aborted) left a whole base file holding key 1 in a file group of
    # its own (tests/integration/test_table_isolation.py aborts a real write)
    from engine.table import failed_writes

    aborted = str(int(r1.instant) + 1)
    fid = "deadbeef-0000-0000-0000-000000000000-0"
    failed_writes.record(t.meta.storage, aborted, "commit", [("paris", fid)])
    src = next(Path(t.path, "paris").glob("*.parquet"))
    straggler = Path(t.path, "paris", f"{fid}_0-1-2_{aborted}.parquet")
    shutil.copy(src, straggler)
    for i in range(3, 7):
        upsert(t, spark, [(i, f"v{i}", "rome", i)])
    assert data(t) == oracle(t) and len(data(t)) == 6  # hidden while its instant is on the active range
    plan = archive_service.plan_archive(t.meta, t.timeline(), 2, 3)
    assert r2.instant in plan.times
    assert archive_service.debris_below(t.meta, t.timeline(), plan) == [f"paris/{straggler.name}"]
    archived = t.maintenance.__class__(t.meta, {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                                "hoodie.cleaner.commits.retained": "1"}).archive()
    assert r2.instant in archived and not straggler.exists()
    assert t.timeline().archived_before > aborted
    expected = sorted([(1, "a", "paris", 1), (2, "b", "rome", 2)] + [(i, f"v{i}", "rome", i) for i in range(3, 7)])
    assert data(t) == oracle(t) == expected  # key 1 once, not twice


def test_a_writer_that_lost_its_lock_before_completing_touches_nothing_more(spark, tmp_path, monkeypatch):
    import time

    from engine.services.transaction import WriteGuard
    from engine.transaction.lock import TableLock

    fast = {**MANUAL, "hoodie.client.heartbeat.interval_in_ms": "300", "hoodie.client.heartbeat.tolerable.misses": "2"}
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1)])
    real = WriteGuard.before_complete
    thief = TableLock(t.meta.storage, "thief", lease=60, clock=lambda: time.time() + 3600)

    def stall_then_check(self):
        thief.acquire()  # to a clock an hour ahead our lease has expired: the lock is taken over
        real(self)

    with monkeypatch.context() as m:
        m.setattr(WriteGuard, "before_complete", stall_then_check)
        with pytest.raises(ConcurrentWriteError, match="the table lock was lost, so it is left for the next writer"):
            upsert(t, spark, [(2, "b", "oslo", 2)], **fast)
    # nothing was cleaned up by the writer that lost the lock: its instant and files are the holder's business
    pending = list(t.timeline().pending)
    assert len(pending) == 1 and pending[0].action is Action.COMMIT
    assert [p.name for p in Path(t.path, "oslo").glob("*.parquet")] and Path(t.path, "oslo/.hoodie_partition_metadata").exists()
    assert data(t) == oracle(t) == [(1, "a", "paris", 1)]
    thief.release()
    time.sleep(0.7)  # the dead writer's heartbeat expires
    r = upsert(t, spark, [(3, "c", "rome", 3)], **fast)
    assert r.repaired is not None and r.repaired.failed_writes_rolled_back == [pending[0].time]
    assert not Path(t.path, "oslo").exists()
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (3, "c", "rome", 3)]


# ---- repair -----------------------------------------------------------------------------------
def _fake_failed_write(table: Table, instant: str) -> str:
    """What a writer killed mid-write leaves: requested + inflight files and a partial base file."""
    hoodie = Path(table.path, ".hoodie")
    (hoodie / f"{instant}.commit.requested").write_bytes(b"")
    (hoodie / f"{instant}.inflight").write_bytes(b"{}")
    debris = Path(table.path, "paris", f"deadbeef-0000-0000-0000-000000000000-0_0-1-2_{instant}.parquet")
    debris.write_bytes(b"PAR1 partial")
    return debris.name


def test_next_write_rolls_back_a_failed_write_with_an_expired_heartbeat(spark, tmp_path):
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1)])
    failed = "20990101000000000"  # newer than anything: a later write must still roll it back
    debris = _fake_failed_write(t, failed)
    assert data(t) == oracle(t) == [(1, "a", "paris", 1)]  # debris is invisible
    r = upsert(t, spark, [(2, "b", "paris", 2)])
    assert r.repaired is not None and r.repaired.failed_writes_rolled_back == [failed]
    assert not Path(t.path, "paris", debris).exists()
    assert not any(n.startswith(failed) for n in timeline_files(t))
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (2, "b", "paris", 2)]


def test_a_pending_write_with_a_live_heartbeat_stops_the_next_writer(spark, tmp_path):
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1)])
    failed = "20990101000000000"
    _fake_failed_write(t, failed)
    beat = Heartbeat.start(t.meta.storage, failed, 60.0)
    try:
        snapshot = tree_bytes(t.path)
        with pytest.raises(ConcurrentWriteError, match=failed):
            upsert(t, spark, [(2, "b", "paris", 2)])
        assert {k: v for k, v in tree_bytes(t.path).items() if ".lock" not in k and ".heartbeat" not in k} == {
            k: v for k, v in snapshot.items() if ".lock" not in k and ".heartbeat" not in k
        }
    finally:
        beat.stop()


def test_repair_dry_run_then_repair(spark, tmp_path):
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1)])
    failed = "20990101000000000"
    debris = _fake_failed_write(t, failed)
    report = t.maintenance.repair(dry_run=True)
    assert report.failed_writes_rolled_back == [failed] and report.dry_run
    assert Path(t.path, "paris", debris).exists()
    report = t.maintenance.repair()
    assert report.failed_writes_rolled_back == [failed]
    assert not Path(t.path, "paris", debris).exists()
    assert t.maintenance.repair().nothing_done


def test_rollback_of_a_failed_pending_write(spark, tmp_path):
    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1)])
    failed = "20990101000000000"
    debris = _fake_failed_write(t, failed)
    res = t.maintenance.rollback(failed)
    assert res.target == failed
    assert not Path(t.path, "paris", debris).exists()
    assert not any(n.startswith(failed) for n in timeline_files(t))
    assert data(t) == oracle(t) == [(1, "a", "paris", 1)]


def test_savepoint_of_a_commit_the_cleaner_already_passed_is_refused(spark, tmp_path):
    from engine.errors import InvalidInputError
    from engine.services.maintenance import Maintenance

    t = make(spark, tmp_path)
    instants = [upsert(t, spark, [(1, f"v{i}", "paris", i)]).instant for i in range(3)]
    Maintenance(t.meta, {**MANUAL, "hoodie.cleaner.commits.retained": "1"}).clean()
    snapshot = tree_bytes(t.path)
    with pytest.raises(InvalidInputError, match=f"a clean already retained only from {instants[2]}"):
        t.maintenance.create_savepoint(instants[0])
    assert tree_bytes(t.path) == snapshot
    t.maintenance.create_savepoint(instants[2])


def test_savepoint_of_a_snapshot_a_file_versions_clean_broke_is_refused(spark, tmp_path):
    from engine.errors import InvalidInputError
    from engine.services.maintenance import Maintenance

    t = make(spark, tmp_path)
    instants = [upsert(t, spark, [(1, f"v{i}", "paris", i)]).instant for i in range(3)]
    upsert(t, spark, [(2, "w", "rome", 9)])
    # KEEP_LATEST_FILE_VERSIONS records no earliest retained commit: only the snapshot itself tells
    Maintenance(t.meta, {**MANUAL, "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                         "hoodie.cleaner.fileversions.retained": "1"}).clean()
    snapshot = tree_bytes(t.path)
    with pytest.raises(InvalidInputError, match=f"commit {instants[1]} cannot be savepointed: 1 file"):
        t.maintenance.create_savepoint(instants[1])
    assert tree_bytes(t.path) == snapshot
    sp = t.maintenance.create_savepoint(instants[2])  # its snapshot is whole
    assert sp.time == instants[2] and len(sp.files) == 1


def test_a_failing_automatic_clean_does_not_fail_the_committed_write(spark, tmp_path, monkeypatch):
    from engine.errors import StorageError
    from engine.services import clean as clean_service

    t = make(spark, tmp_path)
    upsert(t, spark, [(1, "a", "paris", 1)])

    def broken(*_a, **_k):
        raise StorageError("disk full")

    monkeypatch.setattr(clean_service, "clean", broken)
    r = t.upsert(df(spark, [(1, "b", "paris", 2)]), options={"hoodie.archive.automatic": "false"})
    assert r.services == {"clean_error": "StorageError: disk full"}
    assert t.timeline().is_completed(r.instant)
    assert data(t) == [(1, "b", "paris", 2)]


def test_repair_removes_a_savepoint_left_inflight(spark, tmp_path):
    t = make(spark, tmp_path)
    r = upsert(t, spark, [(1, "a", "paris", 1)])
    Path(t.path, f".hoodie/{r.instant}.savepoint.inflight").write_bytes(b"")
    report = t.maintenance.repair()
    assert report.savepoints_removed == [r.instant]
    assert not Path(t.path, f".hoodie/{r.instant}.savepoint.inflight").exists()
    assert list(t.timeline().pending) == []
