"""Record-index benchmark: what keeping Apache Hudi's record index (the metadata table's
`record_index` partition) costs a write, in one run.

    python -m bench.metadata_record_index                      # 3 batches of 100,000 new keys
    python -m bench.metadata_record_index --rows 20000 --batches 5

Two copies of the copy-on-write table of version 9 that Apache Hudi 1.1 wrote with a record
index (hudi-rs's `v9_txns_simple_meta`, fetched as the tests fetch it): one keeps its record
index, the other has it dropped first (`hoodie index drop --partition record_index`); both keep
the `files` partition. Each batch (--rows new keys over three partitions, plus --rows/10
updates of keys of the previous batch) is upserted into both, interleaved; the median write time
of each and their ratio. Afterwards the record index is checked against the data files (every
key, at its record's file group: `tests.support.record_index.check`) and both tables against
each other; a mismatch exits 1. Then --lookups existing keys in random order are looked up
through the record index as a RECORD write tags (`engine.index.metadata_record.lookup`): once with
nothing decoded yet (a new process), then 20 times (p50, p95; target p95 <= 100 ms). Results: a table on stdout and bench/results/metadata-record-index.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # `python bench/metadata_record_index.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FIXTURE = "sample_table/cow/v9_txns_simple_meta"
LOOKUP_RUNS = 20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--lookups", type=int, default=100_000, help="keys per timed lookup (0: none)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "metadata-record-index.json"))
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from engine import Table
    from engine.services.maintenance import Maintenance
    from engine.spark import build_session
    from engine.table.meta_client import MetaClient
    from tests.support import hudi1x, record_index

    spark = build_session("local[2]", app_name="bench-record-index", conf={"spark.ui.enabled": "false"})
    work = Path(tempfile.mkdtemp(prefix="bench-record-index-"))
    paths = {}
    for name in ("kept", "dropped"):
        paths[name] = hudi1x.fixture(FIXTURE, work / name).table
    Maintenance(MetaClient.open(str(paths["dropped"]))).drop_metadata_partition("record_index")
    options = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
    template = Table.open(spark, str(paths["kept"])).read()
    template = template.drop(*[c for c in template.columns if c.startswith("_hoodie_")]).orderBy("txn_id").limit(1)
    times: dict[str, list[float]] = {"kept": [], "dropped": []}
    for b in range(args.batches):
        ids = spark.range(args.rows).withColumnRenamed("id", "n")
        batch = ids.crossJoin(template).withColumn("txn_id", F.concat(F.lit(f"B{b}-"), F.col("n").cast("string")))
        batch = batch.withColumn("region", F.element_at(F.array(F.lit("us"), F.lit("eu"), F.lit("apac")),
                                                        (F.col("n") % 3 + 1).cast("int")))
        if b:
            updates = spark.range(args.rows // 10).withColumnRenamed("id", "n").crossJoin(template)
            updates = updates.withColumn("txn_id", F.concat(F.lit(f"B{b - 1}-"), (F.col("n") * 10).cast("string")))
            updates = updates.withColumn("region", F.element_at(
                F.array(F.lit("us"), F.lit("eu"), F.lit("apac")), ((F.col("n") * 10) % 3 + 1).cast("int")))
            updates = updates.withColumn("txn_ts", F.col("txn_ts") + b)
            batch = batch.unionByName(updates)
        batch = batch.drop("n").cache()
        batch.count()
        for name in ("dropped", "kept") if b % 2 else ("kept", "dropped"):
            started = time.perf_counter()
            Table.open(spark, str(paths[name])).upsert(batch, options=options)
            times[name].append(time.perf_counter() - started)
        batch.unpersist()
    found = record_index.check(MetaClient.open(str(paths["kept"])))
    lookup_times: list[float] = []
    if args.lookups:  # the record index as RECORD reads it: existing keys, random order, 5 runs
        import random

        import pyarrow as pa

        from engine.index import metadata_record
        from engine.metadata import record_index_lookup

        meta = MetaClient.open(str(paths["kept"]))
        rng = random.Random(7)
        keys = sorted(found)
        record_index_lookup.CACHE.clear()  # the first run decodes the index's files, as a new process does
        for _ in range(1 + LOOKUP_RUNS):
            probe = pa.array(rng.sample(keys, min(args.lookups, len(keys))), pa.string())
            started = time.perf_counter()
            located = metadata_record.lookup(meta, probe)
            lookup_times.append(time.perf_counter() - started)
            assert located.num_rows == len(probe)
    rows = {name: Table.open(spark, str(p)).read().count() for name, p in paths.items()}
    ok = rows["kept"] == rows["dropped"] == len(found)
    kept, dropped = statistics.median(times["kept"]), statistics.median(times["dropped"])
    print(f"record index: {len(found):,} keys after {args.batches} batches of {args.rows:,} new keys "
          f"(+{args.rows // 10:,} updates from the second)")
    print(f"{'table':<28}{'upsert (median)':>18}   each")
    for label, name in (("record index dropped", "dropped"), ("record index kept", "kept")):
        each = " ".join(f"{t:.2f}" for t in times[name])
        print(f"{label:<28}{statistics.median(times[name]):>16.2f} s   {each}")
    print(f"ratio kept / dropped: {kept / dropped:.2f}x" + ("" if ok else "  MISMATCH"))
    warm: dict = {}
    if lookup_times:
        ms = np.array(lookup_times[1:]) * 1000
        warm = {"p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1)}
        print(f"lookup of {min(args.lookups, len(found)):,} random keys in {len(found):,}: first (files decoded) "
              f"{lookup_times[0]:.3f} s; then p50 {warm['p50_ms']} ms, p95 {warm['p95_ms']} ms ({LOOKUP_RUNS} runs; "
              f"target p95 <= 100 ms: {'met' if warm['p95_ms'] <= 100 else 'MISSED'})")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "rows": args.rows, "batches": args.batches, "keys": len(found), "seconds": times,
        "median": {"kept": kept, "dropped": dropped}, "ratio": kept / dropped, "ok": ok,
        "lookups": args.lookups, "lookup_seconds": lookup_times, "lookup_warm": warm,
        "machine": platform.platform(),
    }, indent=2))
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
