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


def test_archival_of_a_version_8_table_is_planned_like_any_table(console):
    fx = _registered(console)
    before = tree_bytes(fx.table)
    client = console.client("operator")
    assert client.get("/tables/trips8/services/clean").status_code == 200  # planned like any table
    resp = client.get("/tables/trips8/services/archive")
    assert resp.status_code == 200  # the LSM history is written now: the plan (empty) is shown
    assert "archival into the LSM timeline of table versions 8 and 9" not in resp.get_data(as_text=True)
    assert tree_bytes(fx.table) == before
