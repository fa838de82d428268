"""The console on the running stack, end to end through its JSON API (as an operator's script
would use it): a token, a table under the first warehouse root, upsert jobs run by the job runner
on the Spark cluster, the commits they made (checked against hudi-rs reading the bucket), a
rollback job; then the job runner killed in the middle of a write and started again.

Found only through the variables the compose file sets: CONSOLE_URL (the `stack-test` service),
CONSOLE_ADMIN_USER / CONSOLE_ADMIN_PASSWORD, CONSOLE_WAREHOUSE_ROOTS and the AWS_* of the bucket.
Killing and starting the runner goes through tests/support/stack_control.py: the process stack's
control server (`make stack-local`); inside `make stack-test` that test skips, saying why.
"""

from __future__ import annotations

import io
import json
import os
import re
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import boto3
import botocore.config
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.services.maintenance import Maintenance
from engine.table.meta_client import MetaClient
from tests.support import hudi_rs, stack_control

pytestmark = pytest.mark.stack

JOB_TIMEOUT = 240.0
INSTANT = re.compile(r"^\d{17}$")
DATA_COLUMNS = ["trip_id", "city", "fare", "ts"]


class Api:
    """The console's JSON API with a bearer token (urllib only: what any script would use)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.token: str | None = None

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             content_type: str = "application/json") -> tuple[int, Any]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            payload = exc.read()
            return exc.code, json.loads(payload) if payload.startswith(b"{") else payload.decode(errors="replace")

    def get(self, path: str) -> Any:
        status, doc = self.call("GET", path)
        assert status == 200, (path, status, doc)
        return doc

    def wait_job(self, job_id: int, timeout: float = JOB_TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.get(f"/api/v1/jobs/{job_id}")
            if job["state"] in ("succeeded", "failed", "cancelled"):
                return job
            assert time.monotonic() < deadline, f"job {job_id} still {job['state']}: {job['log_tail'][-2000:]}"
            time.sleep(0.3)


@pytest.fixture(scope="module")
def api(stack_env) -> Api:
    missing = [v for v in ("CONSOLE_URL", "CONSOLE_ADMIN_USER", "CONSOLE_ADMIN_PASSWORD") if not os.environ.get(v)]
    if missing:
        pytest.skip(f"no console in this stack: set {', '.join(missing)}")
    client = Api(os.environ["CONSOLE_URL"])
    assert client.call("GET", "/healthz")[0] == 200
    status, doc = client.call("POST", "/api/v1/tokens", {"username": os.environ["CONSOLE_ADMIN_USER"],
                                                         "password": os.environ["CONSOLE_ADMIN_PASSWORD"]})
    assert status == 201 and doc["role"] == "admin", (status, doc)
    client.token = doc["token"]
    return client


def new_table(api: Api, stack_env, prefix: str) -> tuple[str, str]:
    """Create a table through the API (no path: under the first warehouse root); (name, uri)."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    status, doc = api.call("POST", "/api/v1/tables", {"name": name, "record_key": "trip_id", "partition_fields": "city",
                                                      "precombine_field": "ts"})
    root = stack_env["CONSOLE_WAREHOUSE_ROOTS"].split(",")[0].strip().rstrip("/")
    assert status == 201, doc
    assert (doc["name"], doc["path"], doc["table_type"], doc["record_key"], doc["partition_fields"]) == (
        name, f"{root}/{name}", "COPY_ON_WRITE", "trip_id", ["city"])
    return name, doc["path"]


