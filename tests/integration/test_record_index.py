"""RECORD index end to end on local Spark: files written, global semantics, crashes, rollbacks,
compaction, and random operation sequences checked against a brute-force map."""

from __future__ import annotations

import random
import signal

import pyarrow as pa
import pytest

from engine import Table
from engine.data.file_names import parse_base_file_name
from engine.index.record import RecordIndex, load_state
from engine.index.record_files import INDEX_FOLDER, IndexFile
from engine.keygen.record_hash import buckets_of
from engine.table.meta_client import instant_file_names
from engine.timeline.instant import Action, Instant, State
from tests.integration.test_crash import FAST, run_writer
from tests.support import hudi_rs
from tests.support.tables import data_rows, rows, tree_bytes

pytestmark = pytest.mark.spark

SCHEMA = "id string, city string, v string, ts long"
KEYS = "id string, city string"
# RECORD updates a record whose partition changed in place by default (Apache Hudi's
# hoodie.record.index.update.partition.path=false); the tests that follow moves ask for them
MOVES = {"hoodie.record.index.update.partition.path": "true"}


def make(spark, path, index="RECORD", buckets=4) -> Table:
    return Table.create(spark, str(path), name="r", record_key="id", partition_fields="city",
                        precombine_field="ts", index=index,
                        record_index_buckets=buckets if index == "RECORD" else None)


@pytest.fixture
def rebuilt(monkeypatch) -> list[list[int]]:
    """The buckets of every rebuild of the RECORD index from the data files, in order."""
    from engine.index import record_service

    calls: list[list[int]] = []
    real_rebuild = record_service.rebuild

    def counting_rebuild(meta, buckets=None, options=None):
        calls.append(list(buckets or []))
        return real_rebuild(meta, buckets, options)

    monkeypatch.setattr(record_service, "rebuild", counting_rebuild)
    return calls


def index_files(t: Table) -> list[str]:
    return [f.name for f in t.meta.storage.list_dir(INDEX_FOLDER)]


def locate(t: Table, keys) -> dict[str, tuple[str, str]]:
    found = RecordIndex().locate(t.meta, pa.array(sorted(keys), pa.string()))
    return {r["key"]: (r["partition"], r["file_id"]) for r in found.to_pylist()}


def truth(t: Table) -> dict[str, tuple[str, str]]:
    return {r["_hoodie_record_key"]: (r["_hoodie_partition_path"], r["_hoodie_file_name"].split("_")[0])
            for r in rows(t.read())}


def rollback(t: Table, instant: str) -> None:
    """Stand-in for the rollback service: delete the instant's data files and its index files
    (`rollback_files`), let the index react (`rollback_commit`), then delete its timeline files."""
    meta, index = t.meta, RecordIndex()
    index_paths = index.rollback_files(meta, instant)
    for f in meta.list_data_files():
        parsed = parse_base_file_name(f.path.rsplit("/", 1)[-1])
        if parsed is not None and parsed.instant == instant:
            meta.storage.delete(f.path)
    for p in index_paths:
        meta.storage.delete(p)
    index.rollback_commit(meta, instant, None)
    for name in instant_file_names(Instant(instant, Action.COMMIT, State.COMPLETED)):
        meta.storage.delete(f".hoodie/{name}")


