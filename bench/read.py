"""Read benchmark: snapshot, incremental and merge-on-read reads, each against its baseline, in one run.

    python -m bench.read                          # 1M rows, all sections
    python -m bench.read --rows 200000 --sections cow --repeat 2

Sections (each builds its table untimed; every timed read materialises every row and column
with Spark's `noop` sink, so nothing is pruned away; best of --repeat):

- cow          a COPY_ON_WRITE table (recent workload: bulk_insert, then one upsert of 1% of the
               rows): our snapshot read (`Table.read()`) and the `hudi` data source
               (`spark.read.format("hudi").load(path)`) against Spark's own parquet reader on the
               same latest base files (`spark.read.parquet(*paths)`, "plain parquet")
- incremental  the same table: `Table.read_incremental(<bulk_insert instant>)` (the 1% the upsert
               changed) and the data source's incremental query against a full snapshot read
- mor          a MERGE_ON_READ table (uniform workload, bulk_insert), then 10 deltacommits of 1%
               updates each (log files on every file group): snapshot read after 1, 5 and 10
               deltacommits, the read-optimized read, the compaction's time, and the snapshot
               read of the compacted table; each read also through the data source (snapshot or
               read_optimized query)

Reads compared with each other interleave their repetitions (`Bench.timed_together`).

Every read's row count (and the number of updated rows it sees) is checked against what was
written; a mismatch exits 1. Results: a table on stdout and bench/results/read-<rows>.json.
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

if __package__ in (None, ""):  # `python bench/read.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import DAY_MS, PARTITION_FIELD, PRECOMBINE_FIELD, RECORD_KEY, make_workload  # noqa: E402

SECTIONS = ("cow", "incremental", "mor")
MB = 1024 * 1024
OPTIONS = {"hoodie.parquet.max.file.size": 128 * MB}
DELTACOMMITS = 10
MEASURE_AFTER = (1, 5, 10)


class Bench:
    def __init__(self, master: str, driver_memory: str, repeat: int) -> None:
        from engine.spark.session import build_session

        self.spark = build_session(master, app_name="bench-read", conf={"spark.driver.memory": driver_memory})
        self.repeat = repeat

    def timed(self, make_df) -> tuple[float, int]:
        """Best wall time of --repeat full reads (`noop` sink), and the row count (read untimed)."""
        best = float("inf")
        for _ in range(self.repeat):
            t0 = time.perf_counter()
            make_df().write.format("noop").mode("overwrite").save()
            best = min(best, time.perf_counter() - t0)
        return best, make_df().count()

    def timed_together(self, *makers) -> list[tuple[float, int]]:
        """`timed` for several reads compared with each other: their repetitions interleave (each
        round starts with the next read), so none gets a colder or warmer JVM than the others."""
        best = [float("inf")] * len(makers)
        for r in range(self.repeat):
            for k in range(len(makers)):
                i = (r + k) % len(makers)
                t0 = time.perf_counter()
                makers[i]().write.format("noop").mode("overwrite").save()
                best[i] = min(best[i], time.perf_counter() - t0)
        return [(b, make().count()) for b, make in zip(best, makers, strict=True)]

    def table(self, path: str, table_type: str):
        from engine.api import Table

        return Table.create(
            self.spark,
            path,
            name="bench",
            record_key=RECORD_KEY,
            partition_fields=PARTITION_FIELD,
            precombine_field=PRECOMBINE_FIELD,
            table_type=table_type,
        )

    def source(self, path: str, **options: str):
        """A reader of the `hudi` data source (`build_session` registers it) on the table at `path`."""
        reader = self.spark.read.format("hudi")
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load(path)

    def load(self, table, base: pa.Table, work: Path) -> str:
        src = str(work / "base.parquet")
        pq.write_table(base, src, row_group_size=256 * 1024)
        res = table.bulk_insert(self.spark.read.parquet(src), options=OPTIONS)
        return res.instant

    # ---- sections ------------------------------------------------------------------------
    def cow_and_incremental(self, rows: int, work: Path, sections: list[str]) -> dict:
        from pyspark.sql import functions as F

        wl = make_workload("recent", rows, max(1, rows // 100), seed=42)
        path = str(work / "cow")
        table = self.table(path, "COPY_ON_WRITE")
        first = self.load(table, wl.base, work)
        res = table.upsert(self.spark.createDataFrame(wl.batch), options=OPTIONS)
        expected = wl.expected_rows_after
        out: dict = {"rows": expected, "batch": wl.batch.num_rows, "upsert_files_written": res.files_written}
        if "cow" in sections:
            paths = [
                s.base_file.path for s in table.file_system_view().latest_slices() if s.base_file is not None
            ]
            local = [table.meta.storage.uri(p) for p in paths]
            # the same with the schema given (no footer-reading schema inference in the clock)
            known = self.spark.read.parquet(local[0]).schema
            (hudi_s, hudi_n), (ds_s, ds_n), (plain_s, plain_n), (typed_s, typed_n) = self.timed_together(
                lambda: table.read(),
                lambda: self.source(path),
                lambda: self.spark.read.parquet(*local),
                lambda: self.spark.read.schema(known).parquet(*local),
            )
            out["snapshot"] = {"seconds": hudi_s, "rows": hudi_n, "ok": hudi_n == expected}
            out["datasource"] = {
                "seconds": ds_s,
                "rows": ds_n,
                "ok": ds_n == expected,
                "partitions": self.source(path).rdd.getNumPartitions(),
            }
            out["plain_parquet"] = {
                "seconds": plain_s,
                "rows": plain_n,
                "ok": plain_n == expected,
                "files": len(paths),
            }
            out["plain_parquet_schema_given"] = {
                "seconds": typed_s,
                "rows": typed_n,
                "ok": typed_n == expected,
            }
            out["snapshot_over_plain"] = hudi_s / min(plain_s, typed_s)
            out["datasource_over_snapshot"] = ds_s / hudi_s
            out["datasource_over_plain"] = ds_s / min(plain_s, typed_s)
        if "incremental" in sections:
            incremental = {
                "hoodie.datasource.query.type": "incremental",
                "hoodie.datasource.read.begin.instanttime": first,
            }
            (inc_s, inc_n), (ds_s, ds_n), (full_s, full_n) = self.timed_together(
                lambda: table.read_incremental(first),
                lambda: self.source(path, **incremental),
                lambda: table.read(),
            )
            seen = table.read_incremental(first).filter(F.col(PRECOMBINE_FIELD) >= wl.batch_ts_min).count()
            ds_seen = (
                self.source(path, **incremental).filter(F.col(PRECOMBINE_FIELD) >= wl.batch_ts_min).count()
            )
            out["incremental"] = {
                "seconds": inc_s,
                "rows": inc_n,
                "ok": inc_n == wl.batch.num_rows and seen == inc_n,
                "expected_rows": wl.batch.num_rows,
            }
            out["incremental_datasource"] = {
                "seconds": ds_s,
                "rows": ds_n,
                "ok": ds_n == wl.batch.num_rows and ds_seen == ds_n,
                "expected_rows": wl.batch.num_rows,
            }
            out["incremental_datasource_over_incremental"] = ds_s / inc_s
            out["full_scan"] = {"seconds": full_s, "rows": full_n, "ok": full_n == expected}
            out["incremental_over_full"] = inc_s / full_s
        return out

    def mor(self, rows: int, work: Path) -> dict:
        wl = make_workload("uniform", rows, 1, seed=42)
        base = wl.base
        path = str(work / "mor")
        table = self.table(path, "MERGE_ON_READ")
        self.load(table, base, work)
        rng = np.random.default_rng(7)
        per_commit = max(1, rows // 100)
        updated: set[int] = set()
        out: dict = {"rows": rows, "updates_per_deltacommit": per_commit, "reads": {}}
        write_s = []
        for n in range(1, DELTACOMMITS + 1):
            ids = np.sort(rng.choice(rows, per_commit, replace=False))
            batch = base.take(pa.array(ids))
            ts = wl.batch_ts_min + n * DAY_MS + rng.integers(0, DAY_MS, per_commit)
            batch = batch.set_column(
                batch.schema.get_field_index(PRECOMBINE_FIELD), PRECOMBINE_FIELD, pa.array(ts)
            )
            amount = batch.schema.get_field_index("amount")
            batch = batch.set_column(amount, "amount", pc.add(batch.column("amount"), 1.0))
            t0 = time.perf_counter()
            res = table.upsert(self.spark.createDataFrame(batch), options=OPTIONS)
            write_s.append(round(time.perf_counter() - t0, 3))
            assert res.updates == per_commit and res.inserts == 0, res
            updated.update(ids.tolist())
            if n in MEASURE_AFTER:
                logs = sum(len(s.log_files) for s in table.file_system_view().latest_slices())
                out["reads"][f"after_{n}_deltacommits"] = self.mor_read(table, path, rows, len(updated), wl)
                out["reads"][f"after_{n}_deltacommits"]["log_files"] = logs
        out["deltacommit_seconds"] = write_s
        ro = {"hoodie.datasource.query.type": "read_optimized"}
        (ro_s, ro_n), (ds_s, ds_n) = self.timed_together(
            lambda: table.read(read_optimized=True), lambda: self.source(path, **ro)
        )
        out["read_optimized"] = {
            "seconds": ro_s,
            "rows": ro_n,
            "ok": ro_n == rows,
            "datasource": {"seconds": ds_s, "rows": ds_n, "ok": ds_n == rows},
            "datasource_over_ours": ds_s / ro_s,
        }
        t0 = time.perf_counter()
        result = table.maintenance.compact(spark=self.spark)
        out["compaction"] = {
            "seconds": time.perf_counter() - t0,
            "instant": getattr(result, "instant", None),
            "files": len(getattr(result, "files", []) or []),
        }
        out["compacted"] = self.mor_read(table, path, rows, len(updated), wl)
        secs = out["compacted"]["seconds"]
        for key, r in out["reads"].items():
            out[f"{key}_over_compacted"] = r["seconds"] / secs
        return out

    def mor_read(self, table, path: str, rows: int, updated: int, wl) -> dict:
        """A snapshot read by `Table.read()` and by the data source, timed together; each must see
        every row and exactly the `updated` rows' new versions."""
        from pyspark.sql import functions as F

        (secs, count), (ds_s, ds_n) = self.timed_together(lambda: table.read(), lambda: self.source(path))
        newer = F.col(PRECOMBINE_FIELD) >= wl.batch_ts_min
        seen = table.read().filter(newer).count()
        ds_seen = self.source(path).filter(newer).count()
        return {
            "seconds": secs,
            "rows": count,
            "updated_rows_seen": seen,
            "ok": count == rows and seen == updated,
            "datasource": {
                "seconds": ds_s,
                "rows": ds_n,
                "updated_rows_seen": ds_seen,
                "ok": ds_n == rows and ds_seen == updated,
            },
            "datasource_over_ours": ds_s / secs,
        }

    def stop(self) -> None:
        self.spark.stop()


