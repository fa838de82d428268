"""Crash matrix: a writer process is SIGKILLed (with its JVM and Spark workers) at each failpoint.

After each kill, our reader and hudi-rs both see exactly the last completed snapshot; the next
write succeeds, finishes or rolls back what the crash left, and removes the debris; no record is
duplicated or lost. Real subprocesses (tests/support/writer_process.py), real SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import Table
from engine.data.file_names import parse_base_file_name
from tests.support import hudi_rs
from tests.support.tables import rows

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
ROOT = Path(__file__).resolve().parents[2]
# short heartbeats and leases, so the next writer takes over a dead writer quickly
FAST = {
    "hoodie.client.heartbeat.interval_in_ms": "300",
    "hoodie.client.heartbeat.tolerable.misses": "2",
    "hoodie.write.lock.lease_ms": "1500",
    "hoodie.write.lock.wait_time_ms": "30000",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
}


def run_writer(job: dict, failpoint: str | None, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOODIE_FAILPOINT")}
    if failpoint:
        env["HOODIE_FAILPOINT"] = failpoint
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.writer_process", json.dumps(job)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"writer timed out\n{err[-3000:]}") from None
    _wait_group_gone(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _wait_group_gone(pgid: int, timeout: float = 30) -> None:
    """Every process of the writer's group (JVM, Python workers) has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(pgid, signal.SIGKILL)
    raise AssertionError("the writer's processes did not exit")


def data(table: Table, as_of: str | None = None) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(table.read(as_of=as_of)))


def oracle(table: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(table.path))


def assert_clean_table(table: Table) -> None:
    """No pending instant, no heartbeat, and every data file belongs to a completed write."""
    tl = table.timeline()
    assert [str(i) for i in tl.pending] == []
    completed = {i.time for i in tl.completed_writes}
    seen: set[tuple[str, str]] = set()
    for p in Path(table.path).rglob("*.parquet"):
        if ".hoodie" in p.parts:
            continue
        name = parse_base_file_name(p.name)
        assert name is not None and name.instant in completed, f"debris left: {p}"
        assert (name.file_id, name.instant) not in seen, f"two base files for one file id and instant: {p}"
        seen.add((name.file_id, name.instant))
    hb = Path(table.path, ".hoodie/.heartbeat")
    assert not hb.exists() or not any(hb.iterdir())


