"""What a table's metadata table holds, for `hoodie show` and the console's overview (no Spark):
its partitions (file groups, files, bytes, the latest base file), which of them this engine
keeps, and whether reads list files through it now (and if not, why).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.errors import CorruptTableError, StorageError, UnsupportedFeatureError
from engine.metadata import records as mdr
from engine.metadata.reader import FOLDER, MetadataTableReader, MetadataTableUnavailable
from engine.metadata.writer import keepable_partitions
from engine.serial import Documented
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline


@dataclass(frozen=True)
class PartitionSummary(Documented):
    """One partition of the metadata table."""

    name: str
    named: bool  # hoodie.table.metadata.partitions names it (built)
    kept: bool  # this engine keeps it up to date (the others go at its next write: dropped, or the
    # whole metadata table removed where this engine cannot keep it)
    file_groups: int
    files: int
    bytes: int
    latest_base: str | None  # the newest base HFile's instant


@dataclass(frozen=True)
class MetadataSummary(Documented):
    """The metadata table of a table (`present` false: it has none)."""

    present: bool
    listing: str  # where reads list files from: "metadata table" or "storage"
    reason: str | None = None  # why not the metadata table, where the table has one
    partitions: list[PartitionSummary] = field(default_factory=list)
    instants: int = 0  # completed instants on its timeline


def summarize(meta: MetaClient, timeline: Timeline | None = None) -> MetadataSummary:
    timeline = timeline if timeline is not None else meta.timeline()
    if not meta.storage.exists(f"{FOLDER}/.hoodie/hoodie.properties"):
        return MetadataSummary(False, "storage")
    named = metadata_table.partitions_in(meta.config)
    mdt_storage = meta.storage
    names = sorted({i.path.split("/")[-1] for i in mdt_storage.list_dir(FOLDER)
                    if i.is_dir and not i.name.startswith(".")} | set(named))
    partitions = []
    for name in names:
        groups: set[str] = set()
        files = size = 0
        bases: list[str] = []
        for info in mdt_storage.list_dir(f"{FOLDER}/{name}") if mdt_storage.exists(f"{FOLDER}/{name}") else []:
            if info.is_dir or info.name.startswith(".hoodie_partition_metadata"):
                continue
            stem = info.name.lstrip(".")
            groups.add(stem.split("_", 1)[0])
            files += 1
            size += info.size
            if info.name.endswith(".hfile"):
                bases.append(stem.rsplit("_", 1)[-1].removesuffix(".hfile"))
        partitions.append(PartitionSummary(name, name in named, False, len(groups), files, size,
                                           max(bases) if bases else None))
    listing, reason, instants = "storage", None, 0
    try:
        reader = MetadataTableReader(meta, timeline)
        instants = len(reader.mdt_timeline.completed.instants)
        kept = set(keepable_partitions(meta, reader))
        partitions = [replace(p, kept=p.name in kept) for p in partitions]
        reader.check_in_sync()
        listing = "metadata table"
    except (MetadataTableUnavailable, CorruptTableError, UnsupportedFeatureError, StorageError) as exc:
        reason = str(exc)
    if listing == "metadata table" and mdr.FILES not in named:
        listing, reason = "storage", "its files partition is not built"
    if listing != "metadata table":  # the next write removes it whole
        partitions = [replace(p, kept=False) for p in partitions]
    return MetadataSummary(True, listing, reason, partitions, instants)


__all__ = ["MetadataSummary", "PartitionSummary", "summarize"]
