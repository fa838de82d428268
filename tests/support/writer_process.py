"""A writer in a process of its own, for the crash and two-writer tests.

    python -m tests.support.writer_process '<json job>'

The job: {"path", "action": "upsert" | "insert" | "bulk_insert" | "delete" | "rollback" | "restore" | "clean" | "archive" | "repair",
"options": {...}, "batches": [[row, ...], ...] (writes), "schema" (writes), "delays": [seconds
before each batch] (writes, optional), "args": [...]}.
Each batch of a write is one commit. Prints one JSON line per finished operation:
{"op": n, "instant": ..., "error": null | "<ErrorType>: message", "t0": ..., "t1": ...}
(+ "conflict": {"instant", "other", "groups", "keys"} for a WriteConflictError)
(t0/t1: wall-clock seconds around the operation). Exit code 0, or 3 when an operation failed.

Started by the tests in a process group of its own (`start_new_session=True`): the failpoint
named by HOODIE_FAILPOINT then SIGKILLs this group (driver, JVM and Spark Python workers).
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    os.environ["HOODIE_FAILPOINT_PGID"] = str(os.getpgrp())  # inherited by the JVM and its workers
    job = json.loads(sys.argv[1])
    from engine.errors import EngineError, WriteConflictError
    from engine.services.maintenance import Maintenance
    from engine.table.meta_client import MetaClient

    failed = False
    if job["action"] in ("upsert", "insert", "bulk_insert", "delete"):
        from engine import Table
        from engine.spark import build_session

        # a short-lived JVM: the client compiler only and the serial collector spend less CPU on
        # starting it (the suite starts dozens of these beside its own session)
        conf = {"spark.ui.enabled": "false",
                "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
        arrow = job.get("arrow")  # {"column": "arrow type alias"}: Arrow input, no JVM (the local write)
        spark = None if arrow else build_session("local[1]", app_name="writer-process", conf=conf)
        table = Table.open(spark, job["path"])
        for n, batch in enumerate(job["batches"]):
            time.sleep((job.get("delays") or [0.0] * (n + 1))[n])
            t0 = time.time()
            try:
                write = getattr(table, job["action"])
                if arrow:
                    import pyarrow as pa

                    schema = pa.schema([(k, pa.type_for_alias(v)) for k, v in arrow.items()])
                    frame = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in batch], schema)
                else:
                    frame = spark.createDataFrame(batch, job["schema"])
                res = write(frame, options=job.get("options"))
                out = {"op": n, "instant": res.instant, "error": None}
            except EngineError as exc:
                failed = True
                out = {"op": n, "instant": None, "error": f"{type(exc).__name__}: {exc}"}
                if isinstance(exc, WriteConflictError):
                    out["conflict"] = {"instant": exc.instant, "other": exc.other, "groups": exc.groups, "keys": exc.keys}
            out.update(t0=t0, t1=time.time())
            print(json.dumps(out), flush=True)
        if spark is not None:
            spark.stop()
    else:
        m = Maintenance(MetaClient.open(job["path"]), job.get("options"))
        t0 = time.time()
        try:
            getattr(m, job["action"])(*job.get("args", []))
            out = {"op": 0, "instant": None, "error": None}
        except EngineError as exc:
            failed = True
            out = {"op": 0, "instant": None, "error": f"{type(exc).__name__}: {exc}"}
        out.update(t0=t0, t1=time.time())
        print(json.dumps(out), flush=True)
    return 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
