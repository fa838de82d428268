"""The record index of Apache Hudi's metadata table kept by this engine's writes (issue 35), on the
copy-on-write and merge-on-read tables Apache Hudi 1.1 wrote with a global record index in ten
file groups (hudi-rs's `v9_txns_simple_meta`). After every step the index holds exactly the keys
the data files hold, each at its record's partition and file id and in the file group its hash
names (`tests.support.record_index.check`): inserts at the write's instant, deletes as DELETE
blocks, a partition move under a global index at its new place; a rollback takes the rolled-back
write's entries away with its deltacommit, and the metadata table's compaction writes the index's
base files. A rollback of a write a compaction already holds drops the record index (Hudi builds
it again) rather than leave it wrong."""

from __future__ import annotations

from pathlib import Path

import javaproperties
import pytest
from pyspark.sql import functions as F

from engine import Table
from engine.data.log_block import BlockType, decode_delete_block
from engine.data.log_file import read_log_blocks
from engine.metadata import record_index as ri
from engine.storage import storage_for
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from tests.support import column_stats, hudi1x, hudi_rs, partition_stats, record_index, secondary_index

pytestmark = pytest.mark.spark

FAST = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def _rows(table: Table) -> list[tuple]:
    return sorted((r["txn_id"], r["region"], r["txn_type"]) for r in table.read().collect())


def _oracle(path: Path) -> list[tuple]:
    return sorted((r["txn_id"], r["region"], r["txn_type"]) for r in hudi_rs.snapshot(str(path)))


def _partitions(path: Path) -> str:
    return javaproperties.loads((path / ".hoodie" / "hoodie.properties").read_text())["hoodie.table.metadata.partitions"]


ALL = "column_stats,files,partition_stats,record_index,secondary_index_merchant_idx,secondary_index_txn_date_idx"


def _check(path: Path) -> dict:
    """The record index checked against the data files, and the column and partition statistics
    and the secondary indexes too (while they are kept)."""
    meta = MetaClient.open(str(path))
    found = record_index.check(meta)
    column_stats.check(meta)
    if "partition_stats" in metadata_table.partitions_in(meta.config):
        partition_stats.check(meta)
    secondary_index.check(meta)
    return found


def _deleted_in(path: Path, instant: str) -> list[str]:
    """Keys of the DELETE blocks the deltacommit at `instant` wrote to the record index."""
    storage = storage_for(str(path / ".hoodie" / "metadata"))
    out = []
    for info in storage.list_dir("record_index"):
        if f"_{instant}.log." in info.name:
            for block in read_log_blocks(storage, info.path):
                if block.block_type == BlockType.DELETE:
                    out += decode_delete_block(block).column("key").to_pylist()
    return sorted(out)


@pytest.mark.parametrize("kind", ["cow", "mor/avro"])
def test_writes_keep_the_record_index(spark, tmp_path, kind):
    fx = hudi1x.fixture(f"sample_table/{kind}/v9_txns_simple_meta", tmp_path)
    path = fx.table
    table = Table.open(spark, str(path))
    before = _check(path)
    data = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")])
    first = data.orderBy("txn_id").limit(1)
    (old,) = first.collect()

    # an update in place and two inserts: the inserts enter the index at the write's instant
    batch = first.withColumn("txn_type", F.lit("changed")).withColumn("txn_ts", F.col("txn_ts") + 1).unionByName(
        first.withColumn("txn_id", F.lit("NEW-1"))).unionByName(first.withColumn("txn_id", F.lit("NEW-2")))
    result = table.upsert(batch, options=FAST)
    found = _check(path)
    assert sorted(set(found) - set(before)) == ["NEW-1", "NEW-2"]
    assert {found[k].instant_millis for k in ("NEW-1", "NEW-2")} == {ri.instant_millis(result.instant)}
    assert found[old["txn_id"]] == before[old["txn_id"]]  # an update in place leaves its entry
    assert _partitions(path) == ALL
    assert _rows(table) == _oracle(path)

    # a delete: a DELETE block in the key's file group
    deleted = table.delete(first.withColumn("txn_id", F.lit("NEW-2")).withColumn("txn_ts", F.col("txn_ts") + 5),
                           options=FAST)
    assert _deleted_in(path, deleted.instant) == ["NEW-2"]
    assert "NEW-2" not in _check(path)

    # rolled back, the delete's deltacommit goes and the key is indexed again
    table.maintenance.rollback(deleted.instant)
    assert _check(path)["NEW-2"] == found["NEW-2"]

    # a partition move under a global index: the key's entry names its new partition
    moved = first.withColumn("region", F.lit("moon")).withColumn("txn_ts", F.col("txn_ts") + 9)
    result = table.upsert(moved, options={**FAST, "hoodie.index.type": "GLOBAL_SIMPLE",
                                          "hoodie.simple.index.update.partition.path": "true"})
    found = _check(path)
    assert found[old["txn_id"]].partition == "region=moon"
    assert found[old["txn_id"]].instant_millis == ri.instant_millis(result.instant)
    assert _rows(table) == _oracle(path)
    assert ("region=moon" in {loc.partition for loc in found.values()})


