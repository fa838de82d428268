"""Registering/creating tables (warehouse roots) and uploads: bad batches get clear errors and no job."""

from __future__ import annotations

import io
import os

import pyarrow as pa
import pyarrow.parquet as pq

from tests.support.console import audit_rows, csrf, jobs_rows
from tests.support.tables import tree_bytes


def _post(client, url, data, **kw):
    return client.post(url, data={"csrf_token": csrf(client), **data}, **kw)


def _upload(client, filename: str, body: bytes, operation: str = "upsert"):
    return client.post("/tables/trips/write/upload", data={
        "up-csrf_token": csrf(client, "/tables/trips/write"), "up-operation": operation,
        "up-file": (io.BytesIO(body), filename)}, content_type="multipart/form-data")


def test_create_table_under_the_first_root(console):
    client = console.client("operator")
    resp = _post(client, "/tables/new", {"name": "rides", "record_key": "ride_id", "partition_fields": "day",
                                         "precombine_field": "ts", "index": "SIMPLE", "table_type": "COPY_ON_WRITE"})
    assert resp.status_code == 302 and resp.headers["Location"] == "/tables/rides"
    props = (console.root / "rides" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.name=rides" in props and "hoodie.table.recordkey.fields=ride_id" in props
    assert "hoodie.index.type=SIMPLE" in props
    page = client.get("/tables/rides").get_data(as_text=True)
    assert 'data-testid="stat-records">0<' in page and "never written" in page
    assert audit_rows(console.app) == [
        ("operator", "table.create", "rides", {"record_key": "ride_id", "partition_fields": "day", "precombine_field": "ts",
                                               "table_type": "COPY_ON_WRITE", "index": "SIMPLE", "path": str(console.root / "rides"),
                                               "hive_style": False, "table_version": 6, "cdc_mode": None}, False, "created",
         None)]
    assert "hoodie.table.cdc" not in props
    # with a CDC log: Apache Hudi's properties, fixed at creation
    resp = _post(client, "/tables/new", {"name": "orders", "record_key": "id", "index": "SIMPLE",
                                         "table_type": "COPY_ON_WRITE", "cdc_mode": "DATA_BEFORE"})
    assert resp.status_code == 302
    props = (console.root / "orders" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.cdc.enabled=true" in props and "hoodie.table.cdc.supplemental.logging.mode=DATA_BEFORE" in props
    assert 'data-testid="config-cdc">DATA_BEFORE<' in client.get("/tables/orders").get_data(as_text=True)
    bad = _post(client, "/tables/new", {"name": "bad", "record_key": "id", "cdc_mode": "EVERYTHING"})
    assert bad.status_code == 400 and not (console.root / "bad").exists()


def test_paths_outside_the_roots_are_refused(console, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, console.root / "escape")
    client = console.client("operator")
    for path in (str(outside / "t"), str(console.root / ".." / "elsewhere" / "t"), str(console.root / "escape" / "t"),
                 "/etc", "relative/path", "s3://other-bucket/t", "hdfs://x/y"):
        resp = _post(client, "/tables/new", {"name": "bad", "record_key": "id", "path": path, "index": "BLOOM",
                                             "table_type": "COPY_ON_WRITE"})
        assert resp.status_code in (400, 403), (path, resp.status_code)
        text = resp.get_data(as_text=True)
        assert ("is not under a warehouse root" in text or "must be absolute" in text
                or "unsupported storage scheme" in text or "contains &#39;..&#39;" in text), path
    assert not (outside / "t").exists() and not (outside / "t" / ".hoodie").exists()
    resp = _post(client, "/tables/register", {"path": str(console.root / "escape"), "name": "esc"})
    assert resp.status_code == 403
    assert [r[5] for r in audit_rows(console.app)][-1].startswith("refused: ")
    assert [r[2] for r in audit_rows(console.app)] == ["bad"] * 7 + ["esc"]


def test_register_twice_is_refused(console):
    client = console.client("operator")
    resp = _post(client, "/tables/register", {"path": console.table.path, "name": "trips2"})
    assert resp.status_code == 409
    assert "already registered" in resp.get_data(as_text=True)


def test_upload_preview_then_confirm_queues_one_job(console):
    client = console.client("operator")
    csv = b"trip_id,city,ts,fare\nt1,paris,5,12.5\nt2,berlin,6,8.0\n"
    resp = _upload(client, "batch.csv", csv)
    assert resp.status_code == 200
    page = resp.get_data(as_text=True)
    assert 'data-testid="preview-rows">2<' in page
    assert "<td>t1</td><td>paris</td><td>5</td><td>12.5</td>" in page
    assert jobs_rows(console.app) == [] and audit_rows(console.app) == []  # a preview is not an action
    upload_id = page.split('name="upload_id" type="hidden" value="')[1].split('"')[0]
    resp = client.post("/tables/trips/write/confirm", data={"csrf_token": csrf(client), "upload_id": upload_id,
                                                           "operation": "upsert"})
    assert resp.status_code == 302 and resp.headers["Location"] == "/jobs/1"
    assert jobs_rows(console.app) == [(1, "upsert", "queued", 2)]
    assert audit_rows(console.app) == [("operator", "upsert", "trips", {"rows": 2, "filename": "batch.csv"}, False, "queued", 1)]
    job_page = client.get("/jobs/1").get_data(as_text=True)
    assert "Job #1 · upsert" in job_page and 'data-testid="job-state">queued<' in job_page

    # the confirm form submitted again (a double click, a resent request): still one job
    again = client.post("/tables/trips/write/confirm", data={"csrf_token": csrf(client), "upload_id": upload_id,
                                                            "operation": "insert"})
    assert again.status_code == 302 and again.headers["Location"] == "/jobs/1"
    assert "This batch is already queued as job 1: it is written once." in client.get("/jobs/1").get_data(as_text=True)
    assert jobs_rows(console.app) == [(1, "upsert", "queued", 2)]
    assert len(audit_rows(console.app)) == 1


def _assert_refused(console, resp, status: int, message: str, before: dict) -> None:
    assert resp.status_code == status, resp.get_data(as_text=True)[:2000]
    assert message in resp.get_data(as_text=True)
    assert jobs_rows(console.app) == []
    assert tree_bytes(console.table.path) == before


def test_bad_uploads_get_clear_errors_and_nothing_happens(console):
    client = console.client("operator")
    before = tree_bytes(console.table.path)
    _assert_refused(console, _upload(client, "batch.xlsx", b"PK\x03\x04"), 415, "unsupported file type &#39;.xlsx&#39;", before)
    _assert_refused(console, _upload(client, "batch.parquet", b"not parquet at all"), 400,
                    "is not a Parquet file (no PAR1 magic bytes)", before)
    _assert_refused(console, _upload(client, "batch.jsonl", b'{"trip_id": "a", "city": "paris"\n'), 400,
                    "cannot read batch.jsonl as JSON lines", before)
    _assert_refused(console, _upload(client, "batch.csv", b"trip_id,city,ts,fare\n,paris,1,2.0\nt9,paris,1,2.0\n"), 422,
                    "1 row(s) have a null or empty record key (trip_id); every row needs a key", before)
    _assert_refused(console, _upload(client, "batch.csv", b"trip_id,city,ts,fare\nt1,paris,oops,2.0\n"), 422,
                    "schema mismatch: column &#39;ts&#39; is string in the input but int64 in the table", before)
    _assert_refused(console, _upload(client, "batch.csv", b"trip_id,city,ts\nt1,paris,1\n"), 422,
                    "schema mismatch: the input lacks table column(s) fare", before)
    _assert_refused(console, _upload(client, "batch.csv", b"city,ts,fare\nparis,1,2.0\n"), 422,
                    "the input has no record key column &#39;trip_id&#39;", before)
    _assert_refused(console, _upload(client, "batch.csv", b"trip_id,city,ts,fare\n"), 400,
                    "the batch has no rows: nothing to write", before)
    assert audit_rows(console.app) == []


def test_too_big_upload_is_413(console):
    console.app.config["MAX_CONTENT_LENGTH"] = 2048
    client = console.client("operator")
    token = csrf(client, "/tables/trips/write")
    resp = client.post("/tables/trips/write/upload", data={"up-csrf_token": token, "up-operation": "upsert",
                                                          "up-file": (io.BytesIO(b"x" * 5000), "big.csv")},
                       content_type="multipart/form-data")
    assert resp.status_code == 413
    assert "The upload is larger than the limit of 2.0 KB (CONSOLE_MAX_UPLOAD_MB)." in resp.get_data(as_text=True)
    assert jobs_rows(console.app) == []


def test_parquet_and_json_lines_with_schema_comparison(console):
    client = console.client("operator")
    table = pa.table({"trip_id": ["p1"], "city": ["lisbon"], "ts": pa.array([3], pa.int32()), "fare": [1.5],
                      "tip": [0.5]})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    page = _upload(client, "b.parquet", sink.getvalue()).get_data(as_text=True)
    compare = page.split('data-testid="schema-compare"')[1].split("</table>")[0]
    assert '<tr class="schema-widened"><td><code>ts</code>' in compare
    assert '<tr class="schema-added"><td><code>tip</code>' in compare
    assert '<tr class="schema-same"><td><code>trip_id</code> <span class="small text-muted">record key</span>' in compare
    page = _upload(client, "b.jsonl", b'{"trip_id": "j1", "city": "rome", "ts": 4, "fare": 2.5}\n').get_data(as_text=True)
    assert 'data-testid="preview-rows">1<' in page and "<td>j1</td><td>rome</td><td>4</td><td>2.5</td>" in page


def test_delete_needs_only_keys(console):
    client = console.client("operator")
    page = _upload(client, "del.csv", b"trip_id,city\nparis-0-0,paris\n", operation="delete").get_data(as_text=True)
    assert "<strong>delete</strong> of <strong data-testid=\"preview-rows\">1<" in page


def test_demo_batch_fits_the_table(console):
    client = console.client("operator")
    resp = client.post("/tables/trips/write/demo", data={"demo-csrf_token": csrf(client, "/tables/trips/write"),
                                                         "demo-rows": "25", "demo-operation": "upsert"})
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200 and 'data-testid="preview-rows">25<' in page
    compare = page.split('data-testid="schema-compare"')[1].split("</table>")[0]
    assert compare.count('class="schema-same"') == 4 and "schema-added" not in compare


def test_confirm_with_a_forged_upload_is_refused(console):
    client = console.client("operator")
    resp = client.post("/tables/trips/write/confirm", data={"csrf_token": csrf(client), "upload_id": "0" * 32,
                                                           "operation": "upsert"})
    assert resp.status_code == 303
    assert jobs_rows(console.app) == []
    assert audit_rows(console.app) == [("operator", "upsert", "trips", {}, False,
                                        "refused: this upload is gone (already written, or never made): upload the file again", None)]


def test_text_timestamps_are_parsed_for_timestamp_columns(console):
    import pyarrow as pa

    from webui.services.uploads import align_text_times, from_records

    batch = from_records([{"id": "a", "at": "2026-01-02T03:04:05Z"}, {"id": "b", "at": "2026-01-02 03:04:06"}])
    target = pa.schema([("id", pa.string()), ("at", pa.timestamp("us", tz="UTC"))])
    aligned = align_text_times(batch, target)
    assert aligned.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert [v.isoformat() for v in aligned.column("at").to_pylist()] == ["2026-01-02T03:04:05+00:00",
                                                                         "2026-01-02T03:04:06+00:00"]
    bad = from_records([{"id": "a", "at": "yesterday"}])
    assert align_text_times(bad, target).schema.field("at").type == pa.string()


def test_unconfirmed_uploads_expire(console):
    from datetime import timedelta

    import sqlalchemy as sa

    from webui.extensions import db
    from webui.models import Upload, utcnow

    client = console.client("operator")
    _upload(client, "a.csv", b"trip_id,city,ts,fare\nt1,paris,5,12.5\n")
    with console.app.app_context():
        db.session.execute(sa.update(Upload).values(created_at=utcnow() - timedelta(days=8)))
        db.session.commit()
    _upload(client, "b.csv", b"trip_id,city,ts,fare\nt2,paris,5,12.5\n")
    with console.app.app_context():
        assert db.session.scalars(sa.select(Upload.filename)).all() == ["b.csv"]
