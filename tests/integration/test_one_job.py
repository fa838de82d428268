"""The one-job write (`engine.write.one_job`) against the distributed pipeline: the same writes
through both give the same rows, counts and files, hudi-rs agrees, and the one-job path runs one
Spark job to collect the batch and one to write it."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import Table
from engine.runtime.jobs import job_group
from tests.support import hudi_rs
from tests.support.tables import rows

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
DRIVER = {"hoodie.write.driver.plan": "always"}
SPARK = {"hoodie.write.driver.plan": "never"}

# (operation, rows): inserts, an upsert with in-batch duplicates (the later / larger ts wins) and
# a stale update (older ts than stored: the stored record stays), a delete of present and absent keys
STEPS = [
    ("upsert", [(i, f"n{i}", ("paris", "rome", "oslo")[i % 3], 10) for i in range(30)]),
    ("upsert", [(1, "dup-old", "rome", 11), (1, "dup-new", "rome", 12), (2, "stale", "oslo", 5),
                (4, "upd", "rome", 20), (100, "new", "paris", 20), (101, "new", "lima", 20)]),
    ("delete", [(5, None, "oslo", 30), (7, None, "rome", 30), (999, None, "paris", 30)]),
    ("insert", [(200, "ins", "paris", 40), (201, "ins", "lima", 40)]),
    ("upsert", [(i, f"again{i}", ("paris", "rome", "oslo")[i % 3], 50) for i in range(10, 20)]),
]


def _jobs(spark) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def _run(spark, table: Table, options: dict) -> list:
    results = []
    for op, data in STEPS:
        frame = spark.createDataFrame(data, SCHEMA)
        results.append(getattr(table, op)(frame, options=options))
    return results


def _data(table: Table) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("_hoodie_commit_seqno", "_hoodie_file_name")} for r in rows(table.read())]


def _comparable(table: Table) -> list[tuple]:
    """Per commit: action, operation and the per-partition write counts (file ids differ)."""
    out = []
    for instant, meta in table.meta.completed_commits_newest_first(table.meta.timeline()):
        stats = sorted(
            (s.partitionPath, s.numWrites, s.numInserts, s.numUpdateWrites, s.numDeletes)
            for s in meta.write_stats
        )
        out.append((instant.action.value, meta.operation_type, stats))
    return out[::-1]


@pytest.mark.parametrize(
    "kind",
    [
        {"index": "BLOOM"},
        {"index": "SIMPLE"},
        {"index": "RECORD", "table_type": "MERGE_ON_READ"},
        {"index": "BLOOM", "table_type": "MERGE_ON_READ"},
    ],
    ids=["cow-bloom", "cow-simple", "mor-record", "mor-bloom"],
)
def test_one_job_equals_the_distributed_pipeline(spark, tmp_path: Path, kind: dict) -> None:
    args = dict(name="trips", record_key="id", partition_fields="city", precombine_field="ts", **kind)
    fast = Table.create(spark, str(tmp_path / "fast"), **args)
    slow = Table.create(spark, str(tmp_path / "slow"), **args)
    got = _run(spark, fast, DRIVER)
    want = _run(spark, slow, SPARK)
    counts = ("inserts", "updates", "deletes", "absent_deletes", "stale_ignored", "duplicates_dropped", "input_records", "files_written", "partitions")
    assert [[getattr(r, c) for c in counts] for r in got] == [[getattr(r, c) for c in counts] for r in want]
    assert got[1].duplicates_dropped == 1 and got[2].absent_deletes == 1
    assert _comparable(fast) == _comparable(slow)
    fast_rows, slow_rows = _data(fast), _data(slow)
    for r in fast_rows + slow_rows:
        r.pop("_hoodie_commit_time")
    assert fast_rows == slow_rows
    by_id = {r["id"]: r for r in fast_rows}
    assert by_id[1]["name"] == "dup-new" and by_id[2]["name"] == "n2" and by_id[4]["name"] == "upd"
    assert 5 not in by_id and 7 not in by_id and 999 not in by_id and by_id[15]["name"] == "again15"
    assert len(fast_rows) == 30 + 2 - 2 + 2
    oracle = hudi_rs.snapshot(fast.path)
    assert sorted((r["city"], r["id"], r["name"], r["ts"]) for r in oracle) == sorted(
        (r["city"], r["id"], r["name"], r["ts"]) for r in fast_rows
    )


def test_one_job_runs_two_spark_jobs(spark, tmp_path: Path) -> None:
    table = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city", precombine_field="ts")
    table.upsert(spark.createDataFrame(STEPS[0][1], SCHEMA))
    frame = spark.createDataFrame(STEPS[1][1], SCHEMA)
    before = _jobs(spark)
    result = table.upsert(frame, options=DRIVER)
    ungrouped = _jobs(spark) - before
    written = spark.sparkContext.statusTracker().getJobIdsForGroup(job_group(result.instant))
    assert (len(ungrouped), len(written)) == (1, 1)  # collect the batch; write the file groups
    before = _jobs(spark)
    result = table.upsert(spark.createDataFrame(STEPS[4][1], SCHEMA), options=SPARK)
    assert len(_jobs(spark) - before) >= 3  # the distributed pipeline: prepare, tag, profile...


def test_driver_plan_option_is_checked(spark, tmp_path: Path) -> None:
    from engine.errors import InvalidConfigError

    table = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city", precombine_field="ts")
    with pytest.raises(InvalidConfigError, match="hoodie.write.driver.plan must be one of auto, always, never"):
        table.upsert(spark.createDataFrame(STEPS[0][1], SCHEMA), options={"hoodie.write.driver.plan": "sometimes"})
    assert tuple(table.meta.timeline().instants) == ()