def test_compaction_and_a_rollback_it_holds(spark, tmp_path, monkeypatch, caplog):
    from engine.metadata import compaction

    monkeypatch.setattr(compaction, "MAX_DELTA_COMMITS", 1)
    fx = hudi1x.fixture("sample_table/mor/avro/v9_txns_simple_meta", tmp_path)
    path = fx.table
    table = Table.open(spark, str(path))
    data = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")])
    first = data.orderBy("txn_id").limit(1)
    a = table.upsert(first.withColumn("txn_id", F.lit("NEW-A")), options=FAST)
    b = table.upsert(first.withColumn("txn_id", F.lit("NEW-B")), options=FAST)
    # b's write compacted the metadata table (at a new instant, after b's) before its deltacommit:
    # the record-index group with log files since the last compaction (a's) got a base file
    mdt = path / ".hoodie" / "metadata"
    bases = sorted(p.name for p in (mdt / "record_index").glob("*.hfile"))
    newest = max(p.rsplit("_", 1)[-1].removesuffix(".hfile") for p in bases)
    assert a.instant < b.instant < newest
    group_a = ri.file_group_id(ri.file_group_of("NEW-A", 10))
    assert [p for p in bases if p.endswith(f"_{newest}.hfile")] == [f"{group_a}_0-0-0_{newest}.hfile"]
    found = _check(path)
    assert {"NEW-A", "NEW-B"} <= set(found)

    # b's deltacommit is a log on top of the compaction: rolled back with it, the index stays
    table.maintenance.rollback(b.instant)
    assert "NEW-B" not in _check(path)
    assert _partitions(path) == ALL
    # a's deltacommit is in the compacted base files: the record index, the partition statistics
    # and the secondary indexes are dropped, files and column statistics kept
    table.maintenance.rollback(a.instant)
    assert _partitions(path) == "column_stats,files"  # the rollback's tombstones keep the statistics right
    column_stats.check(MetaClient.open(str(path)))
    assert ("dropped the metadata table partitions partition_stats, record_index, secondary_index_merchant_idx, "
            f"secondary_index_txn_date_idx (the write {a.instant} being rolled back is in its") in (
        caplog.text)
    assert not (mdt / "record_index").exists()
    assert _rows(table) == _oracle(path)
    assert "NEW-A" not in {r[0] for r in _rows(table)}


