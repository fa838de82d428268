"""Tables Apache Hudi 1.x wrote (versions 8 and 9), from hudi-rs's fixtures (tests/support/hudi1x.py).

Every version 8 and 9 fixture with Parquet base files reads exactly as Spark + Apache Hudi read it
(`gold_data/`, row for row, every column), partial updates and a corrupt tail block included; the
one shipped without Spark's reading (HFILE log blocks) reads as hudi-rs reads it. Lance tables are
refused with a typed error naming the file.
Time travel to every completed write instant, and an incremental pull, agree with hudi-rs on every
fixture it reads. Each fixture takes an upsert (one value changed, one record added) and its
rollback as hudi-rs sees them; compaction keeps hudi-rs's snapshot;
archival is tested in test_lsm_archival.py.
"""

from __future__ import annotations

import datetime as dt
import json
import zipfile
from pathlib import Path

import javaproperties
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Table
from engine.errors import UnsupportedFeatureError
from engine.metadata import record_index as ri
from engine.runtime.errors import translate
from engine.table.meta_client import MetaClient
from tests.support import (
    column_stats,
    hudi1x,
    hudi_rs,
    metadata_checks,
    partition_stats,
    record_index,
    secondary_index,
)
from tests.support.tables import tree_bytes

pytestmark = pytest.mark.spark

# fixture -> (error type, text in its message): what this engine does not read yet
REFUSED: dict[str, tuple[type[Exception], str]] = {}
# fixtures shipped without Spark's reading (`gold_data/`): compared with hudi-rs's snapshot instead
NO_GOLD = {"quickstart_trips_table/mor/avro/table_hfile_log_block"}


def _properties(archive: Path) -> dict[str, str] | None:
    with zipfile.ZipFile(archive) as zf:
        try:
            return javaproperties.loads(zf.read(f"{archive.stem}/.hoodie/hoodie.properties").decode("utf-8"))
        except KeyError:
            return None


@pytest.fixture(scope="module")
def versioned() -> dict[str, dict[str, str]]:
    """fixture name -> its hoodie.properties, for every version 8 or 9 table hudi-rs ships."""
    data = hudi1x.data_dir()
    out = {}
    for archive in sorted(data.rglob("*.zip")):
        props = _properties(archive)
        if props is not None and props.get("hoodie.table.version") in ("8", "9"):
            out[archive.relative_to(data).as_posix()[:-4]] = props
    return out


def _norm(value):
    if isinstance(value, dt.datetime) and value.tzinfo is not None:  # Spark's gold is naive UTC
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _rows(table: pa.Table, columns: list[str]) -> list[str]:
    return sorted(json.dumps({c: _norm(r[c]) for c in columns}, sort_keys=True, default=str)
                  for r in table.select(columns).to_pylist())


def test_the_fixtures_cover_both_versions_and_both_table_types(versioned):
    versions = [p["hoodie.table.version"] for p in versioned.values()]
    assert versions.count("8") == 7 and versions.count("9") >= 40
    types = {p["hoodie.table.type"] for p in versioned.values()}
    assert types == {"COPY_ON_WRITE", "MERGE_ON_READ"}
    assert set(REFUSED) | NO_GOLD <= set(versioned)


def test_every_fixture_reads_as_spark_read_it(spark, versioned, tmp_path):
    checked, lance = [], []
    for name, props in versioned.items():
        fx = hudi1x.fixture(name, tmp_path / name.replace("/", "__"))
        table = Table.open(spark, str(fx.table))
        if props.get("hoodie.table.base.file.format", "PARQUET").upper() == "LANCE":
            with pytest.raises(UnsupportedFeatureError, match="base file format LANCE is not read"):
                table.read()
            lance.append(name)
            continue
        if name in REFUSED:
            error, text = REFUSED[name]
            with pytest.raises(Exception) as refused:  # raised in a Spark task: rebuilt by translate
                table.read().collect()
            typed = translate(refused.value)
            assert isinstance(typed, error) and text in str(typed), (name, str(refused.value)[:500])
            assert str(fx.table) in str(typed), name  # names the file
            continue
        ours = table.read().toArrow()
        if name in NO_GOLD:
            assert fx.gold is None, name
            gold = hudi_rs.arrow_snapshot(str(fx.table))
        else:
            assert fx.gold is not None, name
            gold = pq.read_table(sorted(fx.gold.glob("*.parquet"))[0])
        assert set(gold.column_names) <= set(ours.column_names), name
        assert ours.num_rows == gold.num_rows, (name, ours.num_rows, gold.num_rows)
        assert _rows(ours, gold.column_names) == _rows(gold, gold.column_names), name
        checked.append(name)
    assert len(checked) == 50 and len(lance) == 6
    # among them the two Apache Hudi wrote with schema evolution on write (a column added; int ->
    # long and float -> double promotions), base files and log blocks under both schemas
    assert {"quickstart_trips_table/mor/avro/table_evo_add_col", "quickstart_trips_table/mor/avro/table_evo_promotion"} <= set(checked)


