"""Pending clustering plans (scheduled by Apache Hudi): the file groups they are going to rewrite.

Table version 6 records clustering as a replacecommit: `T.replacecommit.requested` holds an Avro
`HoodieRequestedReplaceMetadata` whose `operationType` is `CLUSTER` and whose `clusteringPlan`
lists the input file slices (Hudi 1.x names the action `clustering`). Until T completes, the
plan's file groups must not be updated: executing the plan rewrites them from the slices it
listed and replaces them, which would drop any later update. Apache Hudi's writers refuse such
updates (`SparkRejectUpdateStrategy`) and keep those groups out of small-file packing; we do the
same. A pending clustering is a table service, not a failed write: repair leaves it alone (Hudi
executes it, or `hoodie rollback` removes it).

The requested file of an insert_overwrite replacecommit is empty (older Hudi) or an empty
`HoodieRequestedReplaceMetadata` (operationType "", no plan: what `engine.write.commit` writes).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import CorruptTableError
from engine.table.fs_view import FileSystemView
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

REQUESTED_MODEL = "HoodieRequestedReplaceMetadata"
CLUSTER_OPERATION = "CLUSTER"


@dataclass(frozen=True)
class PendingClustering:
    """A clustering plan that has not completed: its instant and input (partition, file id) groups."""

    instant: Instant
    groups: frozenset[tuple[str, str]]


def parse_requested_replace(data: bytes) -> frozenset[tuple[str, str]] | None:
    """The input file groups of a requested replacecommit's clustering plan; None when the file
    does not describe a clustering (empty, as insert_overwrite writes it, or another operation)."""
    from engine.timeline import avro_models

    if not data.strip():
        return None
    record = avro_models.deserialize(REQUESTED_MODEL, data)
    if str(record.get("operationType") or "").upper() != CLUSTER_OPERATION:
        return None
    plan = record.get("clusteringPlan") or {}
    groups = set()
    for group in plan.get("inputGroups") or []:
        for sl in group.get("slices") or []:
            if sl.get("fileId"):
                groups.add((sl.get("partitionPath") or "", sl["fileId"]))
    return frozenset(groups)


def held_by_services(meta: MetaClient, timeline: Timeline, view: FileSystemView) -> set[tuple[str, str]]:
    """The (partition, file id) groups a pending compaction or clustering holds: no other table
    service may plan them."""
    return set(view.pending_compaction) | {g for c in pending_clustering(meta, timeline) for g in c.groups}


def pending_clustering(meta: MetaClient, timeline: Timeline) -> list[PendingClustering]:
    """The table's pending clustering plans, oldest first."""
    out = []
    for inst in timeline.pending.instants:
        if inst.action not in (Action.REPLACE_COMMIT, Action.CLUSTERING):
            continue
        requested = Instant(inst.time, inst.action, State.REQUESTED)
        try:
            data = meta.storage.read_bytes(meta.instant_path(requested))
        except FileNotFoundError:
            continue  # no plan on disk: nothing this instant could rewrite later
        try:
            groups = parse_requested_replace(data)
        except CorruptTableError as exc:
            raise CorruptTableError(
                f"{meta.storage.uri(meta.instant_path(requested))}: cannot tell whether it schedules a "
                f"clustering: {exc}"
            ) from exc
        if groups is None and inst.action is Action.CLUSTERING:
            groups = frozenset()
        if groups is not None:
            out.append(PendingClustering(inst, groups))
    return out
