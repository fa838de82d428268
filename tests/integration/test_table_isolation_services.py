"""No table service of one table deletes a file of another (issue 23), on local disk and on S3.

Hand-made tables (pyarrow, no Spark). A table `inner` is moved into the folder of `outer`, and
its commits carry the very instants the service on `outer` works on, so that a service that
took inner's files for outer's would delete them: rollback and restore (inner wrote at the
instant undone), repair (inner wrote at outer's dead write's instant), clean (inner's file
group has an old version at outer's instants) and archival (inner wrote between outer's
commits). Each case runs twice: as shipped, and with the listing's nested-table check switched
off (as if a listing bug handed inner's files to the service), where `FileOwnership` must
still refuse them and the service must report what it kept.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.services.maintenance import Maintenance
from engine.storage import storage_for
from engine.table.meta_client import MetaClient
from engine.table.ownership import FileOwnership
from engine.timeline.instant import format_instant_time
from tests.support import handmade

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MANUAL = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


@dataclass
class Lake:
    """A folder (local or an S3 prefix) holding the two tables; `files` snapshots one table."""

    base: str
    move: Callable[[str, str], None]  # relative folder -> relative folder
    files: Callable[[str], dict[str, bytes]]  # relative folder -> {relative path: bytes}


def _local_lake(tmp_path: Path) -> Lake:
    def move(src: str, dst: str) -> None:
        shutil.move(str(tmp_path / src), str(tmp_path / dst))

    def files(rel: str) -> dict[str, bytes]:
        root = tmp_path / rel
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
                if p.is_file() and "/.lock/" not in f"/{p.relative_to(root).as_posix()}"}

    return Lake(str(tmp_path), move, files)


def _s3_lake(server) -> Lake:
    bucket = server.create_bucket()
    client = server.client()

    def keys(prefix: str) -> list[str]:
        out = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"lake/{prefix}/"):
            out += [o["Key"] for o in page.get("Contents", [])]
        return out

    def move(src: str, dst: str) -> None:
        for key in keys(src):
            target = f"lake/{dst}/" + key[len(f"lake/{src}/"):]
            client.copy_object(Bucket=bucket, Key=target, CopySource={"Bucket": bucket, "Key": key})
            client.delete_object(Bucket=bucket, Key=key)

    def files(rel: str) -> dict[str, bytes]:
        return {k[len(f"lake/{rel}/"):]: client.get_object(Bucket=bucket, Key=k)["Body"].read()
                for k in sorted(keys(rel)) if "/.hoodie/.lock/" not in k}

    return Lake(f"s3://{bucket}/lake", move, files)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def lake(request, tmp_path, monkeypatch) -> Iterator[Lake]:
    if request.param == "local":
        yield _local_lake(tmp_path)
        return
    server = request.getfixturevalue("s3_server")
    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    yield _s3_lake(server)


@pytest.fixture(params=["shipped", "listing-bug"])
def mode(request, monkeypatch) -> str:
    if request.param == "listing-bug":
        import engine.table.meta_client as meta_client

        monkeypatch.setattr(meta_client, "nested_table_roots", lambda paths: set())
    return request.param


def nest(lake: Lake, inner: handmade.Handmade) -> MetaClient:
    """Move inner's folder into outer's (`outer/nested`); returns outer's MetaClient."""
    lake.move("inner", "outer/nested")
    return MetaClient.open(f"{lake.base}/outer")


def test_rollback_and_restore_of_outer_keep_inner_files(lake, mode):
    outer = handmade.create(f"{lake.base}/outer", name="outer")
    t1 = handmade.add_commit(outer, {"paris": ["new"]}, at=at(0))
    t2 = handmade.add_commit(outer, {"paris": ["new"], "berlin": ["new"]}, at=at(1))
    inner = handmade.create(f"{lake.base}/inner", name="inner")
    assert handmade.add_commit(inner, {"rome": ["new"]}, at=at(1)) == t2  # the same instant as outer's
    meta = nest(lake, inner)
    inner_before = lake.files("outer/nested")
    assert len([p for p in inner_before if p.endswith(f"_{t2}.parquet")]) == 1

    plan = Maintenance(meta, MANUAL).rollback(t2, dry_run=True)
    assert all(not f.startswith("nested/") for f in plan.files) and len(plan.files) == 2
    res = Maintenance(meta, MANUAL).rollback(t2)
    assert sorted(res.deleted) == sorted(plan.files)
    assert lake.files("outer/nested") == inner_before
    assert res.skipped == ([] if mode == "shipped" else [p for p in _paths(lake, "outer") if p.startswith("nested/rome/")])
    assert [i.time for i in MetaClient.open(f"{lake.base}/outer").timeline().completed_writes] == [t1]
    # restore: outer's t3 and t4 rolled back, inner's files at those instants stay
    t3 = handmade.add_commit(outer, {"oslo": ["new"]}, at=at(2))
    inner_meta = MetaClient.open(f"{lake.base}/outer/nested")
    inner2 = handmade.Handmade(f"{lake.base}/outer/nested", inner_meta)
    _commit_at_same_instant(inner2, "lima", at(2))
    inner_before = lake.files("outer/nested")
    result = Maintenance(meta, MANUAL).restore(t1)
    assert result.rolled_back == [t3]
    assert all(not f.startswith("nested/") for fs in result.deleted.values() for f in fs)
    assert lake.files("outer/nested") == inner_before
    assert (result.skipped != []) == (mode == "listing-bug")
    assert [i.time for i in MetaClient.open(f"{lake.base}/outer").timeline().completed_writes] == [t1]


