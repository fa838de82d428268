"""A table Apache Hudi 1.0 wrote (version 8, hudi-rs's fixture `v8_trips_8i3u1d`) in the console:
registered, browsed on every page with its completion times and Avro commit metadata; archival
planned like any table's (nothing to archive below hoodie.keep.max.commits)."""

from __future__ import annotations

from tests.support import hudi1x
from tests.support.tables import tree_bytes

NAME = "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"
COMPACTION = "20251220210129235"  # completed as a commit (operation COMPACT)
UPDATE = "20251220210127080"  # a deltacommit: one log file, one update


def _registered(console) -> hudi1x.Fixture:
    fx = hudi1x.fixture(NAME, console.root / "v8")
    with console.app.app_context():
        from webui.services.tables import register_existing

        register_existing(str(fx.table), "trips8", None)
    return fx


def test_a_version_8_table_is_registered_and_browsed(console):
    fx = _registered(console)
    before = tree_bytes(fx.table)
    client = console.client("viewer")

    overview = client.get("/tables/trips8")
    assert overview.status_code == 200
    page = overview.get_data(as_text=True)
    assert "MERGE_ON_READ" in page and COMPACTION in page

    timeline = client.get("/tables/trips8/timeline").get_data(as_text=True)
    for instant in ("20251220210108078", UPDATE, COMPACTION):
        assert instant in timeline

    commit = client.get(f"/tables/trips8/commits/{UPDATE}")
    assert commit.status_code == 200
    text = commit.get_data(as_text=True)
    assert "UPSERT_PREPPED" in text  # from the Avro commit metadata
    assert f".6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_{UPDATE}.log.1_0-1072-3078" in text

    groups = client.get("/tables/trips8/file-groups").get_data(as_text=True)
    assert "city=chennai" in groups and "6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0" in groups
    assert "6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_0-1112-3190_20251220210129235.parquet" in groups
    assert tree_bytes(fx.table) == before


def test_the_overview_shows_the_metadata_table(console):
    """Issue 35.6: the overview lists the metadata table's partitions (groups, files, size), which
    this engine keeps, and where reads list files from; browsing changes nothing."""
    import re

    fx = _registered(console)
    before = tree_bytes(fx.table)
    page = console.client("viewer").get("/tables/trips8").get_data(as_text=True)
    assert 'data-testid="metadata-table"' in page
    listing = re.search(r'data-testid="metadata-listing">(.*?)</div>', page, re.S)
    assert listing is not None and "Reads list files through <strong>metadata table</strong>" in listing.group(1)
    rows = re.findall(r'<tr data-testid="metadata-partition"><td><code>([^<]+)</code>(.*?)</tr>', page, re.S)
    names = [name for name, _ in rows]
    assert names == ["column_stats", "files", "partition_stats", "record_index", "secondary_index_rider_idx"]
    kept = {name: ">kept<" in rest for name, rest in rows}
    assert kept == {"column_stats": False, "files": True, "partition_stats": False, "record_index": True,
                    "secondary_index_rider_idx": True}
    assert all("dropped at the next write" in rest for name, rest in rows if name in ("column_stats", "partition_stats"))
    assert tree_bytes(fx.table) == before


def test_archival_of_a_version_8_table_is_planned_like_any_table(console):
    fx = _registered(console)
    before = tree_bytes(fx.table)
    client = console.client("operator")
    assert client.get("/tables/trips8/services/clean").status_code == 200  # planned like any table
    resp = client.get("/tables/trips8/services/archive")
    assert resp.status_code == 200  # the LSM history is written now: the plan (empty) is shown
    assert "archival into the LSM timeline of table versions 8 and 9" not in resp.get_data(as_text=True)
    assert tree_bytes(fx.table) == before


