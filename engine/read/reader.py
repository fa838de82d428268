"""Snapshot, time-travel and incremental reads as Spark DataFrames."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from engine.errors import InstantNotFoundError, InvalidInputError
from engine.read.scan import ScanFile, scan_files
from engine.table.meta_client import MetaClient
from engine.table.schema import with_meta_fields
from engine.timeline.instant import is_valid_instant_time
from engine.timeline.timeline import Timeline


def _check_instant(value: str, what: str) -> str:
    if not is_valid_instant_time(str(value)):
        raise InvalidInputError(f"{what} must be an instant time yyyyMMddHHmmssSSS, got {value!r}")
    return str(value)


def table_schema_or_empty(meta: MetaClient, timeline: Timeline) -> pa.Schema:
    schema = meta.latest_schema(timeline)
    return with_meta_fields(schema if schema is not None else pa.schema([]))


def snapshot_files(meta: MetaClient, timeline: Timeline, as_of: str | None) -> list[ScanFile]:
    view = meta.file_system_view(timeline, as_of=as_of)
    return [ScanFile(b.path, b.partition, b.file_id) for b in view.latest_base_files()]


def read_snapshot(spark: SparkSession, meta: MetaClient, as_of: str | None = None) -> DataFrame:
    """The latest slice of every file group among completed instants (at or before `as_of`)."""
    timeline = meta.timeline()
    if as_of is not None:
        as_of = _check_instant(as_of, "as_of")
        if timeline.first_time is None or as_of < timeline.first_time:
            raise InstantNotFoundError(
                f"as_of {as_of} is before the first instant of the table ({timeline.first_time or 'none'})"
            )
    schema = table_schema_or_empty(meta, timeline)
    return scan_files(spark, meta.storage, snapshot_files(meta, timeline, as_of), schema)


def incremental_files(meta: MetaClient, timeline: Timeline, start: str, end: str | None) -> list[ScanFile]:
    """The newest file of each file group written by the completed commits in (start, end]."""
    latest: dict[tuple[str, str], tuple[str, str]] = {}
    for inst in timeline.completed_writes.between(start, end):
        for stat in meta.commit_metadata(inst).write_stats:
            if stat.path:
                latest[(stat.partitionPath, stat.fileId)] = (inst.time, stat.path)
    return [ScanFile(path, part, fid) for (part, fid), (_t, path) in sorted(latest.items())]


def read_incremental(spark: SparkSession, meta: MetaClient, start: str, end: str | None = None) -> DataFrame:
    """Records whose commit time is in (start, end], reading only the files those commits wrote."""
    start = _check_instant(start, "start")
    if end is not None:
        end = _check_instant(end, "end")
        if end < start:
            raise InvalidInputError(f"end {end} is before start {start}")
    timeline = meta.timeline()
    schema = table_schema_or_empty(meta, timeline)
    files = incremental_files(meta, timeline, start, end)
    return scan_files(spark, meta.storage, files, schema, commit_range=(start, end))
