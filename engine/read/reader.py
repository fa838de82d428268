"""Snapshot, read-optimized, time-travel and incremental reads as Spark DataFrames.

Copy-on-write slices are base files, read as they are: by Spark's own parquet reader where it
returns exactly the same rows (a local table whose files were all written under its current
schema: `engine.read.native`), else by pyarrow in Python tasks (`engine.read.scan`). Merge-on-read
slices with log files are merged (base file + committed log blocks, by the precombine field as
hudi-rs merges them: `engine.data.slice_reader`); read-optimized reads take the base files only.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from engine.data.keys import ScanFile, SliceMerge
from engine.data.slice_reader import SliceFiles, merge_mode_for
from engine.errors import InstantNotFoundError, InvalidInputError, UnsupportedFeatureError
from engine.read.native import native_scan
from engine.read.scan import SliceRead, scan_files, scan_slices
from engine.table.file_group import FileSlice
from engine.table.meta_client import MetaClient
from engine.table.schema import with_meta_fields
from engine.timeline.instant import Instant, is_valid_instant_time
from engine.timeline.timeline import CommittedInstants, Timeline


def _check_instant(value: str, what: str) -> str:
    if not is_valid_instant_time(str(value)):
        raise InvalidInputError(f"{what} must be an instant time yyyyMMddHHmmssSSS, got {value!r}")
    return str(value)


def table_schema_or_empty(meta: MetaClient, timeline: Timeline) -> pa.Schema:
    schema = meta.latest_schema(timeline)
    return with_meta_fields(schema if schema is not None else pa.schema([]))


def slice_read(meta: MetaClient, timeline: Timeline, as_of: str | None = None, commit_range=None) -> SliceRead:
    """How tasks merge this table's slices as of `timeline` (and `as_of`)."""
    return SliceRead(
        ordering_field=meta.config.precombine_field,
        mode=merge_mode_for(meta.config),
        committed=CommittedInstants(timeline.completed_write_times, timeline.archived_before),
        as_of=as_of,
        commit_range=commit_range,
    )


def slice_merge(meta: MetaClient, timeline, view) -> SliceMerge | None:
    """How index lookups that read the data files merge this table's slices with their log files
    and, for a table without meta fields, compute its keys (None when neither is needed)."""
    virtual = None
    if not meta.config.populate_meta_fields:  # no meta fields: keys come from the key fields
        from engine.write.keygen import KeySpec

        virtual = KeySpec.from_config(meta.config)
    elif not any(s.log_files for s in view.latest_slices()):
        return None
    schema = meta.latest_schema(timeline)
    pc_name = meta.config.precombine_field
    ordering = schema.field(pc_name) if schema is not None and pc_name and pc_name in schema.names else None
    return SliceMerge(
        merge_mode_for(meta.config), CommittedInstants(timeline.completed_write_times, timeline.archived_before), ordering,
        virtual,
    )


def scan_latest(
    spark: SparkSession,
    meta: MetaClient,
    timeline: Timeline,
    slices: list[FileSlice],
    schema: pa.Schema,
    *,
    as_of: str | None = None,
    commit_range: tuple[str | None, str | None] | None = None,
    keys: pa.Array | None = None,
) -> DataFrame:
    """The records of `slices`: base files read as they are when no slice has log files, else every
    slice merged with its logs."""
    if not any(s.log_files for s in slices):
        return _scan_base_files(spark, meta, timeline, slices, schema, commit_range, keys)
    how = slice_read(meta, timeline, as_of, commit_range)
    return scan_slices(spark, meta.storage, [SliceFiles.from_slice(s) for s in slices], schema, how, keys=keys)


def _scan_base_files(
    spark: SparkSession,
    meta: MetaClient,
    timeline: Timeline,
    slices: list[FileSlice],
    schema: pa.Schema,
    commit_range: tuple[str | None, str | None] | None = None,
    keys: pa.Array | None = None,
) -> DataFrame:
    """The base files of `slices` as they are: by Spark's parquet reader where it reads them
    exactly as the pyarrow scan does (not for key lookups), else by the pyarrow scan."""
    files = [ScanFile(s.base_file.path, s.partition, s.file_id) for s in slices if s.base_file is not None]
    native = native_scan(spark, meta, timeline, files, schema, commit_range) if keys is None else None
    if native is not None:
        return native
    return scan_files(spark, meta.storage, files, schema, commit_range=commit_range, keys=keys)


def check_base_file_format(meta: MetaClient) -> None:
    """Refuse tables whose base files are not Parquet (Apache Hudi 1.2 writes Lance too): their
    files would not be found, and the table would read empty."""
    fmt = (meta.config.base_file_format or "PARQUET").upper()
    if fmt != "PARQUET":
        raise UnsupportedFeatureError(
            f"{meta.storage.base_uri}: base file format {fmt} is not read by this engine (Parquet only)")


