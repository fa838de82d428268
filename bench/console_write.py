"""Console write benchmark: a small upsert uploaded through the console's pages, from the moment the
job runner claims the job to the moment the job is finished (the commit and its audit row written).

    python -m bench.console_write [--rows 100000] [--batch 300] [--jobs 10]

Builds a copy-on-write table of --rows rows (20 `city` partitions, record key `trip_id`) in a fresh
SQLite console database (written with the engine from Arrow, no Spark), starts one job runner
(`webui.cli worker`, the process `make run` starts) and then, one after the other, uploads --jobs
CSV batches of --batch records (80% updates of random existing trips, 20% new ones) through the
upload and confirm pages and waits for each job. Per job it reports, from the console database:
claim to finish (`started_at` -> `finished_at`: what the runner spends on the job), queue to finish
(`created_at` -> `finished_at`, including the runner's polling interval of --poll seconds), and the
write path the engine took. The first job of a runner also pays for the runner's imports; it is
reported apart. Only 127.0.0.1 and local files are touched; the runner is stopped at the end.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CITIES = [f"city{i:02d}" for i in range(20)]


def base_rows(rows: int, seed: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    return pa.table({
        "trip_id": pa.array([f"t{i:09d}" for i in range(rows)]),
        "city": pa.array([CITIES[i % len(CITIES)] for i in range(rows)]),
        "ts": pa.array(np.ones(rows, dtype=np.int64)),
        "fare": pa.array(rng.uniform(5, 50, rows).round(2)),
        "driver": pa.array([f"d{int(x)}" for x in rng.integers(0, 5000, rows)]),
    })


def batch_csv(rows: int, batch: int, job: int, rng: random.Random) -> bytes:
    """`batch` records: 80% updates of existing trips (their city kept), 20% new trips."""
    out = io.StringIO()
    out.write("trip_id,city,ts,fare,driver\n")
    updates = int(batch * 0.8)
    for i in rng.sample(range(rows), updates):
        out.write(f"t{i:09d},{CITIES[i % len(CITIES)]},{job + 2},{rng.uniform(5, 50):.2f},d{rng.randrange(5000)}\n")
    for j in range(batch - updates):
        n = rows + job * batch + j
        out.write(f"t{n:09d},{rng.choice(CITIES)},{job + 2},{rng.uniform(5, 50):.2f},d{rng.randrange(5000)}\n")
    return out.getvalue().encode()


def run(rows: int, batch: int, jobs: int, poll: float, seed: int, work: Path) -> dict:
    import pytest

    from engine import Table
    from tests.support.console import PASSWORDS, csrf, make_app, start_worker, stop
    from tests.webui.test_console_worker import _upsert_via_pages, wait_job

    mp = pytest.MonkeyPatch()
    db_url = f"sqlite:///{work / 'console.db'}"
    app = make_app(work, mp, db_url)
    from webui.services.tables import NewTable, create_table

    with app.app_context():
        create_table(NewTable(name="rides", record_key="trip_id", partition_fields="city", precombine_field="ts"), None)
    path = str(work / "lake" / "rides")
    t0 = time.perf_counter()
    Table.open(None, path).insert(base_rows(rows, seed))
    load_s = time.perf_counter() - t0

    worker = start_worker(work, db_url, None, "--poll", str(poll))
    client = app.test_client()
    client.post("/login", data={"csrf_token": csrf(client, "/login"), "username": "operator",
                                "password": PASSWORDS["operator"]})
    rng = random.Random(seed)
    results = []
    try:
        for j in range(jobs):
            csv = batch_csv(rows, batch, j, rng)
            submitted = time.perf_counter()
            job_id = _upsert_via_pages(client, "rides", csv)
            done = wait_job(app, job_id, timeout=600)
            seen = time.perf_counter() - submitted
            if done.state != "succeeded":
                raise SystemExit(f"job {job_id} {done.state}: {done.error}")
            r = done.result
            if (r["inserts"], r["updates"]) != (batch - int(batch * 0.8), int(batch * 0.8)):
                raise SystemExit(f"job {job_id}: {r['inserts']} inserts and {r['updates']} updates, "
                                 f"expected {batch - int(batch * 0.8)} and {int(batch * 0.8)}")
            results.append({
                "job": job_id,
                "claim_to_finish_s": (done.finished_at - done.started_at).total_seconds(),
                "queue_to_finish_s": (done.finished_at - done.created_at).total_seconds(),
                "client_seen_s": seen,
                "write_path": r.get("write_path"),
                "files_written": r["files_written"],
                "instant": r["instant"],
            })
    finally:
        stop(worker)
        mp.undo()
    return {"rows": rows, "batch": batch, "jobs": results, "load_s": load_s, "poll_s": poll}


def summary(doc: dict) -> dict:
    later = [j["claim_to_finish_s"] for j in doc["jobs"][1:]] or [doc["jobs"][0]["claim_to_finish_s"]]
    queue = [j["queue_to_finish_s"] for j in doc["jobs"][1:]] or [doc["jobs"][0]["queue_to_finish_s"]]
    return {
        "first_claim_to_finish_s": doc["jobs"][0]["claim_to_finish_s"],
        "claim_to_finish_p50_s": statistics.median(later),
        "claim_to_finish_max_s": max(later),
        "queue_to_finish_p50_s": statistics.median(queue),
        "write_paths": sorted({j["write_path"] for j in doc["jobs"]}),
    }


def print_table(doc: dict) -> None:
    print(f"{'job':>5} {'claim->finish s':>16} {'queue->finish s':>16} {'client saw s':>13} {'path':>8} {'files':>6}")
    for j in doc["jobs"]:
        print(f"{j['job']:>5} {j['claim_to_finish_s']:>16.3f} {j['queue_to_finish_s']:>16.3f} "
              f"{j['client_seen_s']:>13.3f} {j['write_path']:>8} {j['files_written']:>6}")
    s = doc["summary"]
    print(f"\n{doc['batch']}-record upserts into {doc['rows']:,} rows; first job (runner imports included): "
          f"{s['first_claim_to_finish_s']:.3f} s claim to finish; later jobs: p50 {s['claim_to_finish_p50_s']:.3f} s, "
          f"max {s['claim_to_finish_max_s']:.3f} s (target <= 1 s); queue to finish p50 "
          f"{s['queue_to_finish_p50_s']:.3f} s (runner polls every {doc['poll_s']} s)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--poll", type=float, default=0.2, help="the runner's polling interval (seconds)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.jobs < 1 or args.batch < 5 or args.rows < args.batch:
        ap.error("need --jobs >= 1, --batch >= 5 and --rows >= --batch")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="bench-console-write-"))
    try:
        doc = run(args.rows, args.batch, args.jobs, args.poll, args.seed, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["summary"] = summary(doc)
    doc["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    print_table(doc)
    out = Path(args.json or REPO / "bench" / "results" / f"console-write-{args.rows}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