def test_a_commit_writes_one_sorted_file_per_touched_bucket(spark, tmp_path):
    t = make(spark, tmp_path / "t", buckets=4)
    batch = [("a", "paris", "v1", 1), ("b", "rome", "v1", 1), ("c", "rome", "v1", 1), ("d", "oslo", "v1", 1)]
    r1 = t.upsert(spark.createDataFrame(batch, SCHEMA))
    buckets = buckets_of(pa.array(["a", "b", "c", "d"]), 4).tolist()
    assert buckets == [1, 2, 3, 0]
    assert index_files(t) == [IndexFile(b, r1.instant).name for b in sorted(buckets)]
    assert t.config.to_properties()["hoodie.record.index.buckets"] == "4"
    assert r1.index_stats["update_entries"] == 4 and r1.index_stats["update_files"] == 4
    # an update in place writes no entry; a delete writes a tombstone in its bucket only
    r2 = t.upsert(spark.createDataFrame([("a", "paris", "v2", 2)], SCHEMA))
    assert r2.index_stats["update_files"] == 0 and IndexFile(1, r2.instant).name not in index_files(t)
    r3 = t.delete(spark.createDataFrame([("b", "x")], KEYS))
    assert r3.index_stats["update_tombstones"] == 1
    assert IndexFile(2, r3.instant).name in index_files(t)
    assert locate(t, "abcdz") == truth(t)
    assert sorted(locate(t, "abcdz")) == ["a", "c", "d"]
    # hudi-rs reads the table with the index folder inside .hoodie
    assert rows(t.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))


def test_partition_change_moves_the_entry_and_in_place_keeps_it(spark, tmp_path):
    t = make(spark, tmp_path / "t")
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1)], SCHEMA))
    r = t.upsert(spark.createDataFrame([("a", "rome", "v2", 2)], SCHEMA), options=MOVES)
    assert (r.deletes, r.inserts, r.updates) == (1, 1, 0)
    assert [(x["id"], x["_hoodie_partition_path"]) for x in rows(t.read())] == [("a", "rome"), ("b", "rome")]
    assert locate(t, "ab") == truth(t)
    r = t.upsert(spark.createDataFrame([("a", "oslo", "v3", 3)], SCHEMA),
                 options={"hoodie.index.update.partition.path": "false"})
    assert (r.deletes, r.inserts, r.updates) == (0, 0, 1)
    assert locate(t, "ab") == truth(t) and locate(t, "a")["a"][0] == "rome"


def test_same_operations_same_snapshot_as_global_simple(spark, tmp_path):
    rng = random.Random(5)
    tables = {"RECORD": make(spark, tmp_path / "r"), "GLOBAL_SIMPLE": make(spark, tmp_path / "g", "GLOBAL_SIMPLE")}
    for step in range(4):
        batch = [(f"k{rng.randrange(40):02d}", f"c{rng.randrange(3)}", f"v{step}", step) for _ in range(20)]
        victims = [(f"k{rng.randrange(40):02d}", "any") for _ in range(4)]
        for t in tables.values():
            t.upsert(spark.createDataFrame(batch, SCHEMA), options={"hoodie.record.index.compaction.max.files": "2"})
            t.delete(spark.createDataFrame(victims, KEYS), options={"hoodie.record.index.compaction.max.files": "2"})
    r = tables["RECORD"]
    assert data_rows(r.read()) == data_rows(tables["GLOBAL_SIMPLE"].read())
    assert rows(r.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(r.path))
    assert locate(r, [f"k{i:02d}" for i in range(40)]) == truth(r)
    assert any(n.endswith(".compaction") for n in index_files(r))  # compactions ran


def test_spark_lookup_path_tags_like_the_driver_path(spark, tmp_path):
    t = make(spark, tmp_path / "t")
    t.upsert(spark.createDataFrame([(f"k{i}", f"c{i % 3}", "v1", 1) for i in range(30)], SCHEMA))
    batch = spark.createDataFrame([(f"k{i}", f"c{(i + 1) % 3}", "v2", 2) for i in range(20, 40)], SCHEMA)
    r = t.upsert(batch, options={"hoodie.record.index.lookup": "spark", **MOVES})
    assert r.index_stats["driver"] == 0
    assert (r.inserts, r.deletes, r.updates) == (20, 10, 0)  # 10 moved (delete + insert), 10 new
    assert locate(t, [f"k{i}" for i in range(45)]) == truth(t)
    assert len(truth(t)) == 40


