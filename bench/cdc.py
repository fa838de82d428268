"""CDC benchmark: the changes of a 1% upsert against a full snapshot read, in one run.

    python -m bench.cdc                                   # 1M rows
    python -m bench.cdc --rows 10000000 --driver-memory 12g --repeat 2

Two copy-on-write tables get the same rows (bulk_insert, untimed) and the same upsert of 1% of the
rows (the `recent` workload: updates of the latest days and inserts into a new one): one created
with `cdc=True` (Apache Hudi's CDC log, DATA_BEFORE_AFTER), one without (changes inferred from the
file group versions). The upsert of each is timed once, after an untimed warm-up (what the CDC log costs a write). Then,
interleaved, best of --repeat:

- changes, CDC log     `Table.changes(<bulk_insert instant>)` on the CDC table (Arrow, no Spark)
- changes, data source `format("hudi")` incremental query with `incremental.format=cdc` (noop sink)
- changes, inferred    `Table.changes(...)` on the table without a CDC log
- incremental pull     `Table.read_incremental(...)` (latest values of the changed records; noop sink)
- full snapshot        `Table.read()` (noop sink)

Every answer is checked: as many changes as batch rows, updates = the batch's updates; the same
rows from the log and inferred. Results: a table on stdout and bench/results/cdc-<rows>.json.
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

import pyarrow.compute as pc
import pyarrow.parquet as pq

if __package__ in (None, ""):  # `python bench/cdc.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import PARTITION_FIELD, PRECOMBINE_FIELD, RECORD_KEY, make_workload  # noqa: E402

MB = 1024 * 1024
OPTIONS = {"hoodie.parquet.max.file.size": 128 * MB}


def _noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def run(rows: int, repeat: int, master: str, driver_memory: str, work: Path) -> dict:
    from engine.api import Table
    from engine.spark.session import build_session

    spark = build_session(master, app_name="bench-cdc", conf={"spark.driver.memory": driver_memory})
    wl = make_workload("recent", rows, max(1, rows // 100), seed=42)
    src = str(work / "base.parquet")
    pq.write_table(wl.base, src, row_group_size=256 * 1024)
    batch = spark.createDataFrame(wl.batch).persist()
    batch.count()
    tables, firsts, upserts = {}, {}, {}
    # untimed warm-up: the first write of a process pays for Spark's and the Python workers' start
    warm = Table.create(spark, str(work / "warm"), name="warm", record_key=RECORD_KEY, partition_fields=PARTITION_FIELD,
                        precombine_field=PRECOMBINE_FIELD)
    warm.upsert(batch, options=OPTIONS)
    warm.upsert(batch, options=OPTIONS)
    for name, cdc in (("plain", False), ("cdc", True)):
        t = Table.create(spark, str(work / name), name="bench", record_key=RECORD_KEY, partition_fields=PARTITION_FIELD,
                         precombine_field=PRECOMBINE_FIELD, cdc=cdc)
        firsts[name] = t.bulk_insert(spark.read.parquet(src), options=OPTIONS).instant
        t0 = time.perf_counter()
        res = t.upsert(batch, options=OPTIONS)
        upserts[name] = {"seconds": time.perf_counter() - t0, "updates": res.updates, "inserts": res.inserts}
        tables[name] = t
    cdc_t, plain_t = tables["cdc"], tables["plain"]
    cdc_opts = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.query.incremental.format": "cdc",
                "hoodie.datasource.read.begin.instanttime": firsts["cdc"]}

    def source():
        reader = spark.read.format("hudi")
        for k, v in cdc_opts.items():
            reader = reader.option(k, v)
        return reader.load(cdc_t.path)

    runs = {
        "changes_log": lambda: cdc_t.changes(firsts["cdc"]),
        "changes_datasource": lambda: _noop(source()),
        "changes_inferred": lambda: plain_t.changes(firsts["plain"]),
        "incremental": lambda: _noop(cdc_t.read_incremental(firsts["cdc"])),
        "full_snapshot": lambda: _noop(cdc_t.read()),
    }
    best = dict.fromkeys(runs, float("inf"))
    names = list(runs)
    for r in range(repeat):
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            t0 = time.perf_counter()
            runs[name]()
            best[name] = min(best[name], time.perf_counter() - t0)
    log = cdc_t.changes(firsts["cdc"])
    inferred = plain_t.changes(firsts["plain"])
    ops = {op: pc.sum(pc.equal(log.column("op"), op).cast("int64")).as_py() or 0 for op in ("i", "u", "d")}
    same = sorted(map(repr, log.select(["op", "before", "after"]).to_pylist())) == sorted(
        map(repr, inferred.select(["op", "before", "after"]).to_pylist()))
    ds_rows = source().count()
    full = best["full_snapshot"]
    doc = {
        "rows": rows, "batch": wl.batch.num_rows, "repeat": repeat, "upserts": upserts,
        "cdc_log_write_overhead": upserts["cdc"]["seconds"] / upserts["plain"]["seconds"],
        "seconds": best,
        "changes": {"rows": log.num_rows, "ops": ops, "datasource_rows": ds_rows,
                    "ok": log.num_rows == wl.batch.num_rows == ds_rows and ops["u"] == upserts["cdc"]["updates"]
                    and ops["i"] == upserts["cdc"]["inserts"] and ops["d"] == 0 and same},
        "ratios": {k: v / full for k, v in best.items() if k != "full_snapshot"},
        "cdc_files": len(list(Path(cdc_t.path).rglob(".*.cdc"))),
        "cdc_bytes": sum(p.stat().st_size for p in Path(cdc_t.path).rglob(".*.cdc")),
    }
    spark.stop()
    return doc


def print_table(doc: dict) -> None:
    print(f"\nCDC of a 1% upsert ({doc['batch']:,} rows) into {doc['rows']:,} rows, best of {doc['repeat']}")
    print(f"{'what':44} {'seconds':>9} {'/ full snapshot':>16}")
    labels = {"changes_log": "changes from the CDC log (Table.changes)",
              "changes_datasource": "changes, data source (incremental.format=cdc)",
              "changes_inferred": "changes inferred (table without CDC log)",
              "incremental": "incremental pull (latest state)",
              "full_snapshot": "full snapshot read"}
    for k, label in labels.items():
        ratio = doc["ratios"].get(k)
        print(f"{label:44} {doc['seconds'][k]:9.2f} {(f'{ratio:.3f}x' if ratio is not None else ''):>16}")
    u = doc["upserts"]
    print(f"{'upsert with the CDC log':44} {u['cdc']['seconds']:9.2f}")
    print(f"{'upsert without':44} {u['plain']['seconds']:9.2f} {doc['cdc_log_write_overhead']:15.2f}x (write)")
    print(f"CDC log: {doc['cdc_files']} file(s), {doc['cdc_bytes'] / MB:.1f} MB; changes {doc['changes']}")
    print("targets: changes <= 0.1x a full snapshot; incremental pull <= 0.05x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--json", default=None)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-cdc-"))
    try:
        doc = run(args.rows, args.repeat, args.master, args.driver_memory, work)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    doc["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    out = Path(args.json or Path(__file__).parent / "results" / f"cdc-{args.rows}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    print_table(doc)
    if not doc["changes"]["ok"]:
        print("!!! the changes did not match the upsert", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
