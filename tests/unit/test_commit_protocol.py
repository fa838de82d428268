"""The commit protocol without Spark: start, complete (incl. a retried PUT), abort."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from engine.config.table_config import TableConfig
from engine.errors import CommitConflictError
from engine.storage import storage_for
from engine.table.meta_client import MetaClient
from engine.timeline import Action, State
from engine.write import commit
from engine.write.operation import Operation
from engine.write.outcome import WriteOutcome
from engine.write.planner import Bucket, BucketType, WritePlan

SCHEMA = pa.schema([("id", pa.int64())])
PLAN = WritePlan((Bucket(0, BucketType.INSERT, "p1", "f-0", planned_inserts=1),), {}, 100)
OUTCOME = WriteOutcome(
    path="p1/f-0_0-1-1_20260101000000000.parquet", file_id="f-0", partition="p1", prev_instant=None,
    num_writes=1, num_inserts=1, num_updates=0, num_deletes=0, num_stale=0, file_size=10, min_key=None, max_key=None,
)


@pytest.fixture
def meta(tmp_path) -> MetaClient:
    return MetaClient.create(storage_for(str(tmp_path / "t")), TableConfig(name="t", record_key_fields=("id",)))


def names(meta: MetaClient) -> list[str]:
    return sorted(p.name for p in Path(meta.storage.base_uri, ".hoodie").iterdir())


def test_start_marks_inflight_and_writes_partition_metadata(meta):
    pending = commit.start(meta, meta.timeline(), Operation.UPSERT, PLAN)
    t = pending.instant
    assert names(meta) == [f"{t}.commit.requested", f"{t}.inflight", "hoodie.properties"]
    assert pending.created_partitions == ["p1"]
    assert Path(meta.storage.base_uri, "p1", ".hoodie_partition_metadata").read_text().splitlines()[1:] == [
        f"commitTime={t}", "partitionDepth=1"
    ]
    assert [(i.time, i.state) for i in meta.timeline()] == [(t, State.INFLIGHT)]


def test_a_retried_completion_finds_its_own_commit(meta):
    pending = commit.start(meta, meta.timeline(), Operation.UPSERT, PLAN)
    first = commit.complete(meta, pending, SCHEMA, [OUTCOME], 0)
    # the same PUT again (its answer was lost): the existing file is ours, so this succeeds
    again = commit.complete(meta, pending, SCHEMA, [OUTCOME], 0)
    assert again.to_bytes() == first.to_bytes()
    # other content under the same instant is a genuine conflict
    with pytest.raises(CommitConflictError, match="completed by another writer"):
        commit.complete(meta, pending, SCHEMA, [], 0)
    assert [(i.time, i.action, i.state) for i in meta.timeline()] == [(pending.instant, Action.COMMIT, State.COMPLETED)]


def test_abort_removes_everything_but_never_a_completed_commit(meta):
    before = names(meta)
    pending = commit.start(meta, meta.timeline(), Operation.UPSERT, PLAN)
    data = Path(meta.storage.base_uri, "p1", f"f-0_0-1-1_{pending.instant}.parquet")
    data.write_bytes(b"partial")
    commit.abort(meta, pending)
    assert names(meta) == before
    assert not Path(meta.storage.base_uri, "p1").exists()

    done = commit.start(meta, meta.timeline(), Operation.UPSERT, PLAN)
    Path(meta.storage.base_uri, "p1", f"f-0_0-1-1_{done.instant}.parquet").write_bytes(b"data")
    commit.complete(meta, done, SCHEMA, [replace(OUTCOME, path=f"p1/f-0_0-1-1_{done.instant}.parquet")], 0)
    snapshot = sorted(p.as_posix() for p in Path(meta.storage.base_uri).rglob("*"))
    commit.abort(meta, done)
    assert sorted(p.as_posix() for p in Path(meta.storage.base_uri).rglob("*")) == snapshot
