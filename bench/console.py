"""Console latency benchmark: pages and API calls on a big table, under gunicorn on 127.0.0.1.

    python bench/console.py [--instants 1000] [--groups 10000] [--duration 30] [--clients 20] [--mor]

Builds (once, by hand: pyarrow-free filler base files plus the engine's commit metadata and
timeline files, no Spark) a table with 1,000 completed commits and 10,000 file groups in 100
partitions, registers it in a fresh SQLite console database, starts gunicorn, then measures:
1. single client: each URL requested --repeat times in a row (after one warm-up request);
2. --clients concurrent clients for --duration seconds, each cycling through the URLs.
Prints p50/p95 per URL and writes JSON under bench/results/. Only 127.0.0.1 is contacted; the
load is bounded in time and stops by itself.

With --mor the table is MERGE_ON_READ instead: 10,000 file groups written by deltacommits (one
base file each, sparse filler files), the other deltacommits writing log files (about two per
slice: 20,000 log files), and a pending compaction planned on the first 10 partitions' slices
(1,000 operations); the URLs add the MOR pages: file groups with log files, a deltacommit's
log-file stats, the pending compaction's plan and the compaction preview (a dry run).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import handmade  # noqa: E402

URLS = [
    ("overview page", "/tables/bench"),
    ("timeline page", "/tables/bench/timeline"),
    ("timeline page 10, filtered", "/tables/bench/timeline?action=commit&page=10"),
    ("file groups page", "/tables/bench/file-groups"),
    ("file groups of a partition", "/tables/bench/file-groups?partition=p042"),
    ("commit detail page", None),  # filled in with a real instant
    ("API commits", "/api/v1/tables/bench/commits"),
    ("API file groups", "/api/v1/tables/bench/file-groups?per_page=100"),
    ("API overview", "/api/v1/tables/bench"),
]


def build_table(path: Path, instants: int, groups: int, partitions: int = 100) -> handmade.Handmade:
    marker = path / ".bench-complete"
    if marker.exists():
        from engine.table.meta_client import MetaClient

        t = handmade.Handmade(str(path), MetaClient.open(str(path)))
        t.instants = [i.time for i in t.meta.timeline().instants]
        return t
    if path.exists():
        shutil.rmtree(path)
    t = handmade.create(str(path), name="bench")
    rng = random.Random(42)
    per_commit = max(1, groups // instants)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(instants):
        spec: dict[str, list[str]] = {}
        for k in range(per_commit):
            spec.setdefault(f"p{(n * per_commit + k) % partitions:03d}", []).append("new")
        # filler base files of 1-60 KB: the pages list them, nobody reads them
        handmade.add_commit(t, spec, rows_per_file=rng.randrange(1000, 50_000), at=start + timedelta(minutes=n),
                            payload_bytes=rng.randrange(1024, 60 * 1024))
    marker.write_text("ok")
    return t


MOR_URLS = [
    ("overview page", "/tables/bench_mor"),
    ("timeline page", "/tables/bench_mor/timeline"),
    ("file groups page", "/tables/bench_mor/file-groups"),
    ("file groups with log files", "/tables/bench_mor/file-groups?logs=1&page=20"),
    ("file groups of a partition", "/tables/bench_mor/file-groups?partition=p042"),
    ("deltacommit detail page", None),  # filled in with a real instant
    ("pending compaction page", None),
    ("compaction preview (dry run)", "/tables/bench_mor/services/compaction"),
    ("API file groups", "/api/v1/tables/bench_mor/file-groups?per_page=100"),
    ("API overview", "/api/v1/tables/bench_mor"),
]


def build_mor_table(path: Path, instants: int, groups: int, partitions: int = 100) -> list[str]:
    """A MERGE_ON_READ table by hand (see the module docstring); returns its instant times."""
    from engine.data.file_names import base_file_name, log_file_name, new_file_id
    from engine.schema.avro import arrow_to_avro, avro_to_json
    from engine.services.compaction import plan_compaction
    from engine.storage import storage_for
    from engine.table.compaction_plan import PLAN_MODEL, CompactionPlan
    from engine.table.create import new_table_config
    from engine.table.meta_client import MetaClient
    from engine.timeline import avro_models
    from engine.timeline.commit_metadata import CommitMetadata, WriteStat
    from engine.timeline.instant import format_instant_time

    marker = path / ".bench-complete"
    if marker.exists():
        return sorted({n.split(".")[0] for n in os.listdir(path / ".hoodie") if n[:1].isdigit()})
    if path.exists():
        shutil.rmtree(path)
    config = new_table_config(name="bench_mor", record_key="trip_id", partition_fields="city", precombine_field="ts",
                              table_type="MERGE_ON_READ")
    meta = MetaClient.create(storage_for(str(path)), config)
    schema = avro_to_json(arrow_to_avro(handmade.DATA_SCHEMA, "bench_mor"))
    rng = random.Random(7)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    times = [format_instant_time(start + timedelta(minutes=n)) for n in range(instants)]
    hoodie = path / ".hoodie"
    groups_of: list[tuple[str, str, str, str]] = []  # (partition, file id, base instant, base file name)
    logs_of: dict[str, list[str]] = {}
    per_base_commit = 50
    base_commits = groups // per_base_commit

    def sparse(rel: str, size: int) -> None:
        with open(path / rel, "wb") as f:
            f.truncate(size)  # the pages list names and sizes; nobody reads these bytes

    def complete(at: str, stats: dict[str, list[WriteStat]]) -> None:
        (hoodie / f"{at}.deltacommit.requested").write_bytes(b"")
        (hoodie / f"{at}.deltacommit.inflight").write_bytes(b"")
        (hoodie / f"{at}.deltacommit").write_bytes(CommitMetadata(stats, "UPSERT", {"schema": schema}).to_bytes())

    for p in range(partitions):
        (path / f"p{p:03d}").mkdir(parents=True)
        meta.ensure_partition_metadata(f"p{p:03d}", times[0])
    for n, at in enumerate(times[:-1]):
        stats: dict[str, list[WriteStat]] = {}
        if n < base_commits:  # inserts: new base files
            for k in range(per_base_commit):
                part = f"p{(n * per_base_commit + k) % partitions:03d}"
                fid = new_file_id()
                name = base_file_name(fid, f"{k}-0-{k}", at)
                size = rng.randrange(1024, 60 * 1024)
                rows = rng.randrange(1000, 50_000)
                sparse(f"{part}/{name}", size)
                groups_of.append((part, fid, at, name))
                stats.setdefault(part, []).append(WriteStat(
                    fileId=fid, path=f"{part}/{name}", partitionPath=part, numWrites=rows, numInserts=rows,
                    totalWriteBytes=size, fileSizeInBytes=size))
        else:  # updates: a log file on each of 25 slices
            for k in range(25):
                part, fid, base, base_name = groups_of[((n - base_commits) * 25 + k) % len(groups_of)]
                names = logs_of.setdefault(fid, [])
                name = log_file_name(fid, base, len(names) + 1, f"{k}-1-{k}")
                names.append(name)
                size = rng.randrange(1024, 8 * 1024)
                rows = rng.randrange(1, 200)
                sparse(f"{part}/{name}", size)
                stats.setdefault(part, []).append(WriteStat(
                    fileId=fid, path=f"{part}/{name}", partitionPath=part, prevCommit=base, numWrites=rows,
                    numUpdateWrites=rows, totalWriteBytes=size, fileSizeInBytes=size, baseFile=base_name,
                    logFiles=list(names), logVersion=len(names), logOffset=0))
        complete(at, stats)
    plan = plan_compaction(meta, meta.timeline(), times[-1])
    ops = tuple(op for op in plan.operations if op.partition < f"p{partitions // 10:03d}")
    body = avro_models.serialize(PLAN_MODEL, CompactionPlan(times[-1], ops).to_record())
    (hoodie / f"{times[-1]}.compaction.requested").write_bytes(body)
    marker.write_text("ok")
    return times


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _login(base: str) -> requests.Session:
    s = requests.Session()
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', s.get(f"{base}/login").text).group(1)
    r = s.post(f"{base}/login", data={"csrf_token": token, "username": "bench", "password": "bench-password"},
               allow_redirects=False)
    assert r.status_code == 302, r.status_code
    return s


def _api_token(base: str) -> str:
    return requests.post(f"{base}/api/v1/tokens", json={"username": "bench", "password": "bench-password"}).json()["token"]


def _get(session: requests.Session, base: str, url: str, token: str) -> tuple[float, int]:
    headers = {"Authorization": f"Bearer {token}"} if url.startswith("/api/") else {}
    t0 = time.perf_counter()
    r = session.get(base + url, headers=headers, allow_redirects=False)
    return (time.perf_counter() - t0) * 1000, r.status_code


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * len(values) + 0.5) - 1))
    return values[k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instants", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    ap.add_argument("--threads", type=int, default=4, help="gunicorn threads per worker")
    ap.add_argument("--dir", default="/tmp/hoodie-bench-console")
    ap.add_argument("--mor", action="store_true", help="a MERGE_ON_READ table with log files and a pending compaction")
    args = ap.parse_args()

    work = Path(args.dir)
    lake = work / "lake"
    lake.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if args.mor:
        name = "bench_mor"
        instants = build_mor_table(lake / name, args.instants, args.groups)
        urls_spec = [(n, u or (f"/tables/{name}/commits/{instants[-2]}" if n.startswith("deltacommit")
                               else f"/tables/{name}/commits/{instants[-1]}")) for n, u in MOR_URLS]
    else:
        name = "bench"
        instants = build_table(lake / name, args.instants, args.groups).instants
        urls_spec = [(n, u or f"/tables/{name}/commits/{instants[len(instants) // 2]}") for n, u in URLS]
    built_s = time.perf_counter() - t0
    print(f"table {name}: {len(instants)} instants, built/opened in {built_s:.1f} s", flush=True)

    db = work / "console.db"
    for f in work.glob("console.db*"):
        f.unlink()
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "CONSOLE_WAREHOUSE_ROOTS": str(lake),
           "CONSOLE_SECRET_KEY": "bench-secret", "CONSOLE_LOGIN_LIMIT": "1000 per minute"}
    os.environ.update(env)
    from flask_migrate import upgrade

    from webui import create_app

    app = create_app({"CONSOLE_BOOTSTRAP_ADMIN": False})
    with app.app_context():
        upgrade()
        from webui.services.tables import register_existing
        from webui.services.users import create_user

        create_user("bench", "bench-password", "operator" if args.mor else "viewer")  # the compaction preview
        register_existing(str(lake / name), name, None)

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable)) or "gunicorn"
    web = subprocess.Popen([gunicorn, "-b", f"127.0.0.1:{port}", "-w", str(args.workers), "--threads", str(args.threads),
                            "--log-level", "warning", "webui:create_app()"], env=env, cwd=str(REPO),
                           start_new_session=True)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        session = _login(base)
        token = _api_token(base)
        urls = urls_spec
        for _name, url in urls:  # warm-up: each gunicorn worker builds its caches on first use
            for _ in range(args.workers * args.threads):
                ms, status = _get(session, base, url, token)
                assert status == 200, (url, status)

        single: dict[str, list[float]] = {}
        for name, url in urls:
            single[name] = []
            for _ in range(args.repeat):
                ms, status = _get(session, base, url, token)
                assert status == 200, (url, status)
                single[name].append(ms)

        load: dict[str, list[float]] = {n: [] for n, _u in urls}
        errors: list[str] = []
        lock = threading.Lock()
        stop_at = time.monotonic() + args.duration

        def client(k: int) -> None:
            s = _login(base)
            i = k
            while time.monotonic() < stop_at:
                name, url = urls[i % len(urls)]
                i += 1
                try:
                    ms, status = _get(s, base, url, token)
                except requests.RequestException as exc:
                    with lock:
                        errors.append(f"{url}: {type(exc).__name__}")
                    continue
                with lock:
                    if status != 200:
                        errors.append(f"{url}: HTTP {status}")
                    else:
                        load[name].append(ms)

        threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
        started = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join(args.duration + 60)
        elapsed = time.monotonic() - started
    finally:
        os.killpg(web.pid, 15)
        web.wait(30)

    rows = []
    print(f"\n{'request':32} {'1 client p50':>12} {'p95':>8}   {args.clients} clients p50 {'p95':>8} {'n':>6}")
    for name, _url in urls:
        s, c = single[name], load[name]
        row = {"request": name, "single_p50_ms": round(statistics.median(s), 1), "single_p95_ms": round(_pct(s, 95), 1),
               "load_p50_ms": round(statistics.median(c), 1) if c else None,
               "load_p95_ms": round(_pct(c, 95), 1) if c else None, "load_requests": len(c)}
        rows.append(row)
        print(f"{name:32} {row['single_p50_ms']:>12} {row['single_p95_ms']:>8}   {row['load_p50_ms']!s:>14} "
              f"{row['load_p95_ms']!s:>8} {len(c):>6}")
    total = sum(len(v) for v in load.values())
    worst = max(r["single_p95_ms"] for r in rows)
    print(f"\nload: {total} requests in {elapsed:.1f} s ({total / elapsed:.1f}/s), {len(errors)} error(s)")
    print(f"single-client p95, worst request: {worst} ms (target <= 300 ms: {'met' if worst <= 300 else 'MISSED'})")
    doc = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "table": name, "instants": len(instants),
           "file_groups": args.groups, "gunicorn": {"workers": args.workers, "threads": args.threads},
           "clients": args.clients, "duration_s": round(elapsed, 1), "requests_under_load": total,
           "errors": errors[:50], "error_count": len(errors), "cpu_count": os.cpu_count(), "rows": rows}
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"console-{'mor-' if args.mor else ''}{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps(doc, indent=2))
    print(f"wrote {path.relative_to(REPO)}")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
