"""Optimistic concurrency control with real processes: a writer or compaction process paused with
its files written (or killed at a step of its commit) while this process writes the same table,
locally and on S3 (moto).

Each case: the table afterwards equals a model of the committed writes, hudi-rs agrees, no file of
a failed instant is left, and the writer that lost got `WriteConflictError`.
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
from tests.integration.test_crash import (
    FAST,
    ROOT,
    SCHEMA,
    _wait_group_gone,
    assert_clean_table,
    data,
    oracle,
)

pytestmark = pytest.mark.spark

# Apache Hudi's heartbeat (60 s, 2 misses) and our lease (60 s): a writer killed here is proven
# dead at once, so nothing waits for them; a live writer's heartbeat never expires under load
OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
}
SEED = [(1, "a", "paris", 1), (2, "b", "rome", 1)]


def start_writer(job: dict, pause: Path | None = None, point: str = "write.before_commit_lock",
                 kill: str | None = None) -> subprocess.Popen:
    """A writer process; paused at `point` (files in `pause`), or SIGKILLed at `kill`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOODIE_FAILPOINT", "HOODIE_PAUSEPOINT"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if pause is not None:
        env.update(HOODIE_PAUSEPOINT=point, HOODIE_PAUSEPOINT_DIR=str(pause))
    if kill is not None:
        env["HOODIE_FAILPOINT"] = kill
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.writer_process", json.dumps(job)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def wait_paused(proc: subprocess.Popen, pause: Path, point: str = "write.before_commit_lock", timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not (pause / f"{point}.reached").exists():
        if proc.poll() is not None:
            raise AssertionError(f"the writer exited before {point}: {proc.stderr.read()[-3000:]}")
        assert time.monotonic() < deadline, f"the writer never reached {point}"
        time.sleep(0.05)


