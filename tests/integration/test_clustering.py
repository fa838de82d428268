"""Clustering (issue 36): plan, execute, and the rest of the table around it.

One table per (version, type) case, built from small batches that each leave a new file group per
partition; every step is checked against a model of the rows and against hudi-rs.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from engine import PendingClusteringError, Table
from engine.data import space_curve
from engine.errors import InstantNotFoundError, InvalidConfigError, InvalidInputError
from engine.services.maintenance import Maintenance
from engine.table.clustering_plan import read_plan, requested_action
from engine.timeline.instant import Action, State
from tests.support import hudi_rs
from tests.support.metadata_check import metadata_in_step
from tests.support.tables import rows, tree_bytes

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long, score double"
WRITE = {"hoodie.parquet.small.file.limit": "0", "hoodie.clean.automatic": "false",
         "hoodie.archive.automatic": "false"}
ZORDER = {"hoodie.clustering.plan.strategy.sort.columns": "score,ts", "hoodie.layout.optimize.strategy": "z-order"}


def batch(spark, b: int):
    return spark.createDataFrame(
        [(b * 10 + i, f"n{b}{i}", ["paris", "rome"][i % 2], b * 100 + i, float((i * 7 + b * 3) % 11) - 5.0)
         for i in range(6)], SCHEMA)


def model(t: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"], r["score"]) for r in rows(t.read()))


def oracle(path: str, as_of: str | None = None) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"], r["score"]) for r in hudi_rs.snapshot(path, as_of=as_of))


def groups(t: Table) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for s in t.file_system_view().latest_slices():
        out.setdefault(s.partition, set()).add(s.file_id)
    return out


def make(spark, tmp_path, version: int, table_type: str, name: str = "t") -> Table:
    t = Table.create(spark, str(tmp_path / name), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts", table_type=table_type, table_version=version)
    for b in range(4):
        t.upsert(batch(spark, b), options=WRITE)
    # an update: merge-on-read keeps it in a log file of its slice
    t.upsert(spark.createDataFrame([(1, "updated", "rome", 999, 0.5)], SCHEMA), options=WRITE)
    return t


@pytest.mark.parametrize("version,table_type", [(6, "COPY_ON_WRITE"), (6, "MERGE_ON_READ"), (9, "COPY_ON_WRITE"),
                                                (9, "MERGE_ON_READ")])
def test_clustering_rewrites_small_groups_and_the_table_holds(spark, tmp_path, version, table_type):
    t = make(spark, tmp_path, version, table_type)
    before_groups = groups(t)
    assert {p: len(g) for p, g in before_groups.items()} == {"paris": 4, "rome": 4}
    expected = model(t)
    assert expected == oracle(t.path)
    last = t.timeline().completed.instants[-1]
    last_write = last.time
    since = last.completion_time or last.time  # versions 8/9 pull by completion time
    commit_times = {r["id"]: (r["_hoodie_commit_time"], r["_hoodie_commit_seqno"]) for r in rows(t.read())}

    m = Maintenance(t.meta, {**WRITE, **ZORDER})
    plan = m.cluster(dry_run=True)
    assert plan is not None and plan.instant == ""
    assert {(g.partition, frozenset(s.file_id for s in g.slices)) for g in plan.groups} == {
        (p, frozenset(ids)) for p, ids in before_groups.items()}
    assert t.timeline().get(last_write) is not None and len(t.timeline().pending.instants) == 0  # dry run wrote nothing

    result = m.cluster(spark=spark)
    instant = result.instant
    assert {p: sorted(ids) for p, ids in result.replaced.items()} == {p: sorted(ids) for p, ids in before_groups.items()}
    assert result.records == 24 and len(result.files) == 2 and result.groups == 2
    # the timeline: the plan where Apache Hudi keeps it, completed as a replacecommit
    inst = t.timeline().get(instant)
    assert (inst.action, inst.state) == (Action.REPLACE_COMMIT, State.COMPLETED)
    stored = read_plan(t.meta, instant, requested_action(version))
    assert stored.file_groups == {(p, f) for p, ids in before_groups.items() for f in ids}
    assert stored.sort_columns == ["score", "ts"]
    cm = t.commit_metadata(instant)
    assert cm.operation_type == "CLUSTER"
    assert {p: sorted(ids) for p, ids in cm.partition_to_replace_file_ids.items()} == {
        p: sorted(ids) for p, ids in before_groups.items()}
    assert sorted(s.path for s in cm.write_stats) == result.files
    assert all(s.numInserts == s.numWrites and s.prevCommit == "null" for s in cm.write_stats)
    # one new group per partition, holding every record with its commit time and sequence number
    after_groups = groups(t)
    assert {p: len(g) for p, g in after_groups.items()} == {"paris": 1, "rome": 1}
    assert not any(after_groups[p] & before_groups[p] for p in after_groups)
    assert model(t) == oracle(t.path) == expected
    assert {r["id"]: (r["_hoodie_commit_time"], r["_hoodie_commit_seqno"]) for r in rows(t.read())} == commit_times
    # each file is laid out on the Z-order curve of (score, ts)
    for path in result.files:
        data = pq.read_table(f"{t.path}/{path}")
        names = data.schema.names
        assert data.column("_hoodie_file_name").to_pylist() == [path.rpartition("/")[2]] * data.num_rows
        assert list(space_curve.order(data, ["score", "ts"], "z-order",
                                      field_indexes=[names.index("score"), names.index("ts")])) == list(range(data.num_rows))
    # incremental pulls see no new records; time travel before and after agree
    assert rows(t.read_incremental(since)) == [] and hudi_rs.incremental(t.path, since) == []
    assert oracle(t.path, as_of=last_write) == expected
    if version >= 8:
        metadata_in_step(t.path, required=True)

    # an upsert into the clustered groups, then a rollback of the clustering
    t.upsert(spark.createDataFrame([(2, "again", "paris", 1000, 1.0), (99, "new", "rome", 1, 2.0)], SCHEMA),
             options=WRITE)
    expected2 = sorted([r for r in expected if r[0] != 2] + [(2, "again", "paris", 1000, 1.0), (99, "new", "rome", 1, 2.0)])
    assert model(t) == oracle(t.path) == expected2
    Maintenance(t.meta, WRITE).restore(last_write)
    assert model(t) == oracle(t.path) == expected
    assert groups(t) == before_groups
    if version >= 8:
        metadata_in_step(t.path, required=True)


def test_a_pending_clustering_refuses_updates_to_its_groups_and_runs_later(spark, tmp_path):
    t = make(spark, tmp_path, 9, "COPY_ON_WRITE")
    expected = model(t)
    m = Maintenance(t.meta, {**WRITE, "hoodie.clustering.plan.strategy.partition.selected": "paris"})
    plan = m.schedule_clustering()
    assert plan is not None and {g.partition for g in plan.groups} == {"paris"}
    inst = t.timeline().get(plan.instant)
    assert (inst.action, inst.state) == (Action.CLUSTERING, State.REQUESTED)
    before = tree_bytes(t.path)
    with pytest.raises(PendingClusteringError) as err:
        t.upsert(spark.createDataFrame([(0, "x", "paris", 5000, 0.0)], SCHEMA), options=WRITE)
    assert err.value.instant == plan.instant
    assert tree_bytes(t.path) == before
    # an update elsewhere commits
    t.upsert(spark.createDataFrame([(1, "rome-ok", "rome", 5000, 0.0)], SCHEMA), options=WRITE)
    expected = sorted([r for r in expected if r[0] != 1] + [(1, "rome-ok", "rome", 5000, 0.0)])
    result = Maintenance(t.meta, WRITE).run_clustering(plan.instant, spark=spark)
    assert set(result.replaced) == {"paris"} and len(groups(t)["paris"]) == 1 and len(groups(t)["rome"]) == 4
    assert model(t) == oracle(t.path) == expected
    metadata_in_step(t.path, required=True)
    with pytest.raises(InvalidInputError, match="already completed"):
        Maintenance(t.meta, WRITE).run_clustering(plan.instant)
    # clean deletes the replaced groups (every version of them) once no retained snapshot needs them
    planned = {fid for _, fid in plan.file_groups}
    replaced = [f for f in tree_bytes(t.path) if f.startswith("paris/") and f.rpartition("/")[2].split("_")[0] in planned]
    assert replaced
    cleaned = Maintenance(t.meta, {**WRITE, "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"}).clean()
    assert set(replaced) <= set(cleaned.deleted)
    assert not set(replaced) & set(tree_bytes(t.path))
    assert model(t) == oracle(t.path) == expected
    metadata_in_step(t.path, required=True)


def test_an_interrupted_clustering_runs_again_from_the_start(spark, tmp_path, monkeypatch):
    from engine.services import clustering

    t = make(spark, tmp_path, 6, "MERGE_ON_READ")
    expected = model(t)

    def crash(*_a, **_k):
        raise RuntimeError("killed before completing")

    monkeypatch.setattr(clustering, "complete_instant", crash)
    with pytest.raises(RuntimeError):
        Maintenance(t.meta, WRITE).cluster()
    monkeypatch.undo()
    pending = t.timeline().pending.instants
    assert len(pending) == 1 and pending[0].state is State.INFLIGHT
    instant = pending[0].time
    left = [p for p in tree_bytes(t.path) if p.endswith(f"_{instant}.parquet")]
    assert len(left) == 2  # the attempt's files, invisible to readers
    assert model(t) == oracle(t.path) == expected
    result = Maintenance(t.meta, WRITE).run_clustering(instant)
    assert result.instant == instant and not set(left) & set(result.files)
    assert not any(p in tree_bytes(t.path) for p in left)
    assert model(t) == oracle(t.path) == expected
    # rolling the completed clustering back brings the four groups of each partition back
    Maintenance(t.meta, WRITE).rollback(instant)
    assert {p: len(g) for p, g in groups(t).items()} == {"paris": 4, "rome": 4}
    assert model(t) == oracle(t.path) == expected


def test_clustering_refusals_leave_the_table_as_it_was(spark, tmp_path):
    t = make(spark, tmp_path, 6, "COPY_ON_WRITE")
    before = tree_bytes(t.path)
    with pytest.raises(InvalidInputError, match="nope"):
        Maintenance(t.meta, {"hoodie.clustering.plan.strategy.sort.columns": "nope"}).cluster()
    with pytest.raises(InvalidConfigError, match="layout.optimize.strategy"):
        Maintenance(t.meta, {"hoodie.layout.optimize.strategy": "spiral"})
    with pytest.raises(InvalidConfigError, match="unknown clustering option"):
        Maintenance(t.meta, {"hoodie.clustering.plan.strategy.bogus": "1"})
    with pytest.raises(InstantNotFoundError):
        Maintenance(t.meta).run_clustering("20200101000000000")
    # every slice above the small-file limit: nothing to cluster
    assert Maintenance(t.meta, {"hoodie.clustering.plan.strategy.small.file.limit": "1"}).cluster() is None
    assert tree_bytes(t.path) == before


@pytest.mark.parametrize("kind,name", [("cow", "v9_txns_simple_meta"), ("mor/avro", "v9_txns_simple_meta"),
                                       ("cow", "v9_txns_simple_nometa")])
def test_clustering_a_table_apache_hudi_wrote_keeps_every_index(tmp_path, capsys, kind, name):
    """`hoodie clustering run` on Apache Hudi 1.1's table with a metadata table (files, column and
    partition statistics, record index, two secondary indexes), sorted on a Hilbert curve of a
    timestamp and a string: hudi-rs reads the same rows, and every index equals the data files."""
    import json
    from pathlib import Path

    from engine.cli import main
    from engine.table.meta_client import MetaClient
    from tests.support import hudi1x, metadata_checks

    fx = hudi1x.fixture(f"sample_table/{kind}/{name}", tmp_path)
    path = str(fx.table)

    def snapshot() -> list[dict]:  # every column but the file name, which clustering changes
        return sorted(({k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in hudi_rs.snapshot(path)),
                      key=lambda r: r["txn_id"])

    expected = snapshot()
    metadata_checks.in_step(Path(path))
    before = {s.partition: s.file_id for s in MetaClient.open(path).file_system_view().latest_slices()}
    assert main(["clustering", "run", path, "--sort-columns", "txn_datetime,account_id", "--layout", "hilbert",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["clustering"]
    meta = MetaClient.open(path)
    assert set(doc["replaced"]) == set(before) and doc["records"] == len(expected)
    assert meta.timeline().get(doc["instant"]).action is Action.REPLACE_COMMIT
    assert snapshot() == expected
    metadata_checks.in_step(Path(path))
    # the plan is where Hudi keeps it; `show` lists nothing pending
    assert (fx.table / ".hoodie" / "timeline" / f"{doc['instant']}.clustering.requested").exists()
    assert main(["clustering", "show", path]) == 0 and "no pending clustering" in capsys.readouterr().out


def test_inline_clustering_runs_every_n_commits(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "inline"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts")
    opts = {**WRITE, "hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "3",
            "hoodie.clustering.plan.strategy.sort.columns": "ts"}
    results = [t.upsert(batch(spark, b), options=opts) for b in range(4)]
    assert [sorted(r.services) for r in results] == [[], [], ["clustering"], []]
    clustered = results[2].services["clustering"]
    assert {p: len(g) for p, g in groups(t).items()} == {"paris": 2, "rome": 2}  # one clustered + one new each
    assert t.commit_metadata(clustered["instant"]).operation_type == "CLUSTER" and clustered["files"] == 2
    assert model(t) == oracle(t.path) == sorted(
        (b * 10 + i, f"n{b}{i}", ["paris", "rome"][i % 2], b * 100 + i, float((i * 7 + b * 3) % 11) - 5.0)
        for b in range(4) for i in range(6))
    # schedule only: the plan waits for a separate run
    r = t.upsert(batch(spark, 4), options={**opts, "hoodie.clustering.inline": "false",
                                           "hoodie.clustering.schedule.inline": "true",
                                           "hoodie.clustering.inline.max.commits": "1"})
    instant = r.services["clustering_scheduled"]
    assert t.timeline().get(instant).state is State.REQUESTED
    assert Maintenance(t.meta, WRITE).run_clustering(instant).instant == instant


ALLOW = "org.apache.hudi.client.clustering.update.strategy.SparkAllowUpdateStrategy"


def test_updates_strategies_that_let_writes_into_a_pending_clustering(spark, tmp_path):
    """Apache Hudi's SparkAllowUpdateStrategy: with rollback.pending.replacecommit.on.conflict the
    write rolls the clustering back first; without it the write goes in and the clustering, its plan
    stale, refuses to run with nothing written."""
    from engine.errors import CommitConflictError

    t = make(spark, tmp_path, 9, "MERGE_ON_READ")
    expected = model(t)
    update = spark.createDataFrame([(0, "moved-on", "paris", 5000, 0.0)], SCHEMA)
    expected = sorted([r for r in expected if r[0] != 0] + [(0, "moved-on", "paris", 5000, 0.0)])

    plan = Maintenance(t.meta, WRITE).schedule_clustering()
    r = t.upsert(update, options={**WRITE, "hoodie.clustering.updates.strategy": ALLOW,
                                  "hoodie.clustering.rollback.pending.replacecommit.on.conflict": "true"})
    assert r.services["clustering_rolled_back"] == [plan.instant]
    assert t.timeline().get(plan.instant) is None and [i.action for i in t.timeline().pending.instants] == []
    assert any(i.action is Action.ROLLBACK for i in t.timeline().completed.instants)
    assert model(t) == oracle(t.path) == expected

    plan = Maintenance(t.meta, WRITE).schedule_clustering()
    t.upsert(spark.createDataFrame([(0, "again", "paris", 6000, 0.0)], SCHEMA),
             options={**WRITE, "hoodie.clustering.updates.strategy": ALLOW})
    expected = sorted([r for r in expected if r[0] != 0] + [(0, "again", "paris", 6000, 0.0)])
    before = tree_bytes(t.path)
    with pytest.raises(CommitConflictError, match=f"clustering {plan.instant} is stale"):
        Maintenance(t.meta, WRITE).run_clustering(plan.instant)
    assert tree_bytes(t.path) == before and t.timeline().get(plan.instant).state is State.REQUESTED
    assert model(t) == oracle(t.path) == expected
    Maintenance(t.meta, WRITE).rollback(plan.instant)
    assert Maintenance(t.meta, WRITE).cluster(spark=spark) is not None
    assert model(t) == oracle(t.path) == expected
    metadata_in_step(t.path, required=True)


def test_a_clustering_beside_optimistic_writers(spark, tmp_path, monkeypatch):
    """Optimistic concurrency control: the clustering rewrites its groups without the table lock, so
    a write to other groups commits meanwhile; one that updates a planned group with
    SparkAllowUpdateStrategy makes the clustering give up at its commit check, its files removed."""
    from engine.errors import CommitConflictError
    from tests.integration.test_concurrency import paused_in_thread, resume

    occ = {**WRITE, "hoodie.write.concurrency.mode": "optimistic_concurrency_control"}
    t = make(spark, tmp_path, 9, "COPY_ON_WRITE")
    expected = model(t)
    paris = {**occ, "hoodie.clustering.plan.strategy.partition.selected": "paris"}
    point = "clustering.before_complete"
    thread, caught = paused_in_thread(lambda: Maintenance(t.meta, paris).run_clustering(spark=spark),
                                      tmp_path / "pause1", monkeypatch, point)
    (pending,) = t.timeline().pending.instants
    t.upsert(spark.createDataFrame([(1, "rome-meanwhile", "rome", 7000, 0.0)], SCHEMA), options=occ)
    expected = sorted([r for r in expected if r[0] != 1] + [(1, "rome-meanwhile", "rome", 7000, 0.0)])
    resume(tmp_path / "pause1", point)
    thread.join(120)
    assert caught == [] and t.timeline().get(pending.time).state is State.COMPLETED
    assert {p: len(g) for p, g in groups(t).items()} == {"paris": 1, "rome": 4}  # rome: a new slice of one group
    assert model(t) == oracle(t.path) == expected

    allow = {**occ, "hoodie.clustering.updates.strategy": ALLOW}
    for b in range(2):  # two more small groups in paris to cluster
        t.upsert(batch(spark, 10 + b).filter("city = 'paris'"), options=occ)
    expected = model(t)
    thread, caught = paused_in_thread(lambda: Maintenance(t.meta, paris).run_clustering(spark=spark),
                                      tmp_path / "pause2", monkeypatch, point)
    (pending,) = t.timeline().pending.instants
    t.upsert(spark.createDataFrame([(0, "paris-meanwhile", "paris", 8000, 0.0)], SCHEMA), options=allow)
    expected = sorted([r for r in expected if r[0] != 0] + [(0, "paris-meanwhile", "paris", 8000, 0.0)])
    resume(tmp_path / "pause2", point)
    thread.join(120)
    assert len(caught) == 1 and isinstance(caught[0], CommitConflictError) and "is stale" in str(caught[0])
    assert t.timeline().get(pending.time).state is State.REQUESTED
    assert not list((tmp_path / "t" / "paris").glob(f"*_{pending.time}.parquet"))
    assert model(t) == oracle(t.path) == expected
    metadata_in_step(t.path, required=True)


def test_savepoints_clean_and_archival_around_a_clustering(spark, tmp_path):
    """A savepoint before the clustering keeps every replaced group through a clean, and a restore
    to it undoes the clustering; without it, clean deletes the replaced groups; archival then moves
    the clustering off the active timeline."""
    t = make(spark, tmp_path, 6, "COPY_ON_WRITE")
    expected = model(t)
    saved = t.timeline().completed_writes.instants[-1].time
    m = Maintenance(t.meta, {**WRITE, "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
                             "hoodie.cleaner.fileversions.retained": "1"})
    m.create_savepoint(saved)
    before = {f for f in tree_bytes(t.path) if f.endswith(".parquet")}  # 8 groups, one with 2 slices
    assert len(before) == 9
    result = m.cluster()
    assert m.clean() is None and before <= set(tree_bytes(t.path))  # the savepoint keeps them all
    assert model(t) == oracle(t.path) == expected
    m.restore(saved)
    assert model(t) == oracle(t.path) == expected and t.timeline().get(result.instant) is None
    m.delete_savepoint(saved)
    result = m.cluster()
    cleaned = m.clean()
    assert set(cleaned.deleted) == before and set(result.files) == {
        f for f in tree_bytes(t.path) if f.endswith(".parquet")}
    assert model(t) == oracle(t.path) == expected
    for b in range(3):
        t.upsert(batch(spark, 20 + b), options=WRITE)
    expected = model(t)
    archiving = Maintenance(t.meta, {**WRITE, "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                     "hoodie.cleaner.commits.retained": "1"})
    archiving.clean()
    archived = archiving.archive()
    assert result.instant in archived and t.timeline().get(result.instant) is None
    assert model(t) == oracle(t.path) == expected


@pytest.mark.parametrize("sample", ["cow_v6_complexkeygen_hivestyle", "mor_parquet_v6_simplekeygen_nonhivestyle"])
def test_clustering_a_version_6_table_apache_hudi_wrote(spark, tmp_path, sample):
    """Apache Hudi 0.x's sample tables (version 6, COW and MOR with log files), clustered on a
    Z-order of two of their columns: the plan is a replacecommit.requested, and hudi-rs reads the
    same rows after it as before it."""
    from engine.table.meta_client import MetaClient
    from tests.support import samples

    path = str(samples.sample_table(sample, tmp_path))

    def snapshot() -> list[dict]:
        return sorted(({k: v for k, v in r.items() if k != "_hoodie_file_name"} for r in hudi_rs.snapshot(path)),
                      key=lambda r: r["_hoodie_record_key"])

    expected = snapshot()
    meta = MetaClient.open(path)
    columns = [f.name for f in meta.latest_schema(meta.timeline()) if not f.name.startswith("_hoodie")
               and str(f.type) in ("int64", "int32", "double", "string")][:2]
    result = Maintenance(meta, {"hoodie.clustering.plan.strategy.sort.columns": ",".join(columns),
                                "hoodie.layout.optimize.strategy": "z-order"}).cluster(spark=spark)
    assert result is not None and result.records == len(expected)
    from pathlib import Path

    assert (Path(path) / ".hoodie" / f"{result.instant}.replacecommit.requested").exists()
    assert read_plan(meta, result.instant, Action.REPLACE_COMMIT).sort_columns == columns
    assert snapshot() == expected


def test_without_sort_columns_records_are_ordered_by_key_or_as_read(spark, tmp_path):
    """No sort columns: by record key (this engine's default bulk insert sort mode), or, with
    hoodie.bulkinsert.sort.mode=NONE (Apache Hudi's default), each group's slices as read, in the
    plan's order."""
    t = make(spark, tmp_path, 6, "COPY_ON_WRITE")
    expected = model(t)
    none = Maintenance(t.meta, {**WRITE, "hoodie.bulkinsert.sort.mode": "NONE",
                                "hoodie.clustering.plan.strategy.partition.selected": "paris"})
    plan = none.schedule_clustering()
    as_read = [k for s in plan.groups[0].slices
               for k in pq.read_table(f"{t.path}/{s.base_path}").column("_hoodie_record_key").to_pylist()]
    result = none.run_clustering(plan.instant)
    (written,) = result.files
    assert pq.read_table(f"{t.path}/{written}").column("_hoodie_record_key").to_pylist() == as_read
    assert as_read != sorted(as_read)
    result = Maintenance(t.meta, {**WRITE, "hoodie.clustering.plan.strategy.partition.selected": "rome"}).cluster()
    (written,) = result.files
    keys = pq.read_table(f"{t.path}/{written}").column("_hoodie_record_key").to_pylist()
    assert keys == sorted(keys) and len(keys) == 12
    assert model(t) == oracle(t.path) == expected
