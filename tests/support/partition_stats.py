"""The oracle for Apache Hudi's partition_stats partition: each data partition's record replayed
from the data files at the last write that touched it, as Hudi's writer derives it (the write's
files and every other file of the partition's latest slices, with the write's files counted and
the groups it replaces still visible; the column types of the write's schema), compared with what
the metadata table holds."""

from __future__ import annotations

from typing import Any

from engine.metadata import column_stats as cs
from engine.metadata import column_stats_updates as csu
from engine.metadata import partition_stats as ps
from engine.metadata.partition_stats_updates import column_kinds
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline
from tests.support.column_stats import assert_same, held

WRITES = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


def recomputed(meta: MetaClient) -> dict[str, dict[str, Any]]:
    timeline = meta.timeline()
    columns, why = csu.indexed_columns(meta)
    assert columns is not None, why
    writes = sorted((i for i in timeline.completed.instants if i.action in WRITES),
                    key=lambda i: i.completion_time or i.time)
    out: dict[str, dict[str, Any]] = {}
    for write in writes:
        metadata = meta.commit_metadata(write)
        kinds = column_kinds(metadata, columns)
        if metadata.operation_type.upper() == "DELETE_PARTITION":
            for p in metadata.partition_to_replace_file_ids or {}:
                for c in kinds:
                    out[cs.partition_stats_key(p, c)] = cs.comparable(ps.deleted(p, c))
            continue
        done = write.completion_time or write.time
        before = [i for i in timeline.completed.instants if (i.completion_time or i.time) < done]
        as_written = Timeline.from_instants(
            [*before, Instant(write.time, Action.COMMIT, State.COMPLETED, write.completion_time)])
        view = meta.file_system_view(as_written)
        for partition, stats in metadata.partition_to_write_stats.items():
            names = {s.path.rsplit("/", 1)[-1] for s in stats if s.path}
            if not names:
                continue
            names |= {f.rsplit("/", 1)[-1] for sl in view.latest_slices([partition]) for f in sl.files}
            ranges = [r for n in sorted(names) for r in csu.file_ranges(meta.storage, partition, n, kinds)]
            for rec in ps.records_for(partition, kinds, ranges):
                out[rec["key"]] = cs.comparable(rec)
    return out


def check(meta: MetaClient) -> dict[str, dict[str, Any]]:
    """Assert the partition_stats partition equals its replay; return it."""
    meta.reload_config()
    have = held(meta, "partition_stats")
    assert_same(have, recomputed(meta))
    return have
