"""Two writer processes on one table: one lock holder at a time, no lost update, a typed error for
the writer that cannot wait."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from engine import Table
from engine.transaction.lock import TableLock
from tests.integration.test_concurrency import finish as finish_writer
from tests.integration.test_concurrency import start_writer
from tests.integration.test_crash import FAST, SCHEMA, data, oracle, run_writer

pytestmark = pytest.mark.spark


def finish(proc: subprocess.Popen, timeout: float = 300) -> list[dict]:
    code, ops, err = finish_writer(proc, timeout)
    assert code == 0, err[-3000:]
    return ops


def test_two_processes_upsert_at_once_without_losing_an_update(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts")
    t.upsert(spark.createDataFrame([(0, "seed", "paris", 0)], SCHEMA), options=FAST)
    # both rewrite the same file group (paris) three times each, with keys of their own
    jobs = [
        {"path": t.path, "action": "upsert", "schema": SCHEMA, "options": FAST,
         "batches": [[[base + i, f"w{base}", "paris", i + 1]] for i in range(3)]}
        for base in (100, 200)
    ]
    procs = [start_writer(j) for j in jobs]
    results = [finish(p) for p in procs]
    ops = [op for r in results for op in r]
    assert all(op["error"] is None for op in ops), ops
    assert len({op["instant"] for op in ops}) == 6
    # one writer at a time: each commit was requested after the previous one completed
    hoodie = Path(t.path, ".hoodie")
    spans = [
        (os.stat(hoodie / f"{i}.commit.requested").st_mtime_ns, os.stat(hoodie / f"{i}.commit").st_mtime_ns)
        for i in sorted(op["instant"] for op in ops)
    ]
    for (_a0, a1), (b0, _b1) in zip(spans, spans[1:], strict=False):
        assert a1 <= b0
    writers = [{op["instant"] for op in r} for r in results]
    assert all(len(w) == 3 for w in writers)
    expected = sorted([(0, "seed", "paris", 0)] + [(b + i, f"w{b}", "paris", i + 1) for b in (100, 200) for i in range(3)])
    assert data(t) == oracle(t) == expected
    assert [i.time for i in t.timeline().completed_writes][1:] == sorted(op["instant"] for op in ops)
    assert list(t.timeline().pending) == []


def test_the_writer_that_cannot_wait_gets_a_typed_error_naming_the_holder(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts")
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1)], SCHEMA), options=FAST)
    before = data(t)
    holder = TableLock(t.meta.storage, "maintenance window", lease=60)
    holder.acquire()
    try:
        opts = {**FAST, "hoodie.write.lock.wait_time_ms": "0"}
        res = run_writer({"path": t.path, "action": "upsert", "schema": SCHEMA, "options": opts,
                          "batches": [[[2, "b", "paris", 2]]]}, None)
        assert res.returncode == 3, res.stderr[-3000:]
        out = json.loads(res.stdout.splitlines()[-1])
        assert out["error"].startswith("ConcurrentWriteError")
        assert "maintenance window" in out["error"] and str(os.getpid()) in out["error"]
        assert data(t) == before and list(t.timeline().pending) == []
    finally:
        holder.release()
    # released: the same write goes through (in this process: a second writer process proves nothing more)
    t.upsert(spark.createDataFrame([(2, "b", "paris", 2)], SCHEMA), options=FAST)
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (2, "b", "paris", 2)]
    assert Path(t.path, ".hoodie").exists()