def finish(proc: subprocess.Popen, timeout: float = 180) -> tuple[int, list[dict], str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    _wait_group_gone(proc.pid)
    return proc.returncode, [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


def paused_in_thread(write, folder: Path, monkeypatch, point: str = "write.before_commit_lock"):
    """Run `write` in a thread of this process, paused at `point` (files in `folder`); returns once
    it is paused, with the thread and the list its exception (if any) will be put in. Writes this
    process makes afterwards do not pause."""
    import threading

    from engine import failpoints

    folder.mkdir()
    monkeypatch.setenv(failpoints.ENV_PAUSE, point)
    monkeypatch.setenv(failpoints.ENV_PAUSE_DIR, str(folder))
    caught: list[BaseException] = []

    def run() -> None:
        try:
            write()
        except BaseException as exc:  # handed to the test thread
            caught.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 120
    while not (folder / f"{point}.reached").exists():
        assert thread.is_alive() and time.monotonic() < deadline, caught
        time.sleep(0.05)
    monkeypatch.delenv(failpoints.ENV_PAUSE)
    return thread, caught


def job(t: Table, rows: list[list], options: dict | None = None) -> dict:
    return {"path": t.path, "action": "upsert", "schema": SCHEMA, "options": options or OCC, "batches": [rows]}


def make(spark, path: Path, **kw) -> Table:
    t = Table.create(spark, str(path), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts", **kw)
    t.upsert(spark.createDataFrame(SEED, SCHEMA), options=FAST)
    return t


def instants_in_files(t: Table) -> set[str]:
    return {parse_base_file_name(p.name).instant for p in Path(t.path).rglob("*.parquet") if ".hoodie" not in p.parts}


def resume(pause: Path, point: str = "write.before_commit_lock", timeout: float = 30) -> None:
    """Let the paused writer go on, and wait until it did (so that the next pause is a new one)."""
    go = pause / f"{point}.go"
    go.touch()
    deadline = time.monotonic() + timeout
    while go.exists():
        assert time.monotonic() < deadline, "the paused writer did not go on"
        time.sleep(0.02)


def logs_on_disk(t: Table) -> set[str]:
    return {str(p.relative_to(t.path)) for p in Path(t.path).rglob("*.log.*") if ".hoodie" not in p.parts}


def logs_committed(t: Table) -> set[str]:
    return {s.path for i in t.timeline().completed_writes for s in t.commit_metadata(i.time).write_stats
            if s.path and ".log." in s.path}


def test_a_paused_writer_beside_other_writers_and_the_consoles_compaction(spark, tmp_path):
    """One ingestion process, four writes to a merge-on-read table, each paused with its files
    written while this process acts: a write on another file group (both commit), one on the same
    file group (the paused one fails), the same new key into new file groups (the RECORD index's
    key check fails it), and a compaction run by the console's job runner under
    `CONSOLE_CONCURRENCY_MODE=OPTIMISTIC_CONCURRENCY_CONTROL` (its plan leaves the paused write's
    file group out; both complete)."""
    from webui.jobs.operations import Operations
    from webui.jobs.progress import JobReporter

    t = make(spark, tmp_path / "t", index="RECORD", record_index_buckets=2, table_type="MERGE_ON_READ")
    batches = [
        [[1, "w1", "paris", 5]],
        [[1, "w1", "paris", 6], [3, "w1", "lima", 6]],
        [[7, "w1", "lyon", 6]],
        [[1, "ingest", "paris", 8]],
    ]
    proc = start_writer({**job(t, []), "batches": batches}, tmp_path)
    model = {r[0]: r for r in SEED}

    # 1. different file groups: this writer starts after the paused one, ignores its live instant
    # (no wait, no rollback), commits first; the paused one (the earlier instant) completes last
    wait_paused(proc, tmp_path)
    (first,) = [i.time for i in t.timeline().pending]
    r1 = t.upsert(spark.createDataFrame([(2, "w2", "rome", 5)], SCHEMA), options=OCC)
    assert r1.instant > first and [i.time for i in t.timeline().pending] == [first]
    resume(tmp_path)

    # 2. the same file group (paris): this writer commits first, the paused one fails
    wait_paused(proc, tmp_path)
    (second,) = [i.time for i in t.timeline().pending]
    assert t.timeline().get(first).is_completed
    model.update({1: (1, "w1", "paris", 5), 2: (2, "w2", "rome", 5)})
    assert data(t) == sorted(model.values())
    files_before = instants_in_files(t)
    r2 = t.upsert(spark.createDataFrame([(1, "w2", "paris", 7)], SCHEMA), options=OCC)
    model[1] = (1, "w2", "paris", 7)
    resume(tmp_path)

    # 3. one new key into a new partition: two new file groups, only the keys collide
    wait_paused(proc, tmp_path)
    (third,) = [i.time for i in t.timeline().pending]
    assert second not in {i.time for i in t.timeline()}  # rolled back by its writer
    # base files: the lima one went, the paused third write's is there; log files: each one a
    # completed commit wrote (the second write's paris log is gone)
    assert instants_in_files(t) == files_before - {second} | {third}
    assert logs_on_disk(t) == logs_committed(t)
    # the partition it created stays, empty (another writer may be filling it: issue 33.4)
    assert [p.name for p in Path(t.path, "lima").iterdir()] == [".hoodie_partition_metadata"]
    r3 = t.upsert(spark.createDataFrame([(7, "w2", "lyon", 5), (8, "w2", "lyon", 5)], SCHEMA), options=OCC)
    model.update({7: (7, "w2", "lyon", 5), 8: (8, "w2", "lyon", 5)})
    resume(tmp_path)

    # 4. the console compacts while the ingestion's write to paris is in flight
    wait_paused(proc, tmp_path)
    (fourth,) = [i.time for i in t.timeline().pending]
    console = Operations(lambda: spark, {"hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL"})
    reporter = JobReporter(None, 1, table="trips")  # its monitor thread is not started: nothing to publish to
    compaction = console.run("compaction", {}, t.path, reporter, None)["instant"]
    assert compaction > fourth and t.timeline().get(compaction).is_completed
    compacted = {s.partitionPath for s in t.commit_metadata(compaction).write_stats}
    assert "rome" in compacted and "paris" not in compacted  # paris: the write in flight holds it
    assert any(f"compaction {compaction} completed" in line for line in reporter.lines)
    model[1] = (1, "ingest", "paris", 8)
    resume(tmp_path)

    code, ops, err = finish(proc)
    assert code == 3, err[-3000:]
    assert [op["instant"] for op in ops] == [first, None, None, fourth]
    assert ops[0]["error"] is None
    error = ops[1]["error"]
    assert error.startswith(f"WriteConflictError: write {second} conflicts with upsert {r2.instant}"), error
    assert "1 file group(s) (paris/" in error and "rolled back" in error
    assert ops[1]["conflict"]["instant"] == second and ops[1]["conflict"]["other"] == r2.instant
    assert [g[0] for g in ops[1]["conflict"]["groups"]] == ["paris"]
    assert ops[2]["error"].startswith(f"WriteConflictError: write {third} inserted record key(s) 7 "), ops[2]["error"]
    assert ops[2]["conflict"] == {"instant": third, "other": r3.instant, "groups": [], "keys": ["7"]}
    assert data(t) == oracle(t) == sorted(model.values())
    assert [i.time for i in t.timeline().completed_writes][1:] == [
        first, r1.instant, r2.instant, r3.instant, fourth, compaction]
    slices = {g.partition: g.latest_slice for g in t.file_system_view().groups}
    assert slices["rome"].base_instant == compaction and not slices["rome"].log_files
    assert slices["paris"].log_files  # to compact next time
    assert logs_on_disk(t) == logs_committed(t)
    assert_clean_table(t)
    # the index names the one copy of 7: an update finds it
    r4 = t.upsert(spark.createDataFrame([(7, "w1", "lyon", 9)], SCHEMA), options=OCC)
    assert (r4.inserts, r4.updates) == (0, 1)
    model[7] = (7, "w1", "lyon", 9)
    assert data(t) == oracle(t) == sorted(model.values())


@pytest.mark.parametrize("point", ["write.before_commit_lock", "write.commit_locked", "write.after_complete"])
def test_a_writer_killed_at_each_step_of_its_commit(spark, tmp_path, point):
    t = make(spark, tmp_path / "t")
    code, _ops, err = finish(start_writer(job(t, [[1, "dead", "paris", 5], [3, "dead", "lima", 5]], OCC), kill=point))
    assert code == -signal.SIGKILL, err[-3000:]
    committed = point == "write.after_complete"
    started = time.monotonic()
    r = t.upsert(spark.createDataFrame([(1, "next", "paris", 6), (2, "next", "rome", 6)], SCHEMA), options=OCC)
    assert time.monotonic() - started < 30  # not the 60 s lease nor the 120 s heartbeat
    expected = [(1, "next", "paris", 6), (2, "next", "rome", 6)] + ([(3, "dead", "lima", 5)] if committed else [])
    assert data(t) == oracle(t) == expected
    rolled_back = [i for i in t.timeline() if i.action.value == "rollback"]
    assert len(rolled_back) == (0 if committed else 1)
    assert Path(t.path, "lima").exists() == committed
    assert r.instant == t.timeline().completed_writes.instants[-1].time
    assert_clean_table(t)


def test_two_writers_at_random_times_leave_the_model_of_their_commits(spark, tmp_path):
    """A writer process (Table API), a `hoodie upsert` process (the CLI, exit 75 when it loses) and
    this process, at random moments, on the same two file groups: each upsert commits or fails
    with a typed error, and the table is the committed upserts applied in the order they completed."""
    import random

    from engine.errors import ConcurrentWriteError, WriteConflictError

    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    t = make(spark, tmp_path / "t")

    def batch(w: int, n: int) -> list[list]:
        return [[k, f"w{w}.{n}", city, 1] for k, city in ((1, "paris"), (2, "rome"), (10 * w + n, "paris"))]

    # its first write (a partition of its own) warms its JVM up; the next three contend with ours
    theirs = [[[100, "warm", "lima", 1]]] + [batch(1, n) for n in range(3)]
    proc = start_writer({**job(t, []), "batches": theirs, "delays": [0.0] + [rng.uniform(0, 1.5) for _ in range(3)]})
    warm = json.loads(proc.stdout.readline())
    assert warm["error"] is None, warm
    committed = [(warm["instant"], theirs[0])]
    # the CLI writer: one upsert, from its own JVM, started now (it needs seconds to get going)
    import pyarrow as pa
    import pyarrow.parquet as pq

    cli_rows = batch(3, 0)
    cli_input = tmp_path / "cli.parquet"
    pq.write_table(pa.table({"id": pa.array([r[0] for r in cli_rows], pa.int32()),
                             "name": [r[1] for r in cli_rows], "city": [r[2] for r in cli_rows],
                             "ts": pa.array([r[3] for r in cli_rows], pa.int64())}), cli_input)
    cli_args = [str(Path(sys.executable).with_name("hoodie")), "upsert", t.path, "--input", str(cli_input), "--json",
                "--master", "local[1]"] + [a for k, v in OCC.items() for a in ("--option", f"{k}={v}")]
    cli = subprocess.Popen(cli_args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    for n in range(3):
        time.sleep(rng.uniform(0, 1.5))
        rows = batch(2, n)
        try:
            committed.append((t.upsert(spark.createDataFrame([tuple(r) for r in rows], SCHEMA), options=OCC).instant, rows))
        except (WriteConflictError, ConcurrentWriteError):
            pass  # lost to the other writer: nothing of it is in the table (checked below)
    code, ops, err = finish(proc)
    cli_out, cli_err = cli.communicate(timeout=180)
    _wait_group_gone(cli.pid)
    if cli.returncode == 0:
        committed.append((json.loads(cli_out)["instant"], cli_rows))
    else:
        assert cli.returncode == 75, cli_err[-3000:]
        assert cli_err.startswith(("hoodie: error: WriteConflictError: ", "hoodie: error: ConcurrentWriteError: ")), cli_err
    assert len(ops) == 3, err[-3000:]
    for op in ops:
        if op["error"] is None:
            committed.append((op["instant"], theirs[op["op"]]))
        else:
            assert op["error"].startswith(("WriteConflictError: ", "ConcurrentWriteError: ")), (seed, op)
    assert code == (0 if all(op["error"] is None for op in ops) else 3)
    hoodie = Path(t.path, ".hoodie")
    committed.sort(key=lambda c: os.stat(hoodie / f"{c[0]}.commit").st_mtime_ns)  # completion order
    model = {r[0]: r for r in SEED}
    for _instant, rows in committed:
        model.update({r[0]: tuple(r) for r in rows})
    assert data(t) == oracle(t) == sorted(model.values()), seed
    assert sorted(i.time for i in t.timeline().completed_writes)[1:] == sorted(c[0] for c in committed)
    assert_clean_table(t)


def _mor(spark, path: Path) -> Table:
    """A merge-on-read table whose two file groups (paris, rome) have log files to compact."""
    t = make(spark, path, table_type="MERGE_ON_READ")
    t.upsert(spark.createDataFrame([(1, "a2", "paris", 2), (2, "b2", "rome", 2)], SCHEMA), options=OCC)
    return t


def test_a_writer_beside_a_running_compaction_appends_to_the_slices_it_starts(spark, tmp_path):
    """A compaction process paused with its base files written; this process upserts the same
    file groups (log files on the slices the compaction starts) and commits; then the compaction
    completes, and the update stays on top of the compacted base."""
    t = _mor(spark, tmp_path / "t")
    proc = start_writer({"path": t.path, "action": "run_compaction", "options": OCC}, tmp_path,
                        point="compaction.before_complete")
    wait_paused(proc, tmp_path, "compaction.before_complete")
    (compaction,) = [i.time for i in t.timeline().pending]
    r = t.upsert(spark.createDataFrame([(1, "w", "paris", 4), (2, "w", "rome", 4)], SCHEMA), options=OCC)
    assert r.instant > compaction
    resume(tmp_path, "compaction.before_complete")
    code, ops, err = finish(proc)
    assert code == 0 and ops[0]["error"] is None, err[-3000:]
    timeline = t.timeline()
    assert timeline.get(compaction).is_completed and not list(timeline.pending)
    groups = t.file_system_view().groups
    assert all(g.latest_slice.base_instant == compaction and g.latest_slice.log_files for g in groups)
    expected = [(1, "w", "paris", 4), (2, "w", "rome", 4)]
    assert data(t) == oracle(t) == expected
    assert_clean_table(t)


def test_on_s3_a_compaction_process_and_two_writers(spark, s3_server, tmp_path, monkeypatch):
    """The same rules on S3 (moto: the lock and the timeline by conditional puts): a compaction
    process paused before completing while this process upserts its groups, then two writers on
    one file group (the second, paused in a thread, fails)."""
    from engine.errors import WriteConflictError
    from tests.support import hudi_rs

    bucket = s3_server.create_bucket()
    uri = f"s3://{bucket}/lake/trips"
    opts = s3_server.storage_options()
    t = Table.create(spark, uri, name="trips", record_key="id", partition_fields="city", precombine_field="ts",
                     table_type="MERGE_ON_READ", storage_options=opts)
    t.upsert(spark.createDataFrame(SEED, SCHEMA), options=OCC)
    t.upsert(spark.createDataFrame([(1, "a2", "paris", 2), (2, "b2", "rome", 2)], SCHEMA), options=OCC)

    def snapshot() -> list[tuple]:
        ours = data(Table.open(spark, uri, storage_options=opts))
        theirs = sorted((r["id"], r["name"], r["city"], r["ts"])
                        for r in hudi_rs.snapshot(uri, storage_options=hudi_rs.s3_storage_options(s3_server.env())))
        assert ours == theirs
        return ours

    for k, v in s3_server.env().items():
        monkeypatch.setenv(k, v)  # the compaction process finds the bucket by AWS_* (as the CLI would)
    proc = start_writer({"path": uri, "action": "run_compaction", "options": OCC}, tmp_path, point="compaction.before_complete")
    wait_paused(proc, tmp_path, "compaction.before_complete")
    (compaction,) = [i.time for i in t.timeline().pending]
    r1 = t.upsert(spark.createDataFrame([(1, "w", "paris", 4)], SCHEMA), options=OCC)
    resume(tmp_path, "compaction.before_complete")
    code, ops, err = finish(proc)
    assert code == 0 and ops[0]["error"] is None, err[-3000:]
    assert t.timeline().get(compaction).is_completed and r1.instant > compaction
    assert snapshot() == [(1, "w", "paris", 4), (2, "b2", "rome", 2)]

    me = tmp_path / "me"
    thread, caught = paused_in_thread(
        lambda: t.upsert(spark.createDataFrame([(2, "slow", "rome", 5)], SCHEMA), options=OCC), me, monkeypatch
    )
    (slow,) = [i.time for i in t.timeline().pending]
    # its inline compaction runs beside the paused write: the plan leaves rome (in flight) out
    inline = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1"}
    r2 = t.upsert(spark.createDataFrame([(2, "fast", "rome", 6)], SCHEMA), options={**OCC, **inline})
    (inline_compaction,) = [i.time for i in t.timeline().completed_writes if i.time > r2.instant]
    assert {s.partitionPath for s in t.commit_metadata(inline_compaction).write_stats} == {"paris"}
    resume(me)
    thread.join(120)
    (exc,) = caught
    assert isinstance(exc, WriteConflictError) and (exc.instant, exc.other) == (slow, r2.instant)
    assert [g[0] for g in exc.groups] == ["rome"]
    assert snapshot() == [(1, "w", "paris", 4), (2, "fast", "rome", 6)]
    assert slow not in {i.time for i in t.timeline()} and not list(t.timeline().pending)


def test_two_writers_appending_to_one_slice_never_remove_each_others_log_file(spark, tmp_path, monkeypatch):
    """Table version 6 names a log file with its slice's base instant and a version: two writers
    that read the same slice write the same name up to the write token. The one that loses must
    remove its own file only, never the winner's committed one."""
    from engine.errors import WriteConflictError

    t = _mor(spark, tmp_path / "t")
    thread, caught = paused_in_thread(
        lambda: t.upsert(spark.createDataFrame([(1, "slow", "paris", 5)], SCHEMA), options=OCC),
        tmp_path / "p", monkeypatch, point="write.claimed",
    )
    (slow,) = [i.time for i in t.timeline().pending]  # it has read the slice and chosen its log version
    r = t.upsert(spark.createDataFrame([(1, "fast", "paris", 6)], SCHEMA), options=OCC)
    resume(tmp_path / "p", "write.claimed")
    thread.join(120)
    (exc,) = caught
    assert isinstance(exc, WriteConflictError) and (exc.instant, exc.other) == (slow, r.instant)
    (fast_log,) = [s.path for s in t.commit_metadata(r.instant).write_stats if s.partitionPath == "paris"]
    assert Path(t.path, fast_log).exists()
    assert logs_on_disk(t) == logs_committed(t)
    assert data(t) == oracle(t) == [(1, "fast", "paris", 6), (2, "b2", "rome", 2)]
    assert_clean_table(t)