def test_time_travel_to_every_write_and_an_incremental_pull_agree_with_hudi_rs(spark, versioned, tmp_path):
    """Every fixture hudi-rs reads (all 50 but the Lance ones): a snapshot as of each completed write,
    and the incremental pull after the first one, equal hudi-rs's row for row."""
    checked = 0
    for name, props in versioned.items():
        if props.get("hoodie.table.base.file.format", "PARQUET").upper() == "LANCE":
            continue
        fx = hudi1x.fixture(name, tmp_path / name.replace("/", "__"))
        table = Table.open(spark, str(fx.table))
        instants = [i.time for i in table.meta.timeline().completed_writes]
        if not instants:  # sample_table/*/v8_empty: no write completed
            assert table.read().count() == 0 and not hudi_rs.snapshot(str(fx.table)), name
        for instant in instants:
            ours = table.read(as_of=instant).toArrow()
            theirs = hudi_rs.arrow_snapshot(str(fx.table), as_of=instant)
            columns = [c for c in (theirs.column_names if theirs is not None else []) if c in ours.column_names]
            assert ours.num_rows == (theirs.num_rows if theirs is not None else 0), (name, instant)
            if theirs is not None:
                # we read time travel in the schema of the instant, as Apache Hudi's Spark relation
                # does; hudi-rs 0.5 in the latest one (v9_timebasedkeygen_epochmillis: ts_millis long,
                # later string): compare our values in hudi-rs's types
                ours = ours.select(columns).cast(theirs.select(columns).schema)
                assert _rows(ours, columns) == _rows(theirs, columns), (name, instant)
        if len(instants) > 1 and props.get("hoodie.populate.meta.fields", "true") != "false":
            ours_inc = table.read_incremental(instants[0]).toArrow()
            theirs_inc = hudi_rs.incremental(str(fx.table), instants[0])
            keys = sorted(r["_hoodie_record_key"] for r in theirs_inc)
            assert sorted(r["_hoodie_record_key"] for r in ours_inc.to_pylist()) == keys, name
        checked += 1
    assert checked == 50


def test_the_timeline_carries_completion_times_from_the_file_names(tmp_path):
    fx = hudi1x.fixture("sample_table/cow/v8_nonpartitioned", tmp_path)
    meta = MetaClient.open(str(fx.table))
    assert meta.layout.version == 2 and meta.layout.folder == ".hoodie/timeline"
    files = sorted(p.name for p in (fx.table / ".hoodie" / "timeline").iterdir() if p.name.endswith(".commit"))
    completed = [(i.time, i.completion_time) for i in meta.timeline().completed_writes]
    assert [f"{t}_{c}.commit" for t, c in completed] == files
    assert all(c > t for t, c in completed)
    stats = meta.commit_metadata(completed[0][0]).write_stats  # Avro commit metadata
    assert [s.numInserts for s in stats] == [3]


@pytest.mark.parametrize("name", ["quickstart_trips_table/mor/avro/v8_trips_8i3u1d",
                                  "sample_table/mor/avro/v9_txns_simple_meta"])
def test_compaction_keeps_what_hudi_rs_reads_and_archival_finds_nothing_to_do(spark, name, tmp_path):
    fx = hudi1x.fixture(name, tmp_path)
    table = Table.open(spark, str(fx.table))
    _batch, _column, _original, again = _changed_and_added(spark, table)
    table.upsert(again)  # an update: a log file to compact
    before = _oracle(fx.table)
    plan = table.maintenance.schedule_compaction()
    assert plan is not None and plan.operations
    result = table.maintenance.run_compaction(plan.instant, spark=spark)
    assert result.log_files_compacted >= 1
    assert _oracle(fx.table) == before
    done = [p for p in (fx.table / ".hoodie" / "timeline").iterdir() if p.name.startswith(f"{plan.instant}_")]
    assert len(done) == 1 and done[0].name.endswith(".commit") and done[0].read_bytes()[:4] == b"Obj\x01"
    files = tree_bytes(fx.table)
    # fewer completed commits than hoodie.keep.max.commits (30): nothing archived, nothing written
    # (archival itself: tests/integration/test_lsm_archival.py)
    assert table.maintenance.archive() == []
    assert tree_bytes(fx.table) == files


