"""The job runner for real: a worker process with its own SparkSession executes queued jobs.

One worker serves the module (Spark starts once); the crash test starts its own. Tables are
read back with pyarrow from the files the engine wrote (this process never starts Spark).
"""

from __future__ import annotations

import io
import os
import re
import signal
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support import handmade
from tests.support.console import PASSWORDS, audit_rows, csrf, make_app, start_worker, stop
from tests.support.tables import tree_bytes

pytestmark = pytest.mark.spark


def job(app, job_id: int):
    from webui.extensions import db
    from webui.models import Job

    with app.app_context():
        db.session.expire_all()
        return db.session.get(Job, job_id)


def wait_job(app, job_id: int, until=lambda j: j.state in ("succeeded", "failed", "cancelled"), timeout: float = 240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        j = job(app, job_id)
        if until(j):
            return j
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {j.state}: {j.log_tail}")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("worker")
    mp = pytest.MonkeyPatch()
    db_url = f"sqlite:///{tmp / 'console.db'}"
    app = make_app(tmp, mp, db_url)
    proc = start_worker(tmp, db_url, hold="writing@held")
    yield app, tmp
    stop(proc)
    mp.undo()


def _register(app, t: handmade.Handmade, name: str) -> None:
    with app.app_context():
        from webui.services.tables import register_existing

        register_existing(t.path, name, None)


def _upsert_via_pages(client, table: str, csv: bytes) -> int:
    page = client.post(f"/tables/{table}/write/upload", data={
        "up-csrf_token": csrf(client, f"/tables/{table}/write"), "up-operation": "upsert",
        "up-file": (io.BytesIO(csv), "batch.csv")}, content_type="multipart/form-data").get_data(as_text=True)
    upload_id = page.split('name="upload_id" type="hidden" value="')[1].split('"')[0]
    resp = client.post(f"/tables/{table}/write/confirm", data={"csrf_token": csrf(client), "upload_id": upload_id,
                                                              "operation": "upsert"})
    return int(resp.headers["Location"].rsplit("/", 1)[1])


def _table_rows(path: str) -> list[tuple]:
    from engine.table.meta_client import MetaClient

    meta = MetaClient.open(path)
    out = []
    for base in meta.file_system_view().latest_base_files():
        t = pq.read_table(os.path.join(path, base.path), columns=["trip_id", "city", "ts", "fare"])
        out += [tuple(r.values()) for r in t.to_pylist()]
    return sorted(out)


def test_queued_upsert_result_equals_the_engine_commit(env):
    app, tmp = env
    from webui.services.tables import NewTable, create_table

    with app.app_context():
        create_table(NewTable(name="rides", record_key="trip_id", partition_fields="city", precombine_field="ts"), None)
    path = str(tmp / "lake" / "rides")
    client = app.test_client()
    client.post("/login", data={"csrf_token": csrf(client, "/login"), "username": "operator",
                                "password": PASSWORDS["operator"]})
    first = _upsert_via_pages(client, "rides", b"trip_id,city,ts,fare\nr1,paris,1,10.0\nr2,paris,1,11.0\nr3,oslo,1,12.0\n")
    done = wait_job(app, first)
    assert done.state == "succeeded", done.error
    from engine.table.meta_client import MetaClient

    meta = MetaClient.open(path)
    commit = meta.timeline().completed_writes.last
    totals = meta.commit_metadata(commit).totals()
    r = done.result
    assert (r["instant"], r["operation"], r["inserts"], r["updates"], r["deletes"], r["files_written"], r["partitions"]) == (
        commit.time, "UPSERT", 3, 0, 0, totals["files"], ["oslo", "paris"])
    assert totals["inserts"] == 3 and r["bytes_written"] == totals["bytes"]
    assert _table_rows(path) == [("r1", "paris", 1, 10.0), ("r2", "paris", 1, 11.0), ("r3", "oslo", 1, 12.0)]
    assert re.search(r"writing 2 file group\(s\) locally \(\d+ thread\(s\), no Spark job\) for instant", done.log_tail)
    assert "written locally by the job runner (no Spark job)" in done.log_tail and r["write_path"] == "local"
    assert "starting Spark" not in done.log_tail and done.progress["instant"] == commit.time

    second = _upsert_via_pages(client, "rides", b"trip_id,city,ts,fare\nr1,paris,2,99.0\nr4,oslo,2,5.0\n")
    done2 = wait_job(app, second)
    assert (done2.state, done2.result["inserts"], done2.result["updates"]) == ("succeeded", 1, 1)
    assert _table_rows(path) == [("r1", "paris", 2, 99.0), ("r2", "paris", 1, 11.0), ("r3", "oslo", 1, 12.0),
                                 ("r4", "oslo", 2, 5.0)]
    # a data preview through the worker sees the same rows
    resp = client.post("/tables/rides/preview", data={"csrf_token": csrf(client), "mode": "snapshot", "limit": "10"})
    preview = wait_job(app, int(resp.headers["Location"].rsplit("/", 1)[1]))
    cols = preview.result["columns"]
    assert preview.state == "succeeded" and preview.result["total_rows"] == 4
    assert sorted((row[cols.index("trip_id")], row[cols.index("fare")]) for row in preview.result["rows"]) == [
        ("r1", 99.0), ("r2", 11.0), ("r3", 12.0), ("r4", 5.0)]
    page = client.get(f"/jobs/{preview.id}").get_data(as_text=True)
    assert 'data-testid="preview-total">4<' in page
    # time travel to the first commit, and the records committed after it
    for mode, expected in (("as_of", [("r1", 10.0), ("r2", 11.0), ("r3", 12.0)]), ("incremental", [("r1", 99.0), ("r4", 5.0)])):
        resp = client.post("/tables/rides/preview", data={"csrf_token": csrf(client), "mode": mode, "instant": commit.time,
                                                         "limit": "10"})
        read = wait_job(app, int(resp.headers["Location"].rsplit("/", 1)[1]))
        cols = read.result["columns"]
        assert read.state == "succeeded" and read.result["total_rows"] == len(expected), (mode, read.error)
        assert sorted((row[cols.index("trip_id")], row[cols.index("fare")]) for row in read.result["rows"]) == expected
    assert [(a[1], a[5]) for a in audit_rows(app) if a[2] == "rides" and a[1] != "preview"] == [
        ("upsert", "queued"), ("upsert.finished", f"succeeded: instant {commit.time}"),
        ("upsert", "queued"), ("upsert.finished", f"succeeded: instant {done2.result['instant']}")]
    # the worker started Spark and ran five jobs: its output (stdout and stderr) is still its own
    # one line, no JVM start-up warning (WARNING: Using incubator modules: ...) and no Spark log
    (log,) = tmp.glob("worker-*.log")
    [line] = log.read_text().splitlines()
    assert line.startswith("hoodie-console worker ") and line.endswith(": waiting for jobs"), line


def test_rollback_job_removes_the_commit(env):
    app, tmp = env
    t = handmade.create(str(tmp / "lake" / "rb"), name="rb")
    handmade.add_commit(t, {"paris": ["new"]})
    handmade.add_commit(t, {"paris": ["update:0"], "rome": ["new"]})
    _register(app, t, "rb")
    admin = app.test_client()
    admin.post("/login", data={"csrf_token": csrf(admin, "/login"), "username": "admin", "password": PASSWORDS["admin"]})
    page = admin.get(f"/tables/rb/services/rollback?instant={t.instants[1]}").get_data(as_text=True)
    data = {k: page.split(f'name="{k}" type="hidden" value="')[1].split('"')[0]
            for k in ("csrf_token", "instant", "comment", "fingerprint", "plan_hash")}
    resp = admin.post("/tables/rb/services/rollback", data=data)
    done = wait_job(app, int(resp.headers["Location"].rsplit("/", 1)[1]))
    assert done.state == "succeeded", done.error
    assert done.result["target"] == t.instants[1] and len(done.result["deleted"]) == 2
    from engine.table.meta_client import MetaClient

    assert [i.time for i in MetaClient.open(t.path).timeline().completed_writes] == [t.instants[0]]
    assert [(a[0], a[1], a[3], a[4], a[5].split(":")[0], a[6]) for a in audit_rows(app) if a[2] == "rb"] == [
        ("admin", "rollback", {"instant": t.instants[1]}, True, "queued", done.id),
        ("admin", "rollback.finished", {"instant": t.instants[1]}, True, "succeeded", done.id)]
    assert not (Path(t.path) / "rome").exists() or not any((Path(t.path) / "rome").glob("*.parquet"))


def test_cancel_leaves_the_table_byte_identical(env):
    app, tmp = env
    t = handmade.create(str(tmp / "lake" / "held"), name="held")
    handmade.add_commit(t, {"paris": ["new"]})
    _register(app, t, "held")
    before = tree_bytes(t.path)
    client = app.test_client()
    token = client.post("/api/v1/tokens", json={"username": "operator", "password": PASSWORDS["operator"]}).get_json()["token"]
    h = {"Authorization": f"Bearer {token}"}
    job_id = client.post("/api/v1/tables/held/jobs", headers=h, json={
        "operation": "upsert", "records": [{"trip_id": "paris-0-0", "city": "paris", "ts": 9, "fare": 1.0},
                                           {"trip_id": "n1", "city": "lyon", "ts": 9, "fare": 2.0}]}).get_json()["job_id"]
    held = wait_job(app, job_id, until=lambda j: "holding at 'writing'" in (j.log_tail or ""))
    assert held.state == "running"
    from engine.table.meta_client import MetaClient

    pending = MetaClient.open(t.path).timeline().pending.instants
    assert len(pending) == 1 and pending[0].state.value == "inflight"  # the write really had started
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", headers=h).status_code == 202
    done = wait_job(app, job_id)
    assert done.state == "cancelled", (done.error, done.log_tail)
    assert tree_bytes(t.path) == before
    assert [(a[1], a[5].split(":")[0]) for a in audit_rows(app) if a[2] == "held"] == [
        ("upsert", "queued"), ("job.cancel", "requested"), ("upsert.finished", "cancelled")]


def test_killed_worker_fails_its_job_and_queued_jobs_survive(tmp_path, monkeypatch):
    db_url = f"sqlite:///{tmp_path / 'console.db'}"
    app = make_app(tmp_path, monkeypatch, db_url)
    victim = handmade.create(str(tmp_path / "lake" / "victim"), name="victim")
    handmade.add_commit(victim, {"paris": ["new"]})
    other = handmade.create(str(tmp_path / "lake" / "other"), name="other")
    handmade.add_commit(other, {"paris": ["new"]})
    _register(app, victim, "victim")
    _register(app, other, "other")
    client = app.test_client()
    token = client.post("/api/v1/tokens", json={"username": "admin", "password": PASSWORDS["admin"]}).get_json()["token"]
    h = {"Authorization": f"Bearer {token}"}
    worker = start_worker(tmp_path, db_url, hold="writing@victim")
    try:
        first = client.post("/api/v1/tables/victim/jobs", headers=h, json={
            "operation": "upsert", "records": [{"trip_id": "k", "city": "paris", "ts": 1, "fare": 1.0}]}).get_json()["job_id"]
        running = wait_job(app, first, until=lambda j: "holding at 'writing'" in (j.log_tail or ""))
        second = client.post("/api/v1/tables/other/services/clean", headers=h, json={}).get_json()["job_id"]
        time.sleep(1.0)
        assert job(app, second).state == "queued"
        os.killpg(worker.pid, signal.SIGKILL)  # the runner, its JVM and Python workers, mid-write
        worker.wait(30)
    finally:
        stop(worker, signal.SIGKILL)
    assert job(app, first).state == "running"  # nobody knows yet
    restarted = start_worker(tmp_path, db_url, None, "--once")
    try:
        assert restarted.wait(120) == 0
    finally:
        stop(restarted)
    failed, survived = job(app, first), job(app, second)
    assert failed.state == "failed"
    assert failed.error.startswith(f"its job runner {running.worker_id} (pid {worker.pid}) died while the job was running.")
    assert (survived.state, survived.error) == ("succeeded", None)
    assert [(a[1], a[5].split(":")[0]) for a in audit_rows(app) if a[6] == first][-1] == ("upsert.finished", "failed")


def _preview_rows(client, app, table: str, mode: str) -> list[tuple]:
    resp = client.post(f"/tables/{table}/preview", data={"csrf_token": csrf(client), "mode": mode, "limit": "50"})
    done = wait_job(app, int(resp.headers["Location"].rsplit("/", 1)[1]))
    assert done.state == "succeeded", done.error
    cols = done.result["columns"]
    return sorted((r[cols.index("id")], r[cols.index("val")]) for r in done.result["rows"])


def test_compaction_jobs_merge_the_slices(env):
    """A merge-on-read table with a pending compaction (I4) and log files written after it: run I4
    from its preview, then compact what is left through the API (a new plan of two slices, merged
    in Spark tasks); read-optimized previews show the base files change."""
    app, tmp = env
    from tests.support.console import mor_table
    from tests.support.mor_tables import FID, FID2, I

    fx = mor_table(tmp / "lake" / "morw", name="morw")
    with app.app_context():
        from webui.services.tables import register_existing

        register_existing(str(fx.path), "morw", None)
    client = app.test_client()
    client.post("/login", data={"csrf_token": csrf(client, "/login"), "username": "operator",
                                "password": PASSWORDS["operator"]})
    assert _preview_rows(client, app, "morw", "read_optimized") == [
        ("a", "a1"), ("b", "b1"), ("c", "c1"), ("d", "d1"), ("e", "e1")]

    page = client.get(f"/tables/morw/services/compaction?instant={I[4]}").get_data(as_text=True)
    data = {k: page.split(f'name="{k}" type="hidden" value="')[1].split('"')[0]
            for k in ("csrf_token", "instant", "comment", "fingerprint", "plan_hash")}
    resp = client.post("/tables/morw/services/compaction", data=data)
    done = wait_job(app, int(resp.headers["Location"].rsplit("/", 1)[1]))
    assert done.state == "succeeded", (done.error, done.log_tail)
    r = done.result
    assert (r["instant"], r["records"], r["log_files_compacted"], r["log_records_compacted"]) == (I[4], 2, 2, 4)
    assert [Path(f).name.split("_")[0] + "_" + Path(f).name.rsplit("_", 1)[1] for f in r["files"]] == [
        f"{FID}_{I[4]}.parquet"]
    assert f"compaction {I[4]} completed: 1 base file(s), 2 log file(s) merged" in done.log_tail
    from engine.table.meta_client import MetaClient

    tl = MetaClient.open(str(fx.path)).timeline()
    assert [(i.time, i.action.value, i.state.value) for i in tl.instants if i.time == I[4]] == [(I[4], "commit", "completed")]
    commit = client.get(f"/tables/morw/commits/{I[4]}").get_data(as_text=True)
    assert 'data-testid="compaction-commit"' in commit and 'data-testid="logs-compacted">2<' in commit
    assert 'data-testid="log-records-compacted">4<' in commit and 'data-testid="compaction-plan"' in commit
    groups = client.get("/tables/morw/file-groups").get_data(as_text=True)
    assert 'data-testid="pending-badge"' not in groups and 'data-testid="pending-compactions"' not in groups
    assert f'title="{Path(r["files"][0]).name}"' in groups  # FID's latest slice: the new base file + the I5 log
    assert _preview_rows(client, app, "morw", "read_optimized") == [("a", "a3"), ("b", "b2"), ("d", "d1"), ("e", "e1")]

    token = client.post("/api/v1/tokens", json={"username": "operator", "password": PASSWORDS["operator"]}).get_json()["token"]
    resp = client.post("/api/v1/tables/morw/compaction", headers={"Authorization": f"Bearer {token}"}, json={})
    assert resp.status_code == 202
    plan = resp.get_json()["plan"]
    assert (plan["plan"]["mode"], [(o["file_id"], o["base_instant"]) for o in plan["summary"]["operations"]]) == (
        "schedule", [(FID, I[4]), (FID2, I[1])])
    second = wait_job(app, resp.get_json()["job_id"])
    assert second.state == "succeeded", (second.error, second.log_tail)
    assert second.result["instant"] > I[5] and len(second.result["files"]) == 2
    assert _preview_rows(client, app, "morw", "read_optimized") == [("a", "a3"), ("b", "b5"), ("d", "d5"), ("e", "e1")]
    assert [(a[1], a[5]) for a in audit_rows(app) if a[2] == "morw" and a[1] != "preview"] == [
        ("compaction", "queued"), ("compaction.finished", f"succeeded: instant {I[4]}"),
        ("compaction", "queued"), ("compaction.finished", f"succeeded: instant {second.result['instant']}")]


def test_clustering_jobs_rewrite_the_small_groups(env):
    """The Cluster action on a hand-made table of five small file groups: confirmed with sort
    columns and a Hilbert layout, the job rewrites each partition into one file group (the runner's
    Spark session, progress in the job log), the rows stay, and the file groups page shows the change."""
    app, tmp = env
    t = handmade.create(str(tmp / "lake" / "clus"), name="clus")
    handmade.add_commit(t, {"paris": ["new", "new", "new"], "berlin": ["new", "new"]})
    _register(app, t, "clus")
    before = _table_rows(t.path)
    client = app.test_client()
    client.post("/login", data={"csrf_token": csrf(client, "/login"), "username": "operator",
                                "password": PASSWORDS["operator"]})
    page = client.get("/tables/clus/services/clustering?sort_columns=fare,ts&layout=hilbert").get_data(as_text=True)
    assert 'data-testid="plan-slices">5<' in page and 'data-testid="plan-output-groups">2<' in page
    data = {k: page.split(f'name="{k}" type="hidden" value="')[1].split('"')[0]
            for k in ("csrf_token", "instant", "comment", "sort_columns", "layout", "fingerprint", "plan_hash")}
    resp = client.post("/tables/clus/services/clustering", data=data)
    done = wait_job(app, int(resp.headers["Location"].rsplit("/", 1)[1]))
    assert done.state == "succeeded", (done.error, done.log_tail)
    r = done.result
    assert sorted(r["replaced"]) == ["berlin", "paris"] and len(r["files"]) == 2 and r["records"] == len(before)
    assert "sorted by fare, ts (hilbert)" in done.log_tail
    assert f"clustering {r['instant']} completed: 5 file group(s) replaced by 2" in done.log_tail
    assert _table_rows(t.path) == before
    from engine.table.meta_client import MetaClient

    meta = MetaClient.open(t.path)
    assert meta.commit_metadata(r["instant"]).operation_type == "CLUSTER"
    assert sorted(s.file_id for s in meta.file_system_view().latest_slices()) == sorted(
        p.rpartition("/")[2].split("_")[0] for p in r["files"])
    groups = client.get("/tables/clus/file-groups").get_data(as_text=True)
    for p in r["files"]:
        assert p.rpartition("/")[2] in groups
    assert [(a[1], a[5]) for a in audit_rows(app) if a[2] == "clus" and a[1] != "preview"] == [
        ("clustering", "queued"), ("clustering.finished", f"succeeded: instant {r['instant']}")]
