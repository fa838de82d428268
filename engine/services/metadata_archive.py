"""Archival of Apache Hudi's metadata table, run with the data table's: its oldest completed
deltacommits, compactions and rollbacks move to its own LSM history
(`.hoodie/metadata/.hoodie/timeline/history/`) as the data table's do (`engine.services.archive`),
keeping `hoodie.keep.min.commits` + 1 to `hoodie.keep.max.commits` + 1 of its writes active (the
settings Hudi's metadata writer derives from the data table's, `HoodieMetadataWriteUtils`) and
never reaching its latest compaction or the data table's earliest active write or pending
instant (`engine.metadata.archival`). Instants older than its active timeline stay readable:
their base files and log blocks count as completed (`engine.metadata.reader`).
"""

from __future__ import annotations

from engine.metadata.archival import metadata_table_bound
from engine.metadata.writer import open_metadata_table
from engine.services import archive as archive_service
from engine.table.meta_client import MetaClient
from engine.timeline import lsm


def plan(meta: MetaClient, keep_min: int, keep_max: int) -> tuple[MetaClient | None, archive_service.ArchivePlan]:
    """The metadata table of `meta` and what its archival would take now."""
    mdt = open_metadata_table(meta) if meta.config.version >= 8 else None
    if mdt is None:
        return None, archive_service.ArchivePlan(())
    timeline = mdt.timeline()
    bound = metadata_table_bound(meta.timeline(), timeline)
    return mdt, archive_service.ArchivePlan(
        archive_service.chosen_instants(mdt, timeline, keep_min + 1, keep_max + 1, bound))


def archive_metadata_table(meta: MetaClient, keep_min: int, keep_max: int,
                           compaction_batch_size: int = lsm.DEFAULT_COMPACTION_BATCH) -> list[str]:
    """Archive the metadata table of the data table `meta` (the caller holds the data table's
    lock); returns the instants archived."""
    mdt, chosen = plan(meta, keep_min, keep_max)
    if mdt is None or not chosen.instants:
        return []
    return archive_service.execute_archive(mdt, chosen, compaction_batch_size=compaction_batch_size)


__all__ = ["archive_metadata_table", "plan"]