def test_repair_of_a_dead_write_keeps_inner_files(lake, mode):
    outer = handmade.create(f"{lake.base}/outer", name="outer")
    t1 = handmade.add_commit(outer, {"paris": ["new"]}, at=at(0))
    dead = handmade.add_pending(outer, at(1))  # requested + inflight, no heartbeat: a dead writer
    inner = handmade.create(f"{lake.base}/inner", name="inner")
    assert handmade.add_commit(inner, {"paris": ["new"]}, at=at(1)) == dead
    meta = nest(lake, inner)
    inner_before = lake.files("outer/nested")
    report = Maintenance(meta, MANUAL).repair()
    assert report.failed_writes_rolled_back == [dead]
    assert lake.files("outer/nested") == inner_before
    tl = MetaClient.open(f"{lake.base}/outer").timeline()
    assert [i.time for i in tl.completed_writes] == [t1] and not tl.pending.instants


def test_clean_of_outer_keeps_inner_file_versions(lake, mode):
    outer = handmade.create(f"{lake.base}/outer", name="outer")
    inner = handmade.create(f"{lake.base}/inner", name="inner")
    for n, spec in enumerate(({"paris": ["new"]}, {"paris": ["update:0"]}, {"paris": ["update:0"]})):
        handmade.add_commit(outer, spec, at=at(n))
        if n < 2:  # inner's group has two versions, at outer's first two instants
            handmade.add_commit(inner, {"rome": ["new"]} if n == 0 else {"rome": ["update:0"]}, at=at(n))
    meta = nest(lake, inner)
    inner_before = lake.files("outer/nested")
    m = Maintenance(meta, {**MANUAL, "hoodie.cleaner.commits.retained": "1"})
    plan = m.clean(dry_run=True)
    assert [f.split("/")[0] for f in plan.all_files] == ["paris", "paris"]
    assert len(plan.skipped) == (0 if mode == "shipped" else 1)
    result = m.clean()
    assert sorted(result.deleted) == plan.all_files
    assert lake.files("outer/nested") == inner_before
    assert result.skipped == list(plan.skipped)


def test_archival_of_outer_keeps_inner_files(lake, mode):
    outer = handmade.create(f"{lake.base}/outer", name="outer")
    inner = handmade.create(f"{lake.base}/inner", name="inner")
    times = [handmade.add_commit(outer, {"paris": ["new"]}, at=at(2 * n)) for n in range(6)]
    handmade.add_commit(inner, {"rome": ["new"]}, at=at(3))  # between outer's 2nd and 3rd commits
    meta = nest(lake, inner)
    inner_before = lake.files("outer/nested")
    m = Maintenance(meta, {**MANUAL, "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                           "hoodie.cleaner.commits.retained": "1"})
    plan = m.archive(dry_run=True)
    assert plan.debris == ()
    if mode == "shipped":
        assert plan.times == times[:4] and plan.held_back == ()
    else:  # the inner file reached the planner: unexplained, so kept and archival holds back
        assert plan.held_back == tuple(p for p in _paths(lake, "outer") if p.startswith("nested/rome/"))
        assert plan.times == times[:1]
    archived = m.archive()
    assert archived == plan.times
    assert lake.files("outer/nested") == inner_before
    assert sorted(handmade_keys(f"{lake.base}/outer/nested")) == sorted(inner.keys[next(iter(inner.keys))])


def test_ownership_refuses_another_tables_partition_and_odd_names(tmp_path):
    """A partition folder moved in without its table (no `.hoodie/` to see) is recognised by its
    partition metadata's depth; names that are not Hudi file names are never data files."""
    outer = handmade.create(str(tmp_path / "outer"), name="outer")
    handmade.add_commit(outer, {"paris": ["new"]}, at=at(0))
    inner = handmade.create(str(tmp_path / "inner"), name="inner")
    handmade.add_commit(inner, {"rome": ["new"]}, at=at(0))
    shutil.move(str(tmp_path / "inner" / "rome"), str(tmp_path / "outer" / "old" / "rome"))
    own = next(p.relative_to(tmp_path / "outer").as_posix() for p in (tmp_path / "outer" / "paris").glob("*.parquet"))
    moved = next(p.relative_to(tmp_path / "outer").as_posix() for p in (tmp_path / "outer" / "old" / "rome").glob("*.parquet"))
    ownership = FileOwnership(storage_for(str(tmp_path / "outer")))
    assert ownership.foreign_reason(own) is None
    assert ownership.foreign_reason(moved) == (
        "its folder's .hoodie_partition_metadata records partition depth 1, but the folder is 2 deep in this "
        "table (another table's partition)"
    )
    assert ownership.foreign_reason("paris/notes.txt") == "not named as a Hudi base, log or CDC log file"
    assert ownership.foreign_reason(".hoodie/.record_index/x") is None
    assert ownership.owned([own, moved, "paris/notes.txt"], "test") == [own]
    assert ownership.skipped_paths == [moved, "paris/notes.txt"]


# ---- helpers ----------------------------------------------------------------------------------
def _paths(lake: Lake, rel: str) -> list[str]:
    return sorted(p for p in lake.files(rel) if p.endswith(".parquet"))


def _commit_at_same_instant(t: handmade.Handmade, partition: str, moment: datetime) -> str:
    time = handmade.add_commit(t, {partition: ["new"]}, at=moment)
    assert time == format_instant_time(moment)
    return time


def handmade_keys(path: str) -> list[str]:
    import pyarrow.parquet as pq

    storage = storage_for(path)
    out = []
    for info in storage.list_files_recursive(""):
        if info.name.endswith(".parquet") and not info.path.startswith(".hoodie"):
            with storage.open_input_file(info.path) as f:
                out += pq.read_table(f, columns=["_hoodie_record_key"]).column(0).to_pylist()
    return out