def test_crash_before_completion_leaves_no_visible_entry_and_the_next_write_cleans(spark, tmp_path):
    t = make(spark, tmp_path / "t")
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1)], SCHEMA), options=FAST)
    before = locate(t, "abc")
    # a writer process is SIGKILLed (driver, JVM, workers) after its data and index files, before completion
    batch = [["c", "oslo", "v1", 2], ["a", "rome", "v2", 2]]
    res = run_writer({"path": t.path, "action": "upsert", "schema": SCHEMA, "batches": [batch], "options": FAST},
                     "write.before_complete")
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    crashed = t.timeline().last
    assert crashed is not None and crashed.state is State.INFLIGHT
    left = [n for n in index_files(t) if crashed.time in n]
    assert left  # the crashed write's entries are on disk ...
    assert locate(t, "abc") == before == truth(t)  # ... and invisible
    assert rows(t.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))
    r = t.upsert(spark.createDataFrame([("d", "oslo", "v1", 3)], SCHEMA), options=FAST)
    # the repair before the write rolled the crashed write back, its index files with its data files
    assert r.repaired is not None and r.repaired.failed_writes_rolled_back == [crashed.time]
    assert r.index_stats["update_orphans_removed"] == 0
    assert not [n for n in index_files(t) if crashed.time in n]
    assert [i.time for i in t.timeline().instants if i.time == crashed.time] == []
    assert locate(t, "abcd") == truth(t)
    assert data_rows(t.read()) == [{"id": "a", "city": "paris", "v": "v1", "ts": 1},
                                   {"id": "b", "city": "rome", "v": "v1", "ts": 1},
                                   {"id": "d", "city": "oslo", "v": "v1", "ts": 3}]


def test_an_interrupted_write_undoes_its_index_entries_before_it_stops(spark, tmp_path, monkeypatch):
    from engine.services.transaction import WriteGuard

    t = make(spark, tmp_path / "t")
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1)], SCHEMA), options=FAST)
    before, snapshot = locate(t, "abc"), tree_bytes(t.path)

    def interrupted(self):
        raise KeyboardInterrupt("Ctrl-C")

    with monkeypatch.context() as m:  # interrupted after the index files, before completion
        m.setattr(WriteGuard, "before_complete", interrupted)
        with pytest.raises(KeyboardInterrupt):
            t.upsert(spark.createDataFrame([("c", "oslo", "v1", 2), ("a", "rome", "v2", 2)], SCHEMA),
                     options={**FAST, **MOVES})
    # a process that lives to see the interrupt cleans up at once: no pending instant, no index file
    assert tree_bytes(t.path) == snapshot  # the table exactly as it was, index folder included
    assert locate(t, "abc") == before == truth(t)
    r = t.upsert(spark.createDataFrame([("a", "rome", "v3", 3)], SCHEMA), options={**FAST, **MOVES})
    assert r.repaired is None or r.repaired.failed_writes_rolled_back == []
    assert (r.inserts, r.deletes) == (1, 1)  # moved from paris to rome: the old copy is deleted
    assert locate(t, "abc") == truth(t)
    assert data_rows(t.read()) == [{"id": "a", "city": "rome", "v": "v3", "ts": 3},
                                   {"id": "b", "city": "rome", "v": "v1", "ts": 1}]