def setup_table(spark, tmp_path: Path) -> tuple[Table, list[str], dict[str, list[tuple]]]:
    t = Table.create(spark, str(tmp_path / "t"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts")
    batches = [
        [(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "paris", 1)],
        [(1, "a2", "paris", 2), (4, "d", "rome", 2)],
        [(2, "b3", "rome", 3), (5, "e", "oslo", 3)],
    ]
    instants, states = [], {}
    for b in batches:
        r = t.upsert(spark.createDataFrame(b, SCHEMA), options=FAST)
        instants.append(r.instant)
        states[r.instant] = data(t)
    return t, instants, states


NEXT = [(6, "f", "paris", 9), (1, "a9", "paris", 9)]


def next_write(spark, t: Table) -> None:
    t.upsert(spark.createDataFrame(NEXT, SCHEMA), options=FAST)


def after_next(state: list[tuple]) -> list[tuple]:
    by_id = {r[0]: r for r in state}
    for r in NEXT:
        by_id[r[0]] = r
    return sorted(by_id.values())


# the writer's input as a pyarrow Table: written by the local path (engine.write.local), no JVM
ARROW = {"id": "int32", "name": "string", "city": "string", "ts": "int64"}


@pytest.mark.parametrize(
    ("point", "arrow"),
    [("write.after_requested", False), ("write.file_written", False), ("write.before_complete", False),
     ("write.file_written", True), ("write.before_complete", True)],
    ids=["after_requested", "file_written", "before_complete", "local-file_written", "local-before_complete"],
)
def test_writer_killed_during_a_write(spark, tmp_path, point, arrow):
    t, instants, states = setup_table(spark, tmp_path)
    last = states[instants[-1]]
    batch = [[7, "g", "paris", 5], [2, "b5", "rome", 5], [8, "h", "lima", 5]]
    job = {"path": t.path, "action": "upsert", "schema": SCHEMA, "batches": [batch], "options": FAST}
    if arrow:
        job["arrow"] = ARROW
    res = run_writer(job, point)
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    pending = [i for i in t.timeline().pending]
    assert len(pending) == 1 and pending[0].time > instants[-1]
    assert data(t) == oracle(t) == last  # exactly the last completed snapshot
    next_write(spark, t)
    assert data(t) == oracle(t) == after_next(last)
    assert_clean_table(t)
    assert not Path(t.path, "lima").exists()  # the partition only the dead write created is gone


def test_one_pass_bulk_insert_killed_after_its_first_file(spark, tmp_path):
    """A bulk_insert whose tasks name their own file groups (sort mode NONE): its inflight names
    none, so the repair finds its files and the partition it created by listing."""
    t, instants, states = setup_table(spark, tmp_path)
    last = states[instants[-1]]
    batch = [[7, "g", "paris", 5], [8, "h", "lima", 5], [9, "i", "bern", 5]]
    options = {**FAST, "hoodie.bulkinsert.sort.mode": "NONE"}
    job = {"path": t.path, "action": "bulk_insert", "schema": SCHEMA, "batches": [batch], "options": options}
    res = run_writer(job, "write.file_written")  # after the first file: bern, which it created
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    assert Path(t.path, "bern", ".hoodie_partition_metadata").exists()
    assert len(t.timeline().pending) == 1
    assert data(t) == oracle(t) == last
    next_write(spark, t)
    assert data(t) == oracle(t) == after_next(last)
    assert_clean_table(t)
    assert not Path(t.path, "bern").exists() and not Path(t.path, "lima").exists()


@pytest.mark.parametrize("point", ["rollback.after_revert", "rollback.files_deleted"])
def test_killed_during_rollback(spark, tmp_path, point):
    t, instants, states = setup_table(spark, tmp_path)
    res = run_writer({"path": t.path, "action": "rollback", "args": [instants[-1]], "options": FAST}, point)
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    # the rolled-back commit was made pending before any file went: the previous snapshot shows
    assert data(t) == oracle(t) == states[instants[-2]]
    next_write(spark, t)  # finishes the rollback first
    assert data(t) == oracle(t) == after_next(states[instants[-2]])
    assert instants[-1] not in {i.time for i in t.timeline()}
    assert_clean_table(t)


def test_killed_during_clean(spark, tmp_path):
    t, instants, states = setup_table(spark, tmp_path)
    opts = {**FAST, "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "1"}
    old = sorted(p.name for p in Path(t.path).rglob("*.parquet"))
    res = run_writer({"path": t.path, "action": "clean", "options": opts}, "clean.file_deleted")
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    assert data(t) == oracle(t) == states[instants[-1]]
    pending = [i for i in t.timeline().pending]
    assert [i.action.value for i in pending] == ["clean"]
    next_write(spark, t)
    assert data(t) == oracle(t) == after_next(states[instants[-1]])
    assert_clean_table(t)
    # the clean finished: only the latest version of each file group is left (+ the next write's)
    nxt = t.timeline().completed_writes.last_time
    assert versions(t) == {"paris": [instants[1], nxt], "rome": [instants[2]], "oslo": [instants[2]]}
    assert len(old) == 6


def versions(t: Table) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in sorted(Path(t.path).rglob("*.parquet")):
        name = parse_base_file_name(p.name)
        assert name is not None
        out.setdefault(p.parent.name, []).append(name.instant)
    return {k: sorted(v) for k, v in out.items()}


def test_killed_during_restore(spark, tmp_path):
    t, instants, states = setup_table(spark, tmp_path)
    res = run_writer({"path": t.path, "action": "restore", "args": [instants[0]], "options": FAST},
                     "restore.after_first")
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    # the newest commit is rolled back, the one before still completed: a consistent snapshot
    assert data(t) == oracle(t) == states[instants[1]]
    next_write(spark, t)  # finishes the restore first
    assert data(t) == oracle(t) == after_next(states[instants[0]])
    assert [i.time for i in t.timeline().completed_writes][:1] == [instants[0]]
    assert instants[1] not in {i.time for i in t.timeline()}
    assert_clean_table(t)


def test_killed_during_archival(spark, tmp_path):
    t, instants, states = setup_table(spark, tmp_path)
    opts = {**FAST, "hoodie.cleaner.commits.retained": "1", "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3"}
    for i in range(2):  # 5 commits > max 3
        r = t.upsert(spark.createDataFrame([(20 + i, "x", "rome", 10 + i)], SCHEMA), options=FAST)
        states[r.instant] = data(t)
        instants.append(r.instant)
    res = run_writer({"path": t.path, "action": "archive", "options": opts}, "archive.after_file")
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    assert data(t) == oracle(t) == states[instants[-1]]
    from engine.services import archive as archive_service
    from engine.services.maintenance import Maintenance

    Maintenance(t.meta, opts).archive()  # skips what the archive already holds
    times = [e["commitTime"] for e in archive_service.read_archived_entries(t.meta) if e["actionType"] == "commit"]
    assert times == instants[:3]  # each archived once
    assert [i.time for i in t.timeline().completed_writes] == instants[3:]
    assert data(t) == oracle(t) == states[instants[-1]]


# ---- merge-on-read ---------------------------------------------------------------------------
def setup_mor(spark, tmp_path: Path) -> tuple[Table, list[str], dict[str, list[tuple]]]:
    t = Table.create(spark, str(tmp_path / "m"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts", table_type="MERGE_ON_READ")
    batches = [
        [(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "paris", 1)],
        [(1, "a2", "paris", 2), (4, "d", "rome", 2)],  # a log file in paris, a new base file in rome
        [(2, "b3", "rome", 3)],  # a log file in rome
    ]
    instants, states = [], {}
    for b in batches:
        r = t.upsert(spark.createDataFrame(b, SCHEMA), options=FAST)
        instants.append(r.instant)
        states[r.instant] = data(t)
    return t, instants, states


def assert_clean_mor_table(table: Table) -> None:
    """As assert_clean_table, and every log file's blocks belong to completed writes."""
    from engine.data.log_file import log_block_instants

    assert_clean_table(table)
    completed = {i.time for i in table.timeline().completed_writes}
    for p in Path(table.path).rglob(".*.log.*"):
        rel = p.relative_to(table.path).as_posix()
        assert set(log_block_instants(table.meta.storage, rel)) <= completed, f"debris left: {rel}"


@pytest.mark.parametrize(
    ("point", "arrow"),
    [("write.log_written", False), ("write.before_complete", False), ("write.log_written", True)],
    ids=["log_written", "before_complete", "local-log_written"],
)
def test_writer_killed_during_a_deltacommit(spark, tmp_path, point, arrow):
    t, instants, states = setup_mor(spark, tmp_path)
    last = states[instants[-1]]
    batch = [[1, "a5", "paris", 5], [2, "b5", "rome", 5], [8, "h", "lima", 5]]
    job = {"path": t.path, "action": "upsert", "schema": SCHEMA, "batches": [batch], "options": FAST}
    if arrow:
        job["arrow"] = ARROW
    res = run_writer(job, point)
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    assert [i.action.value for i in t.timeline().pending] == ["deltacommit"]
    assert data(t) == oracle(t) == last  # the dead write's log blocks do not count
    next_write(spark, t)  # rolls the dead deltacommit back first (its log files deleted)
    assert data(t) == oracle(t) == after_next(last)
    assert_clean_mor_table(t)


@pytest.mark.parametrize("point", ["compaction.after_inflight", "compaction.before_complete"])
def test_killed_during_compaction(spark, tmp_path, point):
    t, instants, states = setup_mor(spark, tmp_path)
    last = states[instants[-1]]
    res = run_writer({"path": t.path, "action": "run_compaction", "options": FAST}, point)
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    (pending,) = t.timeline().pending
    assert (pending.action.value, pending.state.value) == ("compaction", "inflight")
    assert data(t) == oracle(t) == last  # the old slices are what readers see
    time.sleep(1.0)  # the compaction's heartbeat (300 ms x 2) expires
    next_write(spark, t)  # repair reverts the interrupted compaction to requested
    assert data(t) == after_next(last)
    (pending,) = t.timeline().pending
    assert (pending.action.value, pending.state.value) == ("compaction", "requested")
    from engine.services.maintenance import Maintenance

    Maintenance(t.meta, FAST).run_compaction(pending.time)
    assert data(t) == oracle(t) == after_next(last)
    assert_clean_mor_table(t)


@pytest.mark.parametrize("point", ["clustering.after_inflight", "clustering.before_complete"])
def test_killed_during_clustering(spark, tmp_path, point):
    t, instants, states = setup_mor(spark, tmp_path)
    last = states[instants[-1]]
    res = run_writer({"path": t.path, "action": "run_clustering", "options": FAST}, point)
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    (pending,) = t.timeline().pending
    assert (pending.action.value, pending.state.value) == ("replacecommit", "inflight")
    assert data(t) == oracle(t) == last  # the old file groups are what readers see
    left = sorted(p.name for p in Path(t.path).rglob(f"*_{pending.time}.parquet"))
    assert len(left) == (2 if point == "clustering.before_complete" else 0)
    time.sleep(1.0)  # the clustering's heartbeat (300 ms x 2) expires
    from engine.services.maintenance import Maintenance

    report = Maintenance(t.meta, FAST).repair()  # the next writer's repair reverts it to requested
    assert report.clusterings_reverted == [pending.time]
    (pending,) = t.timeline().pending
    assert (pending.action.value, pending.state.value) == ("replacecommit", "requested")
    assert list(Path(t.path).rglob(f"*_{pending.time}.parquet")) == []
    result = Maintenance(t.meta, FAST).run_clustering(pending.time)
    assert result.instant == pending.time and result.records == len(last)
    assert data(t) == oracle(t) == last
    assert_clean_mor_table(t)


# ---- a writer killed on this host is not waited for ------------------------------------------
# Apache Hudi's defaults: a 60 s lease, heartbeats every 60 s with 2 misses tolerated, no waiting
# for the lock. A dead writer that could not be proven dead would make the next write fail.
DEFAULTS = {
    "hoodie.client.heartbeat.interval_in_ms": "60000",
    "hoodie.client.heartbeat.tolerable.misses": "2",
    "hoodie.write.lock.lease_ms": "60000",
    "hoodie.write.lock.wait_time_ms": "0",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
}


def test_the_next_write_after_a_writer_killed_here_succeeds_at_once(spark, tmp_path):
    from engine.transaction.lock import LOCK_DIR, LockInfo, lock_file

    t, instants, states = setup_table(spark, tmp_path)
    last = states[instants[-1]]
    batch = [[7, "g", "paris", 5], [2, "b5", "rome", 5], [8, "h", "lima", 5]]
    job = {"path": t.path, "action": "upsert", "schema": SCHEMA, "batches": [batch], "options": DEFAULTS}
    res = run_writer(job, "write.before_complete")
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    (failed,) = t.timeline().pending
    failed_files = sorted(p for p in Path(t.path).rglob("*.parquet") if parse_base_file_name(p.name).instant == failed.time)
    assert {p.parent.name for p in failed_files} == {"paris", "rome", "lima"}
    # the dead writer's lease and heartbeat still run: only its death frees the table
    epochs = sorted(int(f.name.split(".")[1]) for f in t.meta.storage.list_dir(LOCK_DIR))
    dead = LockInfo.from_json(epochs[-1], t.meta.storage.read_bytes(lock_file(epochs[-1])))
    assert not dead.released and dead.expires_at_ms > time.time() * 1000 + 30_000
    assert Path(t.path, ".hoodie/.heartbeat", failed.time).exists()

    started = time.monotonic()
    r = t.upsert(spark.createDataFrame(NEXT, SCHEMA), options=DEFAULTS)
    assert time.monotonic() - started < 30  # well under the 60 s lease and the 120 s heartbeat

    assert data(t) == oracle(t) == after_next(last)
    assert [p for p in failed_files if p.exists()] == []
    assert not Path(t.path, "lima").exists()
    timeline = t.timeline()
    assert failed.time not in {i.time for i in timeline}
    rollbacks = [i for i in timeline if i.action.value == "rollback"]
    assert len(rollbacks) == 1 and rollbacks[0].is_completed and rollbacks[0].time < r.instant
    assert [i.time for i in timeline.completed_writes] == [*instants, r.instant]
    # the takeover of an expired lease: the next epoch; the dead writer's lock file untouched
    assert LockInfo.from_json(dead.epoch, t.meta.storage.read_bytes(lock_file(dead.epoch))) == dead
    assert max(int(f.name.split(".")[1]) for f in t.meta.storage.list_dir(LOCK_DIR)) == dead.epoch + 1
    assert_clean_table(t)