@pytest.mark.parametrize("kind", ["cow", "mor/avro"])
def test_the_record_index_tags_writes_and_answers_key_lookups(spark, tmp_path, kind, monkeypatch, caplog):
    """hoodie.index.type=RECORD_INDEX (Apache Hudi's name) on a table whose metadata table keeps a
    record index tags from it (no data file is read to tag); `read_keys` reads only the file
    groups it names. A metadata table that cannot answer is never guessed from."""
    from engine.index import metadata_record

    fx = hudi1x.fixture(f"sample_table/{kind}/v9_txns_simple_meta", tmp_path)
    path = fx.table
    table = Table.open(spark, str(path))
    data = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")])
    first = data.orderBy("txn_id").limit(1)
    (old,) = first.collect()
    lookups = []
    real = metadata_record.lookup
    monkeypatch.setattr(metadata_record, "lookup", lambda *a, **k: lookups.append(1) or real(*a, **k))

    batch = first.withColumn("txn_type", F.lit("tagged")).withColumn("txn_ts", F.col("txn_ts") + 1).unionByName(
        first.withColumn("txn_id", F.lit("NEW-R")))
    result = table.upsert(batch, options={**FAST, "hoodie.index.type": "RECORD_INDEX"})
    assert (result.inserts, result.updates) == (1, 1)
    assert result.index_stats == {"keys": 2, "found": 1, "metadata_table": 1}
    assert lookups, "tagged from the record index"
    found = record_index.check(MetaClient.open(str(path)))
    assert found["NEW-R"].instant_millis == ri.instant_millis(result.instant)
    assert _rows(table) == _oracle(path)
    assert (old["txn_id"], old["region"], "tagged") in _rows(table)
    assert not (path / ".hoodie" / ".record_index").exists()  # this engine's own index files: none

    # key lookups through it: the keys asked for, none other; an absent key gives no row
    lookups.clear()
    got = sorted((r["txn_id"], r["txn_type"]) for r in table.read_keys([old["txn_id"], "NEW-R", "absent"]).collect())
    assert got == sorted([(old["txn_id"], "tagged"), ("NEW-R", old["txn_type"])])
    assert lookups

    # behind the data table (its last deltacommit gone): lookups read the data files, same answer
    last = table.timeline().completed_writes.last
    (done,) = (path / ".hoodie" / "metadata" / ".hoodie" / "timeline").glob(f"{last.time}_*.deltacommit")
    done.unlink()
    assert not metadata_record.available(MetaClient.open(str(path)))
    got = sorted((r["txn_id"], r["txn_type"]) for r in table.read_keys(["NEW-R"]).collect())
    assert got == [("NEW-R", old["txn_type"])]
    from engine.read.lookup import read_keys

    caplog.clear()
    got = read_keys(spark, MetaClient.open(str(path)), metadata_record.MetadataRecordIndex(), ["NEW-R", "absent"])
    assert sorted((r["txn_id"], r["txn_type"]) for r in got.collect()) == [("NEW-R", old["txn_type"])]
    assert "record index cannot answer" in caplog.text and "behind the data table" in caplog.text


