"""Archival of tables Apache Hudi 1.x wrote (version 9, timeline layout 2) into the LSM history
`.hoodie/timeline/history/`: exact files and manifests, the active timeline left, reads (ours
and hudi-rs's) unchanged, archived instants listed, and an archival killed after its data file
or after its manifest finishing without writing any instant twice.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.errors import InstantNotFoundError
from engine.services import archive as archive_service
from engine.services import archive_lsm
from engine.services.maintenance import Maintenance
from engine.table.meta_client import MetaClient
from engine.timeline import lsm
from engine.timeline.instant import Action, Instant, State
from tests.integration.test_hudi1x_fixtures import MARK, _changed_and_added, _oracle, _rows
from tests.support import hudi1x

pytestmark = pytest.mark.spark

NAME = "sample_table/mor/avro/v9_txns_simple_meta"  # deltacommits, insert overwrite, compaction, clustering
OPTS = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1",
        "hoodie.clean.automatic": "false"}
MANUAL = {**OPTS, "hoodie.archive.automatic": "false"}


def _snapshot(table: Table, as_of: str | None = None) -> list[str]:
    ours = table.read(as_of=as_of).toArrow()
    return _rows(ours, [c for c in ours.column_names if not c.startswith("_hoodie_")] + ["_hoodie_commit_time"])


def _history(path) -> list[str]:
    return sorted(p.name for p in (path / ".hoodie" / "timeline" / "history").iterdir())


def _timeline_names(path) -> list[str]:
    return sorted(p.name for p in (path / ".hoodie" / "timeline").iterdir() if p.is_file())


def test_archival_writes_the_lsm_history_and_reads_stay_the_same(spark, tmp_path):
    fx = hudi1x.fixture(NAME, tmp_path)
    table = Table.open(spark, str(fx.table))
    meta = table.meta
    old = meta.timeline()
    writes = [i for i in old.completed_writes]
    assert [i.action.value for i in writes] == ["deltacommit"] * 7 + ["replacecommit"] + ["deltacommit"] * 2 + [
        "commit", "replacecommit", "deltacommit"]
    raw = {i.time: (fx.table / ".hoodie" / "timeline" / meta.layout.file_name(i)).read_bytes() for i in writes}
    folder = fx.table / ".hoodie" / "timeline"
    plans = {  # Java keeps the requested plan (a replacecommit's inflight metadata when it has any)
        writes[7].time: (folder / f"{writes[7].time}.replacecommit.inflight").read_bytes()
        or (folder / f"{writes[7].time}.replacecommit.requested").read_bytes(),
        writes[10].time: (folder / f"{writes[10].time}.compaction.requested").read_bytes(),
        writes[11].time: (folder / f"{writes[11].time}.clustering.inflight").read_bytes()
        or (folder / f"{writes[11].time}.clustering.requested").read_bytes(),
    }
    # the deltacommits before the first replacecommit (no clean has passed it yet) that completed
    # before the latest compaction of the metadata table (Hudi's TimelineArchiverV2 stops there)
    gone = writes[:6]
    batch, column, _original, again = _changed_and_added(spark, table)
    again = spark.createDataFrame(again.collect(), again.schema)  # not a lazy read of files a clean deletes
    first = table.upsert(batch, options=MANUAL)  # no archival yet: the reads to compare with
    assert "archived" not in first.services
    before = _snapshot(table)
    before_rs = _oracle(fx.table)
    as_of_last = _snapshot(table, as_of=writes[-1].time)

    archived = Maintenance(meta, OPTS).archive()
    assert archived == [i.time for i in gone]
    name0 = f"{gone[0].time}_{gone[-1].time}_0.parquet"
    assert _history(fx.table) == sorted(["_version_", name0, "manifest_1"])
    history = fx.table / ".hoodie/timeline/history"
    assert (history / "_version_").read_text() == "1"
    manifest = json.loads((history / "manifest_1").read_text())
    assert manifest == {"files": [{"fileName": name0, "fileLen": (history / name0).stat().st_size}]}
    rows = pq.read_table(history / name0).to_pylist()
    assert [(r["instantTime"], r["completionTime"], r["action"]) for r in rows] == [
        (i.time, i.completion_time, i.action.value) for i in gone]
    assert [r["metadata"] for r in rows] == [raw[i.time] for i in gone]  # the completed files' bytes
    assert [r["plan"] for r in rows] == [None] * 6 and {r["version"] for r in rows} == {1}
    assert json.loads(pq.ParquetFile(history / name0).metadata.metadata[b"parquet.avro.schema"]) == lsm.INSTANT_SCHEMA

    active = meta.timeline()
    assert [(i.time, i.action, i.state) for i in active] == [
        *[(i.time, i.action, State.COMPLETED) for i in old.instants[6:]], (first.instant, Action.DELTA_COMMIT,
                                                                          State.COMPLETED)]
    kept = {i.time for i in active}
    assert {n.split(".")[0].split("_")[0] for n in _timeline_names(fx.table)} == kept  # no file of gone left
    assert active.has_archive and active.archived_before == writes[6].time

    assert _snapshot(table) == before
    assert _oracle(fx.table) == before_rs
    assert _snapshot(table, as_of=writes[-1].time) == as_of_last  # time travel to an active instant
    with pytest.raises(InstantNotFoundError, match="before the first instant"):  # as in version 6
        _snapshot(table, as_of=writes[5].time)
    # incremental from the last fixture write's completion: our commit's records alone
    assert [r["_hoodie_commit_time"] for r in table.read_incremental(writes[-1].completion_time).collect()] == [
        first.instant] * 2  # the batch changed one record and added one
    assert [(i.time, i.action, i.completion_time) for i in table.maintenance.archived_instants()] == [
        (i.time, i.action, i.completion_time) for i in gone]
    entries = archive_service.read_archived_entries(meta)
    assert [(e["commitTime"], e["actionType"], e["stateTransitionTime"]) for e in entries] == [
        (i.time, i.action.value, i.completion_time) for i in gone]

    # a clean passes the replacecommits and, as Apache Hudi's cleaner does, deletes the file groups
    # they replaced; the next write archives up to what the clean retained
    replaced = {(p, f) for i in (writes[7], writes[11])
                for p, ids in meta.commit_metadata(i).partition_to_replace_file_ids.items() for f in ids}
    assert replaced
    clean = Maintenance(meta, OPTS).clean()
    assert clean is not None and clean.earliest_retained == first.instant
    assert not [path for path in fx.table.rglob("*") if path.is_file() and any(
        path.relative_to(fx.table).as_posix().rpartition("/")[0] == p and f in path.name for p, f in replaced)]
    second = table.upsert(again, options=OPTS)  # automatic archival: 8 writes > keep.max 3
    assert second.services["archived"] == [i.time for i in writes[6:]]
    third = table.upsert(again, options=OPTS)
    assert "archived" not in third.services  # first (the clean's earliest retained), second, third
    name1 = f"{writes[6].time}_{writes[12].time}_0.parquet"
    assert _history(fx.table) == sorted(["_version_", name0, name1, "manifest_1", "manifest_2"])
    assert json.loads((history / "manifest_2").read_text())["files"] == [
        {"fileName": name0, "fileLen": (history / name0).stat().st_size},
        {"fileName": name1, "fileLen": (history / name1).stat().st_size}]
    assert (history / "_version_").read_text() == "2"
    rows = pq.read_table(history / name1).to_pylist()
    assert [(r["instantTime"], r["action"]) for r in rows] == [(i.time, i.action.value) for i in writes[6:]]
    assert {r["instantTime"]: r["plan"] for r in rows if r["plan"] is not None} == plans
    assert [(i.time, i.action) for i in meta.timeline()] == [
        (old.instants[-2].time, Action.INDEXING), (old.instants[-1].time, Action.INDEXING),
        (first.instant, Action.DELTA_COMMIT), (clean.instant, Action.CLEAN), (second.instant, Action.DELTA_COMMIT),
        (third.instant, Action.DELTA_COMMIT)]
    assert not any(n.startswith(tuple(i.time for i in writes)) for n in _timeline_names(fx.table))
    after = _oracle(fx.table)
    assert _rows_without_meta(table) == after
    assert [r for r in after if r[column] in MARK.values()] == []  # `again` overwrote the first change
    assert len(after) == len(before_rs)
    assert [i.time for i in archive_service.archived_instants(meta)] == [i.time for i in writes]


def _rows_without_meta(table: Table) -> list[dict]:
    from tests.integration.test_hudi1x_fixtures import _norm

    rows = [{k: _norm(v) for k, v in r.items() if not k.startswith("_hoodie_")} for r in table.read().toArrow().to_pylist()]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


@pytest.mark.parametrize("point", ["archive.after_data_file", "archive.after_manifest", "archive.after_file"])
def test_an_interrupted_archival_finishes_without_duplicates(spark, tmp_path, monkeypatch, point):
    """The crash is an exception raised at the failpoint: nothing after it runs (the process-kill
    matrix of test_crash.py does the same for version 6)."""
    fx = hudi1x.fixture(NAME, tmp_path)
    table = Table.open(spark, str(fx.table))
    batch, _column, _original, _again = _changed_and_added(spark, table)
    table.upsert(batch, options=MANUAL)
    expected = _snapshot(table)
    meta = MetaClient.open(str(fx.table))
    plan = archive_service.plan_archive(meta, meta.timeline(), 2, 3)
    assert len(plan.instants) == 6  # the deltacommits below the first replacecommit and the metadata compaction

    from engine import failpoints

    class Killed(Exception):
        pass

    def hit(name: str) -> None:
        if name == point:
            raise Killed(name)

    monkeypatch.setattr(failpoints, "hit", hit)
    with pytest.raises(Killed):
        Maintenance(meta, OPTS).archive()
    name0 = f"{plan.times[0]}_{plan.times[-1]}_0.parquet"
    history = fx.table / ".hoodie/timeline/history"
    left = {"archive.after_data_file": [name0], "archive.after_manifest": [name0, "manifest_1"],
            "archive.after_file": ["_version_", name0, "manifest_1"]}[point]
    assert _history(fx.table) == sorted(left)
    assert [i.time for i in meta.timeline().completed_writes][:6] == plan.times  # nothing removed yet
    assert _snapshot(table) == expected
    monkeypatch.undo()

    if point == "archive.after_file":  # the history holds them: repair only removes the active files
        assert archive_service.finish_interrupted(meta, meta.timeline()) == plan.times
    elif point == "archive.after_manifest":
        # the manifest is whole: the repair every locked service runs first points `_version_` at
        # it and removes the archived instants, so archival itself finds nothing left
        assert Maintenance(meta, OPTS).archive() == []
    else:  # the torn data file is not listed anywhere: written again
        assert Maintenance(meta, OPTS).archive() == plan.times
    assert _history(fx.table) == sorted(["_version_", name0, "manifest_1"])
    assert (history / "_version_").read_text() == "1"
    rows = archive_lsm.read_rows(meta)
    assert [r["instantTime"] for r in rows] == plan.times  # each once
    assert [r["instantTime"] for r in pq.read_table(history / name0).to_pylist()] == plan.times
    assert not ({i.time for i in meta.timeline()} & set(plan.times))
    assert _snapshot(table) == expected
    assert Maintenance(meta, OPTS).archive() == []  # nothing left to archive
    assert archive_lsm.latest_version(meta) == 1


def test_the_history_compacts_full_layers_into_the_next_and_cleans_old_versions(tmp_path):
    """hoodie.timeline.compaction.batch.size L0 files become one L1 file; versions beyond 3 (+1 per
    compacted layer) are cleaned; the rows stay the same (no Spark: a table of hand-made instants)."""
    fx = hudi1x.fixture("sample_table/cow/v8_nonpartitioned", tmp_path)
    meta = MetaClient.open(str(fx.table))
    writes = list(meta.timeline().completed_writes)
    assert len(writes) == 2
    for inst in writes:  # one L0 file each (no active instants removed: only the history is exercised)
        archive_lsm.append(meta, [inst])
    fake = [Instant(f"2026010100000000{k}", Action.CLEAN, State.COMPLETED, f"2026010100000001{k}") for k in range(2)]
    for inst in fake:
        ts = inst.time
        (fx.table / ".hoodie/timeline" / f"{ts}_{inst.completion_time}.clean").write_bytes(b"")
        archive_lsm.append(meta, [inst])
    history = fx.table / ".hoodie/timeline/history"
    names = [f"{i.time}_{i.time}_0.parquet" for i in [*writes, *fake]]
    assert archive_lsm.read_manifest(meta).file_names == names
    assert archive_lsm.latest_version(meta) == 4
    assert archive_lsm.compact(meta, batch_size=3) == [f"{writes[0].time}_{fake[0].time}_1.parquet"]
    merged = f"{writes[0].time}_{fake[0].time}_1.parquet"
    assert archive_lsm.read_manifest(meta).file_names == [names[3], merged]
    assert archive_lsm.latest_version(meta) == 5
    # 5 versions > 3 + 1: manifest_1 goes, and the files only it listed (none: all are in kept versions)
    assert sorted(p.name for p in history.iterdir()) == sorted(
        ["_version_", "manifest_2", "manifest_3", "manifest_4", "manifest_5", *names, merged])
    assert [r["instantTime"] for r in archive_lsm.read_rows(meta)] == [i.time for i in [*writes, *fake]]
    assert [r["instantTime"] for r in pq.read_table(history / merged).to_pylist()] == [
        i.time for i in [*writes, fake[0]]]
