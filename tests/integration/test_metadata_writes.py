"""Apache Hudi's metadata table kept by this engine's writes and services (issue 35.2, the files
partition), on a merge-on-read table of version 8 that Apache Hudi 1.0 wrote (hudi-rs's
`v8_trips_8i3u1d`, which has a metadata table with five partitions). After every step hudi-rs,
which lists the table's files through the metadata table, reads exactly what this engine reads
and what the model says, and the files partition lists exactly the committed files storage holds.
A writer SIGKILLed between the metadata deltacommit and the data commit, or before either, leaves
a table both readers read as before, which the next write repairs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import javaproperties
import pytest

from engine import Table
from engine.data.file_names import parse_base_file_name, parse_log_file_name
from engine.errors import InvalidConfigError, StorageError
from engine.metadata.reader import MetadataTableReader
from engine.services.maintenance import Maintenance
from engine.table import lifecycle
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action
from tests.support import hudi1x, hudi_rs, record_index, secondary_index
from tests.support.tables import rows, tree_bytes

pytestmark = pytest.mark.spark

NAME = "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"
SCHEMA = "ts long, uuid string, rider string, driver string, fare double, city string"
ROOT = Path(__file__).resolve().parents[2]
FAST = {
    "hoodie.client.heartbeat.interval_in_ms": "300",
    "hoodie.client.heartbeat.tolerable.misses": "2",
    "hoodie.write.lock.lease_ms": "1500",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
}
COLUMNS = ("uuid", "ts", "rider", "driver", "fare", "city")


def _rows(records) -> list[tuple]:
    return sorted(tuple(r[c] for c in COLUMNS) for r in records)


def oracle(path: Path) -> list[tuple]:
    return _rows(hudi_rs.snapshot(str(path)))


def ours(table: Table) -> list[tuple]:
    return _rows(r.asDict() for r in table.read().collect())


def apply(model: list[tuple], batch: list[tuple]) -> list[tuple]:
    """The model after an upsert of `batch` (rows in SCHEMA order; the later ts wins)."""
    by_key = {r[0]: r for r in model}
    for ts, uuid, rider, driver, fare, city in batch:
        old = by_key.get(uuid)
        if old is None or old[1] <= ts:
            by_key[uuid] = (uuid, ts, rider, driver, fare, city)
    return sorted(by_key.values())


def in_step(path: Path) -> dict[str, dict[str, int]]:
    """The files partition equals the committed files storage holds; returns the listing."""
    meta = MetaClient.open(str(path))
    reader = MetadataTableReader(meta, meta.timeline())
    reader.check_in_sync()
    listed = {p: f for p, f in reader.file_listing().items() if f}
    storage: dict[str, dict[str, int]] = {}
    for df in meta.list_data_files():
        if parse_base_file_name(df.name) or parse_log_file_name(df.name):
            storage.setdefault(df.partition, {})[df.name] = df.size
    assert listed == storage
    partitions = dict(meta.config.extra)["hoodie.table.metadata.partitions"]
    assert partitions in ("files", "files,record_index", "files,record_index,secondary_index_rider_idx")
    if "record_index" in partitions:  # kept by every write: it says where every key is
        record_index.check(meta)
    secondary_index.check(meta)  # and the secondary index (Hudi 1.0's, V1) every rider's keys
    return listed


@pytest.fixture
def trips(tmp_path: Path) -> Path:
    return hudi1x.fixture(NAME, tmp_path).table


def test_writes_and_services_keep_the_metadata_table(spark, trips):
    table = Table.open(spark, str(trips))
    model = oracle(trips)
    assert ours(table) == model
    batches = [
        [(1695332066300, "1dced545-862b-4ceb-8b43-d2a568f6616b", "rider-X", "driver-X", 1.5, "san_francisco"),
         (1700000000000, "new-1", "rider-N", "driver-N", 2.5, "oslo")],
        [(1700000000001, "new-2", "rider-M", "driver-M", 3.5, "oslo"),
         (1700000000002, "new-1", "rider-N2", "driver-N2", 4.5, "oslo")],
    ]
    for batch in batches:
        result = table.upsert(spark.createDataFrame(batch, SCHEMA), options=FAST)
        model = apply(model, batch)
        assert oracle(trips) == ours(table) == model
        listed = in_step(trips)
        assert "city=oslo" in listed
        done = list((trips / ".hoodie" / "metadata" / ".hoodie" / "timeline").glob(f"{result.instant}_*.deltacommit"))
        assert len(done) == 1
    # a delete: the record goes for both readers
    table.delete(spark.createDataFrame([batches[1][0]], SCHEMA), options=FAST)
    model = [r for r in model if r[0] != "new-2"]
    assert oracle(trips) == ours(table) == model
    in_step(trips)
    # compaction writes base files the metadata table lists
    compacted = Maintenance(MetaClient.open(str(trips)), FAST).compact(spark=spark)
    assert compacted is not None, "a compaction ran"
    assert oracle(trips) == ours(table) == model
    before_clean = in_step(trips)
    # clean: the replaced versions leave the listing as they leave storage
    cleaned = Maintenance(MetaClient.open(str(trips)), {**FAST, "hoodie.cleaner.commits.retained": "1"}).clean()
    assert cleaned is not None
    after_clean = in_step(trips)
    assert sum(map(len, after_clean.values())) < sum(map(len, before_clean.values()))
    assert oracle(trips) == ours(table) == model
    # insert_overwrite_table: a replacecommit; the replaced groups stay listed until cleaned
    before_overwrite = model
    overwrite = [(1800000000000, "only-1", "r", "d", 9.0, "oslo")]
    table.insert_overwrite_table(spark.createDataFrame(overwrite, SCHEMA), options=FAST)
    model = apply([], overwrite)
    assert oracle(trips) == ours(table) == model
    in_step(trips)
    # rollback of that overwrite: tombstones for its files
    last = table.timeline().completed_writes.last
    assert last is not None
    table.maintenance.rollback(last.time)
    in_step(trips)
    assert oracle(trips) == ours(table) == before_overwrite


@pytest.mark.parametrize("compacted", [False, True], ids=["deltacommits", "compacted"])
def test_a_restore_keeps_the_metadata_table(spark, trips, compacted):
    """A restore rolls the instants after the savepoint back in the metadata table too: their
    deltacommits go, and a deltacommit at the restore's instant tombstones the files it deleted.
    Where a metadata compaction already holds a rolled-back write (compacted after every
    deltacommit here), the files partition is put right by those tombstones, and the record and
    secondary indexes, which cannot say where the keys were before, are dropped alone."""
    options = {**FAST, "hoodie.metadata.compact.max.delta.commits": "1"} if compacted else FAST
    table = Table.open(spark, str(trips))
    model = oracle(trips)
    first = table.upsert(spark.createDataFrame(
        [(1700000000000, "new-1", "r", "d", 1.0, "oslo")], SCHEMA), options=options)
    # (Hudi 1.0's column statistics, of index version V1, went with the first write)
    before = dict(MetaClient.open(str(trips)).config.extra)["hoodie.table.metadata.partitions"]
    assert before == "files,record_index,secondary_index_rider_idx"
    model = apply(model, [(1700000000000, "new-1", "r", "d", 1.0, "oslo")])
    table.maintenance.create_savepoint(first.instant)
    second = table.upsert(spark.createDataFrame([(1700000000001, "new-2", "r", "d", 1.0, "lima"),
                                                 (1700000000002, "new-1", "r2", "d", 2.0, "oslo")], SCHEMA),
                          options=options)
    assert (trips / "city=lima").is_dir()
    # (compacted: the metadata compaction before this write's deltacommit holds the second's)
    third = table.upsert(spark.createDataFrame([(1700000000004, "new-4", "r", "d", 4.0, "oslo")], SCHEMA),
                         options=options)
    restored = table.maintenance.restore(first.instant)
    assert restored.rolled_back == [third.instant, second.instant]
    timeline = trips / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    assert len(list(timeline.glob(f"{restored.instant}_*.deltacommit"))) == 1
    assert not list(timeline.glob(f"{second.instant}*.deltacommit")) + list(timeline.glob(f"{third.instant}*"))
    assert bool([c for c in timeline.glob("*.commit") if c.name > first.instant]) == compacted
    after = dict(MetaClient.open(str(trips)).config.extra)["hoodie.table.metadata.partitions"]
    assert after == ("files" if compacted else before)
    listed = in_step(trips)  # the listing equals storage; the record and secondary indexes the data files
    assert "city=lima" not in listed and not (trips / "city=lima").exists()
    assert oracle(trips) == ours(table) == model
    # the next write goes on from there
    table.upsert(spark.createDataFrame([(1700000000003, "new-3", "r", "d", 3.0, "oslo")], SCHEMA), options=options)
    in_step(trips)
    assert oracle(trips) == ours(table) == apply(model, [(1700000000003, "new-3", "r", "d", 3.0, "oslo")])


def test_the_enable_option(spark, trips, tmp_path):
    table = Table.open(spark, str(trips))
    model = oracle(trips)
    batch = [(1700000000000, "new-1", "r", "d", 1.0, "oslo")]
    # true on a table whose metadata table is kept: accepted
    table.upsert(spark.createDataFrame(batch, SCHEMA), options={**FAST, "hoodie.metadata.enable": "true"})
    model = apply(model, batch)
    in_step(trips)
    # false: removed, as Apache Hudi's writers do
    result = table.upsert(spark.createDataFrame(batch, SCHEMA), options={**FAST, "hoodie.metadata.enable": "false"})
    assert result.repaired is not None and "hoodie.metadata.enable=false" in (result.repaired.metadata_table_removed or "")
    assert not (trips / ".hoodie" / "metadata").exists()
    assert oracle(trips) == ours(table) == model
    # true on a table of version 8 without one: created from the committed files, then kept
    batch = [(1700000000001, "new-2", "r", "d", 2.0, "oslo")]
    result = table.upsert(spark.createDataFrame(batch, SCHEMA), options={**FAST, "hoodie.metadata.enable": "true"})
    model = apply(model, batch)
    assert result.repaired is not None and result.repaired.metadata_table_created
    assert (trips / ".hoodie" / "metadata" / "files" / "files-0000-0_0-0-0_00000000000000000.hfile").exists()
    assert oracle(trips) == ours(table) == model  # hudi-rs lists through the new metadata table
    in_step(trips)
    # true on a table of version 6: refused, nothing touched
    v6 = hudi1x.fixture("sample_table/cow/v6_simplekeygen_nonhivestyle", tmp_path / "v6").table
    files = tree_bytes(v6)
    t6 = Table.open(spark, str(v6))
    some = t6.read().limit(1)
    with pytest.raises(InvalidConfigError, match="creates one for tables of version 8 and 9 only"):
        t6.upsert(some, options={**FAST, "hoodie.metadata.enable": "true"})
    assert tree_bytes(v6) == files


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_new_table_of_version_9_gets_one_and_hudi_rs_lists_through_it(spark, tmp_path, table_type):
    path = tmp_path / "rides"
    table = Table.create(spark, str(path), name="rides", record_key="uuid", partition_fields="city",
                         precombine_field="ts", table_type=table_type, table_version=9)
    # created with the table (Apache Hudi 1.x's default), before any write: an empty listing
    props = javaproperties.loads((path / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.table.metadata.partitions"] == "files"
    mdt = path / ".hoodie" / "metadata"
    names = sorted(p.name for p in (mdt / ".hoodie" / "timeline").iterdir() if p.is_file())
    assert names[:2] == ["00000000000000000.deltacommit.inflight", "00000000000000000.deltacommit.requested"]
    assert len(names) == 3 and re.fullmatch(r"00000000000000000_\d{17}\.deltacommit", names[2]), names
    assert (mdt / "files" / "files-0000-0_0-0-0_00000000000000000.hfile").exists()
    assert in_step(path) == {}
    on = FAST
    model: list[tuple] = []
    batches = [
        [(1, "a", "r1", "d1", 1.0, "oslo"), (1, "b", "r1", "d1", 1.0, "rome")],
        [(2, "a", "r2", "d2", 2.0, "oslo"), (2, "c", "r2", "d2", 2.0, "paris")],
        [(3, "d", "r3", "d3", 3.0, "rome")],
    ]
    instants = []
    for batch in batches:
        result = table.upsert(spark.createDataFrame(batch, SCHEMA), options=on)
        instants.append(result.instant)
        model = apply(model, batch)
        assert oracle(path) == ours(table) == model
        listed = in_step(path)
    assert sorted(listed) == ["oslo", "paris", "rome"]
    table.maintenance.rollback(instants[-1])
    model = [r for r in model if r[0] != "d"]
    assert oracle(path) == ours(table) == model
    in_step(path)
    result = table.delete(spark.createDataFrame([batches[1][1]], SCHEMA), options=on)
    model = [r for r in model if r[0] != "c"]
    assert oracle(path) == ours(table) == model
    in_step(path)
    # control: without the delete's metadata log, hudi-rs (listing through the metadata table)
    # no longer sees the delete's files
    (log,) = (path / ".hoodie" / "metadata" / "files").glob(f".files-0000-0_{result.instant}.log.*")
    log.unlink()
    assert oracle(path) != model


def test_a_new_table_with_the_record_index_looks_keys_up_in_the_metadata_table(spark, tmp_path):
    from engine.index.metadata_record import MetadataRecordIndex

    path = tmp_path / "keyed"
    table = Table.create(spark, str(path), name="keyed", record_key="uuid", partition_fields="city",
                         precombine_field="ts", table_type="MERGE_ON_READ", table_version=9, index="RECORD")
    props = javaproperties.loads((path / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.table.metadata.partitions"] == "files,record_index"
    groups = sorted(p.name for p in (path / ".hoodie" / "metadata" / "record_index").glob("*.hfile"))
    assert groups == [f"record-index-{i:04d}-0_0-0-0_00000000000000001.hfile" for i in range(10)]
    assert isinstance(table._index(), MetadataRecordIndex)
    model: list[tuple] = []
    for batch in ([(1, "a", "r1", "d1", 1.0, "oslo"), (1, "b", "r1", "d1", 1.0, "rome")],
                  [(2, "a", "r2", "d2", 2.0, "oslo"), (2, "c", "r2", "d2", 2.0, "paris")]):
        table.upsert(spark.createDataFrame(batch, SCHEMA), options=FAST)
        model = apply(model, batch)
        assert oracle(path) == ours(table) == model
        in_step(path)  # the record index holds every key where the data files have it
    assert not (path / ".hoodie" / ".record_index").exists()  # this engine's own index is not made
    assert sorted(r["uuid"] for r in rows(table.read_keys(["a", "c", "zz"]))) == ["a", "c"]


def test_new_tables_without_a_metadata_table(spark, tmp_path):
    # opted out: no metadata table, and RECORD keeps this engine's own index
    t = Table.create(spark, str(tmp_path / "off"), name="off", record_key="uuid", precombine_field="ts",
                     table_version=9, index="RECORD", record_index_buckets=4, metadata=False)
    t.upsert(spark.createDataFrame([(1, "a", "r", "d", 1.0, "oslo")], SCHEMA), options=FAST)
    assert not (tmp_path / "off" / ".hoodie" / "metadata").exists()
    assert (tmp_path / "off" / ".hoodie" / ".record_index").is_dir()
    # version 6 tables have none by default, and asking for one is refused before anything is made
    Table.create(spark, str(tmp_path / "v6"), name="v6", record_key="uuid", table_version=6)
    assert not (tmp_path / "v6" / ".hoodie" / "metadata").exists()
    with pytest.raises(InvalidConfigError, match="metadata tables on tables of version 8 and 9, not 6"):
        Table.create(spark, str(tmp_path / "v6b"), name="v6b", record_key="uuid", table_version=6, metadata=True)
    # buckets shape this engine's own record index, which a table with a metadata table does not use
    with pytest.raises(InvalidConfigError, match="pass metadata=False to keep it"):
        Table.create(spark, str(tmp_path / "b"), name="b", record_key="uuid", table_version=9, index="RECORD",
                     record_index_buckets=4)
    assert not (tmp_path / "v6b").exists() and not (tmp_path / "b").exists()
    # the format("hudi") writer: hoodie.metadata.enable on the creating write
    for enable, expected in (("false", False), (None, True)):
        where = str(tmp_path / f"ds_{enable}")
        writer = (spark.createDataFrame([(1, "a", "r", "d", 1.0, "oslo")], SCHEMA).write.format("hudi")
                  .option("hoodie.table.name", "ds").option("hoodie.datasource.write.recordkey.field", "uuid")
                  .option("hoodie.datasource.write.precombine.field", "ts").option("hoodie.write.table.version", "9"))
        if enable is not None:
            writer = writer.option("hoodie.metadata.enable", enable)
        writer.mode("append").save(where)
        assert (Path(where) / ".hoodie" / "metadata").exists() is expected, enable
        assert sorted(r["uuid"] for r in hudi_rs.snapshot(where)) == ["a"]


def test_a_metadata_table_behind_is_removed_by_the_next_write(spark, trips):
    meta = MetaClient.open(str(trips))
    last = meta.timeline().completed_writes.last
    assert last is not None
    timeline_dir = trips / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    (done,) = timeline_dir.glob(f"{last.time}_*.deltacommit")
    done.unlink()  # as if another engine had committed `last` without updating it
    table = Table.open(spark, str(trips))
    model = oracle(trips)  # hudi-rs would miss `last`'s files here: it does not check
    result = table.upsert(spark.createDataFrame([(1700000000000, "new-1", "r", "d", 1.0, "oslo")], SCHEMA),
                          options=FAST)
    assert result.repaired is not None and "behind the data table" in (result.repaired.metadata_table_removed or "")
    assert not (trips / ".hoodie" / "metadata").exists()
    assert oracle(trips) == ours(table)
    assert len(ours(table)) >= len(model)


def test_a_write_that_fails_after_its_metadata_deltacommit_takes_it_away(spark, trips):
    table = Table.open(spark, str(trips))
    model = oracle(trips)

    def fail(meta: MetaClient, instant, body: bytes) -> None:
        if not meta.storage.base_uri.endswith("metadata"):
            raise OSError("injected: the commit file could not be written")

    lifecycle.on_before_complete(fail)
    try:
        with pytest.raises(StorageError):
            table.upsert(spark.createDataFrame([(1700000000000, "new-1", "r", "d", 1.0, "oslo")], SCHEMA),
                         options=FAST)
    finally:
        lifecycle._before_complete.remove(fail)
    meta = MetaClient.open(str(trips))
    pending = [i.time for i in meta.timeline().pending.instants]
    mdt_times = [p.name.split(".")[0].split("_")[0] for p in (trips / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir()
                 if p.is_file()]
    assert not set(pending) & set(mdt_times)
    assert oracle(trips) == ours(table) == model
    in_step(trips)


def _run_writer(job: dict, failpoint: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOODIE_FAILPOINT")}
    env["HOODIE_FAILPOINT"] = failpoint
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "tests.support.writer_process", json.dumps(job)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=240, start_new_session=True)


@pytest.mark.parametrize("point", ["metadata.written", "write.before_complete"])
def test_a_writer_killed_around_the_metadata_deltacommit(spark, trips, point):
    model = oracle(trips)
    batch = [[1700000000000, "new-1", "r", "d", 1.0, "oslo"],
             [1695332066300, "1dced545-862b-4ceb-8b43-d2a568f6616b", "rider-X", "driver-X", 1.5, "san_francisco"]]
    proc = _run_writer({"path": str(trips), "action": "upsert", "schema": SCHEMA, "options": FAST,
                        "batches": [batch]}, point)
    assert proc.returncode == -9, proc.stderr[-2000:]
    mdt_timeline = trips / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    meta = MetaClient.open(str(trips))
    (pending,) = [i.time for i in meta.timeline().pending.instants]
    assert bool(list(mdt_timeline.glob(f"{pending}_*.deltacommit"))) == (point == "metadata.written")
    table = Table.open(spark, str(trips))
    assert oracle(trips) == ours(table) == model  # neither reader sees the unfinished write
    nxt = [(1700000000005, "new-3", "r", "d", 3.0, "oslo")]
    table.upsert(spark.createDataFrame(nxt, SCHEMA), options=FAST)
    assert oracle(trips) == ours(table) == apply(model, nxt)
    in_step(trips)
    shutil.rmtree(trips.parent)


@pytest.mark.parametrize("point", ["metadata.compaction.written", "metadata.compaction.completed"])
def test_a_writer_killed_inside_the_metadata_tables_compaction(spark, trips, point):
    """SIGKILL while the write's hook compacts the metadata table (hoodie.metadata.compact.max.delta.commits=1
    makes the first write compact it): after its first base file, or after the compaction completed
    but before the old slices went and before the write's deltacommit. Neither reader sees the
    unfinished write; the next writer repairs at once (the pending compaction's files removed, the
    write rolled back) and both readers see its rows; the metadata table equals storage."""
    model = oracle(trips)
    options = {**FAST, "hoodie.metadata.compact.max.delta.commits": "1"}
    batch = [[1700000000000, "new-1", "r", "d", 1.0, "oslo"]]
    proc = _run_writer({"path": str(trips), "action": "upsert", "schema": SCHEMA, "options": options,
                        "batches": [batch]}, point)
    assert proc.returncode == -9, proc.stderr[-2000:]
    meta = MetaClient.open(str(trips))
    (pending,) = [i.time for i in meta.timeline().pending.instants]
    mdt = MetaClient.open(str(trips / ".hoodie" / "metadata"))
    compactions = [i for i in mdt.timeline().instants if i.action in (Action.COMPACTION, Action.COMMIT)
                   and i.time > pending]
    assert [i.is_completed for i in compactions] == [point == "metadata.compaction.completed"]
    assert not list((trips / ".hoodie" / "metadata" / ".hoodie" / "timeline").glob(f"{pending}_*.deltacommit"))
    table = Table.open(spark, str(trips))
    assert oracle(trips) == ours(table) == model  # neither reader sees the unfinished write
    nxt = [(1700000000005, "new-3", "r", "d", 3.0, "oslo")]
    result = table.upsert(spark.createDataFrame(nxt, SCHEMA), options=options)
    assert result.repaired is not None and pending in result.repaired.failed_writes_rolled_back
    assert oracle(trips) == ours(table) == apply(model, nxt)
    in_step(trips)
    timeline = MetaClient.open(str(trips / ".hoodie" / "metadata")).timeline()
    assert [str(i) for i in timeline.pending.instants] == []
    shutil.rmtree(trips.parent)


def test_the_metadata_table_compacts_its_files_partition(spark, trips, monkeypatch):
    """Every MAX_DELTA_COMMITS deltacommits (three here) the files partition becomes one new base
    HFile, written before the next deltacommit; both readers keep reading the same table. A
    compaction left pending by a crash is ignored by readers and removed by the next one."""
    from engine.data.bloom_filter import TYPE_DYNAMIC_V0, parse_bloom_filter
    from engine.data.hfile import HFileReader
    from engine.metadata import compaction

    monkeypatch.setattr(compaction, "MAX_DELTA_COMMITS", 3)
    table = Table.open(spark, str(trips))
    model = oracle(trips)
    mdt = trips / ".hoodie" / "metadata"
    bases_before = sorted(p.name for p in (mdt / "files").glob("*.hfile"))
    for n in range(4):
        batch = [(1700000000000 + n, f"new-{n}", "r", "d", float(n), "oslo")]
        table.upsert(spark.createDataFrame(batch, SCHEMA), options=FAST)
        model = apply(model, batch)
        assert oracle(trips) == ours(table) == model
        in_step(trips)
    bases = sorted(p.name for p in (mdt / "files").glob("*.hfile"))
    (new_base,) = sorted(set(bases) - set(bases_before))
    # the compaction cleaned the slices older than the one before it: Hudi's initial base went
    assert bases_before[0].endswith("_00000000000000000.hfile")
    assert bases == sorted(bases_before[1:] + [new_base])
    assert not list((mdt / "files").glob(".files-0000-0_00000000000000000.log.*"))
    instant = new_base.removesuffix(".hfile").rsplit("_", 1)[-1]
    assert list((mdt / ".hoodie" / "timeline").glob(f"{instant}_*.commit"))
    meta = MetaClient.open(str(trips))
    (sl,) = MetadataTableReader(meta, meta.timeline()).slices("files")
    assert sl.base == f"files/{new_base}" and 1 <= len(sl.logs) <= 3
    reader = HFileReader((mdt / "files" / new_base).read_bytes())
    keys = [k for k, _ in reader.cells()]
    assert keys[0] == b"__all_partitions__" and b"city=oslo" in keys
    assert reader.file_info[b"minRecordKey"] == keys[0] and reader.file_info[b"maxRecordKey"] == keys[-1]
    bloom = parse_bloom_filter(reader.meta_block(b"bloomFilter") or b"", TYPE_DYNAMIC_V0)
    assert all(bloom.might_contain(k.decode()) for k in keys)

    # a compaction that died after writing its base file: no reader uses it; the next one removes it
    listed = in_step(trips)
    later = "29991231235959999"
    (mdt / ".hoodie" / "timeline" / f"{later}.compaction.requested").write_bytes(b"")
    (mdt / "files" / f"files-0000-0_0-0-0_{later}.hfile").write_bytes(b"partial")
    assert in_step(trips) == listed
    assert oracle(trips) == ours(table) == model
    monkeypatch.setattr(compaction, "MAX_DELTA_COMMITS", 1)
    batch = [(1700000000009, "new-9", "r", "d", 9.0, "oslo")]
    table.upsert(spark.createDataFrame(batch, SCHEMA), options=FAST)
    model = apply(model, batch)
    assert not (mdt / "files" / f"files-0000-0_0-0-0_{later}.hfile").exists()
    assert not (mdt / ".hoodie" / "timeline" / f"{later}.compaction.requested").exists()
    assert oracle(trips) == ours(table) == model
    in_step(trips)
    final = sorted(p.name for p in (mdt / "files").glob("*.hfile"))
    assert len(final) == 2 and final[0] == new_base  # the latest two slices stay


def test_two_optimistic_writers_keep_both_their_deltacommits(spark, trips, tmp_path, monkeypatch):
    """Optimistic concurrency: a writer paused before the commit lock while another commits; both
    commits reach the metadata table (each writes its deltacommit under the commit lock)."""
    from tests.integration.test_concurrency import OCC, paused_in_thread, resume

    table = Table.open(spark, str(trips))
    model = oracle(trips)
    first = [(1700000000000, "occ-1", "r", "d", 1.0, "oslo")]
    second = [(1700000000001, "occ-2", "r", "d", 2.0, "lima")]
    options = {**FAST, **OCC}
    results = []
    thread, caught = paused_in_thread(
        lambda: results.append(table.upsert(spark.createDataFrame(first, SCHEMA), options=options)),
        tmp_path / "pause", monkeypatch)
    other = Table.open(spark, str(trips)).upsert(spark.createDataFrame(second, SCHEMA), options=options)
    resume(tmp_path / "pause")
    thread.join(180)
    assert not caught, caught
    model = apply(apply(model, second), first)
    assert oracle(trips) == ours(table) == model
    in_step(trips)
    timeline = trips / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    for instant in (other.instant, results[0].instant):
        assert len(list(timeline.glob(f"{instant}_*.deltacommit"))) == 1


def test_a_compaction_killed_after_its_metadata_deltacommit_runs_again_and_is_listed(spark, trips):
    """Review finding: the compaction's second attempt writes other base files; the deltacommit of
    the first (killed after it completed on the metadata table) is taken away when the attempt
    is reverted, and the new one names the new files."""
    table = Table.open(spark, str(trips))
    batch = [(1695332066300, "1dced545-862b-4ceb-8b43-d2a568f6616b", "rider-X", "driver-X", 1.5, "san_francisco")]
    table.upsert(spark.createDataFrame(batch, SCHEMA), options=FAST)  # a log file to compact
    model = oracle(trips)
    proc = _run_writer({"path": str(trips), "action": "run_compaction", "options": FAST}, "metadata.written")
    assert proc.returncode == -9, proc.stderr[-2000:]
    meta = MetaClient.open(str(trips))
    (pending,) = [i for i in meta.timeline().pending.instants]
    mdt_timeline = trips / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    assert list(mdt_timeline.glob(f"{pending.time}_*.deltacommit"))  # written before the kill
    assert oracle(trips) == ours(table) == model
    done = Maintenance(MetaClient.open(str(trips)), FAST).run_compaction(spark=spark)
    assert done is not None
    assert oracle(trips) == ours(table) == model
    listed = in_step(trips)
    bases = {n for files in listed.values() for n in files if n.endswith(f"_{pending.time}.parquet")}
    assert bases and all((trips / p / n).exists() for p, files in listed.items() for n in files if n in bases)


def test_a_rollback_killed_after_the_revert_leaves_no_deltacommit_for_its_target(spark, trips):
    """Review finding: the metadata deltacommit of a rolled-back instant goes before its files, so
    no listing shows files the rollback is deleting; the next write finishes the rollback."""
    table = Table.open(spark, str(trips))
    model = oracle(trips)
    result = table.upsert(spark.createDataFrame([(1700000000000, "new-1", "r", "d", 1.0, "oslo")], SCHEMA),
                          options=FAST)
    mdt_timeline = trips / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    assert list(mdt_timeline.glob(f"{result.instant}_*.deltacommit"))
    proc = _run_writer({"path": str(trips), "action": "rollback", "args": [result.instant], "options": FAST},
                       "rollback.after_revert")
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert not [p for p in mdt_timeline.iterdir() if p.name.startswith(result.instant)]
    assert not list((trips / ".hoodie" / "metadata" / "files").glob(f".files-0000-0_{result.instant}.log.*"))
    assert oracle(trips) == ours(table) == model
    nxt = [(1700000000005, "new-3", "r", "d", 3.0, "oslo")]
    table.upsert(spark.createDataFrame(nxt, SCHEMA), options=FAST)
    assert oracle(trips) == ours(table) == apply(model, nxt)
    in_step(trips)


def test_a_half_made_metadata_table_is_built_again_when_asked(spark, tmp_path):
    """Review finding: a creation killed before the property was written leaves a folder no reader
    uses; a write with hoodie.metadata.enable=true removes it and builds it again (no refusal)."""
    path = tmp_path / "rides"
    table = Table.create(spark, str(path), name="rides", record_key="uuid", partition_fields="city",
                         precombine_field="ts", table_version=9)
    on = {**FAST, "hoodie.metadata.enable": "true"}
    first = [(1, "a", "r1", "d1", 1.0, "oslo")]
    table.upsert(spark.createDataFrame(first, SCHEMA), options=on)
    meta = MetaClient.open(str(path))
    meta.remove_properties(("hoodie.table.metadata.partitions",), "as a creation killed before it")
    table = Table.open(spark, str(path))  # the next writer's process
    second = [(2, "b", "r2", "d2", 2.0, "rome")]
    result = table.upsert(spark.createDataFrame(second, SCHEMA), options=on)
    assert result.repaired is not None
    assert "files partition is not built" in (result.repaired.metadata_table_removed or "")
    assert result.repaired.metadata_table_created
    assert oracle(path) == ours(table) == apply(apply([], first), second)
    in_step(path)


def test_on_s3_the_metadata_table_is_created_kept_and_listed_through(spark, s3_server):
    """On S3 (moto: conditional puts for the timeline): a version 9 table whose writes ask for the
    metadata table; our reads plan from it (no listing of the data folders), hudi-rs lists through
    it, and its files partition equals the objects the bucket holds."""
    from engine.read.plan import plan_snapshot

    bucket = s3_server.create_bucket()
    uri = f"s3://{bucket}/lake/rides"
    opts = s3_server.storage_options()
    table = Table.create(spark, uri, name="rides", record_key="uuid", partition_fields="city",
                         precombine_field="ts", table_type="MERGE_ON_READ", table_version=9, storage_options=opts)
    on = {**FAST, "hoodie.metadata.enable": "true"}
    model: list[tuple] = []
    for batch in ([(1, "a", "r", "d", 1.0, "oslo"), (1, "b", "r", "d", 1.0, "rome")],
                  [(2, "a", "r2", "d2", 2.0, "oslo")]):
        table.upsert(spark.createDataFrame(batch, SCHEMA), options=on)
        model = apply(model, batch)
    theirs = _rows(hudi_rs.snapshot(uri, storage_options=hudi_rs.s3_storage_options(s3_server.env())))
    assert theirs == ours(Table.open(spark, uri, storage_options=opts)) == model
    meta = MetaClient.open(uri, opts)
    listings: list[str] = []
    cls = type(meta.storage)
    originals = {name: getattr(cls, name) for name in ("list_dir", "list_files_recursive")}

    def recorder(name: str):
        def listed(self, rel: str = "", *args, **kwargs):
            listings.append(f"{self.base_uri}|{rel}|{name}")
            return originals[name](self, rel, *args, **kwargs)
        return listed

    try:
        for name in originals:
            setattr(cls, name, recorder(name))
        plan, _ = plan_snapshot(meta)
    finally:
        for name, original in originals.items():
            setattr(cls, name, original)
    assert plan.listing == "metadata table"
    # no listing of the table's root or its data folders: only timelines and the files partition
    assert listings and all(".hoodie" in entry.split("|")[0] + entry.split("|")[1] for entry in listings), listings
    listed = {p: f for p, f in MetadataTableReader(meta, meta.timeline()).file_listing().items() if f}
    storage: dict[str, dict[str, int]] = {}
    for df in meta.list_data_files():
        if parse_base_file_name(df.name) or parse_log_file_name(df.name):
            storage.setdefault(df.partition, {})[df.name] = df.size
    assert listed == storage and sorted(listed) == ["oslo", "rome"]
