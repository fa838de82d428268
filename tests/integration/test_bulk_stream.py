"""bulk_insert in one pass (`hoodie.bulkinsert.sort.mode` NONE / PARTITION_SORT,
`engine.write.bulk_stream`): one Spark job, a task's own file groups per partition it sees,
rolled over by size; exact rows in ours and hudi-rs; bad keys, an empty input and a failing task
leave the table as it was."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine import InvalidInputError, StorageError, Table
from engine.data.file_names import parse_base_file_name
from tests.support import hudi_rs
from tests.support.tables import rows, tree_bytes, tree_dirs

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
CITIES = ("paris", "rome", "oslo")
DATA = [(i, f"n{i}", CITIES[i % 3], i) for i in range(60)]


def _table(spark, path: Path) -> Table:
    return Table.create(spark, str(path), name="t", record_key="id", partition_fields="city", precombine_field="ts")


def _files(path: Path) -> list[tuple[str, str]]:
    return sorted((p.parent.name, p.name) for p in path.rglob("*.parquet") if ".hoodie" not in p.parts)


def _data(table: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(table.read()))


@pytest.mark.parametrize("mode", ["NONE", "PARTITION_SORT"])
def test_one_pass_bulk_insert_writes_a_tasks_own_file_groups(spark, tmp_path, mode):
    table = _table(spark, tmp_path / "t")
    frame = spark.createDataFrame(DATA, SCHEMA).repartition(2)  # 2 tasks, each sees all 3 cities
    jobs_before = set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
    res = table.bulk_insert(frame, options={"hoodie.bulkinsert.sort.mode": mode})
    # no counting or collecting job outside the write's own job group
    assert set(spark.sparkContext.statusTracker().getJobIdsForGroup(None)) - jobs_before == set()

    assert (res.inserts, res.input_records, res.files_written, res.partitions) == (60, 60, 6, ("oslo", "paris", "rome"))
    files = _files(tmp_path / "t")
    assert len(files) == 6 and {city for city, _n in files} == set(CITIES)
    names = [parse_base_file_name(n) for _c, n in files]
    assert {n.instant for n in names} == {res.instant}  # type: ignore[union-attr]
    # two task prefixes of one stem, each task numbering its files 0, 1, 2 across the cities it saw
    prefixes = {n.file_id.rsplit("-", 1)[0] for n in names}  # type: ignore[union-attr]
    assert len(prefixes) == 2 and len({p[:24] for p in prefixes}) == 1
    assert sorted(n.file_id.rsplit("-", 1)[1] for n in names) == ["0", "0", "1", "1", "2", "2"]  # type: ignore[union-attr]

    assert _data(table) == sorted(DATA)
    assert sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(table.path)) == sorted(DATA)
    meta = table.commit_metadata(res.instant)
    assert meta.operation_type == "BULK_INSERT"
    per_city: dict[str, list[int]] = {}
    for st in meta.write_stats:  # one stat per task and city; round-robin splits each city's 20 rows
        per_city.setdefault(st.partitionPath, []).append(st.numInserts)
    assert {c: (len(n), sum(n)) for c, n in per_city.items()} == {c: (2, 20) for c in CITIES}
    # the inflight file, written before the tasks ran, names no file groups (as Hudi's row writer)
    inflight = json.loads((tmp_path / "t" / ".hoodie" / f"{res.instant}.inflight").read_bytes())
    assert inflight["partitionToWriteStats"] == {} and inflight["operationType"] == "BULK_INSERT"
    # an upsert afterwards finds every key in its file group
    up = table.upsert(spark.createDataFrame([(1, "upd", "rome", 100), (61, "new", "lima", 100)], SCHEMA))
    assert (up.updates, up.inserts) == (1, 1)
    assert _data(table) == sorted([r for r in DATA if r[0] != 1] + [(1, "upd", "rome", 100), (61, "new", "lima", 100)])


def test_one_pass_bulk_insert_rolls_files_over_by_size(spark, tmp_path):
    table = _table(spark, tmp_path / "t")
    frame = spark.createDataFrame(DATA, SCHEMA).coalesce(1)
    options = {
        "hoodie.bulkinsert.sort.mode": "PARTITION_SORT",
        "hoodie.parquet.max.file.size": "8000",
        "hoodie.copyonwrite.record.size.estimate": "1000",  # 8 records a file
    }
    res = table.bulk_insert(frame, options=options)
    # 20 records per city -> files of 8, 8, 4
    counts = sorted((s.partitionPath, s.numInserts) for s in table.commit_metadata(res.instant).write_stats)
    assert counts == sorted((c, n) for c in CITIES for n in (8, 8, 4))
    assert _data(table) == sorted(DATA)


def test_one_pass_bulk_insert_null_key_and_empty_input_leave_the_table(spark, tmp_path):
    table = _table(spark, tmp_path / "t")
    table.upsert(spark.createDataFrame(DATA[:3], SCHEMA))
    before, dirs = tree_bytes(table.path, include_lock=False), tree_dirs(table.path)
    opts = {"hoodie.bulkinsert.sort.mode": "NONE"}
    # the bad rows are in one task, a new city's rows in the other: that task writes and is undone
    good = [(100 + i, "x", city, 1) for i, city in enumerate(("lima", "bern", "oslo", "paris"))]
    bad = spark.createDataFrame([*good, (None, "y", "rome", 1), (None, "z", "rome", 1)], SCHEMA).repartition(3, "city")
    with pytest.raises(InvalidInputError, match=r"2 input record\(s\) have a null or empty record key \(id\)"):
        table.bulk_insert(bad, options=opts)
    assert tree_bytes(table.path) == before and tree_dirs(table.path) == dirs
    assert not (Path(table.path) / ".hoodie" / ".failed_writes").exists()
    res = table.bulk_insert(spark.createDataFrame([], SCHEMA), options=opts)
    assert res.instant is None and res.files_written == 0
    assert tree_bytes(table.path) == before and tree_dirs(table.path) == dirs
    assert _data(table) == sorted(DATA[:3])


def test_one_pass_bulk_insert_failing_task_is_undone(spark, tmp_path):
    table = _table(spark, tmp_path / "t")
    table.upsert(spark.createDataFrame(DATA[:3], SCHEMA))
    (Path(table.path) / "lima").write_text("a file where the partition folder would go")
    before, dirs = tree_bytes(table.path), tree_dirs(table.path)
    frame = spark.createDataFrame([(100, "x", "lima", 1), (101, "y", "bern", 1), (102, "z", "rome", 1)], SCHEMA)
    with pytest.raises(StorageError, match=r"write of instant \d{17} failed and was rolled back") as err:
        table.bulk_insert(frame.repartition(3, "city"), options={"hoodie.bulkinsert.sort.mode": "NONE"})
    # the other tasks' files and the partition folder they created are gone again
    assert tree_bytes(table.path) == before and tree_dirs(table.path) == dirs
    instant = re.search(r"instant (\d{17})", str(err.value)).group(1)  # type: ignore[union-attr]
    record = (Path(table.path) / ".hoodie" / ".failed_writes" / instant).read_text()
    assert '"file_id_stems"' in record and '"groups": []' in record
    assert _data(table) == sorted(DATA[:3])
