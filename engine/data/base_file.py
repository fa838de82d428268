"""Reading base files (parquet) and their footers through Storage, with typed errors.

Not parquet -> CorruptTableError; an I/O failure -> StorageError; a missing file stays
FileNotFoundError (callers that race a clean or a compaction retry on it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import CorruptTableError, StorageError
from engine.storage import Storage

_T = TypeVar("_T")


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Select/cast `table` to `schema` by column name; absent columns become nulls."""
    arrays = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            arrays.append(col if col.type == f.type else col.cast(f.type))
        else:
            arrays.append(pa.nulls(table.num_rows, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def read_footer(storage: Storage, path: str) -> dict[bytes, bytes]:
    """A base file's parquet key-value metadata (bloom filter, key range), reading only the footer."""
    return _typed_read(storage, path, lambda f: pq.read_metadata(f).metadata or {})


def read_base_file(storage: Storage, path: str, columns: list[str] | None = None) -> pa.Table:
    """A base file's rows (only `columns` when given)."""
    return _typed_read(storage, path, lambda f: pq.read_table(f, columns=columns))


def _typed_read(storage: Storage, path: str, read: Callable[[Any], _T]) -> _T:
    """Run `read` on the opened file: not parquet -> CorruptTableError, I/O -> StorageError."""
    try:
        with storage.open_input_file(path) as f:
            return read(f)
    except FileNotFoundError:
        raise
    except pa.ArrowInvalid as exc:
        raise CorruptTableError(f"cannot read base file {storage.uri(path)}: {exc}") from exc
    except OSError as exc:
        raise StorageError(f"cannot read base file {storage.uri(path)}: {exc}") from exc


__all__ = ["conform", "read_base_file", "read_footer"]
