"""What a read reads, decided without Spark: the file slices, the schema, and how slices merge.

Snapshot, read-optimized, time-travel and incremental reads are planned here from the timeline
and the file-system view; `engine.read.reader` turns a plan into a Spark DataFrame, and the
Spark data source (`engine.spark.datasource`) into input partitions its Python tasks read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from engine.data.file_group import FileSlice
from engine.data.slice_read import CommitRange, SliceRead, commit_filter  # noqa: F401  (re-exported)
from engine.data.slice_reader import merge_mode_for
from engine.errors import InstantNotFoundError, InvalidInputError, UnsupportedFeatureError
from engine.metadata import listing
from engine.schema.avro import with_meta_fields
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Instant, is_valid_instant_time
from engine.timeline.timeline import CommittedInstants, Timeline


@dataclass(frozen=True)
class ReadPlan:
    """The slices a read scans and how. `base_only`: read the base files as they are (no slice has
    log files, or a read-optimized query); else every slice is merged as `how` says."""

    schema: pa.Schema  # meta columns first
    slices: list[FileSlice]
    how: SliceRead
    base_only: bool
    # where the file listing came from ("metadata table" or "storage"), and why not the metadata
    # table when the table has one that could not answer
    listing: str = listing.STORAGE
    listing_notice: str | None = None

    @property
    def commit_range(self) -> CommitRange | None:
        return self.how.commit_range


def check_instant(value: str, what: str) -> str:
    if not is_valid_instant_time(str(value)):
        raise InvalidInputError(f"{what} must be an instant time yyyyMMddHHmmssSSS, got {value!r}")
    return str(value)


def table_schema_or_empty(meta: MetaClient, timeline: Timeline, as_of: str | None = None) -> pa.Schema:
    schema = meta.latest_schema(timeline, as_of)
    return with_meta_fields(schema if schema is not None else pa.schema([]))


def slice_read(
    meta: MetaClient, timeline: Timeline, as_of: str | None = None, commit_range: CommitRange | None = None
) -> SliceRead:
    """How tasks merge this table's slices as of `timeline` (and `as_of`)."""
    return SliceRead(
        ordering_field=meta.config.precombine_field,
        mode=merge_mode_for(meta.config),
        committed=CommittedInstants(timeline.completed_write_times, timeline.archived_before),
        as_of=as_of,
        commit_range=commit_range,
    )


def check_base_file_format(meta: MetaClient) -> None:
    """Refuse tables whose base files are not Parquet (Apache Hudi 1.2 writes Lance too): their
    files would not be found, and the table would read empty."""
    fmt = (meta.config.base_file_format or "PARQUET").upper()
    if fmt != "PARQUET":
        raise UnsupportedFeatureError(
            f"{meta.storage.base_uri}: base file format {fmt} is not read by this engine (Parquet only)")


def check_as_of(timeline: Timeline, as_of: str | None, meta: MetaClient | None = None) -> str | None:
    if as_of is None:
        return None
    as_of = check_instant(as_of, "as_of")
    if timeline.first_time is None or as_of < timeline.first_time:
        raise InstantNotFoundError(
            f"as_of {as_of} is before the first instant of the table ({timeline.first_time or 'none'})"
        )
    if meta is not None and not any(sp.time == as_of for sp in timeline.savepoints):
        from engine.table.retention import last_earliest_retained

        retained = last_earliest_retained(meta, timeline)
        if retained is not None and as_of < retained:
            # the snapshot may have lost file versions to that clean: refuse rather than return a
            # silently partial table (savepointed instants stay readable)
            raise InstantNotFoundError(
                f"as_of {as_of} is older than the earliest commit the cleaner retains ({retained}): its "
                "snapshot's older file versions may be deleted; savepoint a commit to keep it readable"
            )
    return as_of


def _plan(
    meta: MetaClient, timeline: Timeline, slices: list[FileSlice], schema: pa.Schema, *,
    as_of: str | None = None, commit_range: CommitRange | None = None, read_optimized: bool = False,
    listed: listing.Listing | None = None,
) -> ReadPlan:
    base_only = read_optimized or not any(s.log_files for s in slices)
    listed = listed or listing.Listing(None, listing.STORAGE)
    return ReadPlan(schema, slices, slice_read(meta, timeline, as_of, commit_range), base_only,
                    listed.source, listed.notice)


def plan_snapshot(
    meta: MetaClient, as_of: str | None = None, read_optimized: bool = False, timeline: Timeline | None = None
) -> tuple[ReadPlan, Timeline]:
    """The latest slice of every file group among completed instants (at or before `as_of`);
    `read_optimized`: base files only (merge-on-read log files are not read)."""
    check_base_file_format(meta)
    timeline = timeline if timeline is not None else meta.timeline()
    as_of = check_as_of(timeline, as_of, meta)
    schema = table_schema_or_empty(meta, timeline, as_of)
    listed = listing.data_files(meta, timeline)
    slices = meta.file_system_view(timeline, as_of=as_of, files=listed.files).latest_slices()
    return _plan(meta, timeline, slices, schema, as_of=as_of, read_optimized=read_optimized, listed=listed), timeline


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


def pad_seconds(value: str) -> str:
    """`yyyyMMddHHmmss` (Apache Hudi accepts seconds too, e.g. "00000000000000") as `...SSS` = 000."""
    text = str(value)
    return text + "000" if len(text) == 14 and text.isdigit() else text


def check_window(start: str, end: str | None) -> tuple[str, str | None]:
    """An incremental or change window's bounds as instant times (yyyyMMddHHmmss padded), the end
    not before the start."""
    start = check_instant(pad_seconds(start), "start")
    if end is not None:
        end = check_instant(pad_seconds(end), "end")
        if end < start:
            raise InvalidInputError(f"end {end} is before start {start}")
    return start, end


def plan_incremental(
    meta: MetaClient, start: str, end: str | None = None, timeline: Timeline | None = None
) -> tuple[ReadPlan, Timeline]:
    """Records whose commit time is in (start, end]: the file groups those commits wrote, each read
    as of `end` (merged with its logs on merge-on-read), keeping the records committed in range."""
    if not meta.config.populate_meta_fields:
        # the records carry no commit time to window on; Apache Hudi refuses these queries too
        raise UnsupportedFeatureError(
            "incremental reads are not supported on tables without meta fields "
            "(hoodie.populate.meta.fields=false): their records carry no _hoodie_commit_time"
        )
    start, end = check_window(start, end)
    check_base_file_format(meta)
    timeline = timeline if timeline is not None else meta.timeline()
    schema = table_schema_or_empty(meta, timeline)
    if timeline.completion_times:  # versions 8, 9: the window bounds completion times
        window = completion_window(timeline, start, end)
        if window is None:
            return _plan(meta, timeline, [], schema, commit_range=(start, end)), timeline
        chosen, start, end = window
        groups = _groups_of(meta, chosen)
    else:
        groups = incremental_groups(meta, timeline, start, end)
    listed = listing.data_files(meta, timeline)
    view = meta.file_system_view(timeline, as_of=end, files=listed.files)
    slices = [s for s in view.latest_slices() if (s.partition, s.file_id) in groups]
    return _plan(meta, timeline, slices, schema, as_of=end, commit_range=(start, end), listed=listed), timeline