def test_interrupted_compaction_keeps_the_old_files_valid(spark, tmp_path, monkeypatch):
    t = make(spark, tmp_path / "t", buckets=2)
    opts = {"hoodie.record.index.compaction.max.files": "2"}
    for i in range(3):
        t.upsert(spark.createDataFrame([(f"k{i}{j}", "paris", "v", i) for j in range(4)], SCHEMA), options=opts)
    files_before = index_files(t)
    expected = truth(t)

    real_create = t.meta.storage.create_exclusive.__func__  # type: ignore[attr-defined]

    def crash_on_completed_marker(self, rel, data):
        if rel.endswith(".compaction"):
            raise OSError("disk gone")
        return real_create(self, rel, data)

    with monkeypatch.context() as m:
        m.setattr(type(t.meta.storage), "create_exclusive", crash_on_completed_marker)
        with pytest.raises(Exception, match="disk gone"):
            t.upsert(spark.createDataFrame([("x", "rome", "v", 9)], SCHEMA), options=opts)
    assert [n for n in index_files(t) if n.endswith(".base.arrow")]  # bases written, never completed
    assert locate(t, list(expected) + ["x"]) == expected  # the old files still answer
    state = load_state(t.meta)
    assert sorted(f.name for b in state.buckets.values() for f in b.sources) == sorted(
        n for n in files_before if IndexFile.parse(n))
    r = t.upsert(spark.createDataFrame([("y", "rome", "v", 9)], SCHEMA), options=opts)
    assert r.index_stats["update_compacted_buckets"] == 2
    names = index_files(t)
    assert not [n for n in names if n.endswith(".compaction.requested") and n[:17] + ".compaction" not in names]
    assert locate(t, list(expected) + ["x", "y"]) == truth(t)


def test_rollback_of_compacted_instants_rebuilds_the_buckets(spark, tmp_path):
    t = make(spark, tmp_path / "t", buckets=2)
    opts = {"hoodie.record.index.compaction.max.files": "1"}
    r1 = t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1)], SCHEMA), options=opts)
    r2 = t.delete(spark.createDataFrame([("a", "x")], KEYS), options=opts)
    r3 = t.upsert(spark.createDataFrame([("b", "oslo", "v2", 2), ("c", "oslo", "v1", 2)], SCHEMA), options=opts)
    # r3's write compacted a's bucket (r1's entry and r2's tombstone, dropped) into a base file
    assert buckets_of(pa.array(["a", "b", "c"]), 2).tolist() == [1, 0, 1]
    state = load_state(t.meta)
    assert state.bucket(1).base is not None and state.bucket(1).covers == r2.instant
    assert [f.instant for f in state.bucket(1).deltas] == [r3.instant]
    assert state.bucket(0).base is None
    rollback(t, r3.instant)  # not compacted: its delta files go, nothing to rebuild
    assert locate(t, "abc") == truth(t) == {"b": ("rome", truth(t)["b"][1])}
    rollback(t, r2.instant)  # compacted: "a" must come back although its tombstone was dropped
    assert sorted(truth(t)) == ["a", "b"]
    assert locate(t, "abc") == truth(t)
    assert [i.time for i in t.timeline().completed_writes] == [r1.instant]
    t.upsert(spark.createDataFrame([("c", "rome", "v3", 3)], SCHEMA))
    assert locate(t, "abc") == truth(t)


def test_read_keys_and_filter_exists(spark, tmp_path):
    t = make(spark, tmp_path / "t")
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1), ("c", "oslo", "v1", 1)], SCHEMA))
    t.delete(spark.createDataFrame([("c", "x")], KEYS))
    got = [(r["id"], r["city"], r["v"]) for r in rows(t.read_keys(["a", "c", "zz"]))]
    assert got == [("a", "paris", "v1")]
    incoming = spark.createDataFrame([("a", "rome", "v9", 9), ("c", "oslo", "v9", 9), ("d", "x", "v9", 9)], SCHEMA)
    assert sorted(r["id"] for r in t.filter_exists(incoming).collect()) == ["c", "d"]


