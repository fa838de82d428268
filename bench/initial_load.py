"""Initial-load benchmark with and without the metadata table's record index, in one run.

    python -m bench.initial_load                                   # 1M rows
    python -m bench.initial_load --rows 10000000 --driver-memory 12g

The upsert benchmark's `uniform` base table (bench/data.py: 100 day partitions) is written once
as a Parquet file, then loaded from it with `Table.bulk_insert` into new merge-on-read tables of
version 9, one after another in the same Spark session:

- BLOOM, no metadata table       `metadata=False`: the load alone
- BLOOM, metadata table          the default for new tables: the `files` partition
- RECORD, metadata table         the default with the RECORD index: `files` and `record_index`,
                                 every key's location written by the load's deltacommit
- RECORD, own index              `metadata=False`: this engine's `.hoodie/.record_index/`

and by delta-rs's `write_deltalake` from the same rows in Arrow (partitioned by day), the peer.
Each table is checked outside the clock (every key once; the record index: as many keys as rows).
Prints a table and writes JSON (bench/results/initial-load-<rows>.json). Issue 35's target: the
load with the record index at most 1.3x the load without it.
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

import pyarrow.parquet as pq

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import PARTITION_FIELD, PRECOMBINE_FIELD, RECORD_KEY, make_workload  # noqa: E402

MB = 1024 * 1024
CASES = {
    "BLOOM, no metadata table": ("BLOOM", False),
    "BLOOM, metadata table": ("BLOOM", None),
    "RECORD, metadata table": ("RECORD", None),
    "RECORD, own index": ("RECORD", False),
}


def _load(spark, path: Path, src: str, index: str, metadata: bool | None) -> float:
    from engine.api import Table

    table = Table.create(spark, str(path), name="bench", record_key=RECORD_KEY, partition_fields=PARTITION_FIELD,
                         precombine_field=PRECOMBINE_FIELD, table_type="MERGE_ON_READ", table_version=9,
                         index=index, metadata=metadata)
    t0 = time.perf_counter()
    table.bulk_insert(spark.read.parquet(src), options={"hoodie.parquet.max.file.size": str(128 * MB)})
    return time.perf_counter() - t0


def _check(spark, path: Path, rows: int, index: str, metadata: bool | None) -> None:
    import pyarrow as pa

    from engine.api import Table
    from engine.index.metadata_record import lookup
    from engine.table.meta_client import MetaClient

    snap = Table.open(spark, str(path)).read()
    got, keys = snap.count(), snap.select(RECORD_KEY).distinct().count()
    assert got == rows and keys == rows, (path, got, keys, rows)
    if index == "RECORD" and metadata is None:
        probe = snap.select(RECORD_KEY).limit(1000).toArrow().column(0).cast(pa.string()).combine_chunks()
        assert lookup(MetaClient.open(str(path)), probe).num_rows == len(probe), "keys missing from the record index"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from engine.spark.session import build_session

    spark = build_session("local[*]", app_name="bench-initial-load",
                          conf={"spark.driver.memory": args.driver_memory, "spark.ui.enabled": "false"})
    root = Path(tempfile.mkdtemp(prefix="bench-initial-load-"))
    wl = make_workload("uniform", args.rows, 1000, seed=args.seed)
    src = str(root / "base.parquet")
    pq.write_table(wl.base, src, row_group_size=256 * 1024)
    warm = make_workload("uniform", 20_000, 100, seed=7)  # untimed: JVM, Python workers
    pq.write_table(warm.base, str(root / "warm.parquet"))
    _load(spark, root / "warm", str(root / "warm.parquet"), "RECORD", None)
    seconds: dict[str, float] = {}
    for label, (index, metadata) in CASES.items():
        path = root / label.replace(", ", "-").replace(" ", "_")
        seconds[label] = _load(spark, path, src, index, metadata)
        print(f"{label:<28} {seconds[label]:8.2f} s", flush=True)
        _check(spark, path, args.rows, index, metadata)
    delta = None
    try:
        from deltalake import write_deltalake

        t0 = time.perf_counter()
        write_deltalake(str(root / "delta"), wl.base, partition_by=[PARTITION_FIELD])
        delta = time.perf_counter() - t0
    except ImportError:
        print("deltalake not installed: no peer", file=sys.stderr)
    base = seconds["BLOOM, metadata table"]
    print(f"\ninitial load of {args.rows:,} rows (merge-on-read, version 9, bulk_insert), one run each")
    print(f"{'load':<28} {'seconds':>8} {'x BLOOM + metadata':>20}")
    for label, s in seconds.items():
        print(f"{label:<28} {s:8.2f} {s / base:20.2f}")
    if delta is not None:
        print(f"{'delta-rs write_deltalake':<28} {delta:8.2f} {delta / base:20.2f}")
    ratio = seconds["RECORD, metadata table"] / base
    print(f"record index in the metadata table: {ratio:.2f}x the load without it (target <= 1.3x: "
          f"{'met' if ratio <= 1.3 else 'MISSED'})")
    out = Path(args.json or Path(__file__).parent / "results" / f"initial-load-{args.rows}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": args.rows, "seconds": seconds, "delta_rs": delta, "ratio": ratio,
                               "host": {"platform": platform.platform(), "cpus": os.cpu_count()}}, indent=2))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
