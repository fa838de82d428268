"""Change data capture (issue 37): random write sequences (upserts with updates, late records and
partition moves, deletes, compaction, clustering, rollbacks) on copy-on-write and merge-on-read,
versions 6 and 8/9, each CDC logging mode and none; the changes of every window equal what a model
of the writes says changed, read from the CDC log and inferred alike; the CDC log files are
Apache Hudi's (names, blocks, cdcStats), and services and bad windows keep the answers true."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import pytest

from engine import Table
from engine.data.file_names import parse_cdc_log_file_name
from engine.data.log_block import BlockType, HeaderKey, decode_avro_content
from engine.data.log_file import read_log_blocks
from engine.errors import InvalidConfigError, InvalidInputError, RollbackRefusedError
from engine.read.changes import HistoryUnavailableError, read_changes
from engine.services.maintenance import Maintenance
from tests.support import hudi_rs

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
CITIES = ("oslo", "lima", "rome")
MANUAL = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
          "hoodie.parquet.small.file.limit": str(1 << 20)}


class Model:
    """The table's records and, per write, the changes it made: ('i'|'u'|'d', before, after) with
    images (id, name, city, ts)."""

    def __init__(self, global_index: bool, moves: bool) -> None:
        self.global_index, self.moves = global_index, moves
        self.rows: dict[tuple, tuple] = {}  # model key -> (id, name, city, ts, partition)

    def _key(self, key: int, city: str) -> tuple:
        return (key,) if self.global_index else (key, city)

    def upsert(self, batch: list[tuple]) -> list[tuple]:
        winners: dict[tuple, tuple] = {}
        for row in batch:
            k = self._key(row[0], row[2])
            if k not in winners or row[3] >= winners[k][3]:
                winners[k] = row
        out = []
        for k, row in winners.items():
            stored = self.rows.get(k)
            if stored is None:
                self.rows[k] = (*row, row[2])
                out.append(("i", None, row))
            elif row[3] < stored[3]:
                continue  # late: the stored record stays
            elif self.global_index and self.moves and stored[4] != row[2]:
                self.rows[k] = (*row, row[2])  # moved: deleted in the old partition, inserted in the new
                out += [("d", stored[:4], None), ("i", None, row)]
            else:
                self.rows[k] = (*row, stored[4])
                out.append(("u", stored[:4], row))
        return out

    def delete(self, keys: list[tuple[int, str]]) -> list[tuple]:
        out = []
        for key, city in keys:
            stored = self.rows.pop(self._key(key, city), None)
            if stored is not None:
                out.append(("d", stored[:4], None))
        return out


def story(rng: random.Random, steps: int, services: tuple[str, ...]) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for n in range(steps):
        r = rng.random()
        if n < 2 or r < 0.5:
            size = rng.randint(2, 6)
            out.append(("upsert", [(rng.randint(1, 8), rng.choice(CITIES), rng.randint(0, 6)) for _ in range(size)]))
        elif r < 0.72:
            out.append(("delete", [(k, rng.choice(CITIES)) for k in rng.sample(range(1, 9), rng.randint(1, 3))]))
        elif r < 0.87 and services:
            out.append((rng.choice(services), None))
        else:
            out.append(("rollback", None))
    return out


def image(value: dict | None) -> tuple | None:
    return None if value is None else (value["id"], value["name"], value["city"], value["ts"])


def got(table) -> list[tuple]:
    return sorted(((r["op"], r["ts_ms"], image(r["before"]), image(r["after"])) for r in table.to_pylist()),
                  key=repr)


def want(history: list[tuple[str, list[tuple]]], start: str, end: str | None, done: dict[str, str]) -> list[tuple]:
    """The model's changes of the writes in (start, end]: by instant time, or by completion time
    (`done`, versions 8 and 9: Apache Hudi 1.x windows bound completion times)."""
    return sorted(((op, instant, before, after) for instant, changes in history
                   if start < done.get(instant, instant) and (end is None or done.get(instant, instant) <= end)
                   for op, before, after in changes), key=repr)


# (table type, version, index, CDC logging mode or None: no CDC log, every change inferred)
CASES = [
    ("COPY_ON_WRITE", 6, "BLOOM", "DATA_BEFORE_AFTER"),
    ("COPY_ON_WRITE", 9, "SIMPLE", "OP_KEY_ONLY"),
    ("COPY_ON_WRITE", 6, "GLOBAL_SIMPLE", "DATA_BEFORE"),
    ("MERGE_ON_READ", 6, "GLOBAL_BLOOM", "DATA_BEFORE_AFTER"),
    ("MERGE_ON_READ", 9, "BLOOM", None),
    ("MERGE_ON_READ", 8, "SIMPLE", "OP_KEY_ONLY"),
]


@pytest.mark.parametrize(("table_type", "version", "index", "mode"), CASES)
def test_changes_of_random_sequences_equal_the_model(spark, table_type, version, index, mode):
    rng = random.Random(f"cdc-{table_type}-{version}-{index}-{mode}")
    root = tempfile.mkdtemp(prefix="hoodie-cdc-")
    try:
        t = Table.create(spark, f"{root}/t", name="cdc_trips", record_key="id", partition_fields="city",
                         precombine_field="ts", index=index, table_type=table_type, table_version=version,
                         cdc=mode is not None, cdc_mode=mode)
        global_index = index.startswith("GLOBAL")
        model = Model(global_index, moves=global_index)
        services = ("compact",) if table_type == "MERGE_ON_READ" else ("cluster",)
        history: list[tuple[str, list[tuple]]] = []  # (instant, its changes); services change nothing
        states: list[dict] = [{}]
        written: list[str] = []
        for n, (kind, arg) in enumerate(story(rng, 8, services)):
            if kind == "upsert":
                data = [(k, f"s{n}r{i}", city, ts) for i, (k, city, ts) in enumerate(arg)]
                before = dict(model.rows)
                changes = model.upsert(data)
                r = t.upsert(spark.createDataFrame(data, SCHEMA), options=MANUAL)
                history.append((r.instant, changes))
                states.append(before)
                written.append(r.instant)
            elif kind == "delete":
                before = dict(model.rows)
                changes = model.delete(arg)
                r = t.delete(spark.createDataFrame([(k, "x", c, 0) for k, c in arg], SCHEMA), options=MANUAL)
                if r.instant is not None:
                    history.append((r.instant, changes))
                    states.append(before)
                    written.append(r.instant)
            elif kind == "compact":
                Maintenance(t.meta, MANUAL).run_compaction()
            elif kind == "cluster":
                Maintenance(t.meta, {**MANUAL, "hoodie.clustering.plan.strategy.small.file.limit": str(1 << 20)}).cluster()
            elif kind == "rollback" and written:
                try:
                    Maintenance(t.meta, MANUAL).rollback(written[-1])
                except RollbackRefusedError as exc:  # a clustering or compaction since rewrote its groups
                    assert "rewrote or replaced file groups it wrote" in str(exc)
                    continue
                written.pop()
                history.pop()
                model.rows = states.pop()
        assert history, "the story wrote nothing"
        done = t.timeline().completion_times  # versions 8, 9: windows bound completion times
        instants = [done.get(i, i) for i, _ in history]
        windows = [("000", None), *((a, b) for a, b in zip(["0" * 17, *instants], instants, strict=False))]
        windows.append((instants[0], instants[-2] if len(instants) > 2 else None))
        for start, end in windows:
            expected = want(history, "0" * 17 if start == "000" else start, end, done)
            from_log = got(t.changes(start, end))
            inferred = got(read_changes(t.meta, start, end, use_log=False))
            assert from_log == expected, (start, end)
            assert inferred == expected, (start, end)
        # the table is still the model's, for Apache Hudi's reader too
        snapshot = sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(t.path))
        assert snapshot == sorted(v[:4] for v in model.rows.values())
        # every CDC log file on storage is one a completed commit names (rollbacks took theirs)
        on_disk = sorted(p.relative_to(Path(root, "t")).as_posix() for p in Path(root, "t").rglob(".*.cdc"))
        named = sorted(f for i in t.timeline().completed_writes.instants
                       for s in t.commit_metadata(i.time).write_stats for f in (s.cdcStats or {}))
        assert on_disk == named
        if mode is None:
            assert on_disk == []
        elif table_type == "COPY_ON_WRITE":
            assert on_disk, "copy-on-write rewrites left no CDC log"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_cdc_log_files_are_apache_hudis(spark, tmp_path, monkeypatch):
    t = Table.create(spark, str(tmp_path / "t"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts", cdc=True)
    assert t.config.cdc_mode.value == "DATA_BEFORE_AFTER"
    props = (tmp_path / "t/.hoodie/hoodie.properties").read_text()
    assert "hoodie.table.cdc.enabled=true" in props
    assert "hoodie.table.cdc.supplemental.logging.mode=DATA_BEFORE_AFTER" in props
    first = t.upsert(spark.createDataFrame([(1, "a", "oslo", 1), (2, "b", "oslo", 1)], SCHEMA)).instant
    assert list((tmp_path / "t").rglob(".*.cdc")) == []  # new file groups: inserts are inferred
    second = t.upsert(spark.createDataFrame([(1, "a2", "oslo", 2), (3, "c", "oslo", 2)], SCHEMA)).instant
    [cdc] = list((tmp_path / "t").rglob(".*.cdc"))
    name = parse_cdc_log_file_name(cdc.name)
    [stat] = t.commit_metadata(second).write_stats
    assert name.file_id == stat.fileId and name.base_instant == second and name.version == 1
    assert stat.cdcStats == {f"oslo/{cdc.name}": cdc.stat().st_size}
    [block] = read_log_blocks(t.meta.storage, f"oslo/{cdc.name}")
    assert block.block_type == BlockType.CDC_DATA and block.header[HeaderKey.INSTANT_TIME] == second
    records = sorted(decode_avro_content(block), key=lambda r: r["op"])
    assert records == [
        {"op": "i", "ts_ms": second, "before": None, "after": {"id": 3, "name": "c", "city": "oslo", "ts": 2}},
        {"op": "u", "ts_ms": second, "before": {"id": 1, "name": "a", "city": "oslo", "ts": 1},
         "after": {"id": 1, "name": "a2", "city": "oslo", "ts": 2}},
    ]
    # polars decodes the log's block (engine.data.avro_batch); fastavro, the fallback, reads the same
    fast = t.changes(first).to_pylist()
    monkeypatch.setattr("engine.read.changes.decode_block_arrow", lambda *a: None)
    assert t.changes(first).to_pylist() == fast
    monkeypatch.undo()
    # the Spark form: Apache Hudi's CDC query columns, images as JSON
    df = t.read_changes(first)
    assert df.columns == ["op", "ts_ms", "before", "after"]
    assert sorted(tuple(r) for r in df.collect()) == [
        ("i", second, None, '{"id":3,"name":"c","city":"oslo","ts":2}'),
        ("u", second, '{"id":1,"name":"a","city":"oslo","ts":1}', '{"id":1,"name":"a2","city":"oslo","ts":2}'),
    ]
    # hudi-rs reads the table (it skips the .cdc file)
    assert sorted(r["name"] for r in hudi_rs.snapshot(t.path)) == ["a2", "b", "c"]


def test_bad_windows_and_settings_are_refused(spark, tmp_path):
    with pytest.raises(InvalidConfigError, match="OP_KEY_ONLY, DATA_BEFORE, DATA_BEFORE_AFTER"):
        Table.create(spark, str(tmp_path / "x"), name="x", record_key="id", cdc=True, cdc_mode="FULL")
    with pytest.raises(InvalidConfigError, match="needs hoodie.table.cdc.enabled"):
        Table.create(spark, str(tmp_path / "y"), name="y", record_key="id", cdc_mode="OP_KEY_ONLY")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    t = Table.create(spark, str(tmp_path / "t"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts", cdc=True)
    assert t.changes("000").num_rows == 0
    instants = []
    for n in range(4):
        instants.append(t.upsert(spark.createDataFrame([(1, f"v{n}", "oslo", n)], SCHEMA), options=MANUAL).instant)
    with pytest.raises(InvalidInputError, match="start must be an instant time"):
        t.changes("yesterday")
    with pytest.raises(InvalidInputError, match="is before start"):
        t.changes(instants[2], instants[0])
    assert [r["op"] for r in t.changes(instants[0], instants[1]).to_pylist()] == ["u"]
    # a clean retaining the last two commits: older windows would miss file versions
    Maintenance(t.meta, {"hoodie.cleaner.commits.retained": "2"}).clean()
    with pytest.raises(HistoryUnavailableError, match="earliest start still answerable is") as err:
        t.changes("000")
    assert err.value.earliest in instants
    rows = t.changes(err.value.earliest).to_pylist()
    assert [r["after"]["name"] for r in rows] == [f"v{instants.index(i)}" for i in instants if i > err.value.earliest]


def test_cdc_through_the_data_source_and_the_cli(spark, tmp_path, capsys):
    """`format("hudi")` creates a CDC table from its options and answers CDC queries; `hoodie init
    --cdc` creates one and `hoodie changes` prints a window's changes without Spark."""
    import json

    from engine.cli import main

    path = str(tmp_path / "ds")
    opts = {"hoodie.table.name": "trips", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "city", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.table.cdc.enabled": "true", "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE"}
    spark.createDataFrame([(1, "a", "oslo", 1), (2, "b", "oslo", 1)], SCHEMA).write.format("hudi") \
        .options(**opts).mode("append").save(path)
    spark.createDataFrame([(1, "a2", "oslo", 2)], SCHEMA).write.format("hudi") \
        .options(**opts).mode("append").save(path)
    t = Table.open(spark, path)
    assert t.config.cdc_mode.value == "DATA_BEFORE"
    first, second = [i.time for i in t.timeline().completed_writes.instants]
    cdc = spark.read.format("hudi").option("hoodie.datasource.query.type", "incremental") \
        .option("hoodie.datasource.query.incremental.format", "cdc") \
        .option("hoodie.datasource.read.begin.instanttime", "000").load(path)
    assert cdc.columns == ["op", "ts_ms", "before", "after"]
    assert sorted(tuple(r) for r in cdc.collect()) == sorted(tuple(r) for r in t.read_changes("000").collect()) == [
        ("i", first, None, '{"id":1,"name":"a","city":"oslo","ts":1}'),
        ("i", first, None, '{"id":2,"name":"b","city":"oslo","ts":1}'),
        ("u", second, '{"id":1,"name":"a","city":"oslo","ts":1}', '{"id":1,"name":"a2","city":"oslo","ts":2}'),
    ]
    with pytest.raises(Exception, match="incremental.format=cdc needs hoodie.datasource.query.type=incremental"):
        spark.read.format("hudi").option("hoodie.datasource.query.incremental.format", "cdc").load(path).collect()
    with pytest.raises(Exception, match="differ from the table"):  # CDC is fixed at creation
        spark.createDataFrame([(3, "c", "oslo", 1)], SCHEMA).write.format("hudi") \
            .options(**{**opts, "hoodie.table.cdc.supplemental.logging.mode": "OP_KEY_ONLY"}).mode("append").save(path)

    assert main(["changes", path, "--since", first, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["count"], doc["updates"], doc["inserts"], doc["deletes"]) == (1, 1, 0, 0)
    assert doc["changes"] == [{"op": "u", "ts_ms": second, "before": {"id": 1, "name": "a", "city": "oslo", "ts": 1},
                               "after": {"id": 1, "name": "a2", "city": "oslo", "ts": 2}}]
    assert main(["changes", path, "--since", "000", "--limit", "1"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1 and json.loads(out)["op"] == "i"
    assert "3 change(s): 2 insert(s), 1 update(s), 0 delete(s)" in err
    assert main(["changes", path, "--since", "tomorrow"]) != 0
    assert "start must be an instant time" in capsys.readouterr().err
    assert main(["init", str(tmp_path / "new"), "--name", "n", "--record-key", "id", "--cdc",
                 "--cdc-mode", "OP_KEY_ONLY"]) == 0
    assert "hoodie.table.cdc.supplemental.logging.mode=OP_KEY_ONLY" in (tmp_path / "new/.hoodie/hoodie.properties").read_text()
    capsys.readouterr()
    assert main(["show", str(tmp_path / "new"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cdc_mode"] == "OP_KEY_ONLY"


def test_archived_history_is_refused_and_the_rest_answered(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts", cdc=True)
    instants = [t.upsert(spark.createDataFrame([(1, f"v{n}", "oslo", n)], SCHEMA), options=MANUAL).instant
                for n in range(6)]
    opts = {**MANUAL, "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.cleaner.commits.retained": "1"}
    Maintenance(t.meta, opts).clean()
    archived = Maintenance(t.meta, opts).archive()
    assert archived, "nothing was archived"
    with pytest.raises(HistoryUnavailableError) as err:
        t.changes("000")
    earliest = err.value.earliest
    assert earliest in instants and earliest > max(archived)
    rows = t.changes(earliest).to_pylist()
    assert [(r["op"], r["before"]["name"], r["after"]["name"]) for r in rows] == [
        ("u", f"v{n - 1}", f"v{n}") for n in range(instants.index(earliest) + 1, 6)]


def test_a_restore_takes_its_writes_changes_and_cdc_logs_with_it(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts", cdc=True)
    instants = [t.upsert(spark.createDataFrame([(1, f"v{n}", "oslo", n), (n + 2, "x", "oslo", n)], SCHEMA),
                         options=MANUAL).instant for n in range(4)]
    logs = {p.name.split("_")[1].split(".")[0] for p in (tmp_path / "t").rglob(".*.cdc")}
    assert logs == set(instants[1:])  # every write after the first rewrote the group
    before = t.changes("000", instants[1]).to_pylist()
    Maintenance(t.meta, MANUAL).restore(instants[1])
    assert t.changes("000").to_pylist() == before
    assert {p.name.split("_")[1].split(".")[0] for p in (tmp_path / "t").rglob(".*.cdc")} == {instants[1]}
