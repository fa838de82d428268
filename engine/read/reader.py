"""Snapshot, time-travel and incremental reads as Spark DataFrames."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from engine.data.keys import ScanFile
from engine.errors import InstantNotFoundError, InvalidConfigError, InvalidInputError
from engine.read.scan import scan_files
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
    slices = view.latest_slices()
    _refuse_log_files(meta, [s for s in slices if s.log_files])
    return [ScanFile(s.base_file.path, s.partition, s.file_id) for s in slices if s.base_file is not None]


def _refuse_log_files(meta: MetaClient, with_logs: list) -> None:
    """Merge-on-read log files are not merged by this version: refuse rather than read stale rows."""
    if with_logs:
        first = with_logs[0]
        raise InvalidConfigError(
            f"{meta.storage.base_uri} is a {meta.config.table_type.value} table whose file slices have log "
            f"files ({len(with_logs)} slice(s), e.g. {first.log_files[0].path}); this version reads base "
            "files only and would miss their updates"
        )


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
    view = meta.file_system_view(timeline, as_of=end)
    _refuse_log_files(meta, [s for s in view.latest_slices() if s.log_files])
    files = incremental_files(meta, timeline, start, end)
    return scan_files(spark, meta.storage, files, schema, commit_range=(start, end))