@pytest.mark.parametrize("seed", [26, 33])
def test_random_operation_sequences_match_a_brute_force_map(spark, tmp_path, seed, rebuilt):
    """insert / upsert (with partition changes) / delete / re-insert / rollback of the latest
    commits (several in a row: a restore), a compaction whenever a bucket holds two files: after
    every step every lookup is exact."""
    rng, ops_rng = random.Random(seed), random.Random(seed)
    t = make(spark, tmp_path / "t", buckets=3)
    opts = {"hoodie.record.index.compaction.max.files": "1", **MOVES}
    model: dict[str, str] = {}
    history: list[tuple[str, dict[str, str]]] = []  # (instant, model before it)
    deleted: set[str] = set()
    pool = [f"k{i:02d}" for i in range(30)]
    for step in range(9):
        op = ops_rng.choice(["upsert", "upsert", "delete", "reinsert", "rollback"]) if step else "upsert"
        before = dict(model)
        if op == "rollback" and history:
            instant, model = history.pop()
            rollback(t, instant)
        elif op == "delete" and model:
            victims = rng.sample(sorted(model), min(3, len(model)))
            r = t.delete(spark.createDataFrame([(k, "any") for k in victims], KEYS), options=opts)
            for k in victims:
                model.pop(k)
                deleted.add(k)
            history.append((r.instant, before))
        else:
            keys = rng.sample(sorted(deleted), min(3, len(deleted))) if op == "reinsert" and deleted else \
                rng.sample(pool, 6)
            batch = {k: (k, f"c{rng.randrange(3)}", f"v{step}", step) for k in keys}
            r = t.upsert(spark.createDataFrame(list(batch.values()), SCHEMA), options=opts)
            model.update({k: row[1] for k, row in batch.items()})
            history.append((r.instant, before))
        found = locate(t, pool)
        assert {k: p for k, (p, _f) in found.items()} == model, (step, op)
    assert rebuilt  # some rollback hit an instant whose entries a compaction had merged
    assert locate(t, pool) == truth(t)
    assert rows(t.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))


def test_index_build_turns_a_global_simple_table_into_a_record_table(spark, tmp_path, capsys):
    import json

    from engine.cli import main

    g = make(spark, tmp_path / "g", "GLOBAL_SIMPLE")
    g.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1), ("c", "oslo", "v1", 1)], SCHEMA))
    g.upsert(spark.createDataFrame([("a", "rome", "v2", 2)], SCHEMA))
    g.delete(spark.createDataFrame([("c", "x")], KEYS))
    capsys.readouterr()
    assert main(["index", "build", g.path, "--type", "RECORD", "--buckets", "4", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["index_type"], doc["buckets"], doc["entries"]) == ("RECORD", 4, 2)
    t = Table.open(spark, g.path)
    assert t.config.index_type.value == "RECORD"
    assert t.config.to_properties()["hoodie.record.index.buckets"] == "4"
    names = index_files(t)
    assert len([n for n in names if n.endswith(".base.arrow")]) == 4 and len([n for n in names if n.endswith(".compaction")]) == 1
    assert locate(t, "abc") == truth(t) and sorted(truth(t)) == ["a", "b"]
    r = t.upsert(spark.createDataFrame([("b", "oslo", "v3", 3), ("c", "paris", "v3", 3)], SCHEMA), options=MOVES)
    assert (r.inserts, r.deletes, r.updates) == (2, 1, 0)  # b moved, c re-inserted
    assert locate(t, "abc") == truth(t)
    assert rows(t.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))


def test_index_build_is_refused_and_changes_nothing_while_another_writer_holds_the_lock(spark, tmp_path, capsys):
    from engine.cli import main
    from engine.transaction.lock import TableLock

    g = make(spark, tmp_path / "g", "GLOBAL_SIMPLE")
    g.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1)], SCHEMA))
    before = tree_bytes(g.path)
    holder = TableLock(g.meta.storage, "a running upsert", lease=60)
    holder.acquire()
    try:
        capsys.readouterr()
        assert main(["index", "build", g.path, "--type", "RECORD"]) != 0
        err = capsys.readouterr().err
        assert "ConcurrentWriteError" in err or "a running upsert" in err
    finally:
        holder.release()
    assert tree_bytes(g.path) == before  # no index file, hoodie.properties untouched
    assert Table.open(spark, g.path).config.index_type.value == "GLOBAL_SIMPLE"


