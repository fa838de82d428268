"""Apache Hudi's column statistics kept by this engine's writes and read through (issue 35), on
the merge-on-read table Apache Hudi 1.1 wrote (hudi-rs's `v9_txns_simple_meta`): an upsert adds
its log file's ranges (checked against the data files), and a filtered `format("hudi")` read
skips the file slices the statistics rule out: a slice whose base file is made unreadable is never
opened by a read whose filter its statistics exclude, while the same read without data skipping
fails on it; the rows equal hudi-rs's."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from engine import Table
from engine.table.meta_client import MetaClient
from tests.support import column_stats, hudi1x, hudi_rs

pytestmark = pytest.mark.spark

FAST = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def test_column_stats_kept_and_filtered_reads_skip_slices(spark, tmp_path):
    fx = hudi1x.fixture("sample_table/mor/avro/v9_txns_simple_meta", tmp_path)
    path = fx.table
    table = Table.open(spark, str(path))
    data = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")])
    row = data.filter(F.col("region") == "eu").orderBy("txn_ts").limit(1)
    result = table.upsert(row.withColumn("txn_ts", F.lit(1800000000000)), options=FAST)
    held = column_stats.check(MetaClient.open(str(path)))
    (log_ts,) = [v for v in held.values() if v["fileName"].startswith(".") and result.instant in v["fileName"]
                 and v["columnName"] == "txn_ts"]
    assert (log_ts["minValue"], log_ts["maxValue"], log_ts["valueCount"]) == (
        {"value": 1800000000000}, {"value": 1800000000000}, 1)

    def read(condition, **options):
        frame = spark.read.format("hudi").options(**options).load(str(path)).filter(condition)
        return sorted((r["txn_id"], r["txn_ts"]) for r in frame.collect())

    def oracle(keep):
        return sorted((r["txn_id"], r["txn_ts"]) for r in hudi_rs.snapshot(str(path)) if keep(r))

    assert read(F.col("txn_ts") >= 1800000000000) == oracle(lambda r: r["txn_ts"] >= 1800000000000)
    assert len(read(F.col("txn_ts") >= 1800000000000)) == 1
    # the us slice whose base file holds txn_ts up to 1700600000014 only: made unreadable
    us = sorted((path / "region=us").glob("*.parquet"))
    victim = next(p for p in us if any(
        v["fileName"] == p.name and v["columnName"] == "txn_ts" and v["maxValue"]["value"] == 1700600000014
        for v in held.values()))
    want = oracle(lambda r: r["txn_ts"] > 1700700000000)
    everything = hudi_rs.snapshot(str(path))  # hudi-rs's rows, before a file is broken

    def held_rows(keep):
        return sorted((r["txn_id"], r["txn_ts"]) for r in everything if keep(r))

    victim.write_bytes(b"not parquet any more")
    assert read(F.col("txn_ts") > 1700700000000) == want  # skipped: never opened
    with pytest.raises(Exception, match="not parquet|Parquet|parquet"):
        read(F.col("txn_ts") > 1700700000000, **{"hoodie.enable.data.skipping": "false"})
    with pytest.raises(Exception, match="not parquet|Parquet|parquet"):
        read(F.col("txn_ts") > 0)  # a filter the statistics cannot rule out reads it

    # Table.read(filters=...) skips the same way, and returns only the matching rows
    def ours(filters):
        return sorted((r["txn_id"], r["txn_ts"]) for r in table.read(filters=filters).collect())

    assert ours([("txn_ts", ">", 1700700000000)]) == want
    eu = [("region", "=", "eu"), ("txn_ts", ">=", 1700600000000)]
    assert ours(eu) == held_rows(lambda r: r["region"] == "eu" and r["txn_ts"] >= 1700600000000)
    assert ours([("region", "NOT IN", ["us"])]) == held_rows(lambda r: r["region"] != "us")  # us: pruned
    some = want[0][0]
    assert ours([("txn_id", "=", some)]) == [r for r in want if r[0] == some]  # through the record index
    with pytest.raises(Exception, match="not parquet|Parquet|parquet"):
        table.read(filters=[("txn_ts", ">", 0)]).collect()


def test_building_column_stats_on_this_engines_table(spark, tmp_path, capsys):
    """`hoodie index build --partition column_stats` on a merge-on-read table this engine wrote:
    Hudi's columns (the three meta fields, then the top-level columns the statistics cover, not a
    struct), the ranges of every file of the latest slices (base files, update and delete logs),
    two file groups at the next initializing instant; writes keep them, filtered reads skip by
    them, and a second build is refused with the table unchanged."""
    import datetime as dt
    import json
    from decimal import Decimal

    from engine.cli import main
    from tests.support.tables import tree_bytes

    schema = ("id string, part string, ts long, amount decimal(10,2), day date, ok boolean, score double, "
              "info struct<a:int>")
    path = tmp_path / "t"
    table = Table.create(spark, str(path), name="t", record_key="id", partition_fields="part",
                         precombine_field="ts", table_type="MERGE_ON_READ", table_version=9)

    def rows(ids, part, ts):
        return spark.createDataFrame([(f"k{i}", part, ts, Decimal(f"{i}.25"), dt.date(2024, 1, 1 + i % 28),
                                       i % 2 == 0, i / 3, (i,)) for i in ids], schema)

    table.upsert(rows(range(0, 20), "a", 1).unionByName(rows(range(20, 40), "b", 1)),
                 options={**FAST, "hoodie.metadata.enable": "true"})
    table.upsert(rows(range(0, 5), "a", 2), options=FAST)  # updates: a log file
    table.delete(rows([21], "b", 3), options=FAST)  # a delete block
    assert main(["index", "build", str(path), "--partition", "column_stats", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    want = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key", "id", "part", "ts", "amount",
            "day", "ok", "score"]
    assert (doc["columns"], doc["file_groups"], doc["instant"]) == (want, 2, "00000000000000001")
    meta = MetaClient.open(str(path))
    held = column_stats.check(meta)
    files = {v["fileName"] for v in held.values()}
    assert doc["files"] == len(files) and any(n.startswith(".") for n in files)
    assert {v["columnName"] for v in held.values()} == set(want)
    defs = json.loads((path / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]
    assert defs["column_stats"]["sourceFields"] == want and defs["column_stats"]["version"] == "V2"
    assert sorted(p.name for p in (path / ".hoodie" / "metadata" / "column_stats").glob("*.hfile")) == [
        f"col-stats-000{i}-0_0-0-0_00000000000000001.hfile" for i in range(2)]
    amounts = [v for v in held.values() if v["columnName"] == "amount" and not v["fileName"].startswith(".")]
    assert all(v["valueType"] == {"typeOrdinal": 10, "additionalInfo": "10,2"} for v in amounts)

    before = tree_bytes(path)
    assert main(["index", "build", str(path), "--partition", "column_stats"]) != 0
    assert "has column statistics already" in capsys.readouterr().err
    assert tree_bytes(path) == before

    table.upsert(rows(range(40, 45), "a", 4), options=FAST)  # kept by the next write
    column_stats.check(MetaClient.open(str(path)))
    frame = spark.read.format("hudi").load(str(path))
    for condition in [F.col("ts") == 4, F.col("id") == "k21", F.col("day") == dt.date(2024, 1, 3),
                      F.col("ok") & (F.col("part") == "b"), F.col("amount") > Decimal("41.00")]:
        assert sorted(r["id"] for r in frame.filter(condition).collect()) == sorted(
            r["id"] for r in table.read().filter(condition).collect())


def test_the_column_stats_enable_option_builds_and_drops_them(spark, tmp_path):
    """hoodie.metadata.index.column.stats.enable=true on a write builds the column statistics before
    it (its own files then get theirs from its deltacommit); =false drops them, as Hudi's writers do."""
    import javaproperties

    schema = "id string, part string, ts long"
    path = tmp_path / "t"
    table = Table.create(spark, str(path), name="t", record_key="id", partition_fields="part",
                         precombine_field="ts", table_type="COPY_ON_WRITE", table_version=9)
    table.upsert(spark.createDataFrame([(f"k{i}", f"p{i % 2}", 1) for i in range(10)], schema),
                 options={**FAST, "hoodie.metadata.enable": "true"})
    on = {**FAST, "hoodie.metadata.index.column.stats.enable": "true"}
    result = table.upsert(spark.createDataFrame([("k1", "p1", 2), ("n1", "p0", 2)], schema), options=on)
    assert result.repaired is not None and result.repaired.metadata_partitions_built == ["column_stats"]
    held = column_stats.check(MetaClient.open(str(path)))
    assert any(v["fileName"].endswith(f"_{result.instant}.parquet") for v in held.values())
    again = table.upsert(spark.createDataFrame([("n2", "p0", 3)], schema), options=on)
    assert again.repaired is None or not again.repaired.metadata_partitions_built  # built once
    column_stats.check(MetaClient.open(str(path)))

    def partitions() -> str:
        return javaproperties.loads((path / ".hoodie" / "hoodie.properties").read_text())[
            "hoodie.table.metadata.partitions"]

    assert partitions() == "column_stats,files"
    off = table.upsert(spark.createDataFrame([("n3", "p1", 4)], schema),
                       options={**FAST, "hoodie.metadata.index.column.stats.enable": "false"})
    assert off.repaired is not None and off.repaired.metadata_partitions_dropped == ["column_stats"]
    assert partitions() == "files" and not (path / ".hoodie" / "metadata" / "column_stats").exists()
    ids = sorted(r["id"] for r in table.read().collect())
    assert ids == sorted([f"k{i}" for i in range(10)] + ["n1", "n2", "n3"])
    assert sorted(r["id"] for r in hudi_rs.snapshot(str(path))) == ids


