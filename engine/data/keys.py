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
from engine.data.base_file import read_base_file
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


__all__ = ["ANY_PARTITION", "KEYS_SCHEMA", "ScanFile", "file_keys", "keys_batch"]
