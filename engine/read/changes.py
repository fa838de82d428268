"""Change data capture queries without Spark: what each write in a window inserted, updated (before
and after) and deleted, as Apache Hudi's CDC query answers it (RFC-51, `HoodieCDCExtractor` and
`CDCFileGroupIterator`).

The changes are found per completed write and per file group it touched (its write stats, and the
groups a replacecommit replaced). Where the write left a CDC log file (`cdcStats`), the log says
what changed (`AS_IS`): with DATA_BEFORE_AFTER as it stands, with DATA_BEFORE the after image is
looked up in the group's records after the write, with OP_KEY_ONLY both images are. Elsewhere the
change is inferred from the group's records before the write (as of the previous completed
instant) and after it (Apache Hudi's BASE_FILE_INSERT, BASE_FILE_DELETE, LOG_FILE and
REPLACE_COMMIT cases all are that difference): a record the write stamped with its commit time is
an insert or an update (by whether its key was there before), a record gone is a delete. Both ways
give the same rows.

Writes that change no record are left out as Apache Hudi leaves them out
(`WriteOperationType.yieldChanges`): compaction, clustering, index builds. Images hold the data
columns (no meta fields) in the table's latest schema.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.config.cdc import AFTER, BEFORE, OP, RECORD_KEY, TS_MS, CdcMode
from engine.constants import COMMIT_TIME_COL, RECORD_KEY_COL
from engine.data.avro_batch import decode_block_arrow
from engine.data.log_block import AVRO_BLOCK_VERSION, BlockType, HeaderKey, decode_avro_content
from engine.data.log_file import read_log_blocks
from engine.data.slice_reader import SliceFiles, read_slice
from engine.errors import CorruptTableError, InstantNotFoundError, InvalidInputError
from engine.metadata import listing
from engine.read.plan import (
    check_base_file_format,
    check_instant,
    check_window,
    completion_window,
    slice_read,
)
from engine.schema.avro import with_meta_fields, without_meta_fields
from engine.schema.avro_types import avro_to_arrow
from engine.table.fs_view import DataFile, FileSystemView
from engine.table.meta_client import MetaClient
from engine.timeline.instant import Action, Instant
from engine.timeline.timeline import Timeline

# Apache Hudi's WriteOperationType.yieldChanges
YIELD_CHANGES = frozenset({
    "INSERT", "UPSERT", "UPSERT_PREPPED", "DELETE", "DELETE_PREPPED", "BULK_INSERT", "DELETE_PARTITION",
    "INSERT_OVERWRITE", "INSERT_OVERWRITE_TABLE", "BOOTSTRAP",
})


class HistoryUnavailableError(InstantNotFoundError):
    """A change window reaches into history the table no longer holds (archived commits, or file
    versions the cleaner deleted); `earliest`: the earliest start still answerable."""

    def __init__(self, message: str, earliest: str) -> None:
        super().__init__(message)
        self.earliest = earliest


@dataclass(frozen=True)
class GroupChange:
    """One completed write's change to one file group: the CDC log files it left (none: inferred)."""

    instant: str
    partition: str
    file_id: str
    cdc_files: tuple[str, ...]


def changes_schema(data: pa.Schema) -> pa.Schema:
    """The CDC query's columns: `op` (i/u/d), `ts_ms` (the commit's instant time), `before` and
    `after` (the images, null where the op has none)."""
    image = pa.struct(list(data))
    return pa.schema([(OP, pa.string()), (TS_MS, pa.string()), (BEFORE, image), (AFTER, image)])


def window(meta: MetaClient, timeline: Timeline, start: str, end: str | None) -> list[Instant]:
    """The completed writes whose changes a window (start, end] holds, oldest first: by instant
    time on version 6 tables, by completion time on versions 8 and 9 (as Apache Hudi 1.x windows
    incremental and CDC queries). Refuses a window reaching into history no longer held."""
    earliest = earliest_start(meta, timeline)
    if earliest is not None and start < earliest:
        raise HistoryUnavailableError(
            f"changes since {start} are no longer answerable: older commits were archived or their file "
            f"versions cleaned; the earliest start still answerable is {earliest}", earliest)
    if timeline.completion_times:
        chosen = completion_window(timeline, start, end)
        instants = chosen[0] if chosen is not None else []
    else:
        instants = list(timeline.completed_writes.between(start, end).instants)
    return [i for i in instants if i.action is not Action.COMPACTION]