def test_building_the_record_index_from_the_data_files(spark, tmp_path, capsys):
    """`hoodie index build --partition record_index` on the table Apache Hudi wrote (its record
    index dropped first) builds what Hudi had built: every key at its file group, ten groups, the
    properties and index definitions naming it; refused while a write is in flight or when one
    exists, the table unchanged."""
    import json

    from engine.cli import main
    from engine.metadata.reader import MetadataTableReader
    from tests.support.tables import tree_bytes

    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    path = fx.table
    hudis = {k: (v.partition, v.file_id) for k, v in record_index.check(MetaClient.open(str(path))).items()}
    assert main(["index", "drop", str(path), "--partition", "record_index"]) == 0
    assert _partitions(path) == ",".join(p for p in ALL.split(",") if p != "record_index")
    capsys.readouterr()
    assert main(["index", "build", str(path), "--partition", "record_index", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # Hudi initialized its partitions at 00000000000000000 to ...04: the build takes the next
    assert (doc["partition"], doc["file_groups"], doc["keys"], doc["instant"]) == (
        "record_index", 10, 12, "00000000000000005")
    assert _partitions(path) == ALL
    built = record_index.check(MetaClient.open(str(path)))
    assert {k: (v.partition, v.file_id) for k, v in built.items()} == hudis
    defs = json.loads((path / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]
    assert defs["record_index"]["indexOptions"] == {"isPartitioned": "false"}
    assert sorted(p.name for p in (path / ".hoodie" / "metadata" / "record_index").glob("*.hfile")) == [
        f"record-index-{i:04d}-0_0-0-0_00000000000000005.hfile" for i in range(10)]

    # a second build is refused; so is one while a write is in flight; nothing changes
    before = tree_bytes(path)
    assert main(["index", "build", str(path), "--partition", "record_index"]) != 0
    assert "has a record index already" in capsys.readouterr().err
    assert tree_bytes(path) == before
    main(["index", "drop", str(path), "--partition", "record_index"])
    # a live writer's instant (its heartbeat beats): the build would miss its keys
    from engine.storage import storage_for
    from engine.transaction.heartbeat import Heartbeat

    (path / ".hoodie" / "timeline" / "29990101000000000.commit.requested").write_bytes(b"")
    beating = Heartbeat.start(storage_for(str(path)), "29990101000000000", interval=3600)
    try:
        before = tree_bytes(path)
        assert main(["index", "build", str(path), "--partition", "record_index"]) != 0
        err = capsys.readouterr().err
        assert "ConcurrentWriteError" in err and "29990101000000000" in err
        assert tree_bytes(path) == before
    finally:
        beating.stop()
    assert "record_index" not in MetadataTableReader(MetaClient.open(str(path)), MetaClient.open(str(path)).timeline()).partitions()


def test_a_record_index_built_on_this_engines_metadata_table_is_kept(spark, tmp_path, monkeypatch):
    """A table this engine created (its metadata table's schema has the files fields only): the
    built index is written with Hudi's `recordIndexMetadata` field, and writes, the metadata
    compaction and RECORD lookups keep using it."""
    from engine.metadata import compaction
    from engine.services.maintenance import Maintenance

    schema = "id string, part string, ts long, v string"
    path = tmp_path / "t"
    table = Table.create(spark, str(path), name="t", record_key="id", partition_fields="part",
                         precombine_field="ts", table_type="MERGE_ON_READ", table_version=9)
    rows = [(f"k{i}", f"p{i % 3}", 1, "a") for i in range(30)]
    table.upsert(spark.createDataFrame(rows, schema), options={**FAST, "hoodie.metadata.enable": "true"})
    built = Maintenance(MetaClient.open(str(path))).build_metadata_record_index()
    assert (built.keys, built.file_groups) == (30, 10)
    found = record_index.check(MetaClient.open(str(path)))
    assert len(found) == 30
    monkeypatch.setattr(compaction, "MAX_DELTA_COMMITS", 2)
    for n in range(3):
        result = table.upsert(spark.createDataFrame([(f"n{n}", "p9", 2, "b"), ("k1", "p1", 2 + n, "c")], schema),
                              options={**FAST, "hoodie.index.type": "RECORD"})
        assert (result.inserts, result.updates) == (1, 1)
        assert result.index_stats.get("metadata_table") == 1
        found = record_index.check(MetaClient.open(str(path)))
        assert found[f"n{n}"].instant_millis == ri.instant_millis(result.instant)
    bases = sorted((path / ".hoodie" / "metadata" / "record_index").glob("*.hfile"))
    assert any(not b.name.endswith("_00000000000000001.hfile") for b in bases), "the metadata compaction ran"
    assert len(found) == 33
    assert sorted(r["id"] for r in table.read_keys(["n2", "k1", "zz"]).collect()) == ["k1", "n2"]


def test_a_corrupt_record_index_file_is_refused_by_name_and_nothing_changes(spark, tmp_path):
    """A record-index base HFile that does not parse: a RECORD write stops with a typed error
    naming the file, and the table is exactly as it was (no guess from a half-read index)."""
    from engine.errors import CorruptTableError
    from tests.support.tables import tree_bytes

    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    path = fx.table
    table = Table.open(spark, str(path))
    data = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")])
    first = data.orderBy("txn_id").limit(1)
    table.upsert(first.withColumn("txn_id", F.lit("NEW-C")), options=FAST)  # drops what is not kept
    bases = sorted((path / ".hoodie" / "metadata" / "record_index").glob("*.hfile"))
    group = ri.file_group_id(ri.file_group_of(first.collect()[0]["txn_id"], 10))
    (victim,) = [b for b in bases if b.name.startswith(group)]
    victim.write_bytes(victim.read_bytes()[:200])
    before = tree_bytes(path)
    with pytest.raises(CorruptTableError, match=victim.name):
        table.upsert(first.withColumn("txn_ts", F.col("txn_ts") + 1), options={**FAST, "hoodie.index.type": "RECORD_INDEX"})
    assert tree_bytes(path) == before
