"""The oracle for a metadata table this engine keeps: its `files` partition lists exactly the
committed data files storage holds (names and sizes), its properties name only partitions this
engine keeps, and the record index, column and partition statistics and secondary indexes it holds equal
the data files."""

from __future__ import annotations

from pathlib import Path

from engine.data.file_names import parse_base_file_name, parse_log_file_name
from engine.metadata.reader import MetadataTableReader
from engine.table.meta_client import MetaClient
from tests.support import column_stats, partition_stats, record_index, secondary_index


def in_step(path: Path, name: str = "") -> None:
    """Assert the metadata table of the table at `path` (if it has one) is in step with storage."""
    if not (path / ".hoodie" / "metadata").exists():
        return
    meta = MetaClient.open(str(path))
    timeline = meta.timeline()
    listed = MetadataTableReader(meta, timeline).file_listing()
    storage: dict[str, dict[str, int]] = {}
    for df in meta.list_data_files():
        parsed = parse_base_file_name(df.name) or parse_log_file_name(df.name)
        if parsed is not None:
            storage.setdefault(df.partition, {})[df.name] = df.size
    assert {p: f for p, f in listed.items() if f} == storage, name
    assert timeline.completed_times  # (every listed file's instant completed: the storage side holds no failed write)
    partitions = dict(meta.config.extra)["hoodie.table.metadata.partitions"].split(",")
    assert "files" in partitions and {p for p in partitions if not p.startswith("secondary_index_")} <= {
        "column_stats", "files", "partition_stats", "record_index"}, name
    if "record_index" in partitions:
        record_index.check(meta)
    if "column_stats" in partitions:
        column_stats.check(meta)
    if "partition_stats" in partitions:
        partition_stats.check(meta)
    secondary_index.check(meta)
