"""Metadata-table benchmark: the same copy-on-write table of version 9 written twice, without and
with Apache Hudi's metadata table (`hoodie.metadata.enable=true`), in one run.

    python -m bench.metadata_table                              # 200 partitions, 200k rows, 5 upserts
    python -m bench.metadata_table --partitions 1000 --rows 100000 --upserts 3
    python -m bench.metadata_table --s3 --partitions 1000 --rows 100000 --upserts 3   # on moto S3

Measured (best of --repeat where timed):

- upsert: each of --upserts batches (--batch rows over every partition) into both tables,
  interleaved; the median upsert time of each, and their ratio (issue 35's target: at most 1.15x);
- planning a snapshot read (`engine.read.plan.plan_snapshot`, no Spark): time, and the storage
  calls it makes, counted on the table's Storage object (list calls and the entries they return,
  reads, existence checks). On S3 a listing is one LIST request per 1,000 keys, a read a GET;
  with --s3 both tables live on a moto S3 server on 127.0.0.1 and the HTTP requests planning
  makes are counted as the server receives them (LIST, GET, HEAD).

Both plans are checked to read the same file slices, and both tables to hold the same rows (our
read and hudi-rs's, which lists the second table through its metadata table); a mismatch exits 1.
Results: a table on stdout and bench/results/metadata-table-<partitions>.json.
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
from collections import Counter
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # `python bench/metadata_table.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SCHEMA = "id string, part string, ts long, value double"


class CountingStorage:
    """Counts the calls every Storage of a class receives while in use (the data table's and the
    metadata table's), and the entries their listings return."""

    CALLS = ("list_dir", "list_files_recursive", "read_bytes", "exists", "size", "open_input_file")

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.counts: Counter[str] = Counter()
        self.saved: dict[str, Any] = {}

    def __enter__(self) -> CountingStorage:
        for name in self.CALLS:
            original = self.saved[name] = getattr(self.cls, name)

            def counted(inner: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
                self.counts[_name] += 1
                out = _original(inner, *args, **kwargs)
                if _name.startswith("list"):
                    self.counts["listed entries"] += len(out)
                return out

            setattr(self.cls, name, counted)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self.saved.items():
            setattr(self.cls, name, original)


def _batch(rng: np.random.Generator, partitions: int, rows: int, ts: int, start: int = 0) -> list[tuple]:
    ids = rng.integers(start, start + rows * 4, rows) if start == 0 else np.arange(start, start + rows)
    return [(f"k{int(i):09d}", f"p{int(i) % partitions:04d}", ts, float(i)) for i in ids]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--upserts", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3, help="planning repetitions (best of)")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", default=None)
    ap.add_argument("--s3", action="store_true", help="both tables on a moto S3 server (requests counted)")
    args = ap.parse_args(argv)

    from engine import Table
    from engine.read.plan import plan_snapshot
    from engine.spark.session import build_session
    from engine.table.meta_client import MetaClient
    from tests.support import hudi_rs

    spark = build_session(args.master, app_name="bench-metadata-table", conf={"spark.ui.enabled": "false"})
    rng = np.random.default_rng(args.seed)
    work = Path(tempfile.mkdtemp(prefix="bench-mdt-"))
    s3 = None
    storage_options: dict[str, str] | None = None
    if args.s3:
        from tests.support.moto_s3 import start_moto_s3

        s3 = start_moto_s3()
        storage_options = s3.storage_options()
        bucket = s3.create_bucket()

    def location(name: str) -> str:
        folder = name.replace(" ", "_")
        return f"s3://{bucket}/{folder}" if s3 is not None else str(work / folder)

    manual = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
    variants = {"storage listing": {**manual}, "metadata table": {**manual, "hoodie.metadata.enable": "true"}}
    tables = {}
    try:
        rows = [(f"k{i:09d}", f"p{i % args.partitions:04d}", 1, float(i)) for i in range(args.rows)]
        for name, options in variants.items():
            t = Table.create(spark, location(name), name="bench", record_key="id", partition_fields="part",
                             precombine_field="ts", table_version=9, storage_options=storage_options)
            t.bulk_insert(spark.createDataFrame(rows, SCHEMA), options=options)
            tables[name] = t
        times: dict[str, list[float]] = {name: [] for name in variants}
        for n in range(args.upserts):
            batch = _batch(rng, args.partitions, args.batch, 2 + n)
            df = spark.createDataFrame(batch, SCHEMA).cache()
            df.count()
            for name, options in (variants.items() if n % 2 == 0 else reversed(list(variants.items()))):
                t0 = time.perf_counter()
                tables[name].upsert(df, options=options)
                times[name].append(time.perf_counter() - t0)
            df.unpersist()
        plans: dict[str, dict[str, Any]] = {}
        slices = {}
        for name, t in tables.items():
            best = float("inf")
            counts: Counter[str] = Counter()
            for _ in range(args.repeat):
                meta = MetaClient.open(t.path, storage_options) if s3 is not None else MetaClient.open(t.path)
                with CountingStorage(type(meta.storage)) as counting, (
                        s3.recording() if s3 is not None else nullcontext([])) as requests:
                    t0 = time.perf_counter()
                    plan, _ = plan_snapshot(meta)
                    elapsed = time.perf_counter() - t0
                if elapsed < best:
                    best, counts = elapsed, counting.counts
                    counts["S3 LIST"] = sum(1 for r in requests if r.is_list)
                    counts["S3 GET"] = sum(1 for r in requests if r.method == "GET" and not r.is_list)
                    counts["S3 HEAD"] = sum(1 for r in requests if r.method == "HEAD")
            slices[name] = sorted((s.partition, s.file_id, s.base_instant, s.base_file.name.name if s.base_file else None,
                                   tuple(lf.name.name for lf in s.log_files)) for s in plan.slices)
            plans[name] = {"seconds": best, "listing": plan.listing, **dict(counts)}
        # the metadata table's listing plans exactly what a storage listing plans for that table
        meta = MetaClient.open(tables["metadata table"].path, storage_options)
        listed = sorted((s.partition, s.file_id, s.base_instant, s.base_file.name.name if s.base_file else None,
                         tuple(lf.name.name for lf in s.log_files)) for s in meta.file_system_view().latest_slices())
        same = listed == slices["metadata table"] and plans["metadata table"]["listing"] == "metadata table"
        ok = same
        ours = {name: t.read().count() for name, t in tables.items()}
        oracle = len(hudi_rs.snapshot(tables["metadata table"].path, storage_options=(
            hudi_rs.s3_storage_options(s3.env()) if s3 is not None else None)))
        ok = ok and len(set(ours.values())) == 1 and oracle == ours["metadata table"]
        upsert = {name: statistics.median(v) for name, v in times.items()}
        ratio = upsert["metadata table"] / upsert["storage listing"]
        print(f"\n{args.partitions} partitions, {args.rows} rows, {args.upserts} upserts of {args.batch} rows "
              f"({platform.node()}, {args.master})\n")
        s3_head = f"{'S3 LIST':>9}{'S3 GET':>8}{'S3 HEAD':>9}{'requests':>10}" if s3 is not None else ""
        print(f"{'':24}{'upsert (median s)':>20}{'plan (s)':>10}{'list calls':>12}{'listed':>9}{'reads':>7}{'exists':>8}"
              + s3_head)
        for name in variants:
            p = plans[name]
            lists = p.get("list_dir", 0) + p.get("list_files_recursive", 0)
            s3_cells = ""
            if s3 is not None:
                total = p["S3 LIST"] + p["S3 GET"] + p["S3 HEAD"]
                p["S3 requests"] = total
                s3_cells = f"{p['S3 LIST']:>9}{p['S3 GET']:>8}{p['S3 HEAD']:>9}{total:>10}"
            print(f"{name:24}{upsert[name]:>20.2f}{p['seconds']:>10.3f}{lists:>12}{p.get('listed entries', 0):>9}"
                  f"{p.get('read_bytes', 0) + p.get('open_input_file', 0):>7}{p.get('exists', 0):>8}" + s3_cells)
        if s3 is not None:
            fewer = plans["storage listing"]["S3 requests"] / max(plans["metadata table"]["S3 requests"], 1)
            print(f"\nS3 requests to plan a snapshot read: {fewer:.1f}x fewer with the metadata table")
        print(f"\nupsert with / without the metadata table: {ratio:.2f}x; the metadata table's listing plans the "
              f"slices a storage listing plans: {same}; rows (ours, hudi-rs): {ours}, {oracle}")
        out = Path(args.json or f"bench/results/metadata-table-{'s3-' if s3 is not None else ''}{args.partitions}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"args": vars(args), "upsert_seconds": times, "upsert_median": upsert,
                                   "ratio": ratio, "plan": plans, "consistent": ok}, indent=2))
        return 0 if ok else 1
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
        if s3 is not None:
            s3.stop()


if __name__ == "__main__":
    sys.exit(main())