def earliest_start(meta: MetaClient, timeline: Timeline) -> str | None:
    """The earliest window start the table still answers: after archival, the first instant of the
    active timeline (the one before it may be archived); after a clean, the earliest commit it
    retained (older file versions may be gone). None: the whole history."""
    from engine.table.retention import last_earliest_retained

    bounds = [t for t in (timeline.archived_before, last_earliest_retained(meta, timeline)) if t]
    return max(bounds) if bounds else None


def group_changes(meta: MetaClient, instants: Iterable[Instant]) -> list[GroupChange]:
    """Each write's changed file groups (write stats and replaced groups), in instant order."""
    out: list[GroupChange] = []
    for inst in instants:
        md = meta.commit_metadata(inst)
        if md.operation_type.upper() not in YIELD_CHANGES:
            continue
        logs: dict[tuple[str, str], set[str]] = {}  # a group's CDC log files, over all its write stats
        for stat in md.write_stats:
            if stat.fileId and stat.path:
                logs.setdefault((stat.partitionPath, stat.fileId), set()).update((stat.cdcStats or {}).keys())
        for partition, ids in (md.partition_to_replace_file_ids or {}).items():
            for file_id in ids:
                logs.setdefault((partition, file_id), set())
        out.extend(GroupChange(inst.time, p, f, tuple(sorted(cdc))) for (p, f), cdc in logs.items())
    return out


