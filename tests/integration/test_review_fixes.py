"""Regression tests for defects found in review (each names the failure it pins)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import InvalidConfigError, InvalidInputError, SchemaMismatchError, Table
from tests.support import hudi_rs
from tests.support.tables import rows, tree_bytes

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"


def make(spark, tmp_path, **kw) -> Table:
    args = dict(name="t", record_key="id", partition_fields="city", precombine_field="ts")
    args.update(kw)
    return Table.create(spark, str(tmp_path / "t"), **args)


def test_upsert_after_a_delete_emptied_the_file_group(spark, tmp_path):
    """An emptied file group (zero-row base file) is a small file; merging into it must work."""
    t = make(spark, tmp_path)
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1), (2, "b", "paris", 1)], SCHEMA))
    t.delete(spark.createDataFrame([(1, "paris"), (2, "paris")], "id int, city string"))
    assert rows(t.read()) == []
    r = t.upsert(spark.createDataFrame([(3, "c", "paris", 1)], SCHEMA))
    assert (r.inserts, r.files_written) == (1, 1)
    assert [(x["id"], x["name"]) for x in rows(t.read())] == [(3, "c")]
    assert rows(t.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))


def test_user_columns_named_like_cdc_fields_are_kept(spark, tmp_path):
    """A user's `_op` column (common in CDC feeds) is data, not the engine's operation marker."""
    t = make(spark, tmp_path)
    schema = "id int, name string, city string, ts long, _op string, _fid string"
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1, "c", "x"), (2, "b", "paris", 1, "u", "y")], schema))
    assert [(x["id"], x["_op"], x["_fid"]) for x in rows(t.read())] == [(1, "c", "x"), (2, "u", "y")]
    bad = spark.createDataFrame([(1, "a", "paris", 1, "z")], "id int, name string, city string, ts long, __hoodie_op string")
    with pytest.raises(InvalidInputError, match="reserved prefix '__hoodie_'"):
        t.upsert(bad)


def test_insert_keeps_both_copies_of_an_existing_key(spark, tmp_path):
    """insert does not look keys up: an existing key packed into the same small file stays twice."""
    t = make(spark, tmp_path)
    t.insert(spark.createDataFrame([(1, "a", "paris", 5)], SCHEMA))
    r = t.insert(spark.createDataFrame([(1, "again", "paris", 1)], SCHEMA))
    assert (r.inserts, r.updates, r.stale_ignored, r.files_written) == (1, 0, 0, 1)
    assert sorted((x["id"], x["name"]) for x in rows(t.read())) == [(1, "a"), (1, "again")]
    assert len(t.file_system_view().groups_in("paris")) == 1
    assert rows(t.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))


def test_hoodie_is_deleted_rows_delete(spark, tmp_path):
    t = make(spark, tmp_path)
    schema = SCHEMA + ", _hoodie_is_deleted boolean"
    t.upsert(spark.createDataFrame([(1, "a", "paris", 1, False), (2, "b", "paris", 1, False)], schema))
    r = t.upsert(spark.createDataFrame([(1, "a", "paris", 2, True), (3, "c", "paris", 2, None), (9, "x", "paris", 2, True)], schema))
    assert (r.deletes, r.inserts, r.absent_deletes) == (1, 1, 1)
    assert [(x["id"], x["name"]) for x in rows(t.read())] == [(2, "b"), (3, "c")]
    with pytest.raises(SchemaMismatchError, match="must be boolean"):
        t.upsert(spark.createDataFrame([(4, "d", "paris", 1, "yes")], SCHEMA + ", _hoodie_is_deleted string"))


def test_layout_options_we_cannot_write_are_refused(spark, tmp_path):
    # URL-encoded partition paths are written since issue 32 (tests/integration/test_partition_values.py);
    # dropped partition columns are still refused
    t = make(spark, tmp_path)
    props = Path(t.path, ".hoodie", "hoodie.properties")
    props.write_text(props.read_text().replace("drop.partition.columns=false", "drop.partition.columns=true"))
    t2 = Table.open(spark, t.path)
    before = tree_bytes(t.path)
    with pytest.raises(InvalidConfigError, match="dropped partition columns"):
        t2.upsert(spark.createDataFrame([(1, "a", "paris", 1)], SCHEMA))
    assert tree_bytes(t.path) == before


def test_payload_class_records_event_time_ordering(spark, tmp_path):
    t = make(spark, tmp_path)
    text = Path(t.path, ".hoodie", "hoodie.properties").read_text()
    assert "hoodie.compaction.payload.class=org.apache.hudi.common.model.DefaultHoodieRecordPayload" in text
    t2 = make(spark, tmp_path / "b", precombine_field=None)
    text2 = Path(t2.path, ".hoodie", "hoodie.properties").read_text()
    assert "hoodie.compaction.payload.class=org.apache.hudi.common.model.OverwriteWithLatestAvroPayload" in text2
