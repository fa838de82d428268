"""Upsert benchmark: one upsert batch applied to the same table by four systems, in one run.

    python -m bench.upsert                      # 1M rows, batch 100k, both workloads, all systems
    python -m bench.upsert --rows 200000 --batch 20000 --workloads uniform --systems ours,delta

Systems (each starts from the same base table, set up untimed; only the upsert is timed):

- ours     engine `Table.upsert(spark_df)` on a COPY_ON_WRITE table loaded with `bulk_insert`
- mor      the same on a MERGE_ON_READ table (BLOOM index: file groups that take inserts as
           small files are rewritten, as Apache Hudi does; the others get log files)
- mor-rli  MERGE_ON_READ with the RECORD index (log files are indexed: updates and inserts
           both go to log files); no compaction in the clock for either
- delta    deltalake (delta-rs) `DeltaTable.merge(...)` update-all / insert-all on `t.id = s.id`
- iceberg  pyiceberg `Table.upsert(batch, join_cols=["id"])` on a SQL (sqlite) catalog
- reload   pyarrow full rewrite: read the whole table, drop the batch's keys, append the batch,
           write everything again (partitioned by day) and drop the old copy

See bench/README.md for the columns and caveats.
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
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

if __package__ in (None, ""):  # `python bench/upsert.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import PARTITION_FIELD, PRECOMBINE_FIELD, RECORD_KEY, WORKLOADS, Workload, make_workload  # noqa: E402
from bench.stages import last_stage_id, print_stages, stages_since  # noqa: E402

SYSTEMS = ("ours", "arrow", "one-job", "cow-rli", "mor", "mor-rli", "mor-arrow", "delta", "iceberg", "reload")
# our systems: (table type, index, input); BLOOM is the engine's default index (Apache Hudi's too).
# input "spark": the batch as a Spark DataFrame; "arrow": the pyarrow Table itself (no Spark
# DataFrame: the local path takes it without a Spark job when it fits hoodie.write.local.max.bytes)
TABLE_TYPES = {
    "ours": ("COPY_ON_WRITE", "BLOOM", "spark"),
    "arrow": ("COPY_ON_WRITE", "BLOOM", "arrow"),
    "one-job": ("COPY_ON_WRITE", "BLOOM", "spark"),  # hoodie.write.local=never: the Spark job writes
    "cow-rli": ("COPY_ON_WRITE", "RECORD", "spark"),
    "mor": ("MERGE_ON_READ", "BLOOM", "spark"),
    "mor-rli": ("MERGE_ON_READ", "RECORD", "spark"),
    "mor-arrow": ("MERGE_ON_READ", "RECORD", "arrow"),
}
MB = 1024 * 1024
OURS_OPTIONS = {"hoodie.parquet.max.file.size": 128 * MB}
SYSTEM_OPTIONS = {"one-job": {"hoodie.write.local": "never"}}
DAY_PARTITIONING = ds.partitioning(pa.schema([(PARTITION_FIELD, pa.string())]), flavor="hive")


@dataclass
class Run:
    """One timed upsert of one system, plus its (untimed) verification."""

    seconds: float
    setup_seconds: float
    rows_after: int
    batch_rows_visible: int
    files_written: int | None = None
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------
# systems: each `run_*` sets the table up (untimed), times the upsert, verifies (untimed)


class Ours:
    def __init__(self, master: str, driver_memory: str, progress: bool, stages: bool) -> None:
        from engine.spark.session import build_session

        self.conf = {"spark.driver.memory": driver_memory, "spark.ui.enabled": "true" if stages else "false"}
        self.spark = build_session(master, app_name="bench-upsert", conf=self.conf)
        self.progress = progress
        self.stages = stages

    def warm_up(self, work: Path) -> float:
        """An untimed tiny bulk_insert + upsert, so JVM class loading / JIT and Python worker start-up
        do not land on the first measured run (the peers are native code without a warm-up)."""
        t0 = time.perf_counter()
        full = make_workload("recent", 2_000, 200, seed=7)
        recent = full.base.filter(
            pc.field(PARTITION_FIELD) >= min(full.batch.column(PARTITION_FIELD).to_pylist())
        )
        # only the last days (3 file groups + "today"), so the warm-up stays a few seconds long
        wl = Workload(
            "warmup", recent.num_rows, recent, full.batch, full.updates, full.inserts, full.batch_ts_min, 7
        )
        progress, self.progress = self.progress, False
        try:
            base = str(work / "warmup-base.parquet")
            pq.write_table(wl.base, base)
            self.run(wl, base, work)
        finally:
            self.progress = progress
        return time.perf_counter() - t0

    def spark_conf(self) -> dict:
        keys = [
            "spark.master",
            "spark.driver.memory",
            "spark.sql.shuffle.partitions",
            "spark.sql.adaptive.enabled",
            "spark.default.parallelism",
        ]
        conf = self.spark.sparkContext.getConf()
        out = {k: conf.get(k, None) for k in keys}
        out["defaultParallelism"] = self.spark.sparkContext.defaultParallelism
        return out

    def _printer(self, label: str) -> Callable[[str], None] | None:
        if not self.progress:
            return None
        start = time.perf_counter()

        def emit(msg: str) -> None:
            print(f"      [{label} +{time.perf_counter() - start:7.2f}s] {msg}", flush=True)

        return emit

    def run(
        self,
        wl: Workload,
        base_parquet: str,
        work: Path,
        table_type: str = "COPY_ON_WRITE",
        index: str = "BLOOM",
        source: str = "spark",
        options: dict | None = None,
    ) -> Run:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        from engine.api import Table

        t_setup = time.perf_counter()
        path = str(work / "hudi")
        table = Table.create(
            self.spark,
            path,
            name="bench",
            record_key=RECORD_KEY,
            partition_fields=PARTITION_FIELD,
            precombine_field=PRECOMBINE_FIELD,
            table_type=table_type,
            index=index,
        )
        loaded = table.bulk_insert(
            self.spark.read.parquet(base_parquet), options=OURS_OPTIONS, progress=self._printer("bulk_insert")
        )
        anchor = None
        if table_type == "COPY_ON_WRITE" and index == "BLOOM" and source == "spark" and not options:
            # the initial load's anchor: Spark's own partitioned parquet write of the same rows,
            # same session, same source (bulk_insert also writes meta columns, Hudi names and footers)
            t_anchor = time.perf_counter()
            self.spark.read.parquet(base_parquet).write.partitionBy(PARTITION_FIELD).parquet(str(work / "spark-parquet"))
            anchor = time.perf_counter() - t_anchor
            shutil.rmtree(work / "spark-parquet", ignore_errors=True)
        # the batch as a Spark DataFrame, materialised before the clock starts (or the Arrow table)
        sdf = None
        if source == "spark":
            sdf = self.spark.createDataFrame(wl.batch).persist(StorageLevel.MEMORY_AND_DISK)
            n = sdf.count()
            assert n == wl.batch.num_rows, (n, wl.batch.num_rows)
        before = table.file_system_view()
        setup = time.perf_counter() - t_setup
        gc.collect()
        last_stage = last_stage_id(self.spark) if self.stages else -1

        memory = _local_memory(path, wl.batch, work, options) if source == "arrow" else None
        t0 = time.perf_counter()
        res = table.upsert(sdf if sdf is not None else wl.batch, options={**OURS_OPTIONS, **(options or {})},
                           progress=self._printer("upsert"))
        seconds = time.perf_counter() - t0

        stages = stages_since(self.spark, last_stage) if self.stages else None
        if stages and self.progress:
            print_stages(stages)

        snap = table.read()
        rows_after = snap.count()
        visible = snap.filter(F.col(PRECOMBINE_FIELD) >= wl.batch_ts_min).count()
        if sdf is not None:
            sdf.unpersist()
        touched = _touched_bytes(table, before, res.instant)
        return Run(
            seconds=seconds,
            setup_seconds=setup,
            rows_after=rows_after,
            batch_rows_visible=visible,
            files_written=res.files_written,
            extra={
                "write_result": res.to_dict() | {"partitions": len(res.partitions)},
                "bulk_insert_files": loaded.files_written,
                "bulk_insert_seconds": loaded.seconds,
                "spark_parquet_write_seconds": anchor,
                "table_type": table_type,
                "index": index,
                "input": source,
                "write_path": res.write_path,
                # Arrow input: the same upsert on a copy of the table in a fresh Python process (no
                # Spark), its peak RSS above its RSS with the batch loaded; against the batch's Arrow
                # bytes plus the stored bytes of the file slices the upsert rewrote or appended to
                "local_memory": memory,
                "batch_arrow_bytes": wl.batch.nbytes,
                "touched_slice_bytes": touched,
                "log_files_written": _log_files(table, res.instant),
                **({"stages": stages} if stages is not None else {}),
            },
        )

    def stop(self) -> None:
        self.spark.stop()


_MEMORY_PROBE = """
import gc, json, sys
from pathlib import Path
import pyarrow as pa
import pyarrow.parquet as pq
from engine import Table