class ChangeReader:
    """Reads one window's changes. A group's state after one write is its state before the next
    write to it: the last few states read are kept (`STATES_KEPT`)."""

    STATES_KEPT = 8

    def __init__(self, meta: MetaClient, timeline: Timeline, schema: pa.Schema, changes: Sequence[GroupChange],
                 use_log: bool = True) -> None:
        """`changes`: every group change of the window (also those another reader reads)."""
        self.meta = meta
        self.timeline = timeline
        self.schema = with_meta_fields(schema)  # meta columns first
        self.data = without_meta_fields(schema)
        self.how = slice_read(meta, timeline)
        self.mode = meta.config.cdc_mode if use_log else None  # None: infer every change
        self._views: dict[str | None, FileSystemView] = {}
        self._states: OrderedDict[tuple[str, str, str], pa.Table] = OrderedDict()
        self._touched: dict[tuple[str, str], list[str]] = {}
        for c in changes:
            self._touched.setdefault((c.partition, c.file_id), []).append(c.instant)
        for times in self._touched.values():
            times.sort()
        self._writes = sorted(timeline.completed_write_times)

    def previous(self, instant: str) -> str | None:
        """The completed write before `instant` (its state is the one `instant` changed)."""
        i = bisect.bisect_left(self._writes, instant)
        return self._writes[i - 1] if i > 0 else None

    @cached_property
    def files(self) -> list[DataFile] | None:
        """The table's data files, listed once, when a change is first inferred (a query the CDC
        log answers alone lists nothing)."""
        return listing.data_files(self.meta, self.timeline).files

    def view(self, as_of: str) -> FileSystemView:
        if as_of not in self._views:
            self._views[as_of] = self.meta.file_system_view(self.timeline, as_of=as_of, files=self.files)
        return self._views[as_of]

    def state(self, partition: str, file_id: str, as_of: str | None) -> pa.Table:
        """The group's records as of `as_of` (meta columns first); empty before it existed or once
        it was replaced."""
        if as_of is None:
            return self.schema.empty_table()
        key = (partition, file_id, self._last_write_to(partition, file_id, as_of))
        if key in self._states:
            self._states.move_to_end(key)
            return self._states[key]
        records = self._read_state(partition, file_id, as_of)
        self._states[key] = records
        while len(self._states) > self.STATES_KEPT:
            self._states.popitem(last=False)
        return records

    def _last_write_to(self, partition: str, file_id: str, as_of: str) -> str:
        """The state key: states as of two instants between which no write touched the group are
        the same (only the window's writes are known; before them, `as_of` itself)."""
        touched = self._touched.get((partition, file_id), [])
        i = bisect.bisect_right(touched, as_of)
        return touched[i - 1] if i > 0 else as_of

    def _read_state(self, partition: str, file_id: str, as_of: str) -> pa.Table:
        view = self.view(as_of)
        group = view.group(partition, file_id)
        found = group.merged_slice(view.compaction_pending_on(partition, file_id)) if group is not None else None
        if found is None:
            return self.schema.empty_table()
        return read_slice(
            self.meta.storage, SliceFiles.from_slice(found), self.schema, ordering_field=self.how.ordering_field,
            mode=self.how.mode, is_committed=self.how.committed, as_of=as_of,
        )

    def read(self, change: GroupChange) -> pa.Table:
        """The change rows of one group change (`changes_schema`)."""
        if change.cdc_files and self.mode is not None:
            return self._as_is(change)
        return self._inferred(change)

    # ---- inferred from the group's records before and after the write -----------------------
    def _inferred(self, change: GroupChange) -> pa.Table:
        before = self.state(change.partition, change.file_id, self.previous(change.instant))
        after = self.state(change.partition, change.file_id, change.instant)
        written = after.filter(pc.equal(after.column(COMMIT_TIME_COL), change.instant))
        existed = pc.is_in(written.column(RECORD_KEY_COL), value_set=before.column(RECORD_KEY_COL))
        updated = written.filter(existed)
        inserted = written.filter(pc.invert(existed))
        gone = before.filter(pc.invert(pc.is_in(before.column(RECORD_KEY_COL), value_set=after.column(RECORD_KEY_COL))))
        prior = _by_key(before, updated.column(RECORD_KEY_COL))
        return self._rows(
            change.instant,
            ["u"] * updated.num_rows + ["i"] * inserted.num_rows + ["d"] * gone.num_rows,
            pa.concat_tables([prior, _nulls(inserted), gone]),
            pa.concat_tables([updated, inserted, _nulls(gone)]),
            present=(updated.num_rows, inserted.num_rows, gone.num_rows),
        )

    # ---- from the CDC log -----------------------------------------------------------------------
    def _log_records(self, change: GroupChange) -> pa.Table | None:
        """The CDC log's records of a group change, in the log's own schema (None: no record)."""
        parts = []
        for path in change.cdc_files:
            for block in read_log_blocks(self.meta.storage, path):
                if block.block_type != BlockType.CDC_DATA:
                    continue
                schema_json = block.header.get(HeaderKey.SCHEMA)
                if schema_json is None:
                    raise CorruptTableError(f"{path}: CDC block at offset {block.offset} without a SCHEMA header")
                fast = decode_block_arrow(block.content, AVRO_BLOCK_VERSION, schema_json)
                if fast is None:  # fastavro, a record at a time (and the errors naming what is wrong)
                    written = avro_to_arrow(schema_json)
                    fast = pa.Table.from_pylist(decode_avro_content(block), schema=written)
                parts.append(fast)
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return None
        return pa.concat_tables(parts, promote_options="permissive")

    def _as_is(self, change: GroupChange) -> pa.Table:
        records = self._log_records(change)
        if records is None:
            return changes_schema(self.data).empty_table()
        ops = [str(o) for o in records.column(OP).to_pylist()]
        bad = next((o for o in ops if o not in ("i", "u", "d")), None)
        if bad is not None:
            raise CorruptTableError(f"{change.cdc_files[0]}: CDC record with op {bad!r} (i, u or d expected)")
        if self.mode is CdcMode.DATA_BEFORE_AFTER:
            before = _conform_struct(records.column(BEFORE).combine_chunks(), self.data)
            after = _conform_struct(records.column(AFTER).combine_chunks(), self.data)
            return _assemble(change.instant, ops, before, after, self.data)
        keys = records.column(RECORD_KEY).cast(pa.string())
        after_state = self.state(change.partition, change.file_id, change.instant)
        after = _mask(_images_of(_by_key(after_state, keys, missing_ok=True), self.data), [o != "d" for o in ops])
        if self.mode is CdcMode.DATA_BEFORE:
            before = _conform_struct(records.column(BEFORE).combine_chunks(), self.data)
        else:
            before_state = self.state(change.partition, change.file_id, self.previous(change.instant))
            before = _mask(_images_of(_by_key(before_state, keys, missing_ok=True), self.data), [o != "i" for o in ops])
        return _assemble(change.instant, ops, before, after, self.data)

    def _rows(self, instant: str, ops: list[str], before: pa.Table, after: pa.Table,
              present: tuple[int, int, int]) -> pa.Table:
        nu, ni, nd = present
        b = _mask(_images_of(before, self.data), [True] * nu + [False] * ni + [True] * nd)
        a = _mask(_images_of(after, self.data), [True] * nu + [True] * ni + [False] * nd)
        return _assemble(instant, ops, b, a, self.data)


