"""Issue 35.6: admins build or drop one partition of Apache Hudi's metadata table from the
console, through a server-side dry run and a confirmation (the table name typed for a drop, the
timeline fingerprint and plan hash carried), as a queued job; viewers and operators cannot; a
forged partition is refused with nothing changed. The job itself runs here through the job
runner's `Operations`, as the worker runs it."""

from __future__ import annotations

import re

import javaproperties

from engine.metadata.reader import MetadataTableReader
from engine.table.meta_client import MetaClient
from tests.support import column_stats, hudi1x, hudi_rs
from tests.support.console import audit_rows, jobs_rows
from tests.support.tables import tree_bytes

NAME = "sample_table/cow/v9_txns_simple_meta"


class _Reporter:
    """The job reporter's surface `Operations` uses (the worker's writes progress to the database)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.spark = None

    def __call__(self, message: str) -> None:
        self.lines.append(message)

    def log(self, message: str) -> None:
        self.lines.append(message)

    def check_cancel(self) -> None:
        return None


def _registered(console):  # type: ignore[no-untyped-def]
    fx = hudi1x.fixture(NAME, console.root / "v9")
    with console.app.app_context():
        from webui.services.tables import register_existing

        register_existing(str(fx.table), "txns", None)
    return fx


def _hidden(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" type="hidden" value="([^"]*)"', page)
    assert found, name
    return found.group(1)


def _form(page: str, **extra: str) -> dict[str, str]:
    data = {k: _hidden(page, k) for k in ("csrf_token", "instant", "comment", "partition", "fingerprint", "plan_hash")}
    return {**data, **extra}


def _run(console, job_id: int) -> dict:  # type: ignore[no-untyped-def]
    from webui.extensions import db
    from webui.jobs.operations import Operations
    from webui.models import Job

    with console.app.app_context():
        job = db.session.get(Job, job_id)
        operation, params = job.operation, dict(job.params)
        from webui.services.tables import get_table

        base = get_table("txns").base_path
    reporter = _Reporter()
    out = Operations(lambda: None).run(operation, params, base, reporter, None)  # type: ignore[arg-type]
    return {"result": out, "log": reporter.lines}


def _partitions(fx) -> list[str]:  # type: ignore[no-untyped-def]
    props = javaproperties.loads((fx.table / ".hoodie" / "hoodie.properties").read_text())
    return props["hoodie.table.metadata.partitions"].split(",")


def test_only_admins_see_and_plan_metadata_partition_changes(console):
    fx = _registered(console)
    before = tree_bytes(fx.table)
    for role in ("viewer", "operator"):
        client = console.client(role)
        assert 'data-testid="metadata-drop-' not in client.get("/tables/txns").get_data(as_text=True)
        assert client.get("/tables/txns/services/metadata_drop?partition=column_stats").status_code == 403
        assert client.get("/tables/txns/services/metadata_build?partition=column_stats").status_code == 403
    page = console.client("admin").get("/tables/txns").get_data(as_text=True)
    drops = re.findall(r'data-testid="metadata-drop-([a-z_]+)"', page)
    assert drops == ["column_stats", "files", "partition_stats", "record_index", "secondary_index_merchant_idx",
                     "secondary_index_txn_date_idx"]
    assert 'data-testid="metadata-build"' not in page  # every partition it can build is built
    # a forged partition: refused, said why, nothing planned or changed
    admin = console.client("admin")
    bad = admin.get("/tables/txns/services/metadata_drop?partition=../../etc")
    assert bad.status_code == 400 and "partition must name a metadata table partition" in bad.get_data(as_text=True)
    gone = admin.get("/tables/txns/services/metadata_drop?partition=bloom_filters")
    assert gone.status_code == 409 and "has no metadata partition &#39;bloom_filters&#39;" in gone.get_data(as_text=True)
    built = admin.get("/tables/txns/services/metadata_build?partition=record_index")
    assert built.status_code == 409 and "has record_index already" in built.get_data(as_text=True)
    assert tree_bytes(fx.table) == before and audit_rows(console.app) == [] and jobs_rows(console.app) == []


def test_drop_then_build_the_column_statistics(console):
    fx = _registered(console)
    mdt = fx.table / ".hoodie" / "metadata"
    rows = sorted(r["txn_id"] for r in hudi_rs.snapshot(fx.table))
    before = tree_bytes(fx.table)
    admin = console.client("admin")
    resp = admin.get("/tables/txns/services/metadata_drop?partition=column_stats")
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200
    assert 'data-testid="plan-partitions">column_stats, partition_stats<' in page
    going = sorted(str(p.relative_to(fx.table)) for d in ("column_stats", "partition_stats")
                   for p in (mdt / d).rglob("*") if p.is_file())
    assert f'data-testid="plan-files">{len(going)}<' in page
    assert re.findall(r'<li data-fate="deleted"><code>([^<]+)</code>', page) == going
    assert tree_bytes(fx.table) == before and jobs_rows(console.app) == []  # a dry run changes nothing

    # the table name must be typed
    refused = admin.post("/tables/txns/services/metadata_drop", data=_form(page))
    assert refused.status_code == 400 and "type the table name &#39;txns&#39; to confirm the drop" in refused.get_data(
        as_text=True)
    assert jobs_rows(console.app) == []
    queued = admin.post("/tables/txns/services/metadata_drop", data=_form(page, confirm_name="txns"))
    assert queued.status_code == 302 and queued.headers["Location"] == "/jobs/1"
    assert jobs_rows(console.app) == [(1, "metadata_drop", "queued", 1)]
    assert audit_rows(console.app) == [("admin", "metadata_drop", "txns", {"partition": "column_stats"}, True, "queued", 1)]
    assert tree_bytes(fx.table) == before
    done = _run(console, 1)
    assert done["result"] == {"dropped": ["column_stats", "partition_stats"]}
    assert "column_stats" not in _partitions(fx) and not (mdt / "column_stats").exists()
    assert not (mdt / "partition_stats").exists() and (mdt / "record_index").exists()
    assert sorted(r["txn_id"] for r in hudi_rs.snapshot(fx.table)) == rows

    # now the overview offers to build them again; the build plan names Hudi's columns
    page = admin.get("/tables/txns").get_data(as_text=True)
    assert re.findall(r'data-testid="metadata-build-([a-z_]+)"', page) == ["column_stats"]
    resp = admin.get("/tables/txns/services/metadata_build?partition=column_stats")
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200 and 'data-testid="plan-file-groups">2<' in page
    columns = re.search(r'data-testid="plan-columns">(.*?)</p>', page, re.S)
    assert columns is not None and re.findall(r"<code>([^<]+)</code>", columns.group(1))[:4] == [
        "_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key", "txn_id"]
    meta = MetaClient.open(str(fx.table))
    listed = MetadataTableReader(meta, meta.timeline()).file_listing()
    committed = sorted(f"{p}/{n}" for p, names in listed.items() for n in names)
    latest = {p for sl in meta.file_system_view().latest_slices() for p in sl.files}
    assert latest < set(committed)  # older and replaced file versions are not cleaned yet: ranged too
    assert re.findall(r'<li data-fate="read"><code>([^<]+)</code>', page) == committed
    queued = admin.post("/tables/txns/services/metadata_build", data=_form(page))
    assert queued.status_code == 302 and queued.headers["Location"] == "/jobs/2"
    done = _run(console, 2)
    assert any("column statistics built at" in line for line in done["log"])
    assert "column_stats" in _partitions(fx)
    held = column_stats.check(MetaClient.open(str(fx.table)))
    assert {v["fileName"] for v in held.values()} == {p.rsplit("/", 1)[-1] for p in committed}

    # with the column statistics back, the overview offers the partition statistics, from them
    page = admin.get("/tables/txns").get_data(as_text=True)
    assert re.findall(r'data-testid="metadata-build-([a-z_]+)"', page) == ["partition_stats"]
    resp = admin.get("/tables/txns/services/metadata_build?partition=partition_stats")
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200 and 'data-testid="plan-file-groups">1<' in page
    meta = MetaClient.open(str(fx.table))
    latest_files = sorted(p for sl in meta.file_system_view().latest_slices() for p in sl.files)
    assert re.findall(r'<li data-fate="read"><code>([^<]+)</code>', page) == latest_files
    queued = admin.post("/tables/txns/services/metadata_build", data=_form(page))
    assert queued.status_code == 302 and queued.headers["Location"] == "/jobs/3"
    done = _run(console, 3)
    assert any("partition statistics built at" in line for line in done["log"]), done["log"]
    assert "partition_stats" in _partitions(fx)
    assert sorted(r["txn_id"] for r in hudi_rs.snapshot(fx.table)) == rows
