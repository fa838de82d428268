"""Every service plan and result has one JSON form (`to_dict()`), shared by the CLI and the console."""

from __future__ import annotations

import json

from engine.serial import to_doc
from engine.services.archive import ArchivePlan
from engine.services.clean import CleanPlan, CleanResult
from engine.services.repair import RepairReport
from engine.services.restore import RestorePlan, RestoreResult
from engine.services.rollback import IndexRevert, RollbackPlan, RollbackResult
from engine.services.savepoint import Savepoint
from engine.timeline.instant import Action, Instant, State
from engine.write.operation import Operation, WriteResult

T1 = "20260101120000000"
T2 = "20260101120000500"


def test_rollback_plan_with_index_revert() -> None:
    plan = RollbackPlan(
        Instant(T1, Action.COMMIT, State.COMPLETED),
        ("p/a.parquet",),
        None,
        IndexRevert("HBASE", 2, 1, ("k1",), ("k2", "k3")),
        ("nested/p/b.parquet",),
    )
    assert plan.to_dict() == {
        "target": {"time": T1, "action": "commit", "state": "completed"},
        "files": ["p/a.parquet"],
        "instant": None,
        "index_revert": {
            "index": "HBASE",
            "entries_put": 2,
            "entries_deleted": 1,
            "deleted_keys": ["k1"],
            "put_keys": ["k2", "k3"],
        },
        "skipped": ["nested/p/b.parquet"],
    }


def test_results_and_plans_are_json() -> None:
    docs = [
        RollbackResult(T2, T1, ["p/a.parquet"], 0.5),
        RestorePlan(T1, (Instant(T2, Action.COMMIT, State.COMPLETED),)),
        RestoreResult(T2, T1, [T2], {T2: ["p/b.parquet"]}),
        CleanPlan("KEEP_LATEST_COMMITS", 10, T1, T2, {"p": ("p/a.parquet",)}),
        CleanResult(T2, ["p/a.parquet"], T1),
        ArchivePlan((Instant(T1, Action.CLEAN, State.COMPLETED),), ("p/c.parquet",), ("p/d.parquet",)),
        RepairReport(failed_writes_rolled_back=[T2], left_pending={T1: "pending compaction"}),
        Savepoint(T1, ("p/a.parquet",), "ann", "before the backfill", 1767268800000),
    ]
    for d in docs:
        assert json.loads(json.dumps(d.to_dict())) == d.to_dict()
    assert docs[1].to_dict() == {
        "target": T1,
        "instants": [{"time": T2, "action": "commit", "state": "completed"}],
        "instant": None,
    }
    assert docs[3].to_dict()["files"] == {"p": ["p/a.parquet"]}
    assert docs[6].to_dict()["left_pending"] == {T1: "pending compaction"}
    assert docs[5].to_dict() == {
        "instants": [{"time": T1, "action": "clean", "state": "completed"}],
        "debris": ["p/c.parquet"],
        "held_back": ["p/d.parquet"],
    }


def test_write_result() -> None:
    r = WriteResult(T1, Operation.UPSERT, inserts=3, partitions=("a", "b"), repaired=RepairReport(rollbacks_finished=[T2]))
    d = r.to_dict()
    assert d["operation"] == "UPSERT"
    assert d["partitions"] == ["a", "b"]
    assert d["repaired"]["rollbacks_finished"] == [T2]
    assert json.loads(json.dumps(d)) == d


def test_sets_become_sorted_lists() -> None:
    assert to_doc({"x": frozenset({"b", "a"})}) == {"x": ["a", "b"]}
