"""Reading one file slice of a merge-on-read table: its base file merged with its log files, as
hudi-rs 0.5 reads it (its default file-group reader, v2). Pure pyarrow, I/O through Storage only,
so it runs in Spark tasks, on the driver and in the console alike.

Blocks are applied in file order (the slice's log files ordered by base instant, version and
write token, then the blocks of each file). A data or delete block counts only when its instant
is committed (`is_committed`) and not after `as_of`; a ROLLBACK command block removes the blocks
of its target instant that came before it; corrupt blocks are skipped (`engine.data.log_file`).
The per-key merge rules are in `engine.data.log_merge`, and in `engine.data.partial_merge` for a
slice whose log holds partial updates (data blocks with IS_PARTIAL "true", Apache Hudi 1.x).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.config.table_config import TableConfig
from engine.constants import RECORD_KEY_COL
from engine.data.base_file import read_columns
from engine.data.file_group import FileSlice
from engine.data.log_block import (
    BlockType,
    CommandBlockType,
    HeaderKey,
    LogBlock,
    decode_data_block,
    decode_delete_block,
)
from engine.data.log_file import read_log_blocks
from engine.data.log_merge import (
    merge_base,
    normalize_delete_ordering,
    normalize_field_ordering,
    ordering_class,
    resolve_events,
)
from engine.data.partial_merge import merge_partial
from engine.errors import CorruptTableError, InvalidConfigError, InvalidInputError
from engine.storage import Storage


@dataclass(frozen=True)
class SliceFiles:
    """The files of one file slice, as a reader task needs them: paths relative to the table.

    `log_paths` are in the order their blocks apply: base instant, then version (numeric), then
    write token (as a string), which is how hudi-rs orders them (and Apache Hudi too, for files
    that differ in those).
    """

    partition: str
    file_id: str
    base_instant: str
    base_path: str | None
    log_paths: tuple[str, ...]

    @classmethod
    def from_slice(cls, file_slice: FileSlice) -> SliceFiles:
        """The files of a `FileSlice` of the file-system view."""
        logs = sorted(
            file_slice.log_files,
            key=lambda lf: (lf.name.base_instant, lf.name.version, lf.name.write_token or ""),
        )
        base = file_slice.base_file.path if file_slice.base_file is not None else None
        return cls(
            file_slice.partition,
            file_slice.file_id,
            file_slice.base_instant,
            base,
            tuple(lf.path for lf in logs),
        )

    def base_only(self) -> SliceFiles:
        """The slice as a read-optimized query sees it: the base file alone (nothing for a
        log-only file group)."""
        return replace(self, log_paths=())


class MergeMode(Enum):
    """How a slice's records of one key are merged (Hudi's record merge modes)."""

    EVENT_TIME = "EVENT_TIME_ORDERING"  # the greater ordering (precombine) value wins
    COMMIT_TIME = "COMMIT_TIME_ORDERING"  # the last written record wins


MERGE_MODE_KEY = "hoodie.record.merge.mode"
PAYLOAD_CLASS_KEYS = (
    "hoodie.compaction.payload.class",
    "hoodie.datasource.write.payload.class",
    "hoodie.table.legacy.payload.class",
)
MERGE_STRATEGY_KEYS = ("hoodie.record.merge.strategy.id", "hoodie.compaction.record.merger.strategy")
EVENT_TIME_PAYLOADS = (
    "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
    "org.apache.hudi.common.model.EventTimeAvroPayload",
)
COMMIT_TIME_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
EVENT_TIME_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"


def merge_mode_for(config: TableConfig) -> MergeMode:
    """The merge mode hudi-rs 0.5 infers for a table version 6 table.

    `hoodie.record.merge.mode` when the table states it; else the payload class (the first of
    `PAYLOAD_CLASS_KEYS` set): OverwriteWithLatestAvroPayload -> COMMIT_TIME, DefaultHoodieRecordPayload
    or EventTimeAvroPayload -> EVENT_TIME; else the merge strategy id; else EVENT_TIME when the
    table has a precombine field, COMMIT_TIME when not. A custom payload class or strategy raises
    InvalidConfigError: hudi-rs refuses to merge such slices (it still reads slices without logs).

    Note that Apache Hudi 0.14 merges an OverwriteWithLatestAvroPayload table's log records by
    ordering value, and falls back to that payload when none is set: see docs/format-notes.md.
    """
    props = dict(config.extra)
    stated = props.get(MERGE_MODE_KEY, "").strip().upper()
    if stated:
        for mode in MergeMode:
            if stated == mode.value:
                return mode
        raise InvalidConfigError(
            f"{MERGE_MODE_KEY}={stated}: only EVENT_TIME_ORDERING and COMMIT_TIME_ORDERING are read"
        )
    payload = next((props[k] for k in PAYLOAD_CLASS_KEYS if props.get(k)), "")
    strategy = next((props[k] for k in MERGE_STRATEGY_KEYS if props.get(k)), "")
    if payload:
        if payload in EVENT_TIME_PAYLOADS:
            return MergeMode.EVENT_TIME
        if payload == COMMIT_TIME_PAYLOAD:
            return MergeMode.COMMIT_TIME
        raise InvalidConfigError(
            f"payload class {payload} is a custom merger, which log files cannot be merged with"
        )
    if strategy:
        if strategy == EVENT_TIME_STRATEGY:
            return MergeMode.EVENT_TIME
        if strategy == COMMIT_TIME_STRATEGY:
            return MergeMode.COMMIT_TIME
        raise InvalidConfigError(
            f"merge strategy {strategy} is a custom merger, which log files cannot be merged with"
        )
    return MergeMode.EVENT_TIME if config.precombine_field else MergeMode.COMMIT_TIME


# ----------------------------------------------------------------------------- log blocks


def active_blocks(
    storage: Storage, log_paths: Sequence[str], is_committed: Callable[[str], bool], as_of: str | None = None
) -> list[tuple[str, LogBlock]]:
    """The data and delete blocks of a slice's log files that count, with their file, in the order
    they apply: committed, not after `as_of`, not rolled back by a later ROLLBACK command block."""
    queued: list[tuple[str, LogBlock]] = []
    for path in log_paths:
        for block in read_log_blocks(storage, path):
            instant = block.instant
            if instant is None:
                raise CorruptTableError(
                    f"{storage.uri(path)}: log block at offset {block.offset} has no INSTANT_TIME"
                )
            kind = block.block_type
            if kind == BlockType.COMMAND:
                command = block.header.get(HeaderKey.COMMAND_BLOCK_TYPE)
                target = block.header.get(HeaderKey.TARGET_INSTANT_TIME)
                if command != str(CommandBlockType.ROLLBACK) or target is None:
                    raise CorruptTableError(
                        f"{storage.uri(path)}: log block at offset {block.offset}: unknown command block "
                        f"(type {command!r}, target {target!r})"
                    )
                queued = [(p, b) for p, b in queued if b.instant != target]
            elif kind in (
                BlockType.DELETE,
                BlockType.AVRO_DATA,
                BlockType.PARQUET_DATA,
                BlockType.HFILE_DATA,
            ):
                if is_committed(instant) and (as_of is None or instant <= as_of):
                    queued.append((path, block))
            elif kind == BlockType.CDC_DATA:
                raise CorruptTableError(
                    f"{storage.uri(path)}: log block at offset {block.offset}: CDC blocks are unsupported"
                )
            else:
                raise CorruptTableError(
                    f"{storage.uri(path)}: log block at offset {block.offset}: unknown block type {kind}"
                )
    return queued


IS_DELETED_COL = "_hoodie_is_deleted"  # a log record with true here is a delete (with its ordering value)


def _delete_markers(records: pa.Table) -> np.ndarray:
    if IS_DELETED_COL not in records.column_names or not pa.types.is_boolean(
        records.schema.field(IS_DELETED_COL).type
    ):
        return np.zeros(records.num_rows, dtype=bool)
    flags = records.column(IS_DELETED_COL).combine_chunks().fill_null(False)
    return flags.to_numpy(zero_copy_only=False).astype(bool)


def _block_schema(schema: pa.Schema) -> pa.Schema:
    """What to decode log records to: `schema`, plus the delete marker when `schema` lacks it (key and
    ordering scans must see deleted records as deleted)."""
    if IS_DELETED_COL in schema.names:
        return schema
    return schema.append(pa.field(IS_DELETED_COL, pa.bool_()))


@dataclass(frozen=True)
class _LogEvents:
    """A slice's log records and deletes in the order they apply (one event each)."""

    data: pa.Table  # the data records, conformed to the read schema
    keys: pa.Array  # record key per event
    is_delete: np.ndarray
    is_natural: np.ndarray  # natural-order deletes
    ordering: pa.Array | None  # comparable ordering value per event (event time only)
    rows: np.ndarray  # row of `data` per event, -1 for deletes
    present: np.ndarray | None  # per event, which columns of `data` it carries; None: no partial block