def status(name):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1]) * 1024

cold_path, warm_path, batch_file, options = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
batch = pq.read_table(batch_file)
out = {}
for label, path in (("cold", cold_path), ("warm", warm_path)):
    table = Table.open(None, path)
    gc.collect()
    pa.default_memory_pool().release_unused()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    base = status("VmRSS")
    result = table.upsert(batch, options=options)
    out[label] = {"write_path": result.write_path, "rss_before": base, "rss_peak": status("VmHWM")}
    del table, result
print(json.dumps(out))
"""


def _local_memory(path: str, batch: pa.Table, work: Path, options: dict | None) -> dict | None:
    """Peak RSS of the upsert of `batch` into a copy of the table at `path`, in a fresh Python
    process with no Spark: how much memory the local write needs (untimed). Measured twice in the
    process: "cold", the process's first write (the modules it imports on first use included), then
    "warm", the same upsert into a second copy, with the peak reset (/proc/self/clear_refs) and
    Arrow's unused memory released before it."""
    import subprocess

    copies = [work / "memory-cold", work / "memory-warm"]
    batch_file = work / "memory-batch.parquet"
    for copy in copies:
        shutil.copytree(path, copy)
    pq.write_table(batch, batch_file)
    try:
        opts = {**OURS_OPTIONS, **(options or {})}
        root = str(Path(__file__).resolve().parents[1])
        out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, *map(str, copies), str(batch_file), json.dumps(opts)],
                             capture_output=True, text=True, timeout=600, cwd=root,
                             env={**os.environ, "PYTHONPATH": root})
        if out.returncode != 0:
            return {"error": out.stderr[-500:]}
        doc = json.loads(out.stdout.strip().splitlines()[-1])
        for run in doc.values():
            run["peak_growth_bytes"] = run["rss_peak"] - run["rss_before"]
        return {"write_path": doc["cold"]["write_path"], "peak_growth_bytes": doc["cold"]["peak_growth_bytes"],
                "warm_peak_growth_bytes": doc["warm"]["peak_growth_bytes"], "runs": doc}
    finally:
        for copy in copies:
            shutil.rmtree(copy, ignore_errors=True)
        batch_file.unlink(missing_ok=True)


