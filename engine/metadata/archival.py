"""How far archival may go with Apache Hudi's metadata table (`TimelineArchiverV2`'s rules), for
the data table's archival and the metadata table's own (`engine.services.metadata_archive`).

- The data table's archival never passes the latest compaction of its metadata table: it stops
  below the first write completed after it (with no compaction yet, nothing is archived).
- The metadata table's archival never reaches its latest compaction (the deltacommits after it
  are in log files readers merge, by valid instant), nor the earliest write or the earliest
  pending instant of the data table's active timeline (a rollback of a data instant needs its
  deltacommit).
"""

from __future__ import annotations

from engine.metadata.writer import open_metadata_table
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action
from engine.timeline.timeline import Timeline

NOTHING = ""  # a bound below every instant: nothing is archived


def latest_compaction(timeline: Timeline) -> str | None:
    """The latest completed compaction of a metadata table's timeline."""
    done = [i.time for i in timeline.completed.instants if i.action is Action.COMMIT]
    return max(done) if done else None


def data_table_bound(meta: MetaClient, timeline: Timeline) -> str | None:
    """The instant the data table's archival stops below (None: no metadata table, no bound;
    NOTHING: its metadata table has no compaction yet)."""
    mdt = open_metadata_table(meta)
    if mdt is None:
        return None
    compacted = latest_compaction(mdt.timeline())
    if compacted is None:
        return NOTHING
    done = timeline.completion_times
    after = sorted(i.time for i in timeline.completed_writes.instants if done.get(i.time, i.time) > compacted)
    return after[0] if after else None


def metadata_table_bound(data: Timeline, mdt_timeline: Timeline) -> str:
    """The instant the metadata table's archival stops below (NOTHING: no compaction yet)."""
    compacted = latest_compaction(mdt_timeline)
    if compacted is None:
        return NOTHING
    bounds = [compacted]
    first_write = next((i.time for i in data.instants if i.action.is_write), None)
    if first_write is not None:
        bounds.append(first_write)
    bounds += [i.time for i in data.pending.instants]
    return min(bounds)


__all__ = ["NOTHING", "data_table_bound", "latest_compaction", "metadata_table_bound"]
