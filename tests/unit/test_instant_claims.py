"""Instant times are unique and strictly increasing per table, even across processes."""

from __future__ import annotations

import multiprocessing as mp
from datetime import UTC, datetime

from engine.config.table_config import TableConfig
from engine.storage import storage_for
from engine.table.meta_client import MetaClient
from engine.timeline import Action, State
from engine.write import commit
from engine.write.operation import Operation
from engine.write.planner import WritePlan

EMPTY_PLAN = WritePlan(buckets=(), insert_ranges={}, record_size=100)


def _claim_many(path: str, n: int, frozen: bool, out) -> None:
    meta = MetaClient.open(path)
    claimed = []
    for _ in range(n):
        now = datetime(2026, 1, 1, tzinfo=UTC) if frozen else None
        pending = commit.start(meta, meta.timeline(), Operation.UPSERT, EMPTY_PLAN, now=now)
        claimed.append(pending.instant)
    out.put(claimed)


def _run(path: str, procs: int, n: int, frozen: bool) -> list[list[str]]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    workers = [ctx.Process(target=_claim_many, args=(path, n, frozen, queue)) for _ in range(procs)]
    for w in workers:
        w.start()
    results = [queue.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    return results


def _table(tmp_path) -> str:
    path = str(tmp_path / "t")
    MetaClient.create(storage_for(path), TableConfig(name="t", record_key_fields=("id",)))
    return path


def test_concurrent_processes_never_share_an_instant(tmp_path):
    path = _table(tmp_path)
    results = _run(path, procs=4, n=15, frozen=False)
    everything = [i for r in results for i in r]
    assert len(everything) == len(set(everything)) == 60
    for claimed in results:  # each process sees its own instants strictly increasing
        assert claimed == sorted(claimed) and len(set(claimed)) == len(claimed)
    timeline = MetaClient.open(path).timeline()
    assert sorted(i.time for i in timeline) == sorted(everything)
    assert all(i.action is Action.COMMIT and i.state is State.INFLIGHT for i in timeline)


def test_a_frozen_clock_still_yields_distinct_increasing_instants(tmp_path):
    """Every process reads the same instant from its clock; claims bump past the timeline's last."""
    path = _table(tmp_path)
    results = _run(path, procs=3, n=10, frozen=True)
    everything = sorted(i for r in results for i in r)
    assert len(set(everything)) == 30
    assert everything[0] == "20260101000000000"
    assert everything[-1] == "20260101000000029"
    for claimed in results:
        assert claimed == sorted(claimed)


def test_without_an_archive_files_older_than_the_timeline_are_debris():
    """Archived commits explain files older than the first instant; without an archive they are
    what a failed (and cleaned-up) first write left, and must stay hidden."""
    from engine.timeline import Timeline

    names = ["20260101000000000.commit.requested", "20260101000000000.inflight", "20260101000000000.commit"]
    assert Timeline.from_file_names(names, has_archive=True).is_visible("20251231000000000")
    assert not Timeline.from_file_names(names, has_archive=False).is_visible("20251231000000000")
    assert Timeline.from_file_names(names, has_archive=False).is_visible("20260101000000000")