def _check_as_of(timeline: Timeline, as_of: str | None, meta: MetaClient | None = None) -> str | None:
    if as_of is None:
        return None
    as_of = _check_instant(as_of, "as_of")
    if timeline.first_time is None or as_of < timeline.first_time:
        raise InstantNotFoundError(
            f"as_of {as_of} is before the first instant of the table ({timeline.first_time or 'none'})"
        )
    if meta is not None and not any(sp.time == as_of for sp in timeline.savepoints):
        from engine.services.retention import last_earliest_retained

        retained = last_earliest_retained(meta, timeline)
        if retained is not None and as_of < retained:
            # the snapshot may have lost file versions to that clean: refuse rather than return a
            # silently partial table (savepointed instants stay readable)
            raise InstantNotFoundError(
                f"as_of {as_of} is older than the earliest commit the cleaner retains ({retained}): its "
                "snapshot's older file versions may be deleted; savepoint a commit to keep it readable"
            )
    return as_of


def read_snapshot(
    spark: SparkSession, meta: MetaClient, as_of: str | None = None, read_optimized: bool = False
) -> DataFrame:
    """The latest slice of every file group among completed instants (at or before `as_of`);
    `read_optimized`: base files only (merge-on-read log files are not read)."""
    check_base_file_format(meta)
    timeline = meta.timeline()
    as_of = _check_as_of(timeline, as_of, meta)
    schema = table_schema_or_empty(meta, timeline)
    slices = meta.file_system_view(timeline, as_of=as_of).latest_slices()
    if read_optimized:
        return _scan_base_files(spark, meta, timeline, slices, schema)
    return scan_latest(spark, meta, timeline, slices, schema, as_of=as_of)


def incremental_groups(meta: MetaClient, timeline: Timeline, start: str, end: str | None) -> set[tuple[str, str]]:
    """(partition, file id) of the file groups the completed writes in (start, end] wrote."""
    return _groups_of(meta, timeline.completed_writes.between(start, end).instants)


def _groups_of(meta: MetaClient, instants: Iterable[Instant]) -> set[tuple[str, str]]:
    groups = set()
    for inst in instants:
        for stat in meta.commit_metadata(inst).write_stats:
            if stat.path and stat.fileId:
                groups.add((stat.partitionPath, stat.fileId))
    return groups


def completion_window(timeline: Timeline, start: str, end: str | None) -> tuple[list[Instant], str, str] | None:
    """Timeline layout 2 (versions 8, 9): an incremental window bounds completion times, as in
    Apache Hudi 1.x: the completed writes that completed in (start, end], and the range (lo, hi]
    of commit times that holds exactly them (None when none completed in the window). A window
    whose writes completed in another order than they began cannot be such a range: refused."""
    writes = timeline.completed_writes.instants
    done = timeline.completion_times
    chosen = [i for i in writes if start < done.get(i.time, i.time) and (end is None or done.get(i.time, i.time) <= end)]
    if not chosen:
        return None
    times = {i.time for i in chosen}
    lo = max((i.time for i in writes if i.time < min(times)), default="0" * 17)
    hi = max(times)
    strays = sorted(i.time for i in writes if lo < i.time <= hi and i.time not in times)
    if strays:
        raise UnsupportedFeatureError(
            f"incremental window ({start}, {end or 'now'}]: commits {', '.join(strays)} began inside it but "
            "completed outside it (concurrent writers); such windows are not read yet")
    return chosen, lo, hi


def read_incremental(spark: SparkSession, meta: MetaClient, start: str, end: str | None = None) -> DataFrame:
    """Records whose commit time is in (start, end]: the file groups those commits wrote, each read
    as of `end` (merged with its logs on merge-on-read), keeping the records committed in range."""
    if not meta.config.populate_meta_fields:
        # the records carry no commit time to window on; Apache Hudi refuses these queries too
        raise UnsupportedFeatureError(
            "incremental reads are not supported on tables without meta fields "
            "(hoodie.populate.meta.fields=false): their records carry no _hoodie_commit_time"
        )
    start = _check_instant(_pad_seconds(start), "start")
    if end is not None:
        end = _check_instant(_pad_seconds(end), "end")
        if end < start:
            raise InvalidInputError(f"end {end} is before start {start}")
    check_base_file_format(meta)
    timeline = meta.timeline()
    schema = table_schema_or_empty(meta, timeline)
    if timeline.completion_times:  # versions 8, 9: the window bounds completion times
        window = completion_window(timeline, start, end)
        if window is None:
            return scan_latest(spark, meta, timeline, [], schema)
        chosen, start, end = window
        groups = _groups_of(meta, chosen)
    else:
        groups = incremental_groups(meta, timeline, start, end)
    view = meta.file_system_view(timeline, as_of=end)
    slices = [s for s in view.latest_slices() if (s.partition, s.file_id) in groups]
    return scan_latest(spark, meta, timeline, slices, schema, as_of=end, commit_range=(start, end))


def _pad_seconds(value: str) -> str:
    """`yyyyMMddHHmmss` (Apache Hudi accepts seconds too, e.g. "00000000000000") as `...SSS` = 000."""
    text = str(value)
    return text + "000" if len(text) == 14 and text.isdigit() else text
