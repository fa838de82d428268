"""Archival with Apache Hudi's metadata table (issue 35), on the copy-on-write table Apache Hudi
1.1 wrote with files, column statistics and a record index (hudi-rs's `v9_txns_simple_meta`):
the metadata table's own timeline is archived with the data table's, into its LSM history, never
past its latest compaction or the data table's earliest active write; the data table's archival
never passes the metadata table's latest compaction. After it, the metadata table still answers
exactly: the listing equals storage, the record index and the column statistics equal the data
files, and hudi-rs (listing through it) reads what this engine reads."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from engine import Table
from engine.metadata import compaction
from engine.metadata.archival import latest_compaction
from engine.services.archive import archived_instants
from engine.storage import storage_for
from engine.table.meta_client import MetaClient
from tests.support import hudi1x, hudi_rs, metadata_checks

pytestmark = pytest.mark.spark

ARCHIVE = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "true", "hoodie.keep.min.commits": "2",
           "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1"}


def test_the_metadata_table_is_archived_with_the_data_table(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(compaction, "MAX_DELTA_COMMITS", 2)
    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    path = fx.table
    table = Table.open(spark, str(path))
    data = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")])
    first = data.orderBy("txn_id").limit(1)
    results = []
    for n in range(8):
        results.append(table.upsert(first.withColumn("txn_id", F.lit(f"ARC-{n}")), options=ARCHIVE))
    assert any(r.services.get("metadata_archived") for r in results)
    assert any(r.services.get("archived") for r in results)

    meta = MetaClient.open(str(path))
    mdt = MetaClient.open(storage_for(str(path / ".hoodie" / "metadata")))
    mdt_timeline, data_timeline = mdt.timeline(), meta.timeline()
    gone = archived_instants(mdt)
    compacted = latest_compaction(mdt_timeline)
    assert compacted is not None and compacted in mdt_timeline.completed_times
    # the data table keeps its replacecommits while the groups they replaced are on storage (no
    # clean ran): its first active write is Hudi's 20260307162450901, and the metadata table's
    # archival went up to it: Hudi's initializing instants, deltacommits and compaction
    first_data_write = next(i.time for i in data_timeline.instants if i.action.is_write)
    assert first_data_write == "20260307162450901"
    assert [i.time for i in gone][:5] == [f"0000000000000000{n}" for n in range(5)]
    assert "20260307162449278" in {i.time for i in gone}  # Hudi's compaction of its metadata table
    assert all(i.time < compacted and i.time < first_data_write for i in gone)
    assert min(i.time for i in mdt_timeline.instants) == first_data_write
    metadata_checks.in_step(path)
    ours = sorted(r["txn_id"] for r in table.read().collect())
    assert sorted(r["txn_id"] for r in hudi_rs.snapshot(str(path))) == ours
    assert {f"ARC-{n}" for n in range(8)} <= set(ours)
    # and writes go on: a delete and an upsert after archival keep everything exact
    table.delete(first.withColumn("txn_id", F.lit("ARC-0")).withColumn("txn_ts", F.col("txn_ts") + 5), options=ARCHIVE)
    table.upsert(first.withColumn("txn_id", F.lit("ARC-9")), options=ARCHIVE)
    metadata_checks.in_step(path)
    ours = sorted(r["txn_id"] for r in table.read().collect())
    assert "ARC-0" not in ours and "ARC-9" in ours
    assert sorted(r["txn_id"] for r in hudi_rs.snapshot(str(path))) == ours


def test_the_data_tables_archival_waits_for_the_metadata_tables_compaction(spark, tmp_path, monkeypatch):
    """Without a compaction of its metadata table, a table's archival takes nothing (as Hudi's
    TimelineArchiverV2); once the metadata table is compacted, the writes completed before it go."""
    monkeypatch.setattr(compaction, "MAX_DELTA_COMMITS", 100)
    schema = "id string, part string, ts long"
    path = tmp_path / "t"
    table = Table.create(spark, str(path), name="t", record_key="id", partition_fields="part",
                         precombine_field="ts", table_type="COPY_ON_WRITE", table_version=9)
    options = {**ARCHIVE, "hoodie.metadata.enable": "true"}
    for n in range(6):
        result = table.upsert(spark.createDataFrame([(f"k{n}", "p", n)], schema), options=options)
        assert not result.services.get("archived")
    meta = MetaClient.open(str(path))
    assert archived_instants(meta) == [] and len(meta.timeline().completed_writes.instants) == 6
    monkeypatch.setattr(compaction, "MAX_DELTA_COMMITS", 1)  # the next write compacts the metadata table first
    result = table.upsert(spark.createDataFrame([("k9", "p", 9)], schema), options=options)
    meta = MetaClient.open(str(path))
    mdt = MetaClient.open(storage_for(str(path / ".hoodie" / "metadata")))
    compacted = latest_compaction(mdt.timeline())
    assert compacted is not None  # at a new instant, before the write's deltacommit
    archived = result.services.get("archived")
    assert archived and all(t < result.instant for t in archived)
    assert [i.time for i in archived_instants(meta)] == archived
    metadata_checks.in_step(path)
    assert sorted(r["id"] for r in table.read().collect()) == sorted([f"k{n}" for n in range(6)] + ["k9"])
    assert sorted(r["id"] for r in hudi_rs.snapshot(str(path))) == sorted([f"k{n}" for n in range(6)] + ["k9"])
