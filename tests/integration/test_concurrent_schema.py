"""The table's schema under optimistic concurrency (issue 33.1), with real writer processes held at
a pause point: Apache Hudi's schema conflict resolution (`SimpleSchemaConflictResolutionStrategy`,
RFC-82) as `engine.transaction.occ.resolve_schema` applies it.

- a writer that did not evolve the schema commits with the one another writer evolved meanwhile
  (the column another writer added is never rolled back);
- two writers that evolved it differently: the later one fails with WriteConflictError naming the
  columns, the table keeps the first one's;
- a compaction completing beside an add-column write records the evolved schema.

After each: ours == the model == hudi-rs, and nothing committed is lost.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Table
from engine.services.maintenance import Maintenance
from engine.table.meta_client import MetaClient
from tests.integration.test_concurrency import (
    OCC,
    SCHEMA,
    finish,
    job,
    make,
    paused_in_thread,
    resume,
    start_writer,
    wait_paused,
)
from tests.integration.test_crash import assert_clean_table
from tests.support import hudi_rs

pytestmark = pytest.mark.spark

PREPARED = "write.prepared"
TIP = SCHEMA + ", tip double"


def _rows(t: Table) -> list[tuple]:
    table = t.read().toArrow()
    cols = [c for c in ("id", "name", "city", "ts", "tip", "note") if c in table.column_names]
    return sorted(tuple(r[c] for c in cols) for r in table.select(cols).to_pylist())


def _oracle(t: Table, cols: list[str]) -> list[tuple]:
    return sorted(tuple(r.get(c) for c in cols) for r in hudi_rs.snapshot(t.path))


def _columns(t: Table) -> list[str]:
    return [f.name for f in t.schema() if not f.name.startswith("_hoodie_")]


def test_a_writer_that_did_not_evolve_the_schema_keeps_the_column_another_added(spark, tmp_path):
    """The reproduced defect: B holds its resolved schema (no `tip`) while A adds `tip` in another
    partition and commits; B's commit used to record its own schema, and `tip` vanished."""
    t = make(spark, tmp_path / "t")
    proc = start_writer(job(t, [[1, "b", "paris", 5]]), tmp_path, point=PREPARED)
    wait_paused(proc, tmp_path, PREPARED)
    a = t.upsert(spark.createDataFrame([(3, "a", "lima", 2, 7.5)], TIP), options=OCC)
    resume(tmp_path, PREPARED)
    code, ops, err = finish(proc)
    assert code == 0 and ops[0]["error"] is None, err[-3000:]
    b = ops[0]["instant"]
    assert b > a.instant and t.timeline().completed_writes.instants[-1].time == b
    assert _columns(t) == ["id", "name", "city", "ts", "tip"]
    expected = [(1, "b", "paris", 5, None), (2, "b", "rome", 1, None), (3, "a", "lima", 2, 7.5)]
    assert _rows(t) == _oracle(t, ["id", "name", "city", "ts", "tip"]) == expected
    # the next merge of A's file group keeps A's value; the table's schema stays evolved
    t.upsert(spark.createDataFrame([(3, "a2", "lima", 3, 8.5), (1, "c", "paris", 6, None)], TIP), options=OCC)
    expected = [(1, "c", "paris", 6, None), (2, "b", "rome", 1, None), (3, "a2", "lima", 3, 8.5)]
    assert _rows(t) == _oracle(t, ["id", "name", "city", "ts", "tip"]) == expected
    assert_clean_table(t)


def test_a_delete_beside_an_add_column_write_keeps_the_column(spark, tmp_path):
    t = make(spark, tmp_path / "t")
    proc = start_writer({**job(t, [[2, "b", "rome", 1]]), "action": "delete"}, tmp_path, point=PREPARED)
    wait_paused(proc, tmp_path, PREPARED)
    t.upsert(spark.createDataFrame([(3, "a", "lima", 2, 7.5)], TIP), options=OCC)
    resume(tmp_path, PREPARED)
    code, ops, err = finish(proc)
    assert code == 0 and ops[0]["error"] is None, err[-3000:]
    assert _columns(t) == ["id", "name", "city", "ts", "tip"]
    expected = [(1, "a", "paris", 1, None), (3, "a", "lima", 2, 7.5)]
    assert _rows(t) == _oracle(t, ["id", "name", "city", "ts", "tip"]) == expected


