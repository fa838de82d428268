"""Record-key scans of base files: which keys a file holds, as (key, partition, file id) rows.

The building block of the SIMPLE and BLOOM lookups (run inside Spark tasks by `engine.read.scan`
and `engine.index.bloom`), kept free of Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from engine.constants import RECORD_KEY_COL
from engine.data.base_file import read_base_file, read_columns
from engine.storage import Storage

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
    """A base file to scan: its path (relative to the table root), partition and file id."""

    path: str
    partition: str
    file_id: str


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
    storage: Storage, path: str, partition: str, file_id: str, field: pa.Field, keys: pa.Array | None = None
) -> pa.Table:
    """The stored ordering (precombine) value of each record key of one base file (only of `keys`
    when given), as `ordering_schema` rows. Reads the key and ordering columns only; a file without
    the ordering column gives nulls; a key stored twice (an `insert` duplicate) gets its largest value."""
    table = read_columns(storage, path, pa.schema([pa.field(RECORD_KEY_COL, pa.string()), field]))
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
    storage: Storage, path: str, partition: str, file_id: str, wanted: Mapping[str, pa.Array] | None = None
) -> pa.RecordBatch | None:
    """(key, partition, file id) of the records of one base file, reading only the key column;
    only keys among `wanted` (partition -> candidate keys, or ANY_PARTITION -> keys) when given.
    None when no key is left."""
    candidates = None
    if wanted is not None:
        candidates = wanted.get(partition, wanted.get(ANY_PARTITION))
        if candidates is None:
            return None
    keys = read_base_file(storage, path, columns=[RECORD_KEY_COL]).column(0)
    keys = keys.combine_chunks().cast(pa.string())
    if candidates is not None:
        keys = keys.filter(pc.is_in(keys, value_set=candidates))
    return keys_batch(keys, partition, file_id) if len(keys) else None


__all__ = ["ANY_PARTITION", "KEYS_SCHEMA", "ScanFile", "file_keys", "file_ordering", "keys_batch", "ordering_schema"]
