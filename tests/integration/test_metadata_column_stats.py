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
    victim.write_bytes(b"not parquet any more")
    assert read(F.col("txn_ts") > 1700700000000) == want  # skipped: never opened
    with pytest.raises(Exception, match="not parquet|Parquet|parquet"):
        read(F.col("txn_ts") > 1700700000000, **{"hoodie.enable.data.skipping": "false"})
    with pytest.raises(Exception, match="not parquet|Parquet|parquet"):
        read(F.col("txn_ts") > 0)  # a filter the statistics cannot rule out reads it
