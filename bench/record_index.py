"""RECORD index benchmark: point lookups of a 100k-key batch (half present) against 1M / 10M entries.

    python -m bench.record_index                                   # 1M: index-only cases + table cases
    python -m bench.record_index --rows 1000000,10000000 --table-rows 1000000
    python -m bench.record_index --rows 200000 --table-rows 200000 --runs 5 --compare-runs 2   # quick

Two parts (see bench/README.md for the columns and caveats):

1. Index only, no Spark: `--rows` entries are written with the engine's own index writer
   (`entries_table` + `write_entries`, what `update_location`'s tasks call) as 10 commits of
   rows/10 entries into 16 buckets (160 delta files), then compacted (one base file per bucket),
   then copied as parquet (zstd, 8192-row row groups, page index). The clock covers
   `record_files.lookup(...)` (hash, group by bucket, binary search, newest entry wins) for the
   100k batch, `--runs` times, on the driver: compacted Arrow IPC (the engine's format), compacted
   parquet, and 10 Arrow deltas per bucket (before compaction).
2. On a table (`--table-rows`, Spark): a COPY_ON_WRITE table is loaded with index RECORD as
   bench/index.py loads its tables (bulk inserts, one file per day per commit), the batch
   is prepared as the write executor prepares it, and the clock covers, per case:
   - `RECORD locate`: `RecordIndex.locate(meta, keys)` (the driver path, listing included);
   - `RECORD tag (driver)` / `RECORD tag (spark)`: `tag_location` + a count of the tagged records,
     with `hoodie.record.index.lookup` = driver / spark;
   - `GLOBAL_BLOOM tag`, `SIMPLE tag`: the same for those indexes on the same files.
Every run checks that exactly the present keys were found.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if __package__ in (None, ""):  # `python bench/record_index.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.index import (  # noqa: E402
    Batch,
    Layout,
    _git_state,
    _versions,
    build_table,
    new_index,
    ordered_strings,
    prepare_records,
    tag_context,
    tag_once,
    uuid_strings,
)
from engine.index.record_files import (  # noqa: E402
    CompactionPlan,
    IndexFile,
    entries_table,
    lookup,
    merge_entries,
    read_entries,
    resolve_state,
    write_entries,
)
from engine.keygen.record_hash import DEFAULT_BUCKETS, buckets_of, java_hash_array  # noqa: E402
from engine.storage import storage_for  # noqa: E402

COMMITS = 10
DAYS = 10
ROWS_PER_FILE_GROUP = 25_000


def percentiles(seconds: list[float]) -> dict:
    ms = np.array(seconds) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1),
            "min_ms": round(float(ms.min()), 1), "runs": len(ms)}


def timed(fn, runs: int, expect: int) -> tuple[dict, int]:
    fn()  # warm-up (page cache, imports), untimed
    out = []
    found = -1
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        found = fn()
        out.append(time.perf_counter() - t0)
        if found != expect:
            raise SystemExit(f"!!! found {found} keys, expected {expect}")
    return percentiles(out), found


# ---- part 1: index only ----------------------------------------------------------------------
def synthetic(rows: int, kind: str, batch: int, runs: int, work: Path, seed: int, buckets: int) -> dict:
    rng = np.random.default_rng([seed, rows])
    keys = ordered_strings(np.arange(rows)) if kind == "ordered" else uuid_strings(rng, rows)
    days = pa.array([f"2024-01-{d + 1:02d}" for d in range(DAYS)])
    fids = pa.array([f"{uuid.UUID(int=int(x))}-0" for x in rng.integers(0, 2**62, max(1, rows // ROWS_PER_FILE_GROUP))])
    root = work / f"index-{kind}-{rows}"
    storage = storage_for(str(root))
    hashes = java_hash_array(keys)
    bucket = buckets_of(keys, buckets)
    names: list[str] = []
    t0 = time.perf_counter()
    per_commit = rows // COMMITS
    for c in range(COMMITS):
        instant = f"2024010100000{c:04d}"
        sl = slice(c * per_commit, rows if c == COMMITS - 1 else (c + 1) * per_commit)
        k = keys[sl]
        n = len(k)
        table = entries_table(
            k, days.take(pa.array(rng.integers(0, DAYS, n))), fids.take(pa.array(rng.integers(0, len(fids), n))),
            pa.array([instant] * n), pa.array(np.zeros(n, bool)), hashes=hashes[sl],
        )
        kb = bucket[sl]
        tb = buckets_of(table.column("key"), buckets)
        for b in range(buckets):
            f = IndexFile(b, instant)
            write_entries(storage, f, table.filter(pa.array(tb == b)))
            names.append(f.name)
        del kb
    build_s = time.perf_counter() - t0
    delta_bytes = sum(p.stat().st_size for p in (root / ".hoodie/.record_index").iterdir())
    valid = lambda _t: True  # noqa: E731
    deltas = resolve_state(names, {}, valid)
    # compaction, as the engine's compaction task does it (merge newest first, drop tombstones)
    plan = CompactionPlan("20240102000000000", {b: tuple(f.name for f in deltas.bucket(b).sources) for b in range(buckets)},
                          dict.fromkeys(range(buckets), f"2024010100000{COMMITS - 1:04d}"))
    t0 = time.perf_counter()
    for b in range(buckets):
        merged = merge_entries([read_entries(storage, f) for f in deltas.bucket(b).sources], keep_tombstones=False)
        write_entries(storage, plan.base(b), merged)
    compact_s = time.perf_counter() - t0
    base_names = [plan.base(b).name for b in range(buckets)]
    compacted = resolve_state(base_names, {plan.instant: plan}, valid)
    arrow_bytes = sum((root / ".hoodie/.record_index" / n).stat().st_size for n in base_names)
    # parquet copies of the compacted files, in a folder of their own
    pq_storage = storage_for(str(work / f"index-{kind}-{rows}-parquet"))
    pq_names = []
    for b in range(buckets):
        f = IndexFile(b, plan.instant, is_base=True, extension=".parquet")
        write_entries(pq_storage, f, read_entries(storage, plan.base(b)))
        pq_names.append(f.name)
    parquet_bytes = sum(p.stat().st_size for p in (work / f"index-{kind}-{rows}-parquet/.hoodie/.record_index").iterdir())
    pq_plan = CompactionPlan(plan.instant, {b: () for b in range(buckets)}, plan.covers)
    pq_state = resolve_state(pq_names, {plan.instant: pq_plan}, valid)
    # the batch: half present (random existing keys), half absent
    half = batch // 2
    present = keys.take(pa.array(rng.choice(rows, half, replace=False)))
    absent = (ordered_strings(np.arange(rows, rows + batch - half)) if kind == "ordered"
              else uuid_strings(np.random.default_rng([seed, 99]), batch - half))
    probe = pa.concat_arrays([present, absent])
    cases = {}
    for label, st, state in (("arrow compacted", storage, compacted), ("parquet compacted", pq_storage, pq_state),
                             (f"arrow {COMMITS} deltas/bucket", storage, deltas)):
        stats, found = timed(lambda st=st, state=state: lookup(st, state, probe, buckets).num_rows, runs, half)
        cases[label] = {**stats, "found": found}
        print(f"  {rows:>11,} {kind:<8} {label:<24} p50 {stats['p50_ms']:7.1f} ms  p95 {stats['p95_ms']:7.1f} ms",
              flush=True)
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(work / f"index-{kind}-{rows}-parquet", ignore_errors=True)
    return {
        "rows": rows, "keys": kind, "buckets": buckets, "batch": batch, "present": half,
        "build_seconds": round(build_s, 2), "compact_seconds": round(compact_s, 2),
        "bytes_per_entry": {"arrow_compacted": round(arrow_bytes / rows, 1),
                            "parquet_compacted": round(parquet_bytes / rows, 1),
                            f"arrow_{COMMITS}_deltas": round(delta_bytes / rows, 1)},
        "cases": cases,
    }


# ---- part 2: on a table -----------------------------------------------------------------------
def table_cases(spark, rows: int, kind: str, batch_size: int, runs: int, compare_runs: int, work: Path,
                seed: int, progress: bool) -> dict:
    from pyspark.sql import functions as F

    from engine.columns import KEY_COL
    from engine.index.record import RecordIndex, load_state

    layout = Layout(rows, DAYS, None, seed)
    t0 = time.perf_counter()
    table, per_day, _ = build_table(spark, layout, kind, work, seed, progress, index="RECORD")
    load_s = time.perf_counter() - t0
    batch = Batch(layout, batch_size, 0.5, 0.25, seed)
    path = str(work / f"batch-{kind}.parquet")
    pq.write_table(batch.table(kind), path)
    records = prepare_records(spark, table, path)
    ctx, _, _ = tag_context(spark, table, records)
    keys = records.select(KEY_COL).distinct().toArrow().column(0).combine_chunks()
    state = load_state(table.meta)
    index_bytes = sum(f.size for f in table.meta.storage.list_dir(".hoodie/.record_index"))
    expect = batch.updates
    out = {"rows": layout.rows, "keys": kind, "load_seconds": round(load_s, 1), "files_per_day": per_day,
           "index_files": sum(b.file_count for b in state.buckets.values()),
           "index_bytes_per_entry": round(index_bytes / layout.rows, 1), "batch": batch.describe(), "cases": {}}

    def report(label, stats):
        out["cases"][label] = stats
        print(f"  {layout.rows:>11,} {kind:<8} {label:<24} p50 {stats['p50_ms']:9.1f} ms  p95 {stats['p95_ms']:9.1f} ms",
              flush=True)

    stats, _ = timed(lambda: RecordIndex().locate(table.meta, keys).num_rows, runs, expect)
    report("RECORD locate", stats)
    for mode in ("driver", "spark"):
        def tag(mode=mode):
            return tag_once(RecordIndex({"hoodie.record.index.lookup": mode}), ctx, records)[1]
        stats, _ = timed(tag, runs, expect)
        report(f"RECORD tag ({mode})", stats)
    for name in ("GLOBAL_BLOOM", "SIMPLE"):
        stats, _ = timed(lambda name=name: tag_once(new_index(name), ctx, records)[1], compare_runs, expect)
        report(f"{name} tag", stats)
    records.unpersist()
    del F
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="1000000", help="entries of the index-only cases (comma-separated)")
    p.add_argument("--table-rows", type=int, default=1_000_000, help="rows of the table cases (0: skip them)")
    p.add_argument("--batch", type=int, default=100_000)
    p.add_argument("--keys", default="ordered,uuid")
    p.add_argument("--runs", type=int, default=20, help="timed runs of each RECORD case")
    p.add_argument("--compare-runs", type=int, default=5, help="timed runs of GLOBAL_BLOOM and SIMPLE")
    p.add_argument("--buckets", type=int, default=DEFAULT_BUCKETS)
    p.add_argument("--json", default=None)
    p.add_argument("--workdir", default=None)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--master", default=None)
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--progress", action="store_true")
    args = p.parse_args(argv)
    kinds = [k.strip() for k in args.keys.split(",") if k.strip()]
    rows_list = [int(r) for r in args.rows.split(",") if r.strip()]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-record-index-"))
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "git": _git_state(), "versions": _versions(),
                    "host": {"cpus": os.cpu_count(), "platform": platform.platform(),
                             "load_avg_start": os.getloadavg()},
                    "args": vars(args), "index_only": [], "table": []}
    try:
        print("index only (driver, no Spark): 100k-key lookups, half present", flush=True)
        for rows in rows_list:
            for kind in kinds:
                result["index_only"].append(synthetic(rows, kind, args.batch, args.runs, work, args.seed, args.buckets))
        if args.table_rows:
            from engine.spark import build_session

            spark = build_session(args.master or os.environ.get("SPARK_MASTER") or "local[*]", app_name="bench-record",
                                  conf={"spark.ui.enabled": "false", "spark.driver.memory": args.driver_memory})
            print(f"table with index RECORD ({args.table_rows:,} rows), the same batch through each index", flush=True)
            for kind in kinds:
                result["table"].append(table_cases(spark, args.table_rows, kind, args.batch, args.runs,
                                                   args.compare_runs, work, args.seed, args.progress))
            spark.stop()
    finally:
        result["host"]["load_avg_end"] = os.getloadavg()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    out = Path(args.json or f"bench/results/record-index-{max(rows_list)}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
