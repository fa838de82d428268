"""Record-key scans of file slices: which keys a slice holds, as (key, partition, file id) rows,
and their stored ordering values.

The building block of the SIMPLE and BLOOM lookups and of the writer's event-time checks (run
inside Spark tasks by `engine.data.scan` and `engine.index.bloom`), kept free of Spark. A
copy-on-write slice is its base file; a merge-on-read slice with log files is read merged
(`engine.data.slice_reader`), so a key deleted in a log is not there and one updated in a log
has its new ordering value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from engine.constants import RECORD_KEY_COL
from engine.data.base_file import read_base_file, read_columns
from engine.data.slice_reader import MergeMode, SliceFiles, slice_keys, slice_ordering
from engine.storage import Storage

if TYPE_CHECKING:
    from engine.keygen.keys import KeySpec

KEYS_SCHEMA = pa.schema(
    [
        pa.field("__hoodie_existing_key", pa.string()),
        pa.field("__hoodie_existing_partition", pa.string()),
        pa.field("__hoodie_existing_file_id", pa.string()),
    ]
)

ANY_PARTITION = "\0*"  # key of a `wanted` mapping that matches every partition (global lookups)


@dataclass(frozen=True)
class ScanFile:
    """A file slice to scan: its base file (path relative to the table root; None for a log-only
    slice), partition and file id, and (merge-on-read) its base instant and log files in order."""

    path: str | None
    partition: str
    file_id: str
    log_paths: tuple[str, ...] = ()
    base_instant: str = ""

    @classmethod
    def of_slice(cls, file_slice) -> ScanFile:
        """The ScanFile of a `FileSlice` (engine.data.file_group)."""
        base = file_slice.base_file
        return cls(
            base.path if base is not None else None,
            file_slice.partition,
            file_slice.file_id,
            tuple(lf.path for lf in file_slice.log_files),
            file_slice.base_instant,
        )

    @property
    def slice_files(self) -> SliceFiles:
        return SliceFiles(self.partition, self.file_id, self.base_instant, self.path, self.log_paths)


@dataclass(frozen=True)
class SliceMerge:
    """How to merge slices with log files: the table's merge mode, which instants' blocks count,
    and its ordering field (picklable: shipped to scan tasks)."""

    mode: MergeMode
    committed: Callable[[str], bool]
    ordering: pa.Field | None = None
    # tables without meta fields: base files' keys are computed from these key fields
    virtual: KeySpec | None = None


def _base_keys(
    storage: Storage, path: str, merge: SliceMerge | None, extra: pa.Field | None = None
) -> pa.Table:
    """(`_hoodie_record_key`[, extra]) of a base file's rows; computed from the key fields when
    the table has no meta fields."""
    if merge is None or merge.virtual is None:
        fields = [pa.field(RECORD_KEY_COL, pa.string())] + ([extra] if extra is not None else [])
        return read_columns(storage, path, pa.schema(fields))
    from engine.keygen.keys import key_array

    keys = key_array(
        merge.virtual, read_base_file(storage, path, columns=list(merge.virtual.record_key_fields))
    )
    if extra is None:
        return pa.table([keys], names=[RECORD_KEY_COL])
    ordering = read_columns(storage, path, pa.schema([extra])).column(0)
    return pa.table([keys, ordering], names=[RECORD_KEY_COL, extra.name])


def keys_batch(keys: pa.Array, partition: str, file_id: str) -> pa.RecordBatch:
    """KEYS_SCHEMA rows for `keys` found in one file."""
    n = len(keys)
    return pa.RecordBatch.from_arrays(
        [keys, pa.array([partition] * n, pa.string()), pa.array([file_id] * n, pa.string())],
        schema=KEYS_SCHEMA,
    )


ORDERING_KEY = "__hoodie_stored_key"
ORDERING_PART = "__hoodie_stored_partition"
ORDERING_FILE_ID = "__hoodie_stored_file_id"
ORDERING_VALUE = "__hoodie_stored_order"


def ordering_schema(value_type: pa.DataType) -> pa.Schema:
    """(key, partition, file id, ordering value) rows of `file_ordering`."""
    return pa.schema(
        [
            pa.field(ORDERING_KEY, pa.string()),
            pa.field(ORDERING_PART, pa.string()),
            pa.field(ORDERING_FILE_ID, pa.string()),
            pa.field(ORDERING_VALUE, value_type),
        ]
    )


def file_ordering(
    storage: Storage,
    file: ScanFile,
    field: pa.Field,
    keys: pa.Array | None = None,
    merge: SliceMerge | None = None,
) -> pa.Table:
    """The stored ordering (precombine) value of each live record key of one slice (only of `keys`
    when given), as `ordering_schema` rows. Reads the key and ordering columns only; a file without
    the ordering column gives nulls; a key stored twice (an `insert` duplicate) gets its largest value."""
    partition, file_id = file.partition, file.file_id
    if file.log_paths:
        assert merge is not None, "a slice with log files needs its merge context"
        found = slice_ordering(
            storage, file.slice_files, field, mode=merge.mode, is_committed=merge.committed, keys=keys
        )
        table = pa.table(
            [found.column("key").cast(pa.string()), found.column("value").cast(field.type)],
            names=[RECORD_KEY_COL, field.name],
        )
    elif file.path is None:
        table = pa.schema([pa.field(RECORD_KEY_COL, pa.string()), field]).empty_table()
    else:
        table = _base_keys(storage, file.path, merge, field)
        if keys is not None:
            table = table.filter(pc.is_in(table.column(0), value_set=keys))
        if table.num_rows != pc.count_distinct(table.column(0)).as_py():
            table = table.group_by(RECORD_KEY_COL).aggregate([(field.name, "max")])
    n = table.num_rows
    return pa.table(
        [
            table.column(0),
            pa.array([partition] * n, pa.string()),
            pa.array([file_id] * n, pa.string()),
            table.column(1),
        ],
        schema=ordering_schema(field.type),
    )


def file_keys(
    storage: Storage,
    file: ScanFile,
    wanted: Mapping[str, pa.Array] | None = None,
    merge: SliceMerge | None = None,
) -> pa.RecordBatch | None:
    """(key, partition, file id) of the live records of one slice, reading only the key column
    (and, with log files, the ordering column); only keys among `wanted` (partition -> candidate
    keys, or ANY_PARTITION -> keys) when given. None when no key is left."""
    candidates = None
    if wanted is not None:
        candidates = wanted.get(file.partition, wanted.get(ANY_PARTITION))
        if candidates is None:
            return None
    keys = live_keys(storage, file, candidates, merge)
    return keys_batch(keys, file.partition, file.file_id) if len(keys) else None


def live_keys(
    storage: Storage, file: ScanFile, candidates: pa.Array | None = None, merge: SliceMerge | None = None
) -> pa.Array:
    """The keys of a slice's live records (only `candidates` when given), as strings."""
    if file.log_paths:
        assert merge is not None, "a slice with log files needs its merge context"
        keys = slice_keys(
            storage,
            file.slice_files,
            mode=merge.mode,
            is_committed=merge.committed,
            keys=candidates,
            ordering=merge.ordering,
        )
        return keys.cast(pa.string())
    if file.path is None:
        return pa.array([], pa.string())
    keys = _base_keys(storage, file.path, merge).column(0)
    keys = keys.combine_chunks().cast(pa.string())
    if candidates is not None:
        keys = keys.filter(pc.is_in(keys, value_set=candidates))
    return keys


__all__ = [
    "ANY_PARTITION",
    "KEYS_SCHEMA",
    "ScanFile",
    "SliceMerge",
    "file_keys",
    "file_ordering",
    "keys_batch",
    "live_keys",
    "ordering_schema",
]
