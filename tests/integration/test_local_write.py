"""The local write (`engine.write.local`) with Arrow and pandas input and no Spark session: rows
hudi-rs reads back, typed errors for bad input that leave the table as it was, a batch above the
bound refused without a session, a failing bucket undone, and no JVM started."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from engine import Table
from engine.errors import InvalidConfigError, InvalidInputError, SchemaMismatchError, StorageError
from engine.write import bucket_work
from tests.support import hudi_rs
from tests.support.tables import tree_bytes

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("city", pa.string()), ("ts", pa.int64())])


def _batch(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], SCHEMA)


def _table(tmp_path: Path, **kw) -> Table:
    args = dict(name="t", record_key="id", partition_fields="city", precombine_field="ts", **kw)
    return Table.create(None, str(tmp_path / "t"), **args)


def _oracle(table: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(table.path))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_arrow_and_pandas_writes_without_spark(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path, table_type=table_type)
    first = t.upsert(_batch([(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "paris", 1)]))
    assert (first.write_path, first.inserts, first.files_written, first.partitions) == ("local", 3, 2, ("paris", "rome"))
    frame = pd.DataFrame({"id": [1, 4, 2], "name": ["a2", "d", "stale"], "city": ["paris", "oslo", "rome"], "ts": [2, 2, 0]})
    second = t.upsert(frame)
    assert (second.write_path, second.inserts, second.updates, second.stale_ignored) == ("local", 1, 1, 1)
    third = t.delete(pa.RecordBatch.from_pylist([{"id": 3, "city": "paris", "ts": 9}, {"id": 99, "city": "rome", "ts": 9}]))
    assert (third.deletes, third.absent_deletes) == (1, 1)
    assert _oracle(t) == [(1, "a2", "paris", 2), (2, "b", "rome", 1), (4, "d", "oslo", 2)]
    tl = t.timeline()
    assert [i.state.value for i in tl.instants] == ["completed"] * 3
    action = "deltacommit" if table_type == "MERGE_ON_READ" else "commit"
    assert {i.action.value for i in tl.instants} == {action}
    assert t.spark is None  # nothing asked for a session


def _unchanged(t: Table, before: dict[str, bytes]) -> None:
    assert tree_bytes(t.path) == before


@pytest.mark.parametrize(
    ("frame", "error", "message"),
    [
        (pa.table({"id": pa.array([1], pa.uint64()), "name": ["a"], "city": ["paris"], "ts": [1]}), InvalidInputError,
         "type Spark does not read"),
        (_batch([(None, "a", "paris", 1), (5, "e", "rome", 1)]), InvalidInputError, "1 input record\\(s\\) have a null or empty record key"),
        (pa.table({"name": ["a"], "city": ["paris"], "ts": [1]}), InvalidInputError, "the input has no record key column 'id'"),
        ([{"id": 1}], InvalidInputError, "expected a Spark DataFrame, a pyarrow Table or a pandas DataFrame, got list"),
        (pa.table({"id": [7], "name": [1.5], "city": ["paris"], "ts": [1]}), SchemaMismatchError,
         "column 'name' is double in the input but string in the table"),
    ],
    ids=["uint64", "null-key", "missing-key", "list", "wrong-type"],
)
def test_bad_input_is_refused_and_changes_nothing(tmp_path: Path, frame, error, message) -> None:
    t = _table(tmp_path)
    t.upsert(_batch([(1, "a", "paris", 1)]))
    before = tree_bytes(t.path)
    with pytest.raises(error, match=message):
        t.upsert(frame)
    _unchanged(t, before)
    assert _oracle(t) == [(1, "a", "paris", 1)]


def test_a_batch_above_the_bound_needs_a_session(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_batch([(i, f"n{i}", "paris", 1) for i in range(50)]))
    before = tree_bytes(t.path)
    with pytest.raises(InvalidConfigError, match=r"above hoodie.write.local.max.bytes \(1000\), and the table has no SparkSession"):
        t.upsert(_batch([(1, "x", "paris", 2)]), options={"hoodie.write.local.max.bytes": "1000"})
    _unchanged(t, before)
    with pytest.raises(InvalidConfigError, match="needs Spark .* the table has no SparkSession"):
        t.insert_overwrite(_batch([(1, "x", "paris", 2)]))
    _unchanged(t, before)
    with pytest.raises(InvalidConfigError, match="hoodie.write.local must be one of auto, always, never, not 'maybe'"):
        t.upsert(_batch([(1, "x", "paris", 2)]), options={"hoodie.write.local": "maybe"})
    _unchanged(t, before)


def test_a_failing_bucket_undoes_the_write(tmp_path: Path, monkeypatch) -> None:
    t = _table(tmp_path)
    t.upsert(_batch([(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "oslo", 1)]))
    before = tree_bytes(t.path)
    real = bucket_work.write_one
    calls: list[str] = []

    def failing(ctx, actx, bucket, table, index, token, task):
        calls.append(bucket.partition)
        if bucket.partition == "rome":
            raise OSError("disk full")
        return real(ctx, actx, bucket, table, index, token, task)

    monkeypatch.setattr(bucket_work, "write_one", failing)
    with pytest.raises(StorageError, match=r"write of instant \d+ failed and was rolled back: .*disk full"):
        t.upsert(_batch([(1, "a2", "paris", 2), (2, "b2", "rome", 2), (3, "c2", "oslo", 2)]),
                 options={"hoodie.write.local.threads": "1"})
    assert "rome" in calls
    monkeypatch.undo()
    assert _oracle(t) == [(1, "a", "paris", 1), (2, "b", "rome", 1), (3, "c", "oslo", 1)]
    data_files = {k for k in tree_bytes(t.path) if not k.startswith(".hoodie")}
    assert data_files == {k for k in before if not k.startswith(".hoodie")}  # no file of the failed write stays
    assert [i.state.value for i in t.timeline().instants] == ["completed"]


def test_arrow_types_are_written_as_spark_types_them(tmp_path: Path) -> None:
    """Naive timestamps are UTC (as `spark.createDataFrame` reads them with the engine's session
    time zone), large strings are strings, dictionaries are decoded."""
    t = _table(tmp_path)
    frame = pa.table({
        "id": pa.array([1, 2], pa.int64()),
        "name": pa.array(["a", "b"], pa.large_string()),
        "city": pa.array(["paris", "rome"]).dictionary_encode(),
        "ts": pa.array([1, 2], pa.int64()),
        "at": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5), None], pa.timestamp("ns")),
    })
    t.upsert(frame)
    schema = t.schema()
    assert schema is not None
    assert (schema.field("name").type, schema.field("city").type, schema.field("at").type) == (
        pa.string(), pa.string(), pa.timestamp("us", tz="UTC"))
    got = sorted((r["id"], r["city"], r["at"]) for r in hudi_rs.snapshot(t.path))
    assert got[0][:2] == (1, "paris") and got[0][2].replace(tzinfo=None) == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert got[1] == (2, "rome", None)


def test_an_arrow_write_starts_no_jvm(tmp_path: Path) -> None:
    script = f"""
import json, pyarrow as pa
from pyspark import SparkContext
from engine import Table
t = Table.create(None, {str(tmp_path / "t")!r}, name="t", record_key="id", partition_fields="city", precombine_field="ts")
r1 = t.upsert(pa.table({{"id": [1, 2], "city": ["x", "y"], "ts": [1, 1]}}))
r2 = t.delete(pa.table({{"id": [2], "city": ["y"], "ts": [2]}}))
print(json.dumps([r1.write_path, r1.inserts, r2.deletes, SparkContext._gateway is None, SparkContext._jvm is None]))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["local", 2, 1, True, True]
