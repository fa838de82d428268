"""Merge-on-read writes and reads on local Spark: deltacommits, log files, read-optimized, time
travel, incremental, compaction (inline, explicit, pending while writing) and rollbacks; exact rows
and files, and hudi-rs agrees on every table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import Table
from engine.data.file_names import parse_base_file_name, parse_log_file_name
from engine.data.log_block import BlockType
from engine.data.log_file import read_log_blocks
from engine.services.maintenance import Maintenance
from engine.timeline import Action, State
from tests.support import hudi_rs
from tests.support.tables import rows

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
MANUAL = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def make(spark, tmp_path: Path, **kw) -> Table:
    args = dict(name="trips", record_key="id", partition_fields="city", precombine_field="ts",
                table_type="MERGE_ON_READ")
    args.update(kw)
    return Table.create(spark, str(tmp_path / "t"), **args)


def df(spark, data, schema=SCHEMA):
    return spark.createDataFrame(data, schema)


def ours(t: Table, **kw) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(t.read(**kw)))


def oracle(t: Table, as_of: str | None = None, read_optimized: bool = False) -> list[tuple]:
    from hudi import HudiReadOptions, HudiTableBuilder

    opts = HudiReadOptions(hudi_options={"hoodie.read.use.read_optimized.mode": "true"}) if read_optimized else HudiReadOptions()
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    table = HudiTableBuilder.from_base_uri(str(Path(t.path).resolve())).build()
    import pyarrow as pa

    batches = table.read(opts)
    data = pa.Table.from_batches(batches).to_pylist() if batches else []
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in data)


def log_files(t: Table) -> list[str]:
    base = Path(t.path)
    return sorted(p.relative_to(base).as_posix() for p in base.rglob(".*.log.*"))


def base_files(t: Table) -> list[str]:
    base = Path(t.path)
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("*.parquet"))


def commit_json(t: Table, instant: str, action: str = "deltacommit") -> dict:
    return json.loads((Path(t.path) / ".hoodie" / f"{instant}.{action}").read_text())


def test_updates_and_deletes_go_to_log_files_and_read_merged(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = t.upsert(df(spark, [(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "paris", 1)]), options=MANUAL)
    assert (r1.inserts, r1.files_written) == (3, 2)
    assert (Path(t.path) / ".hoodie" / f"{r1.instant}.deltacommit").is_file()
    assert log_files(t) == []
    first_bases = base_files(t)
    r2 = t.upsert(df(spark, [(1, "a2", "paris", 2), (2, "b-late", "rome", 0), (4, "d", "oslo", 2)]), options=MANUAL)
    # 1 updated in paris's log, 2 is late (stale: nothing written for it), 4 is a new base file in oslo
    assert (r2.updates, r2.inserts, r2.stale_ignored) == (1, 1, 1)
    logs = log_files(t)
    assert len(logs) == 1 and logs[0].startswith("paris/.")
    name = parse_log_file_name(logs[0].rpartition("/")[2])
    assert name is not None and (name.base_instant, name.version) == (r1.instant, 1)
    assert set(first_bases) < set(base_files(t))  # the paris base file was not rewritten
    blocks = read_log_blocks(t.meta.storage, logs[0])
    assert [b.block_type for b in blocks] == [BlockType.PARQUET_DATA]
    assert blocks[0].header[0] == r2.instant
    r3 = t.delete(df(spark, [(3, "x", "paris", 0)]), options=MANUAL)
    assert r3.deletes == 1
    assert [b.block_type for b in read_log_blocks(t.meta.storage, sorted(log_files(t))[-1])] == [BlockType.DELETE]
    expected = [(1, "a2", "paris", 2), (2, "b", "rome", 1), (4, "d", "oslo", 2)]
    assert ours(t) == expected == oracle(t)
    # read-optimized: base files only
    assert ours(t, read_optimized=True) == [(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "paris", 1),
                                            (4, "d", "oslo", 2)] == oracle(t, read_optimized=True)
    # time travel and incremental over log records
    for inst in (r1.instant, r2.instant, r3.instant):
        assert ours(t, as_of=inst) == oracle(t, as_of=inst)
    inc = sorted((r["id"], r["name"]) for r in rows(t.read_incremental(r1.instant)))
    assert inc == [(1, "a2"), (4, "d")]
    assert inc == sorted((r["id"], r["name"]) for r in hudi_rs.incremental(t.path, r1.instant))


def test_deltacommit_write_stats_describe_the_log_files(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = t.upsert(df(spark, [(1, "a", "paris", 1), (2, "b", "paris", 1)]), options=MANUAL)
    r2 = t.upsert(df(spark, [(1, "a2", "paris", 2)]), options=MANUAL)
    r3 = t.upsert(df(spark, [(2, "b3", "paris", 3)]), options=MANUAL)
    meta2, meta3 = commit_json(t, r2.instant), commit_json(t, r3.instant)
    (s2,) = meta2["partitionToWriteStats"]["paris"]
    (s3,) = meta3["partitionToWriteStats"]["paris"]
    base = [f for f in base_files(t) if f.startswith("paris/")]
    assert len(base) == 1
    l1, l2 = log_files(t)
    assert (s2["path"], s2["prevCommit"], s2["logVersion"], s2["logOffset"], s2["baseFile"]) == (
        l1, r1.instant, 1, 0, base[0].rpartition("/")[2])
    assert s2["logFiles"] == [l1.rpartition("/")[2]]
    assert (s3["path"], s3["logVersion"]) == (l2, 2)
    assert s3["logFiles"] == [l1.rpartition("/")[2], l2.rpartition("/")[2]]
    assert (s2["numUpdateWrites"], s2["numWrites"], s2["fileSizeInBytes"]) == (1, 1, (Path(t.path) / l1).stat().st_size)
    assert meta2["operationType"] == "UPSERT" and meta2["compacted"] is False


def test_avro_log_blocks_on_request(spark, tmp_path):
    t = make(spark, tmp_path)
    t.upsert(df(spark, [(1, "a", "paris", 1)]), options=MANUAL)
    t.upsert(df(spark, [(1, "b", "paris", 2)]), options={**MANUAL, "hoodie.logfile.data.block.format": "avro"})
    (log,) = log_files(t)
    assert [b.block_type for b in read_log_blocks(t.meta.storage, log)] == [BlockType.AVRO_DATA]
    assert ours(t) == [(1, "b", "paris", 2)] == oracle(t)


def test_compaction_merges_slices_into_base_files(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = t.upsert(df(spark, [(1, "a", "paris", 1), (2, "b", "rome", 1)]), options=MANUAL)
    t.upsert(df(spark, [(1, "a2", "paris", 2)]), options=MANUAL)
    t.delete(df(spark, [(2, "x", "rome", 0)]), options=MANUAL)
    before = ours(t)
    m = Maintenance(t.meta, MANUAL)
    plan = m.schedule_compaction()
    assert plan is not None and {(op.partition, len(op.log_files)) for op in plan.operations} == {("paris", 1), ("rome", 1)}
    requested = Path(t.path) / ".hoodie" / f"{plan.instant}.compaction.requested"
    assert requested.is_file()
    res = m.run_compaction()
    assert res is not None and res.instant == plan.instant
    done = commit_json(t, plan.instant, "commit")
    assert (done["operationType"], done["compacted"]) == ("COMPACT", True)
    assert {parse_base_file_name(Path(f).name).instant for f in res.files} == {plan.instant}
    assert ours(t) == before == oracle(t) == [(1, "a2", "paris", 2)]
    # the compacted base files are what read-optimized readers see now; commit times are kept
    assert ours(t, read_optimized=True) == before == oracle(t, read_optimized=True)
    by_id = {r["id"]: r for r in rows(t.read())}
    assert by_id[1]["_hoodie_commit_time"] != r1.instant  # the update's commit time, not the compaction's
    assert t.timeline().get(plan.instant).action is Action.COMMIT
    # nothing left to compact
    assert Maintenance(t.meta, MANUAL).schedule_compaction() is None


def test_inline_compaction_after_max_delta_commits(spark, tmp_path):
    t = make(spark, tmp_path)
    opts = {**MANUAL, "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "3"}
    t.upsert(df(spark, [(1, "a", "paris", 1)]), options=opts)
    t.upsert(df(spark, [(1, "b", "paris", 2)]), options=opts)
    r = t.upsert(df(spark, [(1, "c", "paris", 3)]), options=opts)
    assert "compaction" in r.services
    commits = [i for i in t.timeline().completed.instants if i.action is Action.COMMIT]
    assert len(commits) == 1
    assert ours(t) == [(1, "c", "paris", 3)] == oracle(t)
    r = t.upsert(df(spark, [(1, "d", "paris", 4)]), options=opts)
    assert "compaction" not in r.services  # one deltacommit since


def test_writes_while_a_compaction_is_pending_start_a_new_slice(spark, tmp_path):
    t = make(spark, tmp_path)
    t.upsert(df(spark, [(1, "a", "paris", 1), (2, "b", "paris", 1)]), options=MANUAL)
    t.upsert(df(spark, [(1, "a2", "paris", 2)]), options=MANUAL)
    plan = Maintenance(t.meta, MANUAL).schedule_compaction()
    assert plan is not None
    r = t.upsert(df(spark, [(2, "b3", "paris", 3), (1, "a-late", "paris", 0)]), options=MANUAL)
    assert r.stale_ignored == 1  # ordered against the merged slice, logs included
    new_logs = [f for f in log_files(t) if parse_log_file_name(Path(f).name).base_instant == plan.instant]
    assert len(new_logs) == 1 and parse_log_file_name(Path(new_logs[0]).name).version == 1
    # our reader merges the pending slice with the one before it (hudi-rs would not show b3 yet)
    assert ours(t) == [(1, "a2", "paris", 2), (2, "b3", "paris", 3)]
    Maintenance(t.meta, MANUAL).run_compaction(plan.instant)
    assert ours(t) == [(1, "a2", "paris", 2), (2, "b3", "paris", 3)] == oracle(t)


def test_rollback_of_a_deltacommit_deletes_its_log_file(spark, tmp_path):
    t = make(spark, tmp_path)
    t.upsert(df(spark, [(1, "a", "paris", 1)]), options=MANUAL)
    before_files = base_files(t) + log_files(t)
    # an update appended to paris's slice, an insert in a new base file in oslo
    r2 = t.upsert(df(spark, [(1, "b", "paris", 2), (5, "e", "oslo", 2)]), options=MANUAL)
    assert len(log_files(t)) == 1 and len(base_files(t)) == 2
    plan = t.maintenance.rollback(r2.instant, dry_run=True)
    assert set(plan.files) == (set(base_files(t)) | set(log_files(t))) - set(before_files)
    t.maintenance.rollback(r2.instant)
    assert log_files(t) == [] and base_files(t) + log_files(t) == before_files
    assert not (Path(t.path) / "oslo").exists()  # the partition only the rolled-back write created
    assert ours(t) == [(1, "a", "paris", 1)] == oracle(t)
    r3 = t.upsert(df(spark, [(1, "c", "paris", 3)]), options=MANUAL)
    assert parse_log_file_name(Path(log_files(t)[0]).name).version == 1
    assert r3.updates == 1 and ours(t) == [(1, "c", "paris", 3)] == oracle(t)


def test_pending_compaction_with_appends_cannot_be_rolled_back(spark, tmp_path):
    from engine.errors import RollbackRefusedError

    t = make(spark, tmp_path)
    t.upsert(df(spark, [(1, "a", "paris", 1)]), options=MANUAL)
    t.upsert(df(spark, [(1, "b", "paris", 2)]), options=MANUAL)
    plan = Maintenance(t.meta, MANUAL).schedule_compaction()
    t.upsert(df(spark, [(1, "c", "paris", 3)]), options=MANUAL)
    with pytest.raises(RollbackRefusedError, match="run it"):
        t.maintenance.rollback(plan.instant)
    assert t.timeline().get(plan.instant).state is State.REQUESTED


def test_bad_log_block_format_is_refused_before_anything_is_written(spark, tmp_path):
    from engine.errors import InvalidConfigError
    from tests.support.tables import tree_bytes

    t = make(spark, tmp_path)
    t.upsert(df(spark, [(1, "a", "paris", 1)]), options=MANUAL)
    snapshot = tree_bytes(t.path)
    with pytest.raises(InvalidConfigError, match="parquet or avro"):
        t.upsert(df(spark, [(1, "b", "paris", 2)]), options={"hoodie.logfile.data.block.format": "hfile"})
    assert tree_bytes(t.path) == snapshot
