"""insert_overwrite_table / insert_overwrite on local Spark: a replacecommit writing new file groups
and replacing the old ones; exact rows (ours and hudi-rs's), the instant's files, the index after
it, rollback, and bad input."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from engine import Table
from engine.errors import InvalidInputError
from engine.index.metadata_record import MetadataRecordIndex
from engine.index.record import RecordIndex
from engine.services.maintenance import Maintenance
from engine.table.clustering import parse_requested_replace
from engine.timeline import Action, State
from engine.timeline.instant import Instant
from tests.integration.test_services import data, df, make  # the same table and helpers
from tests.support import hudi_rs
from tests.support.tables import data_rows, rows, tree_bytes

pytestmark = pytest.mark.spark

OLD = [(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "paris", 1), (4, "d", "oslo", 1)]


def oracle(table: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(table.path))


def groups(table: Table) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for sl in table.file_system_view().latest_slices():
        out.setdefault(sl.partition, []).append(sl.file_id)
    return {p: sorted(ids) for p, ids in out.items()}


def locate(table: Table, keys) -> dict[str, tuple[str, str]]:
    # the table's RECORD index: this engine's own files (version 6), the metadata table's
    # record_index (versions 8 and 9, which get a metadata table when created)
    index = table._index()
    assert isinstance(index, MetadataRecordIndex if table.config.version >= 8 else RecordIndex)
    found = index.locate(table.meta, pa.array(sorted(keys), pa.string()))
    return {r["key"]: (r["partition"], r["file_id"]) for r in found.to_pylist()}


CASES = [
    pytest.param("COPY_ON_WRITE", 6, "BLOOM", id="cow-v6-bloom"),
    pytest.param("MERGE_ON_READ", 6, "RECORD", id="mor-v6-record"),
    pytest.param("COPY_ON_WRITE", 8, "RECORD", id="cow-v8-record"),
    pytest.param("MERGE_ON_READ", 8, "BLOOM", id="mor-v8-bloom"),
]


@pytest.mark.parametrize("table_type, version, index", CASES)
def test_insert_overwrite_table_replaces_every_file_group(spark, tmp_path, table_type, version, index):
    t = make(spark, tmp_path, table_type=table_type, table_version=version, index=index)
    first = t.upsert(df(spark, OLD))
    if table_type == "MERGE_ON_READ":
        t.upsert(df(spark, [(1, "a2", "paris", 2)]))  # a log file in one replaced group
    old_groups = groups(t)
    new = [(3, "c9", "rome", 5), (7, "g", "lima", 5)]
    r = t.insert_overwrite_table(df(spark, new))
    assert (r.operation.value, r.inserts, r.replaced_file_groups) == ("INSERT_OVERWRITE_TABLE", 2, 3)

    assert data(t) == [(3, "c9", "rome", 5), (7, "g", "lima", 5)]
    assert oracle(t) == data(t)
    # the instant: requested (empty replace metadata), inflight, completed replacecommit
    inst = t.timeline().get(r.instant)
    assert (inst.action, inst.state) == (Action.REPLACE_COMMIT, State.COMPLETED)
    requested = t.meta.read_instant(Instant(r.instant, Action.REPLACE_COMMIT, State.REQUESTED))
    assert requested[:4] == b"Obj\x01" and parse_requested_replace(requested) is None
    meta = t.commit_metadata(r.instant)
    assert meta.operation_type == "INSERT_OVERWRITE_TABLE"
    # every partition, as Apache Hudi lists them after writing: new ones with no group to replace
    assert meta.partition_to_replace_file_ids == {**old_groups, "lima": []}
    assert {s.partitionPath for s in meta.write_stats} == {"rome", "lima"}
    assert all(s.prevCommit == "null" and s.path.endswith(f"_{r.instant}.parquet") for s in meta.write_stats)
    assert not set(groups(t)["rome"]) & set(old_groups["rome"])
    # the replaced groups' files stay (time travel, rollback) and the old snapshot reads as before
    assert sorted(x["id"] for x in data_rows(t.read(as_of=first.instant))) == [1, 2, 3, 4]
    if index == "RECORD":
        assert set(locate(t, ["1", "2", "3", "4", "7"])) == {"3", "7"}
        assert locate(t, ["3"])["3"] == ("rome", groups(t)["rome"][0])

    # the index sends a following upsert to the new records (and treats old keys as new)
    u = t.upsert(df(spark, [(3, "c10", "rome", 6), (1, "a3", "paris", 6)]))
    assert (u.inserts, u.updates) == (1, 1)
    assert data(t) == [(1, "a3", "paris", 6), (3, "c10", "rome", 6), (7, "g", "lima", 5)]
    assert oracle(t) == data(t)


@pytest.mark.parametrize("version, table_type", [(6, "COPY_ON_WRITE"), (8, "COPY_ON_WRITE"), (8, "MERGE_ON_READ")])
def test_rollback_of_insert_overwrite_table_restores_the_old_rows(spark, tmp_path, version, table_type):
    t = make(spark, tmp_path, table_version=version, table_type=table_type, index="RECORD")
    t.upsert(df(spark, OLD))
    before = data(t)
    r = t.insert_overwrite_table(df(spark, [(3, "c9", "rome", 5), (7, "g", "lima", 5)]))
    t.maintenance.rollback(r.instant)
    assert t.timeline().get(r.instant) is None
    assert data(t) == before and oracle(t) == before
    assert {k: p for k, (p, _f) in locate(t, ["1", "2", "3", "4", "7"]).items()} == {
        "1": "paris", "2": "rome", "3": "paris", "4": "oslo"
    }
    u = t.upsert(df(spark, [(3, "c10", "paris", 6)]))
    assert (u.inserts, u.updates) == (0, 1)
    assert data(t) == [(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c10", "paris", 6), (4, "d", "oslo", 1)]


def test_insert_overwrite_replaces_only_the_input_partitions(spark, tmp_path):
    t = make(spark, tmp_path, index="RECORD")
    t.upsert(df(spark, OLD))
    old_groups = groups(t)
    r = t.insert_overwrite(df(spark, [(5, "e", "paris", 2), (6, "f", "lima", 2)]))
    meta = t.commit_metadata(r.instant)
    assert meta.operation_type == "INSERT_OVERWRITE"
    assert meta.partition_to_replace_file_ids == {"lima": [], "paris": old_groups["paris"]}
    assert data(t) == [(2, "b", "rome", 1), (4, "d", "oslo", 1), (5, "e", "paris", 2), (6, "f", "lima", 2)]
    assert oracle(t) == data(t)
    assert set(locate(t, ["1", "2", "3", "4", "5", "6"])) == {"2", "4", "5", "6"}
    u = t.upsert(df(spark, [(2, "b2", "rome", 3), (5, "e2", "paris", 3)]))
    assert (u.inserts, u.updates) == (0, 2)


def test_insert_overwrite_table_of_a_non_partitioned_table(spark, tmp_path):
    t = make(spark, tmp_path, partition_fields=None, index="RECORD")
    t.upsert(df(spark, OLD))
    (old_group,) = groups(t)[""]
    r = t.insert_overwrite_table(df(spark, [(9, "z", "x", 2)]))
    assert t.commit_metadata(r.instant).partition_to_replace_file_ids == {"": [old_group]}
    assert data(t) == oracle(t) == [(9, "z", "x", 2)]
    assert set(locate(t, ["1", "2", "3", "4", "9"])) == {"9"}


def test_null_record_keys_leave_the_table_unchanged(spark, tmp_path):
    t = make(spark, tmp_path)
    t.upsert(df(spark, OLD))
    before, snapshot = tree_bytes(t.path), rows(t.read())
    bad = df(spark, [(9, "x", "rome", 2), (None, "y", "paris", 2)])
    for overwrite in (t.insert_overwrite_table, t.insert_overwrite):
        with pytest.raises(InvalidInputError, match="null or empty record key"):
            overwrite(bad)
        assert tree_bytes(t.path) == before
    assert rows(t.read()) == snapshot


# version 8 tables get a metadata table, whose compaction the data table's archival never passes
# (as Apache Hudi's archiver): compacted every 3 deltacommits here, so archival can go on
MANUAL = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
          "hoodie.metadata.compact.max.delta.commits": "3"}


@pytest.mark.parametrize("version", [6, 8])
def test_clean_deletes_replaced_groups_then_archival_passes_the_replacecommit(spark, tmp_path, version):
    t = make(spark, tmp_path, table_version=version)
    t.upsert(df(spark, OLD), options=MANUAL)
    old_files = {sl.base_file.path for sl in t.file_system_view().latest_slices()}
    r = t.insert_overwrite_table(df(spark, [(7, "g", "lima", 5)]), options=MANUAL)
    services = Maintenance(t.meta, {**MANUAL, "hoodie.cleaner.commits.retained": "1",
                                    "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"})
    # the replacecommit is the earliest retained commit: its replaced groups are still read as of before it
    assert services.clean(dry_run=True).all_files == []
    for n in range(2, 5):
        t.upsert(df(spark, [(7, f"g{n}", "lima", 5 + n)]), options=MANUAL)
    plan = services.clean(dry_run=True)
    assert set(old_files) <= set(plan.all_files)
    services.clean()
    assert not any(Path(t.path, f).exists() for f in old_files)
    assert data(t) == oracle(t) == [(7, "g4", "lima", 9)]
    # nothing of the replaced groups left: the replacecommit may be archived now
    archived = services.archive()
    assert r.instant in archived
    assert data(t) == oracle(t) == [(7, "g4", "lima", 9)]


def test_a_failed_insert_overwrite_leaves_table_and_index_as_they_were(spark, tmp_path, monkeypatch):
    from engine.write import commit as commit_protocol

    t = make(spark, tmp_path, index="RECORD")
    t.upsert(df(spark, OLD))
    before, snapshot = tree_bytes(t.path), rows(t.read())
    located = locate(t, ["1", "2", "3", "4"])

    def broken(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(commit_protocol, "complete", broken)
    with pytest.raises(Exception, match="disk full"):
        t.insert_overwrite_table(df(spark, [(7, "g", "lima", 5)]))
    monkeypatch.undo()
    assert tree_bytes(t.path) == before
    assert rows(t.read()) == snapshot and locate(t, ["1", "2", "3", "4", "7"]) == located


def test_a_pending_insert_overwrite_is_rolled_back(spark, tmp_path, monkeypatch):
    t = make(spark, tmp_path, index="RECORD")
    t.upsert(df(spark, OLD))
    snapshot = rows(t.read())

    def crash(job, spark, pending, index_touched, exc):  # the writer dies: nothing cleaned up
        raise exc

    monkeypatch.setattr("engine.write.guarded.undo", crash)
    monkeypatch.setattr("engine.write.commit.complete", lambda *a, **k: (_ for _ in ()).throw(OSError("killed")))
    with pytest.raises(OSError):
        t.insert_overwrite_table(df(spark, [(7, "g", "lima", 5)]))
    monkeypatch.undo()
    (pending,) = [i for i in t.timeline().instants if i.action is Action.REPLACE_COMMIT]
    assert pending.state is State.INFLIGHT
    assert rows(t.read()) == snapshot  # a pending replacecommit replaces nothing
    t.maintenance.rollback(pending.time)
    assert [i for i in t.timeline().instants if i.action is Action.REPLACE_COMMIT] == []
    assert not list(Path(t.path).rglob(f"*_{pending.time}.parquet"))
    assert rows(t.read()) == snapshot and oracle(t) == data(t)
    assert set(locate(t, ["1", "2", "3", "4", "7"])) == {"1", "2", "3", "4"}


@pytest.mark.hbase
def test_hbase_index_follows_the_overwrite_and_its_rollback(spark, tmp_path, hbase_options):
    options = hbase_options()
    t = make(spark, tmp_path, index="HBASE")
    t.upsert(df(spark, OLD), options=options)
    r = t.insert_overwrite(df(spark, [(3, "c9", "rome", 5), (5, "e", "paris", 5)]), options=options)
    assert data(t) == [(3, "c9", "rome", 5), (4, "d", "oslo", 1), (5, "e", "paris", 5)]  # paris, rome replaced
    # keys 1 and 2 lived in replaced groups: no entry may send them there; key 3 is the new record now
    u = t.upsert(df(spark, [(1, "a2", "paris", 6), (3, "c10", "rome", 6), (2, "b2", "rome", 6)]), options=options)
    assert (u.inserts, u.updates) == (2, 1)
    assert data(t) == oracle(t) == [
        (1, "a2", "paris", 6), (2, "b2", "rome", 6), (3, "c10", "rome", 6), (4, "d", "oslo", 1), (5, "e", "paris", 5)
    ]
    services = Maintenance(t.meta, options)
    services.rollback(u.instant)
    services.rollback(r.instant)
    assert data(t) == oracle(t) == sorted(OLD)
    u = t.upsert(df(spark, [(1, "a3", "paris", 7), (3, "c3", "paris", 7), (5, "e3", "paris", 7)]), options=options)
    assert (u.inserts, u.updates) == (1, 2)
    assert data(t) == [(1, "a3", "paris", 7), (2, "b", "rome", 1), (3, "c3", "paris", 7), (4, "d", "oslo", 1),
                       (5, "e3", "paris", 7)]
