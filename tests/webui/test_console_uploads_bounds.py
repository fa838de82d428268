"""Uploads are bounded once decoded (rows, bytes) without the web process holding the whole
batch; every unreadable file is a 400 naming the problem; preview and write jobs are bounded
per user; data previews are audited."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.console import audit_rows, csrf, jobs_rows
from tests.support.tables import tree_bytes

REPO = Path(__file__).resolve().parents[2]
MB = 1 << 20


def _upload(client, filename: str, body: bytes, operation: str = "upsert"):
    return client.post("/tables/trips/write/upload", data={
        "up-csrf_token": csrf(client, "/tables/trips/write"), "up-operation": operation,
        "up-file": (io.BytesIO(body), filename)}, content_type="multipart/form-data")


def _parquet(table: pa.Table, **kw) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **kw)
    return sink.getvalue()


def _refused(console, resp, status: int, message: str, before: dict) -> None:
    page = resp.get_data(as_text=True)
    assert resp.status_code == status, page[:2000]
    assert f'data-testid="upload-error"><strong>Not accepted:</strong> {message}</div>' in page
    assert jobs_rows(console.app) == [] and tree_bytes(console.table.path) == before
    from webui.extensions import db
    from webui.models import Upload

    with console.app.app_context():
        assert db.session.query(Upload).count() == 0


def _measure(tmp_path: Path, upload: Path, **settings: int) -> dict:
    """One upload request in its own process: status, page, RSS before and peak (see upload_memory)."""
    args = [f"{k}={v}" for k, v in settings.items()]
    done = subprocess.run([sys.executable, "-m", "tests.support.upload_memory", str(tmp_path / "work"), str(upload),
                           *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- bounds after decompression ------------------------------------------------------------------
def test_a_parquet_that_decodes_past_the_bound_is_refused_without_being_held(tmp_path):
    """100,000 rows of one 10 KB string: a 3 KB file (dictionary-encoded, zstd) that decodes to
    956 MB. The bound is 64 MB; the request costs the process far less than the batch would."""
    n = 100_000
    bomb = pa.table({"trip_id": [f"t{i % 10}" for i in range(n)], "city": ["paris"] * n,
                     "ts": np.zeros(n, dtype="int64"), "fare": np.ones(n), "note": ["x" * 10_000] * n})
    path = tmp_path / "bomb.parquet"
    pq.write_table(bomb, path, compression="zstd")
    assert path.stat().st_size < 64 * 1024 and bomb.nbytes > 900 * MB
    out = _measure(tmp_path, path, CONSOLE_MAX_UPLOAD_DECODED_MB=64)
    assert out["status"] == 400
    assert ("<strong>Not accepted:</strong> bomb.parquet decompresses to more than 64 MB, the limit of one upload "
            "once decoded (CONSOLE_MAX_UPLOAD_DECODED_MB): split the batch</div>") in out["body"]
    # reading it whole costs ~2 GB of RSS (pq.read_table); bounded reading stops after one batch
    assert out["peak"] - out["rss_before"] < 128 * MB, out


def test_a_64_mb_parquet_upload_past_the_bound_is_refused_from_its_footer(tmp_path):
    """A ~60 MB Parquet file (random values, uncompressed; just under the 64 MB request limit)
    with a 32 MB decoded bound: refused from the footer's sizes, its pages never read."""
    rng = np.random.default_rng(7)
    m = 1_250_000
    big = pa.table({"trip_id": pa.array(rng.integers(0, 1 << 62, m)).cast(pa.string()), "city": ["paris"] * m,
                    "ts": rng.integers(0, 1 << 62, m), "fare": rng.random(m)})
    path = tmp_path / "big.parquet"
    pq.write_table(big, path, compression="none", use_dictionary=False)
    assert 56 * MB < path.stat().st_size < 63 * MB
    del big
    out = _measure(tmp_path, path, CONSOLE_MAX_UPLOAD_DECODED_MB=32, CONSOLE_MAX_UPLOAD_ROWS=2_000_000)
    assert out["status"] == 400
    assert ("<strong>Not accepted:</strong> big.parquet decompresses to more than 32 MB, the limit of one upload "
            "once decoded (CONSOLE_MAX_UPLOAD_DECODED_MB): split the batch</div>") in out["body"]
    assert out["peak"] - out["rss_before"] < 24 * MB, out  # the file alone is 56+ MB