def test_partition_statistics_prune_partitions(spark, tmp_path):
    """A filtered read of the latest snapshot skips the partitions whose partition statistics
    (`partition_stats`, as Apache Hudi 1.1 wrote them) rule the filter out, even where the column
    statistics cannot answer: with every column_stats file broken, a partition whose files are
    broken too is never opened by a read its range excludes, while the same read of an older
    snapshot (which the statistics do not describe) or without data skipping opens it."""
    from engine.metadata import records as mdr
    from engine.metadata.reader import MetadataTableReader

    path = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path).table
    meta = MetaClient.open(str(path))
    reader = MetadataTableReader(meta, meta.timeline())
    highest = {r["ColumnStatsMetadata"]["fileName"]: r["ColumnStatsMetadata"]["maxValue"]["value"]
               for r in reader.records(mdr.PARTITION_STATS).values()
               if r["ColumnStatsMetadata"]["columnName"] == "txn_ts"}
    low = min(highest, key=highest.get)
    assert len(highest) == 3 and highest[low] < max(highest.values())
    cut = highest[low]
    everything = hudi_rs.snapshot(str(path))
    want = sorted((r["txn_id"], r["txn_ts"]) for r in everything if r["txn_ts"] > cut)
    assert want and all(r["region"] != low.split("=")[-1] for r in everything if r["txn_ts"] > cut)
    for f in (path / ".hoodie" / "metadata" / "column_stats").iterdir():
        if f.is_file() and not f.name.startswith(".hoodie"):
            f.write_bytes(b"broken")
    for f in (path / low).glob("*.parquet"):
        f.write_bytes(b"not parquet any more")
    table = Table.open(spark, str(path))
    frame = spark.read.format("hudi").load(str(path)).filter(F.col("txn_ts") > cut)
    assert sorted((r["txn_id"], r["txn_ts"]) for r in frame.collect()) == want
    assert sorted((r["txn_id"], r["txn_ts"]) for r in table.read(filters=[("txn_ts", ">", cut)]).collect()) == want
    with pytest.raises(Exception, match="not parquet|Parquet|parquet"):
        spark.read.format("hudi").option("hoodie.enable.data.skipping", "false").load(str(path)).filter(
            F.col("txn_ts") > cut).collect()
    last = meta.timeline().completed_writes.last
    assert last is not None
    with pytest.raises(Exception, match="not parquet|Parquet|parquet"):  # as of an instant: not pruned
        table.read(as_of=last.time, filters=[("txn_ts", ">", cut)]).collect()