def upsert(api: Api, name: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    status, doc = api.call("POST", f"/api/v1/tables/{name}/jobs", {"operation": "upsert", "records": records})
    assert status == 202, doc
    return api.wait_job(doc["job_id"])


def trips(rows: list[dict[str, Any]]) -> list[tuple]:
    """(trip_id, city, fare, ts, commit time) of a reader's rows, sorted by key."""
    return sorted((r["trip_id"], r["city"], r["fare"], r["ts"], r["_hoodie_commit_time"]) for r in rows)


def hudi_rs_trips(uri: str) -> list[tuple]:
    return trips(hudi_rs.snapshot(uri, storage_options=hudi_rs.s3_storage_options()))


def s3_objects(uri: str) -> dict[str, bytes]:
    """Every object under the table (relative key -> bytes), the table lock's lease files left out."""
    client = boto3.session.Session().client(
        "s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=botocore.config.Config(s3={"addressing_style": "path"}))
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            rel = obj["Key"].removeprefix(prefix + "/")
            if not rel.startswith(".hoodie/.lock/"):
                out[rel] = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    return out


def commits(api: Api, name: str) -> list[tuple]:
    """(time, action, state, operation, stats) of the active timeline, newest first."""
    doc = api.get(f"/api/v1/tables/{name}/commits")
    return [(r["time"], r["action"], r["state"], r["operation"], r["stats"]) for r in doc["rows"]]


def test_upsert_jobs_commits_and_a_rollback_job_through_the_api(api, stack_env):
    name, uri = new_table(api, stack_env, "stack_console")
    first = upsert(api, name, [{"trip_id": "t1", "city": "paris", "fare": 10.0, "ts": 1},
                               {"trip_id": "t2", "city": "rome", "fare": 20.0, "ts": 1},
                               {"trip_id": "t3", "city": "paris", "fare": 30.0, "ts": 1}])
    assert (first["state"], first["error"], first["operation"]) == ("succeeded", None, "upsert")
    r1 = first["result"]
    assert INSTANT.match(r1["instant"])
    assert (r1["inserts"], r1["updates"], r1["deletes"], r1["input_records"], sorted(r1["partitions"])) == (
        3, 0, 0, 3, ["paris", "rome"])

    second = upsert(api, name, [{"trip_id": "t1", "city": "paris", "fare": 11.0, "ts": 2},
                                {"trip_id": "t3", "city": "paris", "fare": 3.0, "ts": 0},  # older: ignored
                                {"trip_id": "t4", "city": "oslo", "fare": 40.0, "ts": 2}])
    assert second["state"] == "succeeded", second["error"]
    r2 = second["result"]
    assert r2["instant"] > r1["instant"]
    assert (r2["inserts"], r2["updates"], r2["stale_ignored"], sorted(r2["partitions"])) == (1, 1, 1, ["oslo", "paris"])

    # the console's view of the timeline is the table's: two completed upsert commits
    assert [c[:4] for c in commits(api, name)] == [(r2["instant"], "commit", "completed", "UPSERT"),
                                                   (r1["instant"], "commit", "completed", "UPSERT")]
    stats = {c[0]: c[4] for c in commits(api, name)}
    assert {k: stats[r1["instant"]][k] for k in ("inserts", "updates", "partitions")} == {
        "inserts": 3, "updates": 0, "partitions": 2}
    assert {k: stats[r2["instant"]][k] for k in ("inserts", "updates", "partitions")} == {
        "inserts": 1, "updates": 1, "partitions": 2}
    after_r1 = [("t1", "paris", 10.0, 1, r1["instant"]), ("t2", "rome", 20.0, 1, r1["instant"]),
                ("t3", "paris", 30.0, 1, r1["instant"])]
    after_r2 = [("t1", "paris", 11.0, 2, r2["instant"]), ("t2", "rome", 20.0, 1, r1["instant"]),
                ("t3", "paris", 30.0, 1, r1["instant"]), ("t4", "oslo", 40.0, 2, r2["instant"])]
    assert hudi_rs_trips(uri) == after_r2

    # roll the second commit back: preview (server-side plan), then confirm with its fingerprint
    plan = api.get(f"/api/v1/tables/{name}/plans/rollback?instant={r2['instant']}")
    status, queued = api.call("POST", f"/api/v1/tables/{name}/rollback", {
        "instant": r2["instant"], "fingerprint": plan["fingerprint"], "plan_hash": plan["hash"]})
    assert status == 202, queued
    rolled = api.wait_job(queued["job_id"])
    assert (rolled["state"], rolled["error"], rolled["operation"]) == ("succeeded", None, "rollback")
    timeline = commits(api, name)
    assert [c[1:3] for c in timeline] == [("rollback", "completed"), ("commit", "completed")]
    assert timeline[1][0] == r1["instant"] and timeline[0][0] > r2["instant"]
    assert hudi_rs_trips(uri) == after_r1


def _batch(n: int, ts: int) -> bytes:
    cities = ["paris", "rome", "oslo", "lisbon"]
    table = pa.table({"trip_id": [f"k{i:06d}" for i in range(n)], "city": [cities[i % 4] for i in range(n)],
                      "fare": [float(i % 97) for i in range(n)], "ts": [ts] * n})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _multipart(operation: str, filename: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"operation\"\r\n\r\n{operation}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def test_the_job_runner_killed_mid_write_and_restarted(api, stack_env):
    """SIGKILL the runner while its upsert writes files; start it again. The job ends failed (at
    once: a restarted runner recognises its predecessor's jobs, even under the same pid), readers
    see the table as before, and the engine's repair leaves it byte-identical to before."""
    reason = stack_control.unavailable()
    if reason:
        pytest.skip(reason)
    name, uri = new_table(api, stack_env, "stack_crash")
    base = upsert(api, name, [{"trip_id": "k000000", "city": "paris", "fare": 1.0, "ts": 1}])
    assert base["state"] == "succeeded", base["error"]
    before_objects, before_rows = s3_objects(uri), hudi_rs_trips(uri)
    assert before_rows == [("k000000", "paris", 1.0, 1, base["result"]["instant"])]

    # big enough that the runner is still writing when killed: the job runner writes an upload this
    # size itself (the local write, no Spark job: 200k records took 1 s), four new 250k-record groups
    body, ctype = _multipart("upsert", "big.parquet", _batch(1_000_000, 2))
    status, queued = api.call("POST", f"/api/v1/tables/{name}/jobs", raw=body, content_type=ctype)
    assert status == 202, queued
    job_id = queued["job_id"]
    deadline = time.monotonic() + JOB_TIMEOUT
    while True:  # wait for the write itself: files of the new instant are being written
        job = api.get(f"/api/v1/jobs/{job_id}")
        assert job["state"] in ("queued", "running"), (job["state"], job["error"], job["log_tail"][-1500:])
        if job["state"] == "running" and job["progress"].get("step", "").startswith("writing "):
            break
        assert time.monotonic() < deadline, job["log_tail"]
        time.sleep(0.1)
    instant = job["progress"]["instant"]
    killed = stack_control.kill("worker")
    killed_at = time.monotonic()
    started = stack_control.start("worker")
    assert (killed["service"], started["started"]) == ("worker", True), (killed, started)
    failed = api.wait_job(job_id, timeout=60)
    noticed = time.monotonic() - killed_at
    assert failed["state"] == "failed"
    assert re.fullmatch(rf"its job runner {re.escape(job['worker_id'])} \(pid \d+(, now another process)?\) died "
                        r"while the job was running\. Nothing more was done; .*", failed["error"]), failed["error"]
    assert noticed < 25, f"the restarted runner took {noticed:.0f}s to fail its predecessor's job"

    # readers: the table as before (the instant never completed)
    assert hudi_rs_trips(uri) == before_rows
    after = s3_objects(uri)
    assert {k: after[k] for k in before_objects} == before_objects  # nothing that was there changed
    leftovers = set(after) - set(before_objects)
    data_files = {k for k in leftovers if k.endswith(".parquet")}
    assert all(f"_{instant}." in k for k in data_files), data_files  # files of the killed write only
    # the write had started: its instant is inflight, its heartbeat written, its new partitions made
    new_partitions = {f"{p}/.hoodie_partition_metadata" for p in ("lisbon", "oslo", "rome")}
    assert leftovers - data_files == {f".hoodie/{instant}.commit.requested", f".hoodie/{instant}.inflight",
                                      f".hoodie/.heartbeat/{instant}"} | new_partitions

    # the engine's repair (run by the next write, or `hoodie repair`) rolls the dead write back once
    # its lock lease (60 s) and heartbeat have run out: wait for the lease, count a heartbeat 2 s old
    # as dead (the runner is known dead: it was killed)
    maintenance = Maintenance(MetaClient.open(uri), {"hoodie.write.lock.wait_time_ms": "90000",
                                                     "hoodie.client.heartbeat.interval_in_ms": "1000"})
    report = maintenance.repair()
    assert report.failed_writes_rolled_back == [instant]
    # byte-identical: every object that was there is unchanged, the killed write's files, heartbeat,
    # instant and new partitions are gone; what is new is the rollback's instant
    repaired = s3_objects(uri)
    assert {k: repaired[k] for k in before_objects} == before_objects
    added = sorted(set(repaired) - set(before_objects))
    assert len(added) == 3 and INSTANT.match(added[0].removeprefix(".hoodie/").partition(".")[0]), added
    rollback = added[0].removeprefix(".hoodie/").partition(".")[0]
    assert rollback > instant
    assert added == [f".hoodie/{rollback}.rollback", f".hoodie/{rollback}.rollback.inflight",
                     f".hoodie/{rollback}.rollback.requested"]
    assert [c[:3] for c in commits(api, name)] == [(rollback, "rollback", "completed"),
                                                   (base["result"]["instant"], "commit", "completed")]
    assert hudi_rs_trips(uri) == before_rows
