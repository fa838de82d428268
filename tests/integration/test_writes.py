"""Write operations on local Spark: exact rows, instants and files; hudi-rs agrees on every table."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.constants import META_COLUMNS
from engine.data.file_names import parse_base_file_name
from engine.index.bloom_filter import build_for_keys
from engine.timeline import Action, State
from tests.support import hudi_rs
from tests.support.tables import data_rows, rows

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"


def make(spark, tmp_path: Path, **kw) -> Table:
    args = dict(name="trips", record_key="id", partition_fields="city", precombine_field="ts")
    args.update(kw)
    return Table.create(spark, str(tmp_path / "t"), **args)


def df(spark, data, schema=SCHEMA):
    return spark.createDataFrame(data, schema)


def oracle(table: Table, as_of: str | None = None) -> list[dict]:
    return hudi_rs.sort_rows(hudi_rs.snapshot(table.path, as_of))


def files_on_disk(table: Table) -> set[str]:
    base = Path(table.path)
    return {p.relative_to(base).as_posix() for p in base.rglob("*.parquet")}


def test_upsert_insert_update_and_partitions(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = t.upsert(df(spark, [(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "paris", 1)]))
    assert (r1.inserts, r1.updates, r1.deletes, r1.files_written) == (3, 0, 0, 2)
    assert r1.partitions == ("paris", "rome")
    r2 = t.upsert(df(spark, [(1, "a2", "paris", 2), (4, "d", "oslo", 2)]))
    assert (r2.inserts, r2.updates) == (1, 1)
    got = rows(t.read())
    assert [(r["id"], r["name"], r["city"], r["ts"]) for r in got] == [
        (4, "d", "oslo", 2), (1, "a2", "paris", 2), (3, "c", "paris", 1), (2, "b", "rome", 1)
    ]
    # meta columns: key, partition, commit time of the version that wrote each record
    by_id = {r["id"]: r for r in got}
    assert by_id[1]["_hoodie_commit_time"] == r2.instant
    assert by_id[3]["_hoodie_commit_time"] == r1.instant  # carried over unchanged
    assert by_id[3]["_hoodie_commit_seqno"].startswith(r1.instant + "_")
    assert by_id[1]["_hoodie_record_key"] == "1" and by_id[1]["_hoodie_partition_path"] == "paris"
    paris_file = by_id[1]["_hoodie_file_name"]
    assert by_id[3]["_hoodie_file_name"] == paris_file
    assert parse_base_file_name(paris_file).instant == r2.instant
    assert got == oracle(t)
    # timeline: two completed commits, nothing pending
    assert [(i.time, i.action, i.state) for i in t.timeline()] == [
        (r1.instant, Action.COMMIT, State.COMPLETED), (r2.instant, Action.COMMIT, State.COMPLETED)
    ]


def test_commit_metadata_lists_exactly_the_files_written(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = t.upsert(df(spark, [(1, "a", "paris", 1), (2, "b", "rome", 1)]))
    before = files_on_disk(t)
    r2 = t.upsert(df(spark, [(1, "a2", "paris", 2)]))
    meta = t.commit_metadata(r2.instant)
    new_files = files_on_disk(t) - before
    assert set(meta.written_paths) == new_files and len(new_files) == 1
    (stat,) = meta.write_stats
    assert stat.prevCommit == r1.instant
    assert (stat.numWrites, stat.numUpdateWrites, stat.numInserts, stat.numDeletes) == (1, 1, 0, 0)
    assert stat.fileSizeInBytes == (Path(t.path) / stat.path).stat().st_size
    raw = json.loads((Path(t.path) / ".hoodie" / f"{r2.instant}.commit").read_text())
    assert raw["operationType"] == "UPSERT"
    schema = json.loads(raw["extraMetadata"]["schema"])
    assert [f["name"] for f in schema["fields"]] == ["id", "name", "city", "ts"]
    # base files: meta columns first, key range in the footer
    pf = pq.ParquetFile(Path(t.path) / stat.path)
    assert pf.schema_arrow.names[:5] == list(META_COLUMNS)
    md = pf.metadata.metadata
    assert md[b"hoodie_min_record_key"] == b"1" and md[b"hoodie_max_record_key"] == b"1"
    # Apache Hudi's default bloom filter of exactly this file's keys, as its BLOOM index expects
    assert md[b"hoodie_bloom_filter_type_code"] == b"DYNAMIC_V0"
    assert md[b"org.apache.hudi.bloomfilter"].decode() == build_for_keys(["1"]).serialize()
    assert b"ARROW:schema" not in md
    assert (Path(t.path) / "paris" / ".hoodie_partition_metadata").read_text().splitlines()[1:] == [
        f"commitTime={r1.instant}", "partitionDepth=1"
    ]


def test_dedupe_and_event_time_ordering(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = t.upsert(df(spark, [(1, "old", "paris", 5), (1, "newest", "paris", 9), (1, "mid", "paris", 7),
                             (2, "tie-first", "paris", 3), (2, "tie-last", "paris", 3)]))
    assert (r1.inserts, r1.duplicates_dropped) == (2, 3)
    assert [(r["id"], r["name"]) for r in rows(t.read())] == [(1, "newest"), (2, "tie-last")]
    # a smaller precombine value does not overwrite the stored record; equal or larger does
    r2 = t.upsert(df(spark, [(1, "stale", "paris", 8), (2, "equal", "paris", 3)]))
    assert (r2.updates, r2.stale_ignored) == (1, 1)
    assert [(r["id"], r["name"], r["ts"]) for r in rows(t.read())] == [(1, "newest", 9), (2, "equal", 3)]
    assert rows(t.read()) == oracle(t)


def test_insert_does_not_look_up_and_bulk_insert_opens_new_groups(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = t.bulk_insert(df(spark, [(1, "a", "paris", 1), (2, "b", "paris", 1)]))
    assert (r1.inserts, r1.files_written) == (2, 1)
    r2 = t.bulk_insert(df(spark, [(3, "c", "paris", 1)]))
    groups = t.file_system_view().groups_in("paris")
    assert len(groups) == 2  # bulk insert never packs into the existing small file
    r3 = t.insert(df(spark, [(1, "dup", "paris", 2)]))
    assert r3.inserts == 1
    # insert packed into the smallest file group (a small file) and duplicated key 1, as in Hudi
    assert sorted((r["id"], r["name"]) for r in rows(t.read())) == [(1, "a"), (1, "dup"), (2, "b"), (3, "c")]
    assert len(t.file_system_view().groups_in("paris")) == 2
    assert t.commit_metadata(r2.instant).operation_type == "BULK_INSERT"
    assert t.commit_metadata(r3.instant).operation_type == "INSERT"
    assert rows(t.read()) == oracle(t)


@pytest.mark.parametrize("index", ["BLOOM", "RECORD"])
def test_insert_operations_number_inserts_across_input_tasks(spark, tmp_path, index):
    """insert and bulk_insert count the batch once while preparing it (nothing to look up): rows
    from several input tasks and partitions fill several new file groups exactly once each, and
    the RECORD index learns where every key went."""
    t = make(spark, tmp_path, index=index, **({"record_index_buckets": 2} if index == "RECORD" else {}))
    cities = ["paris", "rome", "oslo"]
    batch = [(i, f"n{i}", cities[i % 3], 1) for i in range(3000)]
    opts = {"hoodie.parquet.max.file.size": 20_000, "hoodie.parquet.small.file.limit": 0,
            "hoodie.copyonwrite.record.size.estimate": 40}
    r1 = t.bulk_insert(df(spark, batch).repartition(4), options=opts)
    assert (r1.inserts, r1.updates, r1.input_records, r1.duplicates_dropped) == (3000, 0, 3000, 0)
    groups = {c: len(t.file_system_view().groups_in(c)) for c in cities}
    assert all(n > 1 for n in groups.values()), groups  # several new file groups per partition
    assert r1.files_written == sum(groups.values())
    more = [(3000 + i, f"m{i}", cities[i % 3], 1) for i in range(600)]
    r2 = t.insert(df(spark, more).repartition(3), options=opts)
    assert (r2.inserts, r2.input_records) == (600, 600)
    got = rows(t.read())
    assert sorted((r["id"], r["name"], r["city"]) for r in got) == sorted(
        (i, n, c) for i, n, c, _ts in batch + more
    )
    assert got == oracle(t)
    # an upsert of every key updates in place: the index (or bloom lookup) found each one
    r3 = t.upsert(df(spark, [(i, f"u{i}", cities[i % 3], 2) for i in range(3600)]).repartition(2), options=opts)
    assert (r3.inserts, r3.updates) == (0, 3600)
    assert sorted((r["id"], r["name"]) for r in rows(t.read())) == [(i, f"u{i}") for i in range(3600)]


def test_insert_keeps_in_batch_duplicates_unless_asked_to_combine(spark, tmp_path):
    t = make(spark, tmp_path)
    dup = [(1, "first", "paris", 1), (1, "second", "paris", 5), (2, "b", "rome", 1)]
    r1 = t.insert(df(spark, dup))
    assert (r1.inserts, r1.duplicates_dropped) == (3, 0)  # Apache Hudi: combine.before.insert=false
    assert sorted((r["id"], r["name"]) for r in rows(t.read())) == [(1, "first"), (1, "second"), (2, "b")]
    r2 = t.bulk_insert(df(spark, [(7, "x", "oslo", 1), (7, "y", "oslo", 9)]),
                       options={"hoodie.combine.before.insert": "true"})
    assert (r2.inserts, r2.duplicates_dropped) == (1, 1)
    assert [(r["id"], r["name"]) for r in rows(t.read()) if r["id"] == 7] == [(7, "y")]
    assert rows(t.read()) == oracle(t)


def test_insert_of_is_deleted_rows_writes_only_the_live_ones(spark, tmp_path):
    t = make(spark, tmp_path)
    schema = SCHEMA + ", _hoodie_is_deleted boolean"
    r = t.bulk_insert(df(spark, [(1, "a", "paris", 1, False), (2, "gone", "paris", 1, True),
                                 (3, "c", "rome", 1, None)], schema))
    assert (r.inserts, r.deletes, r.absent_deletes, r.input_records) == (2, 0, 1, 3)
    assert sorted(r["id"] for r in rows(t.read())) == [1, 3]
    assert rows(t.read()) == oracle(t)


def test_delete_present_and_absent_keys(spark, tmp_path):
    t = make(spark, tmp_path)
    t.upsert(df(spark, [(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "paris", 1)]))
    r = t.delete(spark.createDataFrame([(1, "paris"), (2, "paris"), (9, "oslo")], "id int, city string"))
    # key 2 lives in rome: under a non-global index (2, paris) is absent, like (9, oslo)
    assert (r.deletes, r.absent_deletes, r.files_written) == (1, 2, 1)
    assert t.commit_metadata(r.instant).extra_metadata["engine.deletes.absent"] == "2"
    assert [(x["id"], x["city"]) for x in rows(t.read())] == [(3, "paris"), (2, "rome")]
    r2 = t.delete(spark.createDataFrame([(3, "paris")], "id int, city string"))
    assert r2.deletes == 1
    assert [(x["id"]) for x in rows(t.read())] == [2]
    # the emptied file group's new slice is an empty file; every reader sees no rows there
    assert rows(t.read()) == oracle(t)


def test_complex_keys_hive_style_multi_field_partitions(spark, tmp_path):
    t = make(spark, tmp_path, record_key="id,name", partition_fields="city,day", hive_style=True)
    schema = "id int, name string, city string, day string, ts long"
    t.upsert(df(spark, [(1, "a", "paris", "d1", 1), (1, "b", "paris", "d1", 1), (2, "a", "rome", "d2", 1)], schema))
    t.upsert(df(spark, [(1, "a", "paris", "d1", 5)], schema))
    got = rows(t.read())
    assert [(r["_hoodie_record_key"], r["_hoodie_partition_path"], r["ts"]) for r in got] == [
        ("id:1,name:a", "city=paris/day=d1", 5),
        ("id:1,name:b", "city=paris/day=d1", 1),
        ("id:2,name:a", "city=rome/day=d2", 1),
    ]
    assert (Path(t.path) / "city=paris" / "day=d1" / ".hoodie_partition_metadata").read_text().endswith(
        "partitionDepth=2\n"
    )
    assert t.config.keygen_class == "org.apache.hudi.keygen.ComplexKeyGenerator"
    assert got == oracle(t)


def test_non_partitioned_table(spark, tmp_path):
    t = make(spark, tmp_path, partition_fields=None)
    t.upsert(df(spark, [(1, "a", "x", 1), (2, "b", "y", 1)]))
    t.upsert(df(spark, [(2, "b2", "y", 2)]))
    got = rows(t.read())
    assert [(r["_hoodie_partition_path"], r["id"], r["name"]) for r in got] == [("", 1, "a"), ("", 2, "b2")]
    assert t.config.keygen_class == "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    assert (Path(t.path) / ".hoodie_partition_metadata").is_file()
    assert got == oracle(t)


def test_small_file_packing_with_tiny_max_file_size(spark, tmp_path):
    t = make(spark, tmp_path)
    # a small bloom filter per file (the default one alone is ~430 KB, far above these sizes)
    opts = {"hoodie.parquet.max.file.size": 40_000, "hoodie.parquet.small.file.limit": 30_000,
            "hoodie.copyonwrite.record.size.estimate": 100,
            "hoodie.index.bloom.num_entries": 1000, "hoodie.index.bloom.fpp": 0.001}
    data = [(i, f"name-{i:05d}-" + "x" * 60, "paris", 1) for i in range(1000)]
    r1 = t.upsert(df(spark, data), options=opts)
    # 40_000 // 100 = 400 records per new file group: 1000 inserts -> 3 groups of 334/333/333
    assert r1.files_written == 3
    stats = sorted(s.numInserts for s in t.commit_metadata(r1.instant).write_stats)
    assert stats == [333, 333, 334]
    sizes = {s.path: s.fileSizeInBytes for s in t.commit_metadata(r1.instant).write_stats}
    # the next commit estimates the record size from this one and packs inserts into small files
    r2 = t.upsert(df(spark, [(2000 + i, "y" * 70, "paris", 1) for i in range(50)]), options=opts)
    meta2 = t.commit_metadata(r2.instant)
    assert r2.inserts == 50 and r2.files_written >= 1
    assert all(s.prevCommit == r1.instant for s in meta2.write_stats)  # no new file group opened
    assert len(t.file_system_view().groups_in("paris")) == 3
    for s in meta2.write_stats:
        assert s.fileSizeInBytes <= 40_000 + 4_000  # bounded by max size (+ parquet footer slack)
    assert max(sizes.values()) <= 40_000 + 4_000
    assert len(rows(t.read())) == 1050
    assert rows(t.read()) == oracle(t)


def test_time_travel_and_incremental(spark, tmp_path):
    t = make(spark, tmp_path)
    r1 = t.upsert(df(spark, [(1, "a", "paris", 1), (2, "b", "rome", 1)]))
    r2 = t.upsert(df(spark, [(1, "a2", "paris", 2), (3, "c", "oslo", 2)]))
    r3 = t.delete(spark.createDataFrame([(2, "rome")], "id int, city string"))
    assert [(r["id"], r["name"]) for r in rows(t.read(as_of=r1.instant))] == [(1, "a"), (2, "b")]
    assert sorted((r["id"], r["name"]) for r in rows(t.read(as_of=r2.instant))) == [(1, "a2"), (2, "b"), (3, "c")]
    assert sorted(r["id"] for r in rows(t.read(as_of=r3.instant))) == [1, 3]
    for inst in (r1.instant, r2.instant, r3.instant):
        assert rows(t.read(as_of=inst)) == oracle(t, inst)
    inc = rows(t.read_incremental(r1.instant))
    assert sorted((r["id"], r["_hoodie_commit_time"]) for r in inc) == [(1, r2.instant), (3, r2.instant)]
    assert rows(t.read_incremental(r1.instant, r2.instant)) == inc
    assert rows(t.read_incremental(r2.instant)) == []
    inc0 = rows(t.read_incremental("00000000000000000", r1.instant))
    assert sorted(r["id"] for r in inc0) == [1, 2]
    oracle_inc = hudi_rs.sort_rows(hudi_rs.incremental(t.path, r1.instant, r2.instant))
    assert inc == oracle_inc


def test_empty_input_commits_nothing(spark, tmp_path):
    t = make(spark, tmp_path)
    r = t.upsert(df(spark, []))
    assert r.instant is None and r.input_records == 0
    assert list(t.timeline()) == []
    assert data_rows(t.read()) == []


def test_files_of_inflight_instants_are_never_read(spark, tmp_path):
    """A writer that died after writing a base file but before completing leaves debris we ignore."""
    t = make(spark, tmp_path)
    r1 = t.upsert(df(spark, [(1, "a", "paris", 1), (2, "b", "paris", 1)]))
    (good,) = list(Path(t.path, "paris").glob("*.parquet"))
    crashed = "29991231235959000"  # an instant after r1 that never completed
    hoodie = Path(t.path, ".hoodie")
    (hoodie / f"{crashed}.commit.requested").write_bytes(b"")
    (hoodie / f"{crashed}.inflight").write_bytes(b"{}")
    fid = parse_base_file_name(good.name).file_id
    debris = Path(t.path, "paris", f"{fid}_0-1-1_{crashed}.parquet")
    table = pq.read_table(good).to_pylist()
    table[0]["name"] = "uncommitted"
    pq.write_table(pq.read_table(good).from_pylist(table, schema=pq.read_schema(good)), debris)
    assert [(r["id"], r["name"]) for r in rows(t.read())] == [(1, "a"), (2, "b")]
    assert rows(t.read()) == oracle(t)
    # the next write sees only committed data and its instant comes after the pending one
    r2 = t.upsert(df(spark, [(2, "b2", "paris", 2)]))
    assert r2.instant > crashed and r2.updates == 1
    assert [(r["id"], r["name"]) for r in rows(t.read())] == [(1, "a"), (2, "b2")]
    assert t.commit_metadata(r2.instant).write_stats[0].prevCommit == r1.instant
    assert rows(t.read()) == oracle(t)