def test_a_table_of_version_8_or_9_is_created_from_the_page_and_the_api(console):
    import javaproperties

    from tests.support.console import PASSWORDS, audit_rows, csrf

    client = console.client("operator")
    form = client.get("/tables/new").get_data(as_text=True)
    assert '<option selected value="6">6 (Apache Hudi 0.14, 0.15)</option>' in form
    assert '<option value="8">8 (Apache Hudi 1.0)</option>' in form
    resp = client.post("/tables/new", data={"csrf_token": csrf(client), "name": "rides8", "record_key": "id",
                                            "precombine_field": "ts", "index": "BLOOM", "table_type": "MERGE_ON_READ",
                                            "table_version": "8"})
    assert resp.status_code == 302 and resp.headers["Location"] == "/tables/rides8"
    props = javaproperties.loads((console.root / "rides8" / ".hoodie" / "hoodie.properties").read_text())
    assert (props["hoodie.table.version"], props["hoodie.timeline.layout.version"]) == ("8", "2")
    assert (console.root / "rides8" / ".hoodie" / "timeline").is_dir()
    assert 'data-testid="config-version">8<' in client.get("/tables/rides8").get_data(as_text=True)
    # with Apache Hudi's metadata table, as Hudi 1.x creates tables of version 8 and 9
    assert props["hoodie.table.metadata.partitions"] == "files"
    assert (console.root / "rides8" / ".hoodie" / "metadata" / "files" /
            "files-0000-0_0-0-0_00000000000000000.hfile").exists()
    bad = client.post("/tables/new", data={"csrf_token": csrf(client), "name": "odd", "record_key": "id",
                                           "index": "BLOOM", "table_type": "COPY_ON_WRITE", "table_version": "7"})
    assert bad.status_code == 400 and "Not a valid choice" in bad.get_data(as_text=True)
    assert not (console.root / "odd").exists()

    api = console.client()
    token = api.post("/api/v1/tokens", json={"username": "operator", "password": PASSWORDS["operator"]}).get_json()["token"]
    h = {"Authorization": f"Bearer {token}"}
    made = api.post("/api/v1/tables", headers=h, json={"name": "rides9", "record_key": "id", "table_version": 9})
    assert made.status_code == 201
    props = javaproperties.loads((console.root / "rides9" / ".hoodie" / "hoodie.properties").read_text())
    assert (props["hoodie.table.version"], props["hoodie.record.merge.mode"]) == ("9", "COMMIT_TIME_ORDERING")
    for version in (7, "9", True):
        refused = api.post("/api/v1/tables", headers=h, json={"name": "nine", "record_key": "id", "table_version": version})
        assert refused.status_code == 400, version
        assert refused.get_json()["error"]["message"] == f"table_version must be one of 6, 8, 9, got {version!r}"
    assert not (console.root / "nine").exists()
    assert [(a[1], a[2], a[3].get("table_version"), a[5]) for a in audit_rows(console.app) if a[1] == "table.create"] == [
        ("table.create", "rides8", 8, "created"), ("table.create", "rides9", 9, "created")]


def test_the_job_log_says_what_happened_to_the_metadata_table():
    from engine.services.repair import RepairReport
    from webui.jobs.operations import repair_notes

    assert repair_notes(None) == [] and repair_notes(RepairReport()) == []
    lines = repair_notes(RepairReport(metadata_partitions_dropped=["column_stats", "record_index"],
                                      metadata_table_created=False))
    assert lines == ["dropped the metadata table partitions column_stats, record_index (not kept by this engine "
                     "yet; Apache Hudi's writers build them again); its files partition is kept up to date"]
    assert repair_notes(RepairReport(metadata_table_removed="removed Apache Hudi's metadata table (x)",
                                     metadata_table_created=True)) == [
        "removed Apache Hudi's metadata table (x)",
        "created Apache Hudi's metadata table with its files partition (hoodie.metadata.enable=true)"]
    assert repair_notes(RepairReport(metadata_partitions_built=["column_stats"])) == [
        "built the metadata table partitions column_stats from the data files"]
