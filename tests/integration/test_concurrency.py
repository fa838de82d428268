"""Optimistic concurrency control with real processes: a writer process paused after writing its
files (or killed at a step of its commit) while this process writes the same table.

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
from engine.errors import WriteConflictError
from engine.table.file_names import parse_base_file_name
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

OCC = {**FAST, "hoodie.write.concurrency.mode": "optimistic_concurrency_control"}
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


def job(t: Table, rows: list[list], options: dict | None = None) -> dict:
    return {"path": t.path, "action": "upsert", "schema": SCHEMA, "options": options or OCC, "batches": [rows]}


def make(spark, path: Path, **kw) -> Table:
    t = Table.create(spark, str(path), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts", **kw)
    t.upsert(spark.createDataFrame(SEED, SCHEMA), options=FAST)
    return t


def instants_in_files(t: Table) -> set[str]:
    return {parse_base_file_name(p.name).instant for p in Path(t.path).rglob("*.parquet") if ".hoodie" not in p.parts}


def test_writers_on_different_file_groups_both_commit(spark, tmp_path):
    t = make(spark, tmp_path / "t")
    proc = start_writer(job(t, [[1, "w1", "paris", 5]]), tmp_path)
    wait_paused(proc, tmp_path)
    (mine,) = [i.time for i in t.timeline().pending]  # the paused writer's instant, claimed and inflight
    # this writer starts after it, ignores its live instant (no wait, no rollback) and commits first
    r = t.upsert(spark.createDataFrame([(2, "w2", "rome", 5)], SCHEMA), options=OCC)
    assert r.instant > mine
    assert [i.time for i in t.timeline().pending] == [mine]
    (tmp_path / "write.before_commit_lock.go").touch()
    code, ops, err = finish(proc)
    assert code == 0, err[-3000:]
    assert ops[0]["instant"] == mine and ops[0]["error"] is None
    expected = [(1, "w1", "paris", 5), (2, "w2", "rome", 5)]
    assert data(t) == oracle(t) == expected
    # the earlier instant completed last: both on the timeline, in instant order
    assert [i.time for i in t.timeline().completed_writes][1:] == [mine, r.instant]
    assert_clean_table(t)


def test_the_second_writer_on_a_file_group_fails_and_leaves_no_file(spark, tmp_path):
    t = make(spark, tmp_path / "t")
    before = instants_in_files(t)
    proc = start_writer(job(t, [[1, "w1", "paris", 5], [3, "w1", "lima", 5]]), tmp_path)
    wait_paused(proc, tmp_path)
    (mine,) = [i.time for i in t.timeline().pending]
    assert instants_in_files(t) == before | {mine}  # its files are written (paris and a new lima)
    r = t.upsert(spark.createDataFrame([(1, "w2", "paris", 6)], SCHEMA), options=OCC)
    (tmp_path / "write.before_commit_lock.go").touch()
    code, ops, err = finish(proc)
    assert code == 3, err[-3000:]
    error = ops[0]["error"]
    assert error.startswith("WriteConflictError: ") and f"write {mine} conflicts with upsert {r.instant}" in error
    assert "paris/" in error and "rolled back" in error
    assert data(t) == oracle(t) == [(1, "w2", "paris", 6), (2, "b", "rome", 1)]
    assert mine not in {i.time for i in t.timeline()}
    assert instants_in_files(t) == before | {r.instant}
    assert not Path(t.path, "lima").exists()  # the partition it created is gone too
    assert_clean_table(t)
    # the loser retries and wins: its update lands on the winner's row
    r2 = t.upsert(spark.createDataFrame([(1, "w1", "paris", 7)], SCHEMA), options=OCC)
    assert r2.updates == 1 and data(t) == oracle(t) == [(1, "w1", "paris", 7), (2, "b", "rome", 1)]


def test_two_writers_inserting_one_new_key_with_the_record_index(spark, tmp_path):
    t = make(spark, tmp_path / "t", index="RECORD", record_index_buckets=2)
    proc = start_writer(job(t, [[7, "w1", "lyon", 5]]), tmp_path)
    wait_paused(proc, tmp_path)
    (mine,) = [i.time for i in t.timeline().pending]
    # a new partition: each writer makes a file group of its own, so only the keys collide
    r = t.upsert(spark.createDataFrame([(7, "w2", "lyon", 5), (8, "w2", "lyon", 5)], SCHEMA), options=OCC)
    (tmp_path / "write.before_commit_lock.go").touch()
    code, ops, err = finish(proc)
    assert code == 3, err[-3000:]
    assert ops[0]["error"].startswith(f"WriteConflictError: write {mine} inserted record key(s) 7 ")
    assert r.instant in ops[0]["error"]
    expected = [(1, "a", "paris", 1), (2, "b", "rome", 1), (7, "w2", "lyon", 5), (8, "w2", "lyon", 5)]
    assert data(t) == oracle(t) == expected
    assert instants_in_files(t) <= {i.time for i in t.timeline().completed_writes}
    assert_clean_table(t)
    # the index names the one copy: an update of 7 finds it
    r2 = t.upsert(spark.createDataFrame([(7, "w1", "lyon", 9)], SCHEMA), options=OCC)
    assert (r2.inserts, r2.updates) == (0, 1)
    assert data(t) == oracle(t) == [*expected[:2], (7, "w1", "lyon", 9), (8, "w2", "lyon", 5)]


def test_a_conflict_is_typed_in_process_too(spark, tmp_path, monkeypatch):
    """This process is the second to commit: WriteConflictError with the instants and groups."""
    import threading

    from engine import failpoints

    t = make(spark, tmp_path / "t")
    me = tmp_path / "me"
    me.mkdir()
    monkeypatch.setenv(failpoints.ENV_PAUSE, "write.before_commit_lock")
    monkeypatch.setenv(failpoints.ENV_PAUSE_DIR, str(me))
    caught: list[BaseException] = []

    def write() -> None:
        try:
            t.upsert(spark.createDataFrame([(2, "me", "rome", 5)], SCHEMA), options=OCC)
        except BaseException as exc:  # handed to the test thread
            caught.append(exc)

    thread = threading.Thread(target=write)
    thread.start()
    deadline = time.monotonic() + 120
    while not (me / "write.before_commit_lock.reached").exists():
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.05)
    (mine,) = [i.time for i in t.timeline().pending]
    code, ops, err = finish(start_writer(job(t, [[2, "other", "rome", 6]])))
    assert code == 0 and ops[0]["error"] is None, err[-3000:]
    (me / "write.before_commit_lock.go").touch()
    thread.join(120)
    (exc,) = caught
    assert isinstance(exc, WriteConflictError)
    assert (exc.instant, exc.other) == (mine, ops[0]["instant"])
    (group,) = exc.groups
    assert group[0] == "rome"
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (2, "other", "rome", 6)]
    assert_clean_table(t)


# the defaults of the heartbeat (60 s, 2 misses) and the lease (60 s): only the proof that the
# killed writer is dead lets the next one go on at once
OCC_SLOW = {
    "hoodie.write.concurrency.mode": "OPTIMISTIC_CONCURRENCY_CONTROL",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
}


@pytest.mark.parametrize("point", ["write.after_requested", "write.before_commit_lock", "write.commit_locked",
                                   "write.after_complete"])
def test_a_writer_killed_at_each_step_of_its_commit(spark, tmp_path, point):
    t = make(spark, tmp_path / "t")
    code, _ops, err = finish(start_writer(job(t, [[1, "dead", "paris", 5], [3, "dead", "lima", 5]], OCC_SLOW), kill=point))
    assert code == -signal.SIGKILL, err[-3000:]
    committed = point == "write.after_complete"
    started = time.monotonic()
    r = t.upsert(spark.createDataFrame([(1, "next", "paris", 6), (2, "next", "rome", 6)], SCHEMA), options=OCC_SLOW)
    assert time.monotonic() - started < 30  # not the 60 s lease nor the 120 s heartbeat
    expected = [(1, "next", "paris", 6), (2, "next", "rome", 6)] + ([(3, "dead", "lima", 5)] if committed else [])
    assert data(t) == oracle(t) == expected
    rolled_back = [i for i in t.timeline() if i.action.value == "rollback"]
    assert len(rolled_back) == (0 if committed else 1)
    assert Path(t.path, "lima").exists() == committed
    assert r.instant == t.timeline().completed_writes.instants[-1].time
    assert_clean_table(t)