def test_two_writers_evolving_the_schema_differently_the_later_fails(spark, tmp_path):
    t = make(spark, tmp_path / "t")
    proc = start_writer({**job(t, [[4, "b", "oslo", 5, "hello"]]), "schema": SCHEMA + ", note string"},
                        tmp_path, point=PREPARED)
    wait_paused(proc, tmp_path, PREPARED)
    a = t.upsert(spark.createDataFrame([(3, "a", "lima", 2, 7.5)], TIP), options=OCC)
    before = _rows(t)
    resume(tmp_path, PREPARED)
    code, ops, err = finish(proc)
    assert code == 3, err[-3000:]
    error = ops[0]["error"]
    assert error.startswith("WriteConflictError: write ") and f"conflicts with {a.instant}" in error, error
    assert ("changed the table's schema in another way (this write has column(s) note that it lacks; "
            "it has column(s) tip that this write lacks)") in error
    assert ops[0]["conflict"]["other"] == a.instant
    assert _columns(t) == ["id", "name", "city", "ts", "tip"]
    assert _rows(t) == before == _oracle(t, ["id", "name", "city", "ts", "tip"])
    assert not (tmp_path / "t" / "oslo").exists() or [p.name for p in (tmp_path / "t" / "oslo").iterdir()] == [
        ".hoodie_partition_metadata"]  # no data file of the failed write (its new partition may stay)
    assert_clean_table(t)


def test_an_evolving_writer_overtaken_by_a_later_plain_write_is_refused(spark, tmp_path):
    """B claimed first and adds `tip`; A started after B, did not evolve, and completed first. The
    table's schema is the newest instant's (A's): B's column would not show, so B is refused (a
    retry is newer). Apache Hudi orders by completion time, which version 6 tables do not record."""
    t = make(spark, tmp_path / "t")
    proc = start_writer({**job(t, [[3, "b", "lima", 5, 7.5]]), "schema": TIP}, tmp_path)
    wait_paused(proc, tmp_path)  # write.before_commit_lock: B's instant claimed, its files written
    (b,) = [i.time for i in t.timeline().pending]
    a = t.upsert(spark.createDataFrame([(1, "a", "paris", 2)], SCHEMA), options=OCC)
    assert a.instant > b
    resume(tmp_path)
    code, ops, err = finish(proc)
    assert code == 3, err[-3000:]
    assert ops[0]["error"].startswith(f"WriteConflictError: write {b} conflicts with {a.instant}, a write that "
                                      "started after it and completed first with another schema "
                                      "(this write has column(s) tip that it lacks)"), ops[0]["error"]
    assert _columns(t) == ["id", "name", "city", "ts"]
    assert _rows(t) == [(1, "a", "paris", 2), (2, "b", "rome", 1)]
    retry = t.upsert(spark.createDataFrame([(3, "b", "lima", 5, 7.5)], TIP), options=OCC)
    assert retry.instant > a.instant
    assert _rows(t) == _oracle(t, ["id", "name", "city", "ts", "tip"]) == [
        (1, "a", "paris", 2, None), (2, "b", "rome", 1, None), (3, "b", "lima", 5, 7.5)]
    assert_clean_table(t)


def test_a_compaction_completing_beside_an_add_column_write_records_the_new_column(spark, tmp_path, monkeypatch):
    """W (a process) claims its instant and writes `tip` into a new partition; a compaction scheduled
    after it (a newer instant, W's group left out) completes after W: it records the schema read
    under its commit lock, so the table's schema keeps `tip`."""
    t = make(spark, tmp_path / "t", table_type="MERGE_ON_READ")
    t.upsert(spark.createDataFrame([(1, "a2", "paris", 2), (2, "b2", "rome", 2)], SCHEMA), options=OCC)
    (tmp_path / "w").mkdir()
    proc = start_writer({**job(t, [[3, "w", "lima", 5, 7.5]]), "schema": TIP}, tmp_path / "w")
    wait_paused(proc, tmp_path / "w")
    (w,) = [i.time for i in t.timeline().pending]
    maintenance = Maintenance(MetaClient.open(t.path), OCC)
    thread, caught = paused_in_thread(lambda: maintenance.run_compaction(spark=spark), tmp_path / "c", monkeypatch,
                                      point="compaction.before_complete")
    (compaction,) = [i.time for i in t.timeline().pending if i.time != w]
    assert compaction > w
    resume(tmp_path / "w")
    code, ops, err = finish(proc)
    assert code == 0 and ops[0]["error"] is None, err[-3000:]
    resume(tmp_path / "c", "compaction.before_complete")
    thread.join(120)
    assert not caught, caught
    timeline = t.timeline()
    assert timeline.completed_writes.instants[-1].time == compaction
    assert _columns(t) == ["id", "name", "city", "ts", "tip"]
    schema = t.commit_metadata(compaction).extra_metadata["schema"]
    assert '"name": "tip"' in schema or '"name":"tip"' in schema
    expected = [(1, "a2", "paris", 2, None), (2, "b2", "rome", 2, None), (3, "w", "lima", 5, 7.5)]
    assert _rows(t) == _oracle(t, ["id", "name", "city", "ts", "tip"]) == expected
    assert pa.types.is_floating(t.schema().field("tip").type)
    assert_clean_table(t)