def _collect_events(
    storage: Storage,
    blocks: list[tuple[str, LogBlock]],
    schema: pa.Schema,
    ordering: pa.Field | None,
    keys: pa.Array | None,
) -> _LogEvents:
    tables: list[pa.Table] = []
    key_parts: list[pa.Array] = []
    deletes: list[np.ndarray] = []
    naturals: list[np.ndarray] = []
    orders: list[pa.Array] = []
    rows: list[np.ndarray] = []
    present: list[np.ndarray] = []
    any_partial = False
    next_row = 0
    for path, block in blocks:
        try:
            if block.block_type == BlockType.DELETE:
                entries = decode_delete_block(block)
                if keys is not None:
                    entries = entries.filter(pc.is_in(entries.column("key"), value_set=keys))
                n = entries.num_rows
                key_parts.append(entries.column("key").combine_chunks())
                value, natural = normalize_delete_ordering(entries, ordering.type if ordering else None)
                deletes.append(np.ones(n, dtype=bool))
                naturals.append(natural)
                if ordering is not None:
                    orders.append(value)
                rows.append(np.full(n, -1, dtype=np.int64))
                present.append(np.zeros((n, len(schema)), dtype=bool))
            else:
                records = decode_data_block(block, _block_schema(schema))
                if keys is not None:
                    records = records.filter(pc.is_in(records.column(RECORD_KEY_COL), value_set=keys))
                n = records.num_rows
                deletes.append(_delete_markers(records))
                records = records.select(schema.names)
                tables.append(records)
                key_parts.append(records.column(RECORD_KEY_COL).combine_chunks())
                naturals.append(np.zeros(n, dtype=bool))
                if ordering is not None:
                    orders.append(normalize_field_ordering(records.column(ordering.name), ordering.type))
                rows.append(np.arange(next_row, next_row + n, dtype=np.int64))
                next_row += n
                if block.is_partial:
                    any_partial = True
                    given = set(block.schema_field_names())
                    carried = np.array([name in given for name in schema.names], dtype=bool)
                else:
                    carried = np.ones(len(schema), dtype=bool)
                present.append(np.broadcast_to(carried, (n, len(schema))))
        except CorruptTableError as exc:
            raise CorruptTableError(f"{storage.uri(path)}: {exc}") from exc
        if key_parts[-1].null_count:
            raise CorruptTableError(
                f"{storage.uri(path)}: log block at offset {block.offset} has records without a key"
            )
    key_type = pa.string()
    return _LogEvents(
        data=pa.concat_tables(tables) if tables else schema.empty_table(),
        keys=pa.concat_arrays([k.cast(key_type) for k in key_parts]) if key_parts else pa.array([], key_type),
        is_delete=np.concatenate(deletes) if deletes else np.zeros(0, dtype=bool),
        is_natural=np.concatenate(naturals) if naturals else np.zeros(0, dtype=bool),
        ordering=pa.concat_arrays(orders) if ordering is not None and orders else None,
        rows=np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64),
        present=np.concatenate(present) if any_partial else None,
    )


