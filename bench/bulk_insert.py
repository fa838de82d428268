"""Initial-load benchmark: our bulk_insert against Spark's own parquet write of the same rows, in
the same Spark session, from the same source.

    python -m bench.bulk_insert                        # 1M rows, both workloads, best of 2
    python -m bench.bulk_insert --rows 10000000 --driver-memory 12g --repeat 1

Each workload's base table (bench/data.py, the upsert benchmark's) is written once as a parquet
file; then, timed one after another, from that file:

- spark     `spark.read.parquet(src).write.partitionBy("day").parquet(out)`: the anchor
- NONE      `Table.bulk_insert` with `hoodie.bulkinsert.sort.mode=NONE` (one pass, no shuffle:
            a task's own file groups per day it sees, as Spark's write makes files)
- PARTITION_SORT   the same, rows sorted by record key inside each file
- default   our default sort mode (PARTITION_PATH_REPARTITION_AND_SORT: file groups sized per day,
            the layout the upsert benchmark starts from)

and from an Arrow table already in the driver (the console's uploads, `hoodie ... --input`):

- spark-arrow      `spark.createDataFrame(arrow).write.partitionBy("day").parquet(out)`
- NONE-arrow / default-arrow   `Table.bulk_insert(spark.createDataFrame(arrow))`

Every table is checked after its write (row count; for ours, every key once) outside the clock.
Prints a table and writes JSON (bench/results/bulk_insert-<rows>.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import PARTITION_FIELD, PRECOMBINE_FIELD, RECORD_KEY, WORKLOADS, make_workload  # noqa: E402
from bench.stages import last_stage_id, print_stages, stages_since  # noqa: E402

MB = 1024 * 1024
MODES = {"NONE": "NONE", "PARTITION_SORT": "PARTITION_SORT", "default": None}
SYSTEMS = ("spark", "NONE", "PARTITION_SORT", "default", "spark-arrow", "NONE-arrow", "default-arrow")


def _ours(spark, path: Path, source, mode: str | None) -> tuple[float, int]:
    from engine.api import Table

    table = Table.create(
        spark, str(path), name="bench", record_key=RECORD_KEY, partition_fields=PARTITION_FIELD,
        precombine_field=PRECOMBINE_FIELD,
    )
    options = {"hoodie.parquet.max.file.size": str(128 * MB)}
    if mode is not None:
        options["hoodie.bulkinsert.sort.mode"] = mode
    t0 = time.perf_counter()
    res = table.bulk_insert(source(), options=options)
    seconds = time.perf_counter() - t0
    return seconds, res.files_written


def _spark(path: Path, source) -> tuple[float, int]:
    t0 = time.perf_counter()
    source().write.partitionBy(PARTITION_FIELD).parquet(str(path))
    seconds = time.perf_counter() - t0
    return seconds, sum(1 for _ in path.rglob("*.parquet"))


def _check(spark, system: str, path: Path, rows: int) -> None:
    """Outside the clock: the written table holds every row (ours: every key exactly once)."""
    if system.startswith("spark"):
        got = spark.read.parquet(str(path)).count()
        assert got == rows, (system, got, rows)
        return
    from engine.api import Table

    snap = Table.open(spark, str(path)).read()
    got, keys = snap.count(), snap.select(RECORD_KEY).distinct().count()
    assert got == rows and keys == rows, (system, got, keys, rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--repeat", type=int, default=2, help="best of K runs")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", default=None)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--stages", action="store_true", help="print and record each run's Spark stages (enables the UI)")
    args = ap.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        ap.error(f"unknown systems: {', '.join(sorted(unknown))}")

    from engine.spark.session import build_session

    conf = {"spark.driver.memory": args.driver_memory, "spark.ui.enabled": "true" if args.stages else "false"}
    spark = build_session("local[*]", app_name="bench-bulk-insert", conf=conf)
    root = Path(args.workdir or tempfile.mkdtemp(prefix="bench-bulk-"))
    root.mkdir(parents=True, exist_ok=True)
    results: dict = {
        "benchmark": "bulk_insert",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "params": vars(args),
        "host": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "workloads": {},
    }
    try:
        # warm-up (untimed): JVM, Python workers
        warm = make_workload("recent", 20_000, 100, seed=7)
        wsrc = str(root / "warm.parquet")
        pq.write_table(warm.base, wsrc)
        _ours(spark, root / "warm-t", lambda: spark.read.parquet(wsrc), "NONE")
        _spark(root / "warm-s", lambda: spark.read.parquet(wsrc))
        for wname in [w for w in args.workloads.split(",") if w]:
            wl = make_workload(wname, args.rows, 1000, seed=args.seed)
            src = str(root / f"{wname}.parquet")
            pq.write_table(wl.base, src, row_group_size=256 * 1024)
            arrow = wl.base
            print(f"== {wname}: {arrow.num_rows:,} rows", flush=True)
            out: dict = {}
            for system in systems:
                times, files, stages = [], 0, []
                for k in range(args.repeat):
                    last = last_stage_id(spark) if args.stages else -1
                    path = root / f"{wname}-{system}-{k}"
                    from_arrow = system.endswith("-arrow")
                    source = (lambda a=arrow: spark.createDataFrame(a)) if from_arrow else (lambda s=src: spark.read.parquet(s))
                    base = system.removesuffix("-arrow")
                    seconds, files = _spark(path, source) if base == "spark" else _ours(spark, path, source, MODES[base])
                    if args.stages:
                        stages.append(stages_since(spark, last))
                    _check(spark, system, path, arrow.num_rows)
                    shutil.rmtree(path, ignore_errors=True)
                    times.append(seconds)
                    print(f"   {system:<15} run {k + 1}/{args.repeat}: {seconds:7.2f}s files={files}", flush=True)
                    if args.stages:
                        print_stages(stages[-1])
                out[system] = {"seconds": round(min(times), 3), "all_seconds": [round(t, 3) for t in times], "files": files}
                if args.stages:
                    out[system]["stages"] = stages
            results["workloads"][wname] = out
    finally:
        spark.stop()
        if args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    _print(results)
    dest = Path(args.json or Path(__file__).parent / "results" / f"bulk_insert-{args.rows}.json")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(results, indent=2))
    print(f"results: {dest}")
    return 0


def _print(results: dict) -> None:
    print(f"\n{'workload':<9} {'system':<15} {'seconds':>8} {'x spark':>8} {'files':>6}")
    for wname, systems in results["workloads"].items():
        for system, r in systems.items():
            anchor = systems.get("spark-arrow" if system.endswith("-arrow") else "spark", {}).get("seconds")
            ratio = f"{r['seconds'] / anchor:.2f}" if anchor else "-"
            print(f"{wname:<9} {system:<15} {r['seconds']:>8.2f} {ratio:>8} {r['files']:>6}")


if __name__ == "__main__":
    raise SystemExit(main())
