"""Issue 35.4: a filtered `format("hudi")` read with an equality on the record key or on the
column of a secondary index reads only the file groups the metadata table's record index (and
secondary index) name. With the column statistics dropped first, the index lookup is the only
pruning: every other slice's base file is made unreadable, the filtered reads still answer
exactly what hudi-rs reads, and the same read with `hoodie.enable.data.skipping=false` (or a
time-travel read, which the indexes cannot answer) fails on the broken files."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from engine import Table
from engine.table.meta_client import MetaClient
from tests.support import hudi1x, hudi_rs, record_index, secondary_index

pytestmark = pytest.mark.spark
FAST = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def test_key_and_secondary_key_filters_read_only_their_file_groups(spark, tmp_path):
    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    path = fx.table
    table = Table.open(spark, str(path))
    table.maintenance.drop_metadata_partition("column_stats")  # the index lookups alone prune
    # our write changes one record's merchant: the secondary index follows it
    data = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")])
    moved = data.filter(F.col("merchant_name") == "Uber").orderBy("txn_id").limit(1)
    (old,) = moved.collect()
    result = table.upsert(moved.withColumn("merchant_name", F.lit("Lyft")), options=FAST)
    meta = MetaClient.open(str(path))
    located = record_index.check(meta)
    held = secondary_index.check(meta)
    assert f"Lyft${old['txn_id']}" in held["secondary_index_merchant_idx"]
    assert f"Uber${old['txn_id']}" not in held["secondary_index_merchant_idx"]

    rows = hudi_rs.snapshot(str(path))
    lyft = [r["txn_id"] for r in rows if r["merchant_name"] == "Lyft"]
    assert lyft == [old["txn_id"]]
    target = located[old["txn_id"]]
    keep = {(target.partition, target.file_id)}
    # every base file of every other file group is broken: a read that opens one fails
    for file in path.rglob("*.parquet"):
        group = file.name.split("_", 1)[0]
        if (file.parent.name, group) not in keep and ".hoodie" not in file.parts:
            file.write_bytes(b"not parquet any more")

    def read(condition, **options):
        frame = spark.read.format("hudi").options(**options).load(str(path)).filter(condition)
        return sorted((r["txn_id"], r["merchant_name"]) for r in frame.collect())

    assert read(F.col("merchant_name") == "Lyft") == [(old["txn_id"], "Lyft")]  # the secondary index
    assert read(F.col("txn_id") == old["txn_id"]) == [(old["txn_id"], "Lyft")]  # the record index
    assert read(F.col("_hoodie_record_key").isin(old["txn_id"], "NO-SUCH-KEY")) == [(old["txn_id"], "Lyft")]
    assert read(F.col("merchant_name") == "Nobody") == []  # no entry: no slice read at all
    assert read(F.col("txn_id") == "NO-SUCH-KEY") == []
    with pytest.raises(Exception, match="not parquet|Parquet|parquet"):
        read(F.col("merchant_name") == "Lyft", **{"hoodie.enable.data.skipping": "false"})
    with pytest.raises(Exception, match="not parquet|Parquet|parquet"):
        read(F.col("merchant_name") == "Lyft", **{"as.of.instant": result.instant})
    with pytest.raises(Exception, match="not parquet|Parquet|parquet"):
        read(F.col("merchant_name") != "Lyft")  # no equality: nothing to look up