# ----------------------------------------------------------------------------- reading


def read_slice(
    storage: Storage,
    files: SliceFiles,
    schema: pa.Schema,
    *,
    ordering_field: str | None,
    mode: MergeMode,
    is_committed: Callable[[str], bool],
    as_of: str | None = None,
    keys: pa.Array | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """The live records of a file slice: its base file merged with its log files.

    `schema` is the table's full Arrow schema with the meta fields; the result is conformed to it
    (a column a file lacks reads as nulls), in its column order, and holds only `columns` when
    given (the key and ordering columns are read anyway when the merge needs them). With `keys`,
    only records of those keys are read and returned. `ordering_field` (the precombine field) is
    used by EVENT_TIME only. Rows come base records first (in file order), then log records.
    A log record whose boolean `_hoodie_is_deleted` is true is a delete carrying its ordering value
    (as hudi-rs reads it, also when `schema` or `columns` leave the column out); base records are
    returned whatever that column holds.

    A slice without log files costs one base-file read of the wanted columns.
    """
    if RECORD_KEY_COL not in schema.names:
        raise InvalidInputError(f"the slice schema must hold {RECORD_KEY_COL}")
    if columns is not None:
        unknown = [c for c in columns if c not in schema.names]
        if unknown:
            raise InvalidInputError(f"columns {unknown} are not in the table schema")
        wanted = set(columns)
        out_names = [n for n in schema.names if n in wanted]
    else:
        out_names = list(schema.names)
    ordering = _ordering_field(schema, ordering_field) if mode is MergeMode.EVENT_TIME else None
    needed = set(out_names) | {RECORD_KEY_COL} | ({ordering.name} if ordering is not None else set())
    read_schema = pa.schema([f for f in schema if f.name in needed], metadata=schema.metadata)
    key_set = _key_set(keys)
    base = (
        read_columns(storage, files.base_path, read_schema, keys=key_set)
        if files.base_path is not None
        else read_schema.empty_table()
    )
    blocks = active_blocks(storage, files.log_paths, is_committed, as_of) if files.log_paths else []
    if blocks:
        events = _collect_events(storage, blocks, read_schema, ordering, key_set)
        if events.present is not None:
            base = merge_partial(
                base,
                events.data,
                events.keys,
                events.rows,
                events.present,
                events.is_delete,
                events.is_natural,
                events.ordering,
                _base_ordering(base, ordering),
                RECORD_KEY_COL,
            )
        elif len(events.keys):
            base = _merge(base, events, ordering)
    return base.select(out_names)


def _ordering_field(schema: pa.Schema, name: str | None) -> pa.Field | None:
    """The ordering field when its values can be compared; None orders by commit time alone, which
    is what event-time merging amounts to without comparable values."""
    if name is None:
        return None
    if name not in schema.names:
        raise InvalidInputError(f"ordering field {name!r} is not in the table schema")
    field = schema.field(name)
    return field if ordering_class(field.type) is not None else None


def _key_set(keys: pa.Array | pa.ChunkedArray | None) -> pa.Array | None:
    if keys is None:
        return None
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else pa.array(keys)
    return arr.cast(pa.string())


def _base_ordering(base: pa.Table, ordering: pa.Field | None) -> pa.Array | None:
    return (
        normalize_field_ordering(base.column(ordering.name), ordering.type) if ordering is not None else None
    )


def _merge(base: pa.Table, events: _LogEvents, ordering: pa.Field | None) -> pa.Table:
    encoded = pc.dictionary_encode(events.keys)
    unique = encoded.dictionary
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    event_time = ordering is not None
    winners = resolve_events(
        codes, len(unique), events.is_delete, events.is_natural, events.ordering, event_time
    )
    base_keys = base.column(RECORD_KEY_COL).combine_chunks()
    base_codes = pc.index_in(base_keys, value_set=unique).fill_null(-1).to_numpy(zero_copy_only=False)
    base_ordering = _base_ordering(base, ordering)
    keep, emit = merge_base(
        base_codes.astype(np.int64),
        base_ordering,
        winners,
        events.is_delete,
        events.is_natural,
        events.ordering,
        event_time,
    )
    logged = events.data.take(pa.array(events.rows[emit]))
    return pa.concat_tables([base.filter(pa.array(keep)), logged])


def slice_ordering(
    storage: Storage,
    files: SliceFiles,
    field: pa.Field,
    *,
    mode: MergeMode,
    is_committed: Callable[[str], bool],
    keys: pa.Array | None = None,
) -> pa.Table:
    """(`key`, `value`) rows: the ordering (`field`) value of each live record of the slice, only
    of `keys` when given; reads the key and ordering columns only. A key stored twice (an insert
    duplicate) gets its largest value, as `engine.data.keys.file_ordering` does for base files."""
    schema = pa.schema([pa.field(RECORD_KEY_COL, pa.string()), field])
    table = read_slice(
        storage, files, schema, ordering_field=field.name, mode=mode, is_committed=is_committed, keys=keys
    )
    if table.num_rows != pc.count_distinct(table.column(0)).as_py():
        table = table.group_by(RECORD_KEY_COL).aggregate([(field.name, "max")])
    return pa.table([table.column(0), table.column(1)], names=["key", "value"])


def slice_keys(
    storage: Storage,
    files: SliceFiles,
    *,
    mode: MergeMode,
    is_committed: Callable[[str], bool],
    keys: pa.Array | None = None,
    ordering: pa.Field | None = None,
) -> pa.Array:
    """The keys of the slice's live records (only those among `keys` when given).

    Under EVENT_TIME, whether a delete with a real ordering value or a lower-ordered update wins
    depends on the ordering values: pass the `ordering` field to get it exactly; without it every
    later delete wins (as natural-order deletes, the only ones we write, do anyway).
    """
    fields = [pa.field(RECORD_KEY_COL, pa.string())] + ([ordering] if ordering is not None else [])
    table = read_slice(
        storage,
        files,
        pa.schema(fields),
        ordering_field=ordering.name if ordering else None,
        mode=mode,
        is_committed=is_committed,
        keys=keys,
        columns=[RECORD_KEY_COL],
    )
    return table.column(0).combine_chunks()


__all__ = [
    "COMMIT_TIME_PAYLOAD",
    "EVENT_TIME_PAYLOADS",
    "MergeMode",
    "SliceFiles",
    "active_blocks",
    "merge_mode_for",
    "read_slice",
    "slice_keys",
    "slice_ordering",
]