def _checks(doc: dict) -> list[str]:
    bad = []

    def walk(node, where):
        if isinstance(node, dict):
            if node.get("ok") is False:
                bad.append(f"{where}: {node}")
            for k, v in node.items():
                walk(v, f"{where}.{k}" if where else k)

    walk(doc, "")
    return bad


def print_table(doc: dict) -> None:
    rows: list[tuple[str, str, str, str]] = []

    def read(section: str, what: str, r: dict) -> None:
        rows.append((section, what, f"{r['seconds']:.2f}", f"{r['rows']:,}"))

    def ratio(section: str, what: str, value: float, digits: int = 2) -> None:
        rows.append((section, what, f"{value:.{digits}f}x", ""))

    s = doc["sections"]
    if "cow" in s and "snapshot" in s["cow"]:
        c = s["cow"]
        read("cow", "snapshot read (Table.read)", c["snapshot"])
        read("cow", f"data source (format hudi, {c['datasource']['partitions']} partitions)", c["datasource"])
        read("cow", "plain parquet (spark.read.parquet)", c["plain_parquet"])
        read("cow", "plain parquet, schema given", c["plain_parquet_schema_given"])
        ratio("cow", "snapshot / faster plain  (target <= 1.05)", c["snapshot_over_plain"])
        ratio("cow", "data source / Table.read  (target <= 1.2)", c["datasource_over_snapshot"])
        ratio("cow", "data source / faster plain  (target <= 1.2)", c["datasource_over_plain"])
    if "cow" in s and "incremental" in s["cow"]:
        c = s["cow"]
        read("incremental", "incremental pull of the 1% upsert", c["incremental"])
        read("incremental", "data source, query.type=incremental", c["incremental_datasource"])
        read("incremental", "full snapshot scan", c["full_scan"])
        ratio("incremental", "incremental / full  (target <= 0.05)", c["incremental_over_full"], 3)
        ratio("incremental", "data source / read_incremental", c["incremental_datasource_over_incremental"])
    if "mor" in s:
        m = s["mor"]
        for key, r in m["reads"].items():
            label = key.replace("_", " ") + f" ({r['log_files']} log files)"
            read("mor", f"snapshot {label}", r)
            read("mor", "  data source snapshot", r["datasource"])
        ro = m["read_optimized"]
        read("mor", "read-optimized (base files only)", ro)
        read("mor", "  data source read_optimized", ro["datasource"])
        rows.append(
            (
                "mor",
                f"compaction ({m['compaction']['files']} base files)",
                f"{m['compaction']['seconds']:.2f}",
                "",
            )
        )
        read("mor", "snapshot after compaction", m["compacted"])
        read("mor", "  data source snapshot", m["compacted"]["datasource"])
        for key in m["reads"]:
            target = "  (target <= 1.5)" if key.startswith("after_5") else ""
            ratio("mor", f"{key.replace('_', ' ')} / compacted{target}", m[f"{key}_over_compacted"])
        for key, r in [*m["reads"].items(), ("compacted", m["compacted"])]:
            ratio("mor", f"data source / ours, {key.replace('_', ' ')}", r["datasource_over_ours"])
        ratio("mor", "data source / ours, read-optimized", ro["datasource_over_ours"])
    w = max(len(r[1]) for r in rows) if rows else 10
    print(f"\n{'section':<12} {'read':<{w}} {'seconds':>9} {'rows':>11}")
    print("-" * (36 + w))
    for sec, what, secs, n in rows:
        print(f"{sec:<12} {what:<{w}} {secs:>9} {n:>11}")
    print("\nseconds: best of --repeat, every row and column materialised (Spark noop sink)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma list of: cow,incremental,mor")
    ap.add_argument("--repeat", type=int, default=3, help="best of K reads (default 3)")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--json", default=None, help="result file (default bench/results/read-<rows>.json)")
    ap.add_argument("--workdir", default=None, help="where tables are written (default: a temp dir, removed)")
    args = ap.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    for s in sections:
        if s not in SECTIONS:
            ap.error(f"unknown section {s!r}")
    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-read-"))
    root.mkdir(parents=True, exist_ok=True)
    bench = Bench(args.master, args.driver_memory, args.repeat)
    doc: dict = {
        "benchmark": "read",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "params": {"rows": args.rows, "sections": sections, "repeat": args.repeat, "master": args.master},
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_avg_start": os.getloadavg()},
        "sections": {},
    }
    try:
        # untimed warm-up: JVM, Python workers, the noop sink
        warm = root / "warm"
        warm.mkdir()
        bench.cow_and_incremental(2_000, warm, ["cow"])
        if {"cow", "incremental"} & set(sections):
            work = root / "cow"
            work.mkdir()
            t0 = time.perf_counter()
            doc["sections"]["cow"] = bench.cow_and_incremental(args.rows, work, sections)
            print(f"cow/incremental done in {time.perf_counter() - t0:.0f}s", flush=True)
        if "mor" in sections:
            work = root / "mor"
            work.mkdir()
            t0 = time.perf_counter()
            doc["sections"]["mor"] = bench.mor(args.rows, work)
            print(f"mor done in {time.perf_counter() - t0:.0f}s", flush=True)
    finally:
        bench.stop()
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)
    doc["host"]["load_avg_end"] = os.getloadavg()
    bad = _checks(doc)
    doc["all_ok"] = not bad
    out = Path(args.json or Path(__file__).resolve().parent / "results" / f"read-{args.rows}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print_table(doc)
    print(f"results: {out}")
    if bad:
        print("!!! row-count mismatch:\n" + "\n".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
