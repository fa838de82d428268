"""A table whose timeline holds a clustering Apache Hudi scheduled but did not finish
(`T.replacecommit.requested` with a CLUSTER plan): repair leaves it alone, writes never update
its file groups (nor pack inserts into them), and `hoodie rollback` / restore remove it."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import PendingClusteringError, Table
from engine.services.maintenance import Maintenance
from engine.timeline.instant import Action, State
from engine.timeline.instant import next_instant_time as _next
from tests.support import hudi_rs
from tests.support.tables import rows, tree_bytes
from tests.unit.test_clustering_plan import requested

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
MANUAL = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def data(t: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(t.read()))


def oracle(t: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(t.path))


def schedule_clustering(t: Table, partition: str) -> tuple[str, str]:
    """Write what Apache Hudi's clustering scheduler leaves: a requested replacecommit whose plan
    takes the partition's file group as input. Returns (instant, file id)."""
    base = next(b for b in t.file_system_view().latest_base_files([partition]))
    from datetime import UTC, datetime

    instant = _next(datetime.now(UTC), t.timeline().last_time)
    Path(t.path, ".hoodie", f"{instant}.replacecommit.requested").write_bytes(requested("CLUSTER", [(partition, base.file_id)]))
    return instant, base.file_id


@pytest.fixture
def table(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts")
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "rome", 1)], SCHEMA), options=MANUAL)
    return t


def test_writes_leave_the_planned_groups_alone_and_repair_leaves_the_plan(spark, table):
    t = table
    instant, frozen = schedule_clustering(t, "paris")
    frozen_files = {k: v for k, v in tree_bytes(t.path).items() if k.startswith("paris/") and frozen in k}
    report = Maintenance(t.meta, MANUAL).repair()
    assert report.failed_writes_rolled_back == [] and list(report.left_pending) == [instant]
    assert report.left_pending[instant].startswith("pending replacecommit (a table service scheduled by Apache Hudi)")

    # an update of a record in the planned group: refused before anything is written
    before = tree_bytes(t.path)
    with pytest.raises(PendingClusteringError) as err:
        t.upsert(spark.createDataFrame([(1, "a2", "paris", 2)], SCHEMA), options=MANUAL)
    assert err.value.instant == instant and err.value.groups == (("paris", frozen),)
    assert f"hoodie rollback PATH {instant}" in str(err.value)
    assert tree_bytes(t.path) == before
    with pytest.raises(PendingClusteringError):  # deletes too
        t.delete(spark.createDataFrame([(1, "paris")], "id int, city string"), options=MANUAL)
    assert tree_bytes(t.path) == before

    # inserts into the partition go to a new file group, not into the planned (small) one
    r = t.upsert(spark.createDataFrame([(3, "c", "paris", 3), (2, "b3", "rome", 3)], SCHEMA), options=MANUAL)
    assert (r.inserts, r.updates) == (1, 1)
    paris = [b for b in t.file_system_view().latest_base_files(["paris"])]
    assert sorted(b.file_id == frozen for b in paris) == [False, True]
    assert {k: v for k, v in tree_bytes(t.path).items() if k.startswith("paris/") and frozen in k} == frozen_files
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (2, "b3", "rome", 3), (3, "c", "paris", 3)]
    # the plan is still pending, untouched
    assert t.timeline().get(instant).state is State.REQUESTED

    # `hoodie rollback` removes the plan; then the group can be updated again
    res = t.maintenance.rollback(instant)
    assert res.target == instant and t.timeline().get(instant) is None
    t.upsert(spark.createDataFrame([(1, "a4", "paris", 4)], SCHEMA), options=MANUAL)
    assert data(t) == oracle(t) == [(1, "a4", "paris", 4), (2, "b3", "rome", 3), (3, "c", "paris", 3)]


def test_restore_removes_a_pending_clustering_after_its_target(spark, table):
    t = table
    target = t.timeline().completed_writes.instants[-1].time
    t.upsert(spark.createDataFrame([(2, "b2", "rome", 2)], SCHEMA), options=MANUAL)
    instant, _ = schedule_clustering(t, "paris")
    res = t.maintenance.restore(target)
    assert res.rolled_back[0] == instant and len(res.rolled_back) == 2
    assert t.timeline().get(instant) is None
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (2, "b", "rome", 1)]


def test_a_failed_insert_overwrite_is_rolled_back_like_a_failed_write(spark, table):
    t = table
    from datetime import UTC, datetime

    instant = _next(datetime.now(UTC), t.timeline().last_time)
    hoodie = Path(t.path, ".hoodie")
    (hoodie / f"{instant}.replacecommit.requested").write_bytes(b"")  # insert_overwrite's empty plan
    (hoodie / f"{instant}.replacecommit.inflight").write_bytes(b"")
    debris = Path(t.path, "paris", f"deadbeef-0000-0000-0000-000000000000-0_0-1-2_{instant}.parquet")
    debris.write_bytes(b"PAR1 partial")
    r = t.upsert(spark.createDataFrame([(4, "d", "oslo", 4)], SCHEMA), options=MANUAL)
    assert r.repaired is not None and r.repaired.failed_writes_rolled_back == [instant]
    assert not debris.exists() and t.timeline().get(instant) is None
    assert all(i.action is not Action.REPLACE_COMMIT for i in t.timeline().instants)
    assert data(t) == oracle(t) == [(1, "a", "paris", 1), (2, "b", "rome", 1), (4, "d", "oslo", 4)]