# windows of hudi-rs's incremental regression tests (bounds are completion times in Apache Hudi 1.x)
C3_REQUESTED, C3_COMPLETED = "20260808010723246", "20260808010723734"
WINDOWS = {
    "quickstart_trips_table/mor/avro/v8_mor_boundary_windows": {
        "between_commits": ("20260808010722500", "20260808010724000"),
        "start_on_completion": (C3_COMPLETED, "20260808010725000"),
        "start_on_requested": (C3_REQUESTED, "20260808010724000"),
        "requested_to_completion": (C3_REQUESTED, C3_COMPLETED),
    },
    "quickstart_trips_table/mor/avro/v9_mor_compacted_incremental": {
        "after_insert_through_c": ("20260807223524868", "20260807223530767"),
        "through_compaction": ("20260807223524868", "20260807223529586"),
        "only_b": ("20260807223528666", "20260807223529143"),
    },
}


def _gold(folder: Path) -> pa.Table:
    return pq.read_table(sorted(folder.glob("*.parquet"))[0])


def _same(ours: pa.Table, gold: pa.Table, what: str) -> None:
    assert set(gold.column_names) <= set(ours.column_names), what
    assert ours.num_rows == gold.num_rows, (what, ours.num_rows, gold.num_rows)
    assert _rows(ours, gold.column_names) == _rows(gold, gold.column_names), what


def test_read_optimized_and_incremental_reads_match_spark(spark, versioned, tmp_path):
    checked = 0
    for name in versioned:
        fx = hudi1x.fixture(name, tmp_path / name.replace("/", "__"))
        manifest = fx.table.parent / "gold_options" / "manifest.json"
        if name in REFUSED or not manifest.exists():
            continue
        table = Table.open(spark, str(fx.table))
        for case in json.loads(manifest.read_text())["cases"]:
            folder = fx.table.parent / "gold_options" / case["name"]
            if case.get("read_optimized"):
                _same(table.read(read_optimized=True).toArrow(), _gold(folder), f"{name} read_optimized")
            elif "start_timestamp" in case:
                ours = table.read_incremental(case["start_timestamp"], case["end_timestamp"]).toArrow()
                _same(ours, _gold(folder), f"{name} {case['name']}")
            else:
                continue
            checked += 1
        for window, (start, end) in WINDOWS.get(name, {}).items():
            ours = table.read_incremental(start, end).toArrow()
            _same(ours, _gold(fx.table / "gold_incremental" / window), f"{name} {window}")
            checked += 1
    assert checked >= 60


MARK = {"string": "changed by hoodie", "integer": 424242, "long": 424242}
MARK2 = {"string": "changed again", "integer": 434343, "long": 434343}


def _changed_and_added(spark, table: Table):
    """A batch that changes one non-key string column of one record and adds one record (a new key)."""
    from pyspark.sql import functions as F

    cfg = table.meta.config
    data = table.read().drop(*[c for c in table.read().columns if c.startswith("_hoodie_")])
    fixed = set(cfg.record_key_fields) | set(cfg.partition_fields) | {cfg.precombine_field}
    free = [f for f in data.schema.fields if f.name not in fixed]
    field = next((f for f in free if f.dataType.typeName() == "string"), None) or next(
        f for f in free if f.dataType.typeName() in ("integer", "long"))
    column = field.name
    # the first key stored once (v9_timebasedkeygen_epochmillis holds TXN-001 twice: Hudi inserted it twice)
    once = data.groupBy(*cfg.record_key_fields).count().filter(F.col("count") == 1).drop("count")
    first = data.join(once, list(cfg.record_key_fields)).orderBy(*cfg.record_key_fields).limit(1).select(*data.columns)
    changed = first.withColumn(column, F.lit(MARK[field.dataType.typeName()]).cast(field.dataType))
    key = cfg.record_key_fields[0]
    kind = data.schema[key].dataType.typeName()
    added = first.withColumn(key, F.lit("NEW-KEY-1") if kind == "string" else (F.col(key) + 1_000_000).cast(kind))
    return changed.unionByName(added), column, first.collect()[0], first.withColumn(
        column, F.lit(MARK2[field.dataType.typeName()]).cast(field.dataType))


