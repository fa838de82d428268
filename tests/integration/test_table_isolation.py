"""One table never touches another's files (issue 23), with real Spark writes on local disk.

The reproduction: a table `inner` ends up inside the folder of a table `outer` (moved there, or
made by a tool that did not check); five upserts of `outer` with tight archival settings used to
take inner's data file for debris of a failed write and delete it. Creating a table inside or
around another is refused, by the API and the CLI. A write that fails records itself, so that
archival deletes a straggler of it and nothing else.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine import Table
from engine.errors import NestedTableError
from engine.services import archive as archive_service
from engine.table import failed_writes
from tests.support import hudi_rs
from tests.support.tables import tree_bytes

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
TIGHT = {"hoodie.keep.max.commits": "3", "hoodie.keep.min.commits": "2", "hoodie.cleaner.commits.retained": "1"}


def make(spark, path: Path, name: str) -> Table:
    return Table.create(spark, str(path), name=name, record_key="id", partition_fields="city", precombine_field="ts")


def data(table: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in table.read().collect())


def oracle(path: Path) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(str(path)))


def test_archival_and_clean_of_the_outer_table_leave_a_nested_table_whole(spark, tmp_path):
    outer = make(spark, tmp_path / "outer", "outer")
    outer.upsert(spark.createDataFrame([(1, "o1", "paris", 1)], SCHEMA), options=TIGHT)
    inner = make(spark, tmp_path / "inner", "inner")
    inner.upsert(spark.createDataFrame([(10, "i1", "rome", 1), (11, "i2", "oslo", 1)], SCHEMA))
    # the folder is moved into outer's (Table.create refuses to make it there: see below)
    nested = tmp_path / "outer" / "nested"
    shutil.move(str(tmp_path / "inner"), str(nested))
    inner_files = tree_bytes(nested)
    expected_inner = [(10, "i1", "rome", 1), (11, "i2", "oslo", 1)]
    assert oracle(nested) == expected_inner

    results = [outer.upsert(spark.createDataFrame([(i, f"o{i}", "paris", i)], SCHEMA), options=TIGHT)
               for i in range(2, 7)]
    assert results[-1].services.get("archived"), "archival must have run for the test to mean anything"
    assert results[-1].services.get("clean") or any(r.services.get("clean") for r in results)
    # inner: every file as it was, and it reads the same rows (ours and hudi-rs)
    assert tree_bytes(nested) == inner_files
    reopened = Table.open(spark, str(nested))
    assert data(reopened) == oracle(nested) == expected_inner
    # outer: its own rows only (the nested table's records are not part of it). hudi-rs does
    # descend into the nested folder and counts inner's files as outer's (their instants predate
    # outer's active timeline): a layout no reader agrees on, which is why creating it is refused
    own = [(i, f"o{i}", "paris", i) for i in range(1, 7)]
    assert data(outer) == own
    assert oracle(tmp_path / "outer") == sorted(own + expected_inner)


def test_a_table_cannot_be_created_inside_or_around_another(spark, tmp_path):
    make(spark, tmp_path / "w" / "outer", "outer")
    before = tree_bytes(tmp_path)
    with pytest.raises(NestedTableError) as inside:
        make(spark, tmp_path / "w" / "outer" / "nested", "inner")
    assert inside.value.other == str(tmp_path / "w" / "outer")
    assert f"lies inside the table at {tmp_path / 'w' / 'outer'}" in str(inside.value)
    with pytest.raises(NestedTableError) as deeper:
        make(spark, tmp_path / "w" / "outer" / "paris" / "x", "deeper")
    assert deeper.value.other == str(tmp_path / "w" / "outer")
    with pytest.raises(NestedTableError) as around:
        make(spark, tmp_path / "w", "around")
    assert around.value.other == str(tmp_path / "w" / "outer")
    assert f"the table at {tmp_path / 'w' / 'outer'} lies inside it" in str(around.value)
    assert tree_bytes(tmp_path) == before
    assert not (tmp_path / "w" / ".hoodie").exists() and not (tmp_path / "w" / "outer" / "nested").exists()
    make(spark, tmp_path / "w" / "beside", "beside")  # next to it is fine


def test_a_failed_write_records_itself_and_archival_deletes_only_its_straggler(spark, tmp_path, monkeypatch):
    from engine import failpoints

    t = make(spark, tmp_path / "t", "t")
    manual = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
    r1 = t.upsert(spark.createDataFrame([(1, "a", "paris", 1)], SCHEMA), options=manual)

    def fail(point):
        if point == "write.before_complete":
            raise RuntimeError("injected failure before completion")

    with monkeypatch.context() as m:
        m.setattr(failpoints, "hit", fail)
        with pytest.raises(Exception, match="injected failure"):
            t.upsert(spark.createDataFrame([(2, "b", "paris", 2), (3, "c", "rome", 2)], SCHEMA), options=manual)
    records = failed_writes.load(t.meta.storage)
    assert len(records) == 1
    (aborted, rec), = records.items()
    assert r1.instant < aborted and rec.action == "commit" and len(rec.groups) == 2
    body = json.loads((tmp_path / "t" / ".hoodie" / ".failed_writes" / aborted).read_bytes())
    assert body["instant"] == aborted and sorted(p for p, _f in body["groups"]) == ["paris", "rome"]
    assert [i.time for i in t.timeline()] == [r1.instant]  # the write itself is gone
    # a straggler task of that write leaves a base file in one of its planned groups, and an
    # unexplained file (an instant this table never had) lies in the same range
    partition, fid = sorted(rec.groups)[0]
    src = next((tmp_path / "t" / "paris").glob("*.parquet"))
    straggler = tmp_path / "t" / partition / f"{fid}_0-9-9_{aborted}.parquet"
    shutil.copy(src, straggler)
    for i in range(4, 9):
        t.upsert(spark.createDataFrame([(i, f"v{i}", "oslo", i)], SCHEMA), options=manual)
    plan = archive_service.plan_archive(t.meta, t.timeline(), 2, 3)
    assert plan.debris == (f"{partition}/{straggler.name}",) and plan.held_back == ()
    assert r1.instant in plan.times
    archived = t.maintenance.__class__(t.meta, {**manual, **TIGHT}).archive()
    assert r1.instant in archived and not straggler.exists()
    assert t.timeline().archived_before > aborted
    assert failed_writes.load(t.meta.storage) == {}  # passed by archival: forgotten
    expected = sorted([(1, "a", "paris", 1)] + [(i, f"v{i}", "oslo", i) for i in range(4, 9)])
    assert data(t) == oracle(tmp_path / "t") == expected


def test_an_unexplained_file_is_kept_and_holds_archival_back(spark, tmp_path):
    t = make(spark, tmp_path / "t", "t")
    manual = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
    results = [t.upsert(spark.createDataFrame([(i, f"v{i}", "paris", i)], SCHEMA), options=manual) for i in range(6)]
    # a base file named with an instant this table never had, between its 2nd and 3rd commits
    stranger = str(int(results[1].instant) + 1)
    src = next((tmp_path / "t" / "paris").glob("*.parquet"))
    alien = tmp_path / "t" / "paris" / f"feedface-0000-0000-0000-000000000000-0_0-1-2_{stranger}.parquet"
    shutil.copy(src, alien)
    plan = archive_service.plan_archive(t.meta, t.timeline(), 2, 3)
    assert plan.held_back == (f"paris/{alien.name}",)
    # the last write before the stranger stays active, so the stranger stays hidden
    assert plan.times == [results[0].instant]
    archived = t.maintenance.__class__(t.meta, {**manual, **TIGHT}).archive()
    assert archived == [results[0].instant]
    assert alien.exists()
    assert t.timeline().archived_before == results[1].instant < stranger
    assert data(t) == oracle(tmp_path / "t") == [(i, f"v{i}", "paris", i) for i in range(6)]


def test_an_upsert_removes_a_stale_metadata_table_and_hudi_rs_reads_every_row(spark, tmp_path):
    """A table that carries Apache Hudi's metadata table (as 0.11+ writers leave it): the upsert
    removes it under the lock before writing, says so in its result, and the table reads the same
    in hudi-rs (which lists storage once the properties name no metadata table)."""
    from tests.integration.test_metadata_table import add_metadata_table, properties

    path = tmp_path / "trips"
    t = make(spark, path, "trips")
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "rome", 1)], SCHEMA))
    add_metadata_table(path, partitions="files")
    props = {k: v for k, v in properties(path).items() if k != "hoodie.table.metadata.partitions"}

    result = Table.open(spark, str(path)).upsert(spark.createDataFrame([(2, "b2", "rome", 2), (3, "c", "oslo", 2)],
                                                                       SCHEMA))
    assert result.repaired is not None
    assert result.repaired.metadata_table_removed.startswith(
        "removed Apache Hudi's metadata table (partitions: files) from ")
    assert not (path / ".hoodie" / "metadata").exists()
    assert properties(path) == props
    expected = [(1, "a", "paris", 1), (2, "b2", "rome", 2), (3, "c", "oslo", 2)]
    assert data(Table.open(spark, str(path))) == oracle(path) == expected


def test_metadata_enable_true_refuses_the_write_and_leaves_the_table_as_it_was(spark, tmp_path):
    from engine.errors import InvalidConfigError
    from tests.integration.test_metadata_table import add_metadata_table

    path = tmp_path / "trips"
    t = make(spark, path, "trips")
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1)], SCHEMA))
    add_metadata_table(path)
    before = tree_bytes(path)
    with pytest.raises(InvalidConfigError, match="hoodie.metadata.enable=true"):
        t.upsert(spark.createDataFrame([(2, "b", "rome", 1)], SCHEMA), options={"hoodie.metadata.enable": "true"})
    assert tree_bytes(path) == before