def _touched_bytes(table, before, instant: str | None) -> int | None:
    """Stored bytes of the file slices (before the upsert) of the groups the upsert wrote into."""
    if instant is None:
        return None
    meta = table.commit_metadata(instant)
    groups = {(s.partitionPath, s.fileId) for s in meta.write_stats}
    return sum(sl.size for sl in before.latest_slices(None) if (sl.partition, sl.file_id) in groups)


def _log_files(table, instant: str | None) -> int | None:
    if instant is None:
        return None
    stats = table.commit_metadata(instant).partition_to_write_stats.values()
    return sum(1 for group in stats for st in group if ".log." in st.path)


def run_delta(wl: Workload, work: Path) -> Run:
    from deltalake import DeltaTable, write_deltalake

    t_setup = time.perf_counter()
    path = str(work / "delta")
    write_deltalake(path, wl.base, partition_by=[PARTITION_FIELD])
    setup = time.perf_counter() - t_setup
    gc.collect()

    t0 = time.perf_counter()
    dt = DeltaTable(path)
    metrics = (
        dt.merge(source=wl.batch, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    seconds = time.perf_counter() - t0

    dset = DeltaTable(path).to_pyarrow_dataset()
    return Run(
        seconds=seconds,
        setup_seconds=setup,
        rows_after=dset.count_rows(),
        batch_rows_visible=dset.count_rows(filter=pc.field(PRECOMBINE_FIELD) >= wl.batch_ts_min),
        files_written=metrics.get("num_target_files_added"),
        extra={"merge_metrics": {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}},
    )


def run_iceberg(wl: Workload, work: Path) -> Run:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import GreaterThanOrEqual

    t_setup = time.perf_counter()
    root = work / "iceberg"
    (root / "warehouse").mkdir(parents=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace("bench")
    table = catalog.create_table("bench.upsert", schema=wl.base.schema)
    with table.update_spec() as spec:
        spec.add_identity(PARTITION_FIELD)
    table.append(wl.base)
    before = {s.snapshot_id for s in table.snapshots()}
    setup = time.perf_counter() - t_setup
    gc.collect()

    t0 = time.perf_counter()
    table = catalog.load_table("bench.upsert")
    result = table.upsert(wl.batch, join_cols=[RECORD_KEY])
    seconds = time.perf_counter() - t0

    table = catalog.load_table("bench.upsert")
    new = [s for s in table.snapshots() if s.snapshot_id not in before]
    added = sum(int(s.summary.additional_properties.get("added-data-files", 0)) for s in new if s.summary)
    deleted = sum(int(s.summary.additional_properties.get("deleted-data-files", 0)) for s in new if s.summary)
    return Run(
        seconds=seconds,
        setup_seconds=setup,
        rows_after=table.scan().count(),
        batch_rows_visible=table.scan(
            row_filter=GreaterThanOrEqual(PRECOMBINE_FIELD, wl.batch_ts_min)
        ).count(),
        files_written=added,
        extra={
            "rows_updated": result.rows_updated,
            "rows_inserted": result.rows_inserted,
            "snapshots": len(new),
            "deleted_data_files": deleted,
        },
    )


def reload_upsert(current: str, target: str, batch: pa.Table) -> int:
    """Full rewrite: the whole table minus the batch's keys, plus the batch, as a new copy."""
    table = ds.dataset(current, format="parquet", partitioning=DAY_PARTITIONING).to_table()
    kept = table.filter(pc.invert(pc.is_in(table[RECORD_KEY], value_set=batch[RECORD_KEY])))
    merged = pa.concat_tables([kept, batch.select(kept.schema.names).cast(kept.schema)])
    written: list[str] = []
    ds.write_dataset(
        merged,
        target,
        format="parquet",
        partitioning=DAY_PARTITIONING,
        existing_data_behavior="error",
        file_visitor=lambda f: written.append(f.path),
    )
    shutil.rmtree(current)
    return len(written)


def run_reload(wl: Workload, work: Path) -> Run:
    t_setup = time.perf_counter()
    v0, v1 = str(work / "reload" / "v0"), str(work / "reload" / "v1")
    ds.write_dataset(wl.base, v0, format="parquet", partitioning=DAY_PARTITIONING)
    setup = time.perf_counter() - t_setup
    gc.collect()

    t0 = time.perf_counter()
    files = reload_upsert(v0, v1, wl.batch)
    seconds = time.perf_counter() - t0

    dset = ds.dataset(v1, format="parquet", partitioning=DAY_PARTITIONING)
    return Run(
        seconds=seconds,
        setup_seconds=setup,
        rows_after=dset.count_rows(),
        batch_rows_visible=dset.count_rows(filter=pc.field(PRECOMBINE_FIELD) >= wl.batch_ts_min),
        files_written=files,
    )


# ---------------------------------------------------------------------------------------


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("pyspark", "deltalake", "pyiceberg", "pyarrow", "numpy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _loud(msg: str) -> None:
    bar = "!" * 100
    for stream in (sys.stdout, sys.stderr):
        print(f"\n{bar}\n!!! {msg}\n{bar}\n", file=stream, flush=True)


def _fmt(value, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec)


def _extras(results: dict, wanted: Callable[[dict], bool]) -> list[tuple[str, str, dict]]:
    """(workload, system, extra) of every system that ran and whose `extra` is `wanted`."""
    return [
        (wname, sname, s["extra"])
        for wname, w in results["workloads"].items()
        for sname, s in w["systems"].items()
        if "error" not in s and wanted(s.get("extra", {}))
    ]


def print_table(results: dict) -> None:
    head = (
        f"{'workload':<9} {'system':<8} {'seconds':>9} {'vs delta':>9} {'files':>6} "
        f"{'rows after':>11} {'batch seen':>10}  check"
    )
    print()
    print(head)
    print("-" * len(head))
    for wname, w in results["workloads"].items():
        delta = w["systems"].get("delta", {}).get("seconds")
        for sname, s in w["systems"].items():
            if "error" in s:
                print(f"{wname:<9} {sname:<8} {'FAILED':>9}  {s['error'][:70]}")
                continue
            ratio = None if sname == "delta" or not delta else s["seconds"] / delta
            check = "ok" if s["ok"] else "MISMATCH"
            print(
                f"{wname:<9} {sname:<8} {s['seconds']:>9.2f} {_fmt(ratio, '.2f'):>9} "
                f"{_fmt(s['files_written']):>6} {s['rows_after']:>11,} {s['batch_rows_visible']:>10,}  {check}"
            )
        d = w["data"]
        print(
            f"{'':<9} ({d['rows']:,} rows; batch {d['batch']:,} = {d['updates']:,} updates + "
            f"{d['inserts']:,} inserts over {d['batch_days']} day(s); expect {d['expected_rows_after']:,} rows after)"
        )
    print()
    print(
        "seconds: best of --repeat, upsert only; vs delta = seconds / delta-rs MERGE seconds (> 1: slower "
        "than delta-rs); files: data files written (mor: base + log files)"
    )
    mem = _extras(results, lambda e: isinstance(e.get("local_memory"), dict) and "peak_growth_bytes" in e["local_memory"])
    if mem:
        print()
        head = (f"{'workload':<9} {'system':<9} {'path':<8} {'cold +MB':>9} {'warm +MB':>9} {'batch MB':>9} "
                f"{'touched MB':>10} {'cold x':>7} {'warm x':>7}")
        print(head)
        print("-" * len(head))
        for wname, sname, extra in mem:
            m = extra["local_memory"]
            touched = extra.get("touched_slice_bytes") or 0
            need = extra["batch_arrow_bytes"] + touched
            warm = m.get("warm_peak_growth_bytes")
            print(
                f"{wname:<9} {sname:<9} {m['write_path']:<8} {m['peak_growth_bytes'] / MB:>9.1f} "
                f"{_fmt(warm / MB if warm is not None else None, '.1f'):>9} "
                f"{extra['batch_arrow_bytes'] / MB:>9.1f} {touched / MB:>10.1f} {m['peak_growth_bytes'] / need:>7.2f} "
                f"{_fmt(warm / need if warm is not None else None, '.2f'):>7}"
            )
        print()
        print(
            "local write memory (Arrow input, last run): the upsert in a fresh Python process without Spark, its peak "
            "RSS above its RSS with the batch loaded; cold: the process's first write (first-use imports included), "
            "warm: the same upsert into a second copy of the table in that process; x = growth / (batch Arrow bytes "
            "+ stored bytes of the slices it rewrote or appended to)"
        )
    loads = _extras(results, lambda e: e.get("bulk_insert_seconds") is not None)
    if loads:
        print()
        head = f"{'workload':<9} {'system':<8} {'bulk_insert':>11} {'spark parquet':>13} {'ratio':>6} {'delta write':>11}"
        print(head)
        print("-" * len(head))
        for wname, sname, extra in loads:
            anchor = extra.get("spark_parquet_write_seconds")
            delta_setup = results["workloads"][wname]["systems"].get("delta", {}).get("setup_seconds")
            delta = min(delta_setup) if isinstance(delta_setup, list) and delta_setup else delta_setup
            ratio = extra["bulk_insert_seconds"] / anchor if anchor else None
            print(
                f"{wname:<9} {sname:<8} {extra['bulk_insert_seconds']:>11.2f} {_fmt(anchor, '.2f'):>13} "
                f"{_fmt(ratio, '.2f'):>6} {_fmt(delta, '.2f'):>11}"
            )
        print()
        print(
            "initial load (last run): our bulk_insert vs Spark's df.write.partitionBy(day).parquet of the same "
            "rows in the same session (ratio > 1: slower), and delta-rs's write_deltalake"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows in the base table (default 1,000,000)")
    ap.add_argument("--batch", type=int, default=100_000, help="rows in the upsert batch (default 100,000)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma list of: uniform,recent")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="comma list of: " + ",".join(SYSTEMS))
    ap.add_argument("--repeat", type=int, default=1, help="best of K runs, tables re-created each run")
    ap.add_argument("--json", default=None, help="result file (default bench/results/upsert-<rows>.json)")
    ap.add_argument("--master", default="local[*]", help="Spark master for ours (default local[*])")
    ap.add_argument("--driver-memory", default="4g", help="spark.driver.memory for ours (default 4g)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--workdir", default=None, help="where tables are written (default: a temp dir, removed)")
    ap.add_argument("--progress", action="store_true", help="print the engine's progress lines with timings")
    ap.add_argument(
        "--stages", action="store_true", help="enable the Spark UI and record per-stage timings of our upsert"
    )
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed Spark warm-up upsert")
    args = ap.parse_args(argv)

    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r}")
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s!r}")
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    out_path = Path(args.json or Path(__file__).resolve().parent / "results" / f"upsert-{args.rows}.json")

    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-upsert-"))
    root.mkdir(parents=True, exist_ok=True)
    ours = (
        Ours(args.master, args.driver_memory, args.progress, args.stages)
        if any(s in TABLE_TYPES for s in systems)
        else None
    )
    warmup_s = None
    if ours is not None and not args.no_warmup:
        warm = root / "warmup"
        warm.mkdir()
        warmup_s = ours.warm_up(warm)
        shutil.rmtree(warm, ignore_errors=True)
        print(f"(spark warm-up: {warmup_s:.1f}s, untimed)", flush=True)
    results: dict = {
        "benchmark": "upsert",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "params": {
            "rows": args.rows,
            "batch": args.batch,
            "workloads": workloads,
            "systems": systems,
            "repeat": args.repeat,
            "seed": args.seed,
            "master": args.master,
            "spark_warmup_seconds": warmup_s,
        },
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_avg_start": os.getloadavg()},
        "versions": _versions(),
        "ours_options": {
            "write": OURS_OPTIONS,
            "table": {k: {"type": t, "index": i, "input": src} for k, (t, i, src) in TABLE_TYPES.items()},
        },
        "spark_conf": ours.spark_conf() if ours else None,
        "peer_settings": {
            "delta": "write_deltalake(partition_by=[day]) defaults; merge predicate t.id = s.id, streamed_exec default",
            "iceberg": "SqlCatalog(sqlite), identity(day) partition spec, defaults; upsert(join_cols=[id])",
            "reload": "pyarrow.dataset read all -> drop batch keys -> append batch -> write_dataset(hive day=) -> rm old",
        },
        "workloads": {},
    }
    mismatch = False
    try:
        for wname in workloads:
            t_gen = time.perf_counter()
            wl = make_workload(wname, args.rows, args.batch, seed=args.seed)
            data_dir = root / f"data-{wname}"
            data_dir.mkdir(exist_ok=True)
            base_parquet = str(data_dir / "base.parquet")
            pq.write_table(wl.base, base_parquet, row_group_size=256 * 1024)
            desc = wl.describe()
            print(
                f"== {wname}: {desc['rows']:,} rows, batch {desc['batch']:,} "
                f"({desc['updates']:,} updates + {desc['inserts']:,} inserts), "
                f"generated in {time.perf_counter() - t_gen:.1f}s",
                flush=True,
            )
            wres: dict = {"data": desc, "systems": {}}
            results["workloads"][wname] = wres
            for sname in systems:
                runs: list[Run] = []
                error = None
                for k in range(args.repeat):
                    work = root / f"{wname}-{sname}-{k}"
                    work.mkdir()
                    try:
                        if sname in TABLE_TYPES:
                            run = ours.run(wl, base_parquet, work, *TABLE_TYPES[sname], SYSTEM_OPTIONS.get(sname))
                        elif sname == "delta":
                            run = run_delta(wl, work)
                        elif sname == "iceberg":
                            run = run_iceberg(wl, work)
                        else:
                            run = run_reload(wl, work)
                    except Exception as exc:  # keep the other systems' numbers
                        traceback.print_exc()
                        error = f"{type(exc).__name__}: {exc}"
                        break
                    finally:
                        shutil.rmtree(work, ignore_errors=True)
                    runs.append(run)
                    ok = (
                        run.rows_after == wl.expected_rows_after
                        and run.batch_rows_visible == wl.batch.num_rows
                    )
                    print(
                        f"   {sname:<8} run {k + 1}/{args.repeat}: upsert {run.seconds:7.2f}s "
                        f"(setup {run.setup_seconds:.1f}s) files={_fmt(run.files_written)} "
                        f"rows_after={run.rows_after:,} batch_seen={run.batch_rows_visible:,}"
                        + ("" if ok else "  <-- MISMATCH"),
                        flush=True,
                    )
                    if not ok:
                        mismatch = True
                        _loud(
                            f"ROW COUNT MISMATCH: {wname}/{sname}: rows_after={run.rows_after:,} "
                            f"(expected {wl.expected_rows_after:,}), batch rows visible="
                            f"{run.batch_rows_visible:,} (expected {wl.batch.num_rows:,})"
                        )
                if error is not None or not runs:
                    wres["systems"][sname] = {"error": error or "no run"}
                    _loud(f"{wname}/{sname} FAILED: {error}")
                    mismatch = True
                    continue
                best = min(runs, key=lambda r: r.seconds)
                wres["systems"][sname] = {
                    "seconds": round(best.seconds, 3),
                    "all_seconds": [round(r.seconds, 3) for r in runs],
                    "setup_seconds": [round(r.setup_seconds, 2) for r in runs],
                    "files_written": best.files_written,
                    "rows_after": best.rows_after,
                    "batch_rows_visible": best.batch_rows_visible,
                    "ok": all(
                        r.rows_after == wl.expected_rows_after and r.batch_rows_visible == wl.batch.num_rows
                        for r in runs
                    ),
                    "extra": best.extra,
                }
            s = wres["systems"]
            rows_seen = {n: v["rows_after"] for n, v in s.items() if "rows_after" in v}
            if len(set(rows_seen.values())) > 1:
                mismatch = True
                _loud(f"{wname}: systems disagree on the row count after the upsert: {rows_seen}")
            for mine in TABLE_TYPES:
                if mine in s and "seconds" in s[mine]:
                    wres[f"ratios_{mine}_over_peer"] = {
                        n: round(s[mine]["seconds"] / v["seconds"], 3)
                        for n, v in s.items()
                        if n not in TABLE_TYPES and "seconds" in v and v["seconds"] > 0
                    }
            shutil.rmtree(data_dir, ignore_errors=True)
            del wl
            gc.collect()
    finally:
        if ours is not None:
            ours.stop()
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)

    results["host"]["load_avg_end"] = os.getloadavg()
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results["all_ok"] = not mismatch
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print_table(results)
    print(f"results: {out_path}")
    if mismatch:
        _loud("at least one system's result did not match the expected row counts (see above)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