def test_a_restore_over_compacted_instants_rebuilds_the_buckets_once(spark, tmp_path, rebuilt):
    t = make(spark, tmp_path / "t", buckets=2)
    opts = {"hoodie.record.index.compaction.max.files": "1", "hoodie.clean.automatic": "false", **MOVES}
    instants = [t.upsert(spark.createDataFrame([(f"k{i}", "paris", "v", i), ("a", ["paris", "rome"][i % 2], f"v{i}", i)],
                                               SCHEMA), options=opts).instant for i in range(5)]
    target = instants[1]
    t.maintenance.restore(target)
    assert len(rebuilt) == 1  # the last (oldest) rolled-back instant only, not once per instant
    assert sorted(truth(t)) == ["a", "k0", "k1"]
    assert locate(t, ["a", "k0", "k1", "k2", "k3", "k4"]) == truth(t)
    assert rows(t.read()) == hudi_rs.sort_rows(hudi_rs.snapshot(t.path))
    r = t.upsert(spark.createDataFrame([("k3", "oslo", "v9", 9), ("a", "oslo", "v9", 9)], SCHEMA), options=opts)
    assert (r.inserts, r.deletes, r.updates) == (2, 1, 0)  # k3 is new again, a moves
    assert locate(t, ["a", "k0", "k1", "k3"]) == truth(t)


def test_a_lookup_as_of_an_older_timeline_answers_for_that_timeline_after_a_compaction(spark, tmp_path):
    t = make(spark, tmp_path / "t", buckets=1)
    opts = {"hoodie.record.index.compaction.max.files": "1", "hoodie.clean.automatic": "false", **MOVES}
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1)], SCHEMA), options=opts)
    t.upsert(spark.createDataFrame([("c", "oslo", "v1", 1)], SCHEMA), options=opts)
    old_timeline, old = t.timeline(), locate(t, "abc")
    # a later write moves a, and its index update first compacts the bucket (2 files > 1)
    r = t.upsert(spark.createDataFrame([("a", "lima", "v2", 2), ("d", "lima", "v2", 2)], SCHEMA), options=opts)
    assert r.index_stats["update_compacted_buckets"] == 1
    r = t.upsert(spark.createDataFrame([("e", "lima", "v3", 3)], SCHEMA), options=opts)  # compacts r's delta too
    assert r.index_stats["update_compacted_buckets"] == 1
    as_of_old = RecordIndex().locate(t.meta, pa.array(["a", "b", "c", "d", "e"]), old_timeline)
    assert {x["key"]: (x["partition"], x["file_id"]) for x in as_of_old.to_pylist()} == old
    assert locate(t, "abcde") == truth(t) and truth(t)["a"][0] == "lima"


def test_lookups_retry_when_index_files_vanish_under_them(spark, tmp_path, monkeypatch):
    from engine import IndexChangedError
    from engine.index import record as record_module

    t = make(spark, tmp_path / "t")
    t.upsert(spark.createDataFrame([("a", "paris", "v1", 1), ("b", "rome", "v1", 1)], SCHEMA))
    real_lookup = record_module.lookup
    failures = {"left": 1}

    def flaky(*args, **kwargs):
        if failures["left"]:
            failures["left"] -= 1
            raise FileNotFoundError("b00001_20240101000000000.arrow")  # deleted after the listing
        return real_lookup(*args, **kwargs)

    monkeypatch.setattr(record_module, "lookup", flaky)
    assert [r["id"] for r in rows(t.read_keys(["a", "zz"]))] == ["a"] and failures["left"] == 0
    failures["left"] = 1
    assert locate(t, "ab") == truth(t)  # no timeline given: reloaded and retried
    failures["left"] = 1
    with pytest.raises(IndexChangedError, match="read again with a newer timeline"):
        RecordIndex().locate(t.meta, pa.array(["a"]), t.timeline())
    failures["left"] = 5
    with pytest.raises(IndexChangedError, match="kept changing"):
        RecordIndex().locate(t.meta, pa.array(["a"]))
