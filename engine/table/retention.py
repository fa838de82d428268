"""What the newest completed clean retained: the oldest commit whose snapshot it kept readable.

Read by clean (planning the next), savepoints (refusing one a clean already broke), archival
(never archiving past it) and time travel (refusing a snapshot it no longer holds). A module of
its own so that clean and savepoint, which each need the other's facts, do not import each other.
"""

from __future__ import annotations

from engine.table.lifecycle import read_avro
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action
from engine.timeline.timeline import Timeline

CLEAN_METADATA_MODEL = "HoodieCleanMetadata"


def last_earliest_retained(meta: MetaClient, timeline: Timeline) -> str | None:
    """The earliest commit the newest completed clean retained (archival must keep it)."""
    for inst in reversed(timeline.filter(actions=[Action.CLEAN], completed=True).instants):
        rec = read_avro(meta, inst, CLEAN_METADATA_MODEL)
        return rec.get("earliestCommitToRetain") or None
    return None