def test_row_and_byte_bounds_of_gzipped_csv_and_parquet(console):
    console.app.config.update(CONSOLE_MAX_UPLOAD_ROWS=1000, CONSOLE_MAX_UPLOAD_DECODED_MB=1)
    client = console.client("operator")
    before = tree_bytes(console.table.path)
    rows = b"trip_id,city,ts,fare\n" + b"".join(b"t%d,paris,1,2.0\n" % i for i in range(5000))
    _refused(console, _upload(client, "many.csv.gz", gzip.compress(rows)), 400,
             "many.csv.gz holds more than 1,000 rows, the limit of one upload (CONSOLE_MAX_UPLOAD_ROWS): split the batch",
             before)
    wide = b"trip_id,city,ts,fare\n" + b"".join(b"t%d,%s,1,2.0\n" % (i, b"p" * 4000) for i in range(500))
    assert len(gzip.compress(wide)) < 64 * 1024
    _refused(console, _upload(client, "wide.csv.gz", gzip.compress(wide)), 400,
             "wide.csv.gz decompresses to more than 1 MB, the limit of one upload once decoded "
             "(CONSOLE_MAX_UPLOAD_DECODED_MB): split the batch", before)
    many = pa.table({"trip_id": [f"t{i}" for i in range(1001)], "city": ["paris"] * 1001, "ts": [1] * 1001,
                     "fare": [2.0] * 1001})
    _refused(console, _upload(client, "many.parquet", _parquet(many)), 400,
             "many.parquet holds more than 1,000 rows (1,001 rows), the limit of one upload (CONSOLE_MAX_UPLOAD_ROWS): "
             "split the batch", before)
    ok = _upload(client, "ok.csv.gz", gzip.compress(b"trip_id,city,ts,fare\nt1,paris,5,12.5\nt2,rome,6,3.0\n"))
    assert ok.status_code == 200, ok.get_data(as_text=True)[:1500]


def test_api_upload_bound_is_a_400_json(console):
    console.app.config.update(CONSOLE_MAX_UPLOAD_ROWS=10)
    client = console.client()
    token = client.post("/api/v1/tokens", json={"username": "operator", "password": "operator-pass-1"}).get_json()["token"]
    h = {"Authorization": f"Bearer {token}"}
    body = gzip.compress(b"trip_id,city,ts,fare\n" + b"".join(b"t%d,paris,1,2.0\n" % i for i in range(11)))
    resp = client.post("/api/v1/tables/trips/jobs", headers=h, content_type="multipart/form-data",
                       data={"operation": "upsert", "file": (io.BytesIO(body), "b.csv.gz")})
    assert resp.status_code == 400
    assert resp.get_json()["error"]["message"] == (
        "b.csv.gz holds more than 10 rows, the limit of one upload (CONSOLE_MAX_UPLOAD_ROWS): split the batch")
    records = [{"trip_id": f"t{i}", "city": "paris", "ts": 1, "fare": 2.0} for i in range(11)]
    resp = client.post("/api/v1/tables/trips/jobs", headers=h, json={"operation": "upsert", "records": records})
    assert resp.status_code == 400
    assert "the records holds more than 10 rows (11 rows)" in resp.get_json()["error"]["message"]
    assert jobs_rows(console.app) == []


# ---- every parse error is a 400 naming the problem -----------------------------------------------------
@pytest.mark.parametrize("filename, body, message", [
    ("dupes.csv", b"trip_id,city,ts,fare,city\nt1,paris,1,2.0,rome\n",
     "duplicate column name(s) &#39;city&#39;: every column needs its own name"),
    ("latin1.csv", "trip_id,city,ts,fare\nt1,zürich,1,2.0\n".encode("latin-1"),
     "column(s) &#39;city&#39; hold text that is not UTF-8: save the file as UTF-8"),
    ("latin1-header.csv", "trip_id,city,ts,fare,größe\nt1,paris,1,2.0,3\n".encode("latin-1"),
     "cannot read latin1-header.csv: its header row is not UTF-8 text (invalid start byte in a column name, "
     "near b&#39;gr\\xf6\\xdfe&#39;): save it as UTF-8"),
    ("ragged.csv", b"trip_id,city,ts,fare\nt1,paris,1\n",
     "cannot read ragged.csv as CSV with a header row: CSV parse error: Expected 4 columns, got 3: t1,paris,1"),
    ("empty-name.csv", b"trip_id,city,ts,fare,\nt1,paris,1,2.0,\n",
     "a column has an empty name: every column needs a name (check the header row)"),
    ("plain.csv.gz", b"trip_id,city\nt1,paris\n", "plain.csv.gz is not gzip-compressed (its name ends in .gz)"),
    ("cut.csv.gz", gzip.compress(b"trip_id,city,ts,fare\nt1,paris,1,2.0\n", mtime=0)[:-6],
     "cannot read cut.csv.gz as CSV with a header row (gzip): Truncated compressed stream"),
    ("bad.jsonl", b'{"trip_id": "t1"}\n{"trip_id": \n', "cannot read bad.jsonl as JSON lines: JSON parse error: "),
    ("cut.parquet", b"PAR1" + b"\0" * 64,
     "cannot read cut.parquet as Parquet: Parquet magic bytes not found in footer. Either the file is corrupted "
     "or this is not a parquet file."),
])
def test_unreadable_files_are_a_400_naming_the_problem(console, filename, body, message):
    client = console.client("operator")
    before = tree_bytes(console.table.path)
    resp = _upload(client, filename, body)
    page = resp.get_data(as_text=True)
    assert resp.status_code == 400, page[:1500]
    assert f"<strong>Not accepted:</strong> {message}" in page
    assert jobs_rows(console.app) == [] and tree_bytes(console.table.path) == before


