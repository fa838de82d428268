"""`make run` (until the console exists): a short end-to-end demo on the embedded defaults.

Creates `./lakehouse/demo_trips` (local files, local Spark), inserts, upserts and deletes a few
trips, then prints the commits, a time-travel read and an incremental pull.
"""

from __future__ import annotations

import os
import shutil
import sys

from engine import Table
from engine.spark import build_session


def main(base: str = "lakehouse") -> int:
    path = os.path.abspath(os.path.join(base, "demo_trips"))
    shutil.rmtree(path, ignore_errors=True)
    spark = build_session(app_name="hoodie-demo")
    table = Table.create(
        spark, path, name="demo_trips", record_key="trip_id", partition_fields="city", precombine_field="ts"
    )
    schema = "trip_id string, city string, fare double, ts long"
    first = spark.createDataFrame(
        [("t1", "paris", 12.5, 1), ("t2", "paris", 8.0, 1), ("t3", "rome", 20.0, 1), ("t4", "oslo", 31.0, 1)], schema
    )
    step = lambda msg: print(f"  .. {msg}", file=sys.stderr)  # noqa: E731
    r1 = table.insert(first, progress=step)
    print(f"insert  -> instant {r1.instant}: {r1.inserts} inserted into {r1.files_written} file(s)")
    second = spark.createDataFrame([("t1", "paris", 14.0, 2), ("t5", "rome", 9.5, 2), ("t3", "rome", 1.0, 0)], schema)
    r2 = table.upsert(second, progress=step)
    print(
        f"upsert  -> instant {r2.instant}: {r2.inserts} inserted, {r2.updates} updated, "
        f"{r2.stale_ignored} older record(s) ignored"
    )
    r3 = table.delete(spark.createDataFrame([("t2", "paris")], "trip_id string, city string"), progress=step)
    print(f"delete  -> instant {r3.instant}: {r3.deletes} deleted")

    print("\ncommits:")
    for inst in table.timeline():
        totals = table.commit_metadata(inst.time).totals() if inst.is_completed else {}
        print(f"  {inst.time}  {inst.action.value:<8} {inst.state.value:<10} {totals}")
    cols = ["_hoodie_commit_time", "trip_id", "city", "fare", "ts"]
    print("\nsnapshot:")
    table.read().select(*cols).orderBy("trip_id").show(truncate=False)
    print(f"as of {r1.instant} (time travel):")
    table.read(as_of=r1.instant).select(*cols).orderBy("trip_id").show(truncate=False)
    print(f"incremental since {r1.instant}:")
    table.read_incremental(r1.instant).select(*cols).orderBy("trip_id").show(truncate=False)
    print(f"table written to {path} — read it with any Hudi reader, e.g. `hoodie commits {path}`")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