def _oracle(path: Path) -> list[dict]:
    return sorted(({k: _norm(v) for k, v in r.items() if not k.startswith("_hoodie_")} for r in
                   hudi_rs.snapshot(str(path))), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def test_upsert_then_rollback_agree_with_hudi_rs(spark, versioned, tmp_path):
    """Every copy-on-write and merge-on-read fixture of the sample and trips tables (not the
    `table_*` feature fixtures, which the read tests cover)."""
    written = []
    for name, props in versioned.items():
        if "lance" in name or name.endswith("v8_empty") or "/table_" in name:
            continue
        fx = hudi1x.fixture(name, tmp_path / name.replace("/", "__"))
        table = Table.open(spark, str(fx.table))
        before = _oracle(fx.table)
        files = tree_bytes(fx.table)
        batch, column, original, again = _changed_and_added(spark, table)
        try:
            result = table.upsert(batch)
        except Exception as exc:  # refused before writing: the reason is typed and the table untouched
            assert tree_bytes(fx.table) == files, name
            written.append((name, f"refused: {type(exc).__name__}"))
            continue
        after = _oracle(fx.table)
        assert len(after) == len(before) + 1, name
        metadata_checks.in_step(fx.table, name)
        changed = [r for r in after if r[column] in MARK.values()]
        assert len(changed) == 1, name  # the one changed value
        assert all(changed[0][k] == original[k] for k in table.meta.config.record_key_fields), name
        # the changed record lost its old value, the added record (a copy under a new key) has it
        assert sum(1 for r in after if r[column] == original[column]) == sum(
            1 for r in before if r[column] == original[column]), name
        # version and layout kept: a completed file named with its completion time, Avro metadata
        assert javaproperties.loads((fx.table / ".hoodie" / "hoodie.properties").read_text())[
            "hoodie.table.version"] == props["hoodie.table.version"], name
        action = "commit" if props["hoodie.table.type"] == "COPY_ON_WRITE" else "deltacommit"
        done = [p.name for p in (fx.table / ".hoodie" / "timeline").iterdir() if p.name.startswith(f"{result.instant}_")]
        assert len(done) == 1 and done[0].endswith(f".{action}"), (name, done)
        assert _rows(table.read().toArrow().drop_columns(
            [c for c in table.read().columns if c.startswith("_hoodie_")]), list(after[0])) == sorted(
            json.dumps({c: r[c] for c in after[0]}, sort_keys=True, default=str) for r in after), name
        if action == "deltacommit":  # an update alone goes to a log file named with the deltacommit
            second = table.upsert(again)
            logs = [p.name for p in fx.table.rglob(f".*_{second.instant}.log.1_*") if ".hoodie" not in p.parts]
            assert len(logs) == 1, (name, logs)
            updated = _oracle(fx.table)
            assert [r[column] for r in updated if r[column] in MARK2.values()] == [
                MARK2[table.read().schema[column].dataType.typeName()]], name
            assert len(updated) == len(after), name
            metadata_checks.in_step(fx.table, name)
            table.maintenance.rollback(second.instant)
            assert not [p for p in fx.table.rglob(f".*_{second.instant}.log.1_*") if ".hoodie" not in p.parts], name
            assert _oracle(fx.table) == after, name
            metadata_checks.in_step(fx.table, name)
        assert (fx.table / ".hoodie" / "timeline" / done[0]).read_bytes()[:4] == b"Obj\x01", name
        assert not (fx.table / ".hoodie" / f"{result.instant}.commit").exists(), name  # nothing in layout 1
        table.maintenance.rollback(result.instant)
        assert _oracle(fx.table) == before, name
        metadata_checks.in_step(fx.table, name)
        written.append((name, "written"))
    # every fixture is written now: the TimestampBasedKeyGenerator ones (test_timestamp_keygen.py
    # also checks the folder a new record lands in) and the one without meta fields (test_virtual_keys.py)
    refused: set[str] = set()
    assert dict(written) == {name: "refused: InvalidConfigError" if name in refused else "written"
                             for name, _ in written}
    assert len(written) == 28


def test_a_write_keeps_the_metadata_table_hudi_rs_lists_through(spark, tmp_path):
    """Issue 35: hudi-rs lists a version 9 table's files through its metadata table when the
    properties name its `files` partition. Our upsert keeps the metadata table: its files
    partition gets a deltacommit at the upsert's instant, the partitions this engine does not keep
    are dropped alone (properties, index definitions, folders), and hudi-rs, listing through it,
    sees the write. The control puts the metadata table as it was before the write back: hudi-rs
    then misses the write, so it did list through ours."""
    import shutil

    from engine.metadata.reader import MetadataTableReader

    name = "sample_table/cow/v9_txns_simple_meta"
    fx = hudi1x.fixture(name, tmp_path / "written")
    pristine = hudi1x.fixture(name, tmp_path / "pristine").table
    props = fx.table / ".hoodie" / "hoodie.properties"
    assert "files" in javaproperties.loads(props.read_text())["hoodie.table.metadata.partitions"].split(",")
    before = _oracle(fx.table)
    table = Table.open(spark, str(fx.table))
    batch, _column, _original, _again = _changed_and_added(spark, table)
    result = table.upsert(batch)

    # every index its owners built is kept: nothing to repair, nothing dropped
    assert result.repaired is None
    indexes = ["column_stats", "files", "partition_stats", "record_index", "secondary_index_merchant_idx",
               "secondary_index_txn_date_idx"]
    assert javaproperties.loads(props.read_text())["hoodie.table.metadata.partitions"] == ",".join(indexes)
    assert sorted(p.name for p in (fx.table / ".hoodie" / "metadata").iterdir()) == [".hoodie", *indexes]
    defs = json.loads((fx.table / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]
    assert sorted(defs) == ["column_stats", "record_index", "secondary_index_merchant_idx", "secondary_index_txn_date_idx"]
    # the secondary indexes hold the write's new record under its merchant and date
    found = secondary_index.check(MetaClient.open(str(fx.table)))
    new_keys = {k for keys in found.values() for k in keys if k.endswith("$NEW-KEY-1")}
    assert len(new_keys) == 2, new_keys
    # the column statistics hold the write's new base file's ranges
    held = column_stats.check(MetaClient.open(str(fx.table)))
    assert {v["columnName"] for v in held.values() if v["fileName"].endswith(f"_{result.instant}.parquet")} == set(
        defs["column_stats"]["sourceFields"])
    # the partition statistics of the partitions the write touched end at its commit time
    touched = {p for p, stats in MetaClient.open(str(fx.table)).commit_metadata(result.instant).partition_to_write_stats.items()
               if stats}
    ranges = partition_stats.check(MetaClient.open(str(fx.table)))
    latest = {v["fileName"]: v["maxValue"]["value"] for v in ranges.values() if v["columnName"] == "_hoodie_commit_time"}
    assert touched and all(latest[p] == result.instant for p in touched)
    assert sorted(latest) == ["region=apac", "region=eu", "region=us"]
    # the record index holds the write's new key at its file group, written at the write's instant
    locations = record_index.check(MetaClient.open(str(fx.table)))
    new_keys = [k for k, loc in locations.items() if loc.instant_millis == ri.instant_millis(result.instant)]
    assert len(new_keys) == 1
    done = [p.name for p in (fx.table / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir()
            if p.name.startswith(f"{result.instant}_")]
    assert len(done) == 1 and done[0].endswith(".deltacommit")
    assert [p.name for p in (fx.table / ".hoodie" / "metadata" / "files").glob(f".files-0000-0_{result.instant}.log.*")] == [
        f".files-0000-0_{result.instant}.log.1_0-0-0"]
    after = _oracle(fx.table)
    assert len(after) == len(before) + 1  # hudi-rs, listing through the metadata table, sees the write
    meta = MetaClient.open(str(fx.table))
    listed = MetadataTableReader(meta, meta.timeline()).file_listing()
    assert any(n.endswith(f"_{result.instant}.parquet") for files in listed.values() for n in files)

    shutil.rmtree(fx.table / ".hoodie" / "metadata")
    shutil.copytree(pristine / ".hoodie" / "metadata", fx.table / ".hoodie" / "metadata")
    assert len(_oracle(fx.table)) == len(before)  # the metadata table as it was hides the write