def test_nested_parquet_columns_the_table_lacks_are_a_400(console):
    client = console.client("operator")
    before = tree_bytes(console.table.path)
    nested = pa.table({"trip_id": ["t1"], "city": ["paris"], "ts": [1], "fare": [2.0],
                       "stops": pa.array([[{"lat": 1.0, "lon": 2.0}]])})
    _refused(console, _upload(client, "nested.parquet", _parquet(nested)), 400,
             "column &#39;stops&#39; has the nested type list&lt;element: struct&lt;lat: double, lon: double&gt;&gt;, "
             "which table &#39;trips&#39; has no such column: upload flat columns (or write nested data with the "
             "engine&#39;s API)", before)
    retyped = pa.table({"trip_id": ["t1"], "city": ["paris"], "ts": [1], "fare": pa.array([{"amount": 2.0}])})
    _refused(console, _upload(client, "retyped.parquet", _parquet(retyped)), 400,
             "column &#39;fare&#39; has the nested type struct&lt;amount: double&gt;, which table &#39;trips&#39; "
             "has double: upload flat columns (or write nested data with the engine&#39;s API)", before)


# ---- the job queue: bounded per user ---------------------------------------------------------------------
def _preview(client):
    return client.post("/tables/trips/preview", data={"csrf_token": csrf(client, "/tables/trips/preview"),
                                                      "mode": "snapshot", "limit": 10})


def test_preview_jobs_are_bounded_per_user_and_audited(console):
    console.app.config["CONSOLE_MAX_JOBS_PER_USER"] = 2
    viewer = console.client("viewer")
    assert [_preview(viewer).status_code for _ in range(2)] == [302, 302]
    third = _preview(viewer)
    assert third.status_code == 429
    assert ("You already have 2 preview job(s) queued or running, the most one user may have "
            "(CONSOLE_MAX_JOBS_PER_USER=2): wait for one to finish, or cancel one, then try again.") in \
        third.get_data(as_text=True)
    # another user's previews are their own
    assert _preview(console.client("operator")).status_code == 302
    # the API answers the same bound as JSON
    client = console.client()
    token = client.post("/api/v1/tokens", json={"username": "viewer", "password": "viewer-pass-1"}).get_json()["token"]
    resp = client.post("/api/v1/tables/trips/jobs", headers={"Authorization": f"Bearer {token}"},
                       json={"operation": "preview", "mode": "snapshot"})
    assert resp.status_code == 429
    assert resp.get_json()["error"]["code"] == "too_many_requests"
    assert resp.get_json()["error"]["message"].startswith("You already have 2 preview job(s) queued or running")
    assert [(j[1], j[2], j[3]) for j in jobs_rows(console.app)] == [
        ("preview", "queued", 3), ("preview", "queued", 3), ("preview", "queued", 2)]
    params = {"mode": "snapshot", "instant": None, "limit": 10}
    assert [r for r in audit_rows(console.app) if r[1] == "preview"] == [("viewer", "preview", "trips", params, False, "queued", 1),
                                       ("viewer", "preview", "trips", params, False, "queued", 2),
                                       ("operator", "preview", "trips", params, False, "queued", 3)]
    # a finished job frees its place
    from webui.extensions import db
    from webui.models import Job

    with console.app.app_context():
        db.session.get(Job, 1).state = "succeeded"
        db.session.commit()
    assert _preview(viewer).status_code == 302


def test_write_jobs_are_bounded_per_user(console):
    console.app.config["CONSOLE_MAX_JOBS_PER_USER"] = 1
    client = console.client("operator")
    resp = client.post("/api/v1/tokens", json={"username": "operator", "password": "operator-pass-1"})
    h = {"Authorization": f"Bearer {resp.get_json()['token']}"}
    rec = [{"trip_id": "t1", "city": "paris", "ts": 1, "fare": 2.0}]
    assert client.post("/api/v1/tables/trips/jobs", headers=h, json={"operation": "upsert", "records": rec}).status_code == 202
    second = client.post("/api/v1/tables/trips/jobs", headers=h, json={"operation": "upsert", "records": rec})
    assert second.status_code == 429
    assert second.get_json()["error"]["message"].startswith("You already have 1 write job(s) queued or running")
    page = _upload(client, "b.csv", b"trip_id,city,ts,fare\nt2,paris,1,2.0\n")
    assert page.status_code == 429 and "You already have 1 write job(s) queued or running" in page.get_data(as_text=True)
    assert _preview(client).status_code == 302  # previews are counted apart
    assert [(j[1], j[2]) for j in jobs_rows(console.app)] == [("upsert", "queued"), ("preview", "queued")]