def _nulls(rows: pa.Table) -> pa.Table:
    """A table of `rows`' shape and length holding nulls (the image an op has not)."""
    return pa.Table.from_arrays([pa.nulls(rows.num_rows, f.type) for f in rows.schema], schema=rows.schema)


def _by_key(rows: pa.Table, keys: pa.Array | pa.ChunkedArray, missing_ok: bool = False) -> pa.Table:
    """The rows of `rows` holding `keys`, in that order (a missing key: a null row)."""
    pos = pc.index_in(keys, value_set=rows.column(RECORD_KEY_COL))
    if not missing_ok and pc.any(pc.is_null(pos)).as_py():
        raise CorruptTableError("a changed record's earlier version is missing from the file group")
    return rows.take(pos)


def _images_of(rows: pa.Table, data: pa.Schema, mask: pa.Array | None = None) -> pa.StructArray:
    """`rows`' columns as structs of `data`'s fields (by name, cast to their types; a column the rows
    lack is null), null where `mask` is true."""
    arrays = []
    for f in data:
        if f.name not in rows.column_names:
            arrays.append(pa.nulls(rows.num_rows, f.type))
            continue
        col = rows.column(f.name).combine_chunks()
        arrays.append(col if col.type == f.type else col.cast(f.type))
    return pa.StructArray.from_arrays(arrays, fields=list(data), mask=mask)


def _mask(images: pa.StructArray, keep: list[bool]) -> pa.StructArray:
    """`images` with the rows not kept null (the struct itself, not only its fields)."""
    fields = [images.field(i) for i in range(images.type.num_fields)]
    mask = pa.array([not k for k in keep], pa.bool_())
    if images.null_count:
        mask = pc.or_(mask, pc.is_null(images))
    return pa.StructArray.from_arrays(fields, fields=list(images.type), mask=mask)


def _conform_struct(arr: pa.Array, data: pa.Schema) -> pa.StructArray:
    """Images decoded from the log (in the writer's schema) in `data`'s."""
    return _images_of(pa.Table.from_struct_array(arr), data, mask=pc.is_null(arr))


def _assemble(instant: str, ops: list[str], before: pa.StructArray, after: pa.StructArray, data: pa.Schema) -> pa.Table:
    n = len(ops)
    return pa.Table.from_arrays(
        [pa.array(ops, pa.string()), pa.array([instant] * n, pa.string()), before, after], schema=changes_schema(data))


def normalized_window(meta: MetaClient, start: str, end: str | None) -> tuple[str, str | None]:
    """(start, end) checked and as instant times ("000" and other all-zero starts: from the
    beginning; yyyyMMddHHmmss padded); refuses tables a change query cannot read."""
    if not meta.config.populate_meta_fields:
        raise InvalidInputError(
            "change queries need the meta fields: a table without them (hoodie.populate.meta.fields=false) "
            "records no commit time per record")
    start = "0" * 17 if str(start) and not str(start).strip("0") else str(start)
    start, end = check_window(start, end)
    check_base_file_format(meta)
    return start, end


