"""Column-statistics benchmark: what keeping Apache Hudi's `column_stats` partition costs a write,
and what data skipping by it saves a filtered read, in one run.

    python -m bench.column_stats                          # 1,000,000 rows in 20 batches
    python -m bench.column_stats --rows 200000 --batches 10 --upserts 3

A copy-on-write table of version 9 with a metadata table, written by this engine in --batches
inserts of disjoint `ts` ranges over two partitions (no small-file packing: each batch writes its
own files), is copied: one copy gets its column statistics built (`hoodie index build
--partition column_stats`, timed), the other keeps the `files` partition only. Then --upserts
rounds of 1% updates (random keys, new `v`) go into both, interleaved: the median write time of
each and their ratio; afterwards the statistics are checked against the data files
(`tests.support.column_stats.check`, exit 1 on a mismatch). Finally filtered
`spark.read.format("hudi")` counts, a point filter and a 1% range on `ts`, with data skipping on
and off (`hoodie.enable.data.skipping`): file slices read (as `engine.read.data_skipping` keeps
them) and the median of 3 timed counts; counts that differ exit 1. Results: a table on stdout and
bench/results/column-stats.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python bench/column_stats.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--upserts", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "column-stats.json"))
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from engine import Table
    from engine.data.slice_reader import SliceFiles
    from engine.read import data_skipping
    from engine.read.plan import plan_snapshot
    from engine.read.prune import Predicate
    from engine.services.maintenance import Maintenance
    from engine.spark import build_session
    from engine.table.meta_client import MetaClient
    from tests.support import column_stats

    spark = build_session("local[2]", app_name="bench-column-stats", conf={"spark.ui.enabled": "false"})
    work = Path(tempfile.mkdtemp(prefix="bench-column-stats-"))
    options = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
               "hoodie.parquet.small.file.limit": "0", "hoodie.metadata.enable": "true"}
    base = work / "none"
    table = Table.create(spark, str(base), name="bench", record_key="id", partition_fields="part",
                         precombine_field="ts", table_type="COPY_ON_WRITE", table_version=9)
    per = args.rows // args.batches
    for b in range(args.batches):
        frame = spark.range(b * per, (b + 1) * per).select(
            F.concat(F.lit("k"), F.col("id").cast("string")).alias("id"),
            F.when(F.col("id") % 2 == 0, F.lit("even")).otherwise(F.lit("odd")).alias("part"),
            F.col("id").alias("ts"), (F.col("id") * 7 % 1000).cast("double").alias("v"))
        table.insert(frame, options=options)
    kept = work / "kept"
    shutil.copytree(base, kept)
    started = time.perf_counter()
    built = Maintenance(MetaClient.open(str(kept))).build_metadata_column_stats()
    build_seconds = time.perf_counter() - started

    paths = {"none": base, "kept": kept}
    times: dict[str, list[float]] = {"none": [], "kept": []}
    for r in range(args.upserts):
        keys = spark.range(args.rows // 100).select(((F.col("id") * 7919 + r * 104729) % args.rows).alias("n"))
        batch = keys.select(F.concat(F.lit("k"), F.col("n").cast("string")).alias("id"),
                            F.when(F.col("n") % 2 == 0, F.lit("even")).otherwise(F.lit("odd")).alias("part"),
                            F.col("n").alias("ts"), F.lit(float(r)).alias("v")).dropDuplicates(["id"]).cache()
        batch.count()
        for name in ("kept", "none") if r % 2 else ("none", "kept"):
            started = time.perf_counter()
            Table.open(spark, str(paths[name])).upsert(batch, options=options)
            times[name].append(time.perf_counter() - started)
        batch.unpersist()
    held = column_stats.check(MetaClient.open(str(kept)))

    meta = MetaClient.open(str(kept))
    plan, timeline = plan_snapshot(meta)
    slices = [SliceFiles.from_slice(s) for s in plan.slices]
    types = {f.name: f.type for f in plan.schema}
    point = args.rows // 2 + 17
    low, high = args.rows // 3, args.rows // 3 + args.rows // 100
    filters = {"ts = point": (F.col("ts") == point, [Predicate("ts", "eq", point)]),
               "ts in a 1% range": ((F.col("ts") >= low) & (F.col("ts") < high),
                                    [Predicate("ts", "ge", low), Predicate("ts", "lt", high)])}
    reads = {}
    ok = True
    for label, (condition, preds) in filters.items():
        stats = data_skipping.load(meta, timeline, slices, ["ts"])
        read_slices = sum(1 for s in slices if stats.slice_may_match(s, preds, types))
        result = {}
        for skipping in ("true", "false"):
            frame = spark.read.format("hudi").option("hoodie.enable.data.skipping", skipping).load(str(kept))
            counts, spent = [], []
            for _ in range(3):
                started = time.perf_counter()
                counts.append(frame.filter(condition).count())
                spent.append(time.perf_counter() - started)
            result[skipping] = {"count": counts[0], "seconds": statistics.median(spent),
                                "slices": read_slices if skipping == "true" else len(slices)}
            ok = ok and len(set(counts)) == 1
        ok = ok and result["true"]["count"] == result["false"]["count"]
        reads[label] = result

    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"column statistics: {args.rows:,} rows, {len(slices)} file slices, {len(built.columns)} columns "
          f"({len(held):,} records); built in {build_seconds:.2f} s")
    print(f"{'table':<26}{'upsert 1% (median)':>20}   each")
    for label, name in (("files partition only", "none"), ("column_stats kept", "kept")):
        print(f"{label:<26}{med[name]:>18.2f} s   " + " ".join(f"{t:.2f}" for t in times[name]))
    print(f"ratio kept / files only: {med['kept'] / med['none']:.2f}x")
    print(f"{'filtered count':<20}{'skipping':>10}{'slices read':>14}{'count (median of 3)':>22}")
    for label, result in reads.items():
        for skipping in ("true", "false"):
            r = result[skipping]
            print(f"{label:<20}{'on' if skipping == 'true' else 'off':>10}{r['slices']:>8} of {len(slices):<4}"
                  f"{r['seconds']:>18.2f} s")
    print("OK" if ok else "MISMATCH")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "rows": args.rows, "batches": args.batches, "upserts": args.upserts, "slices": len(slices),
        "build_seconds": build_seconds, "columns": list(built.columns), "upsert_seconds": times, "median": med,
        "ratio": med["kept"] / med["none"], "reads": reads, "ok": ok, "machine": platform.platform(),
    }, indent=2))
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
