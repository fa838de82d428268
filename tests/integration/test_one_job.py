"""The writes planned on the driver against the distributed pipeline: the one-job write
(`engine.write.one_job`), the local write of a Spark DataFrame and of a pyarrow Table
(`engine.write.local`). The same writes through each give the same rows, counts and files (file
by file: rows, footer keys, bloom filters; names aside), hudi-rs agrees; the one-job path runs one
Spark job to collect the batch and one to write it, the local path only the collect (none for
Arrow input)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.data.file_names import parse_base_file_name
from engine.runtime.jobs import job_group
from tests.support import hudi_rs
from tests.support.tables import rows

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
DRIVER = {"hoodie.write.driver.plan": "always", "hoodie.write.local": "never"}
LOCAL = {"hoodie.write.local": "always"}
SPARK = {"hoodie.write.driver.plan": "never"}
ARROW_SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string()), ("city", pa.string()), ("ts", pa.int64())])

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


def _run(spark, table: Table, options: dict, arrow: bool = False) -> list:
    results = []
    for op, data in STEPS:
        if arrow:
            frame = pa.Table.from_pylist([dict(zip(ARROW_SCHEMA.names, r, strict=True)) for r in data], ARROW_SCHEMA)
        else:
            frame = spark.createDataFrame(data, SCHEMA)
        results.append(getattr(table, op)(frame, options=options))
    return results


FOOTER_KEYS = (b"hoodie_min_record_key", b"hoodie_max_record_key", b"org.apache.hudi.bloomfilter", b"hoodie_bloom_filter_type_code")


def _files(table: Table) -> list[tuple]:
    """Every base file the table holds, as (commit order, partition, footer keys, data rows), and
    its log files as (commit order, partition, "log", count): the files written, names aside."""
    order = {i.time: n for n, i in enumerate(table.timeline().completed.instants)}
    out = []
    root = Path(table.path)
    for f in sorted(root.rglob("*.parquet")):
        if ".hoodie" in f.parts:
            continue
        name = parse_base_file_name(f.name)
        footer = pq.read_metadata(f).metadata or {}
        meta = tuple((k, footer.get(k)) for k in FOOTER_KEYS)
        data = sorted(
            tuple(v for k, v in r.items() if k not in ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name"))
            for r in pq.read_table(f).to_pylist()
        )
        out.append((order.get(name.instant, -1), str(f.parent.relative_to(root)), meta, data))
    logs: dict[tuple, int] = {}
    for f in root.rglob(".*.log.*"):
        key = (str(f.parent.relative_to(root)), "log")
        logs[key] = logs.get(key, 0) + 1
    return sorted(out, key=repr) + sorted(logs.items())


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
def test_driver_planned_writes_equal_the_distributed_pipeline(spark, tmp_path: Path, kind: dict) -> None:
    args = dict(name="trips", record_key="id", partition_fields="city", precombine_field="ts", **kind)
    slow = Table.create(spark, str(tmp_path / "slow"), **args)
    want = _run(spark, slow, SPARK)
    assert {r.write_path for r in want} == {"distributed"}
    counts = ("inserts", "updates", "deletes", "absent_deletes", "stale_ignored", "duplicates_dropped", "input_records", "files_written", "partitions")
    slow_rows = _data(slow)
    for r in slow_rows:
        r.pop("_hoodie_commit_time")
    by_id = {r["id"]: r for r in slow_rows}
    assert by_id[1]["name"] == "dup-new" and by_id[2]["name"] == "n2" and by_id[4]["name"] == "upd"
    assert 5 not in by_id and 7 not in by_id and 999 not in by_id and by_id[15]["name"] == "again15"
    assert len(slow_rows) == 30 + 2 - 2 + 2
    slow_files = _files(slow)
    assert len(slow_files) > 5
    for name, options, arrow, path in (
        ("one-job", DRIVER, False, "one-job"),
        ("local", LOCAL, False, "local"),
        ("arrow", {}, True, "local"),
    ):
        fast = Table.create(None if arrow else spark, str(tmp_path / name), **args)
        got = _run(spark, fast, options, arrow=arrow)
        assert {r.write_path for r in got} == {path}, name
        assert [[getattr(r, c) for c in counts] for r in got] == [[getattr(r, c) for c in counts] for r in want], name
        assert got[1].duplicates_dropped == 1 and got[2].absent_deletes == 1
        assert _comparable(fast) == _comparable(slow), name
        assert _files(fast) == slow_files, name
        fast_rows = _data(Table.open(spark, fast.path))
        for r in fast_rows:
            r.pop("_hoodie_commit_time")
        assert fast_rows == slow_rows, name
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
    # the local path (the default for small work): the collect only; written by the driver's threads
    before = _jobs(spark)
    local_frame = spark.createDataFrame(
        pa.table({"id": pa.array([300, 301, 1], pa.int32()), "name": ["a", "b", "c"], "city": ["lima", "lima", "rome"], "ts": [60, 60, 60]})
    )  # local data: Spark knows its size (a frame of Python rows takes the distributed path)
    result = table.upsert(local_frame)
    assert result.write_path == "local" and (result.updates, result.inserts) == (1, 2)
    assert len(_jobs(spark) - before) == 1
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(job_group(result.instant)) == []


def test_driver_plan_option_is_checked(spark, tmp_path: Path) -> None:
    from engine.errors import InvalidConfigError

    table = Table.create(spark, str(tmp_path / "t"), name="t", record_key="id", partition_fields="city", precombine_field="ts")
    with pytest.raises(InvalidConfigError, match="hoodie.write.driver.plan must be one of auto, always, never"):
        table.upsert(spark.createDataFrame(STEPS[0][1], SCHEMA), options={"hoodie.write.driver.plan": "sometimes"})
    assert tuple(table.meta.timeline().instants) == ()


def test_small_compactions_run_on_the_driver(spark, tmp_path: Path) -> None:
    """With a session at hand, a compaction whose slices fit (clustering follows the same rule)
    hoodie.write.local.max.bytes still runs on the driver's threads: no Spark job; with
    hoodie.write.local=never its slices are Spark tasks. Same rows either way."""
    from engine.services.maintenance import Maintenance

    manual = {"hoodie.compact.inline": "false", "hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
    results = {}
    for mode in ("auto", "never"):
        t = Table.create(spark, str(tmp_path / mode), name="t", record_key="id", partition_fields="city",
                         precombine_field="ts", table_type="MERGE_ON_READ", index="RECORD")
        for ts in (1, 2, 3):
            rows = [(i, f"n{i}-{ts}", ("paris", "rome", "oslo")[i % 3], ts) for i in range(ts * 5)]
            t.upsert(pa.Table.from_pylist([dict(zip(ARROW_SCHEMA.names, r, strict=True)) for r in rows], ARROW_SCHEMA),
                     options=manual)
        before = _jobs(spark)
        result = Maintenance(t.meta, {**manual, "hoodie.write.local": mode}).compact(spark=spark)
        assert result is not None and len(result.files) == 3
        jobs = (_jobs(spark) - before) | set(spark.sparkContext.statusTracker().getJobIdsForGroup(job_group(result.instant)))
        assert (len(jobs) == 0) == (mode == "auto"), (mode, jobs)
        results[mode] = _data(t)
        for r in results[mode]:
            r.pop("_hoodie_commit_time")
    assert results["auto"] == results["never"]
    assert sorted((r["id"], r["name"]) for r in results["auto"]) == [(i, f"n{i}-3") for i in range(15)]