def read_changes(
    meta: MetaClient, start: str, end: str | None = None, timeline: Timeline | None = None,
    progress: Callable[[str], None] | None = None, use_log: bool = True,
) -> pa.Table:
    """The changes committed in (start, end]: one row per inserted, updated or deleted record and
    write (`changes_schema`), oldest write first. `use_log=False`: infer every change from the
    file groups' versions, leaving the CDC log unread (the two agree)."""
    start, end = normalized_window(meta, start, end)
    timeline = timeline if timeline is not None else meta.timeline()
    return _read(meta, timeline, window(meta, timeline, start, end), use_log, progress)


def read_instant_changes(meta: MetaClient, instant: str, timeline: Timeline | None = None) -> pa.Table:
    """The changes one completed write made (`changes_schema`; empty for a write that yields none,
    such as a compaction or clustering). InstantNotFoundError for an instant that is not a
    completed write; HistoryUnavailableError when the versions it changed were cleaned."""
    timeline = timeline if timeline is not None else meta.timeline()
    inst = timeline.get(check_instant(instant, "instant"))
    if inst is None or not inst.is_completed or not inst.action.is_write:
        raise InstantNotFoundError(f"{instant} is not a completed write on the active timeline")
    normalized_window(meta, instant, instant)  # the table checks
    earliest = earliest_start(meta, timeline)
    if earliest is not None and instant <= earliest:
        raise HistoryUnavailableError(
            f"the changes of {instant} are no longer answerable: the file versions it changed were cleaned "
            f"or archived; writes after {earliest} still are", earliest)
    return _read(meta, timeline, [inst] if inst.action is not Action.COMPACTION else [])


def _read(
    meta: MetaClient, timeline: Timeline, instants: Sequence[Instant], use_log: bool = True,
    progress: Callable[[str], None] | None = None,
) -> pa.Table:
    """The changes of `instants` (completed writes, oldest first), in the table's latest schema."""
    schema = meta.latest_schema(timeline)
    data = without_meta_fields(schema) if schema is not None else pa.schema([])
    changes = group_changes(meta, instants)
    if not changes or schema is None:
        return changes_schema(data).empty_table()
    reader = ChangeReader(meta, timeline, schema, changes, use_log)
    parts = []
    for n, change in enumerate(changes, 1):
        parts.append(reader.read(change))
        if progress is not None and (n % 50 == 0 or n == len(changes)):
            progress(f"changes: {n}/{len(changes)} file group changes read")
    return pa.concat_tables(parts)


def _json_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)  # dates, timestamps, decimals


def _has(t: pa.DataType, pred: Callable[[pa.DataType], bool]) -> bool:
    if pred(t):
        return True
    if pa.types.is_struct(t):
        return any(_has(t.field(i).type, pred) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has(t.value_type, pred)
    return False


def _json_texts(images: pa.ChunkedArray) -> pa.Array:
    """Each image as JSON text (null where there is none): polars' encoder for the usual types,
    Python's json for binary and map columns (polars writes no binary; it writes maps as entry lists)."""
    import json

    awkward = _has(images.type, lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)
                   or pa.types.is_fixed_size_binary(t) or pa.types.is_map(t))
    if not awkward:
        try:
            import polars as pl

            texts = pl.from_arrow(images).struct.json_encode().to_arrow()  # type: ignore[union-attr]
            return pc.if_else(pc.is_null(images), pa.scalar(None, pa.string()), texts.cast(pa.string()))
        except Exception:  # noqa: BLE001 (a type polars does not encode: the Python encoder below)
            pass
    return pa.array([None if v is None else json.dumps(_json_value(v)) for v in images.to_pylist()], pa.string())


def with_json_images(changes: pa.Table) -> pa.Table:
    """`changes` with `before` and `after` as JSON text, as Apache Hudi's Spark CDC query returns
    them (`{"id":1,"name":"a"}`; null where the op has no image)."""
    return pa.Table.from_arrays(
        [changes.column(OP), changes.column(TS_MS), _json_texts(changes.column(BEFORE)),
         _json_texts(changes.column(AFTER))],
        names=[OP, TS_MS, BEFORE, AFTER])


__all__ = [
    "YIELD_CHANGES", "with_json_images", "ChangeReader", "GroupChange", "HistoryUnavailableError", "changes_schema",
    "earliest_start", "group_changes", "normalized_window", "read_changes", "read_instant_changes", "window",
]
