"""Reading base files (parquet) and their footers through Storage, with typed errors.

Not parquet -> CorruptTableError; an I/O failure -> StorageError; a missing file stays
FileNotFoundError (callers that race a clean or a compaction retry on it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.constants import RECORD_KEY_COL
from engine.data.file_names import parse_base_file_name
from engine.errors import CorruptTableError, StorageError
from engine.schema.internal import FILE_COLUMNS_KEY, file_columns, without_versions
from engine.storage import Storage

_T = TypeVar("_T")


def conform(table: pa.Table, schema: pa.Schema, instant: str | None = None) -> pa.Table:
    """Select/cast `table` to `schema` by column name; absent columns become nulls. When `schema`
    carries the table's internal schema versions and the rows were written at `instant`, columns
    are matched by id instead (a renamed column is read under its old name; one dropped and added
    again reads as nulls): :func:`engine.schema.internal.file_columns`."""
    sources = file_columns(schema, instant)
    arrays = []
    for f in schema:
        source = f.name if sources is None else sources.get(f.name, f.name)
        if source is not None and source in table.column_names:
            col = table.column(source)
            arrays.append(col if col.type == f.type else col.cast(f.type))
        else:
            arrays.append(pa.nulls(table.num_rows, type=f.type))
    if schema.metadata and FILE_COLUMNS_KEY in schema.metadata:
        schema = without_versions(schema)
    return pa.Table.from_arrays(arrays, schema=schema)


def base_file_instant(path: str) -> str | None:
    """The instant that wrote a base file, from its name (None for a name that is not one)."""
    parsed = parse_base_file_name(path.rsplit("/", 1)[-1])
    return parsed.instant if parsed is not None else None


def read_parquet_metadata(storage: Storage, path: str) -> pq.FileMetaData:
    """A base file's Parquet footer (schema, row groups and their statistics, key-value metadata)."""
    return _typed_read(storage, path, pq.read_metadata)


def read_footer(storage: Storage, path: str, remember: bool = False) -> dict[bytes, bytes]:
    """A base file's parquet key-value metadata (bloom filter, key range), reading only the footer.
    With `remember`, the parsed footer is kept in this process's footer cache (and taken from it
    when there): the reads of this file that follow skip parsing it again; the dict is then
    shared: do not change it."""
    if not remember:
        return read_parquet_metadata(storage, path).metadata or {}
    return _remembered(storage, path).key_value_dict()


def remembered_footer(storage: Storage, path: str) -> dict[bytes, bytes] | None:
    """The key-value metadata of a base file whose footer this process remembers (an index lookup
    read it), else None: nothing is read or remembered."""
    entry = _FOOTERS.get(storage.base_uri, path)
    return entry.key_value_dict() if entry is not None else None


def footer_length(storage: Storage, path: str) -> int:
    """The bytes of a Parquet file's footer (its metadata), from the file's last 8 bytes, without
    parsing it (CorruptTableError if the file does not end like Parquet)."""

    def tail(f: Any) -> int:
        size = f.size()
        if size < 12:
            raise pa.ArrowInvalid("file too small to be Parquet")
        f.seek(size - 8)
        end = f.read(8)
        if end[4:] != b"PAR1":
            raise pa.ArrowInvalid("file does not end with the Parquet magic bytes")
        return int.from_bytes(end[:4], "little")

    return _typed_read(storage, path, tail)


class _Footer:
    __slots__ = ("key_values", "metadata", "size")

    def __init__(self, size: int, metadata: pq.FileMetaData) -> None:
        self.size = size
        self.metadata = metadata
        self.key_values: dict[bytes, bytes] | None = None  # built on first use (~0.5 ms with a bloom filter)

    def key_value_dict(self) -> dict[bytes, bytes]:
        if self.key_values is None:
            self.key_values = self.metadata.metadata or {}
        return self.key_values


def _remembered(storage: Storage, path: str) -> _Footer:
    hit = _FOOTERS.get(storage.base_uri, path)
    if hit is not None:
        return hit

    def parse(f: Any) -> _Footer:
        entry = _Footer(f.size(), pq.read_metadata(f))
        _FOOTERS.put(storage.base_uri, path, entry)
        return entry

    return _typed_read(storage, path, parse)


class _FooterCache:
    """Parsed footers of the base files an index lookup just read, by (storage, path), with the
    file's size: a base file is never rewritten under its name (names carry the writing instant
    and a write token); a footer is used to read a file only if the file has the size it was read
    from (its key-value metadata, for key ranges and bloom filters, is used as it was read).
    Bounded by the footers' bytes (Hudi's ~430 KB bloom filter text is in each, twice once its
    key-value dict is built), least recently used first out. Parsing a footer costs ~1 ms; a local
    write reads each file it rewrites three times (footer, keys, rows)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, str], _Footer] = OrderedDict()
        self._bytes = 0

    def get(self, base_uri: str, path: str) -> _Footer | None:
        with self._lock:
            hit = self._entries.get((base_uri, path))
            if hit is not None:
                self._entries.move_to_end((base_uri, path))
            return hit

    def put(self, base_uri: str, path: str, entry: _Footer) -> None:
        with self._lock:
            old = self._entries.pop((base_uri, path), None)
            if old is not None:
                self._bytes -= 2 * old.metadata.serialized_size
            self._entries[(base_uri, path)] = entry
            self._bytes += 2 * entry.metadata.serialized_size
            while self._bytes > self.max_bytes and len(self._entries) > 1:
                _key, dropped = self._entries.popitem(last=False)
                self._bytes -= 2 * dropped.metadata.serialized_size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


FOOTER_CACHE_BYTES = 128 * 1024 * 1024
_FOOTERS = _FooterCache(FOOTER_CACHE_BYTES)


def _parquet_file(storage: Storage, path: str, f: Any) -> pq.ParquetFile:
    """`f` opened as a ParquetFile, its footer taken from the cache when one of this size is there."""
    hit = _FOOTERS.get(storage.base_uri, path)
    if hit is not None and hit.size == f.size():
        return pq.ParquetFile(f, metadata=hit.metadata)
    return pq.ParquetFile(f)


def read_base_file(storage: Storage, path: str, columns: list[str] | None = None) -> pa.Table:
    """A base file's rows (only `columns` when given)."""
    return _typed_read(storage, path, lambda f: _parquet_file(storage, path, f).read(columns=columns))


def read_columns(
    storage: Storage,
    path: str,
    schema: pa.Schema,
    keys: pa.Array | None = None,
    key_column: str = RECORD_KEY_COL,
) -> pa.Table:
    """The columns of `schema` from a base file, conformed to it: the file's other columns are not
    read, and a column the file lacks (written before it was added) comes back as nulls. With
    `keys`, only the rows whose `key_column` is among them (row groups whose key statistics rule
    them out are not read); `key_column` must then be in `schema`."""

    if keys is None:
        return _read(storage, path, schema)
    return _read(
        storage, path, schema, pc.field(key_column).isin(keys), {key_column}, lacking_gives_all=False
    )


def read_filtered(
    storage: Storage, path: str, schema: pa.Schema, expr: pc.Expression | None, expr_columns: set[str]
) -> pa.Table:
    """The columns of `schema` from a base file, conformed to it; with `expr` (naming only
    `expr_columns`), the row groups its statistics rule out are not read and the rows it rejects
    are dropped. A file lacking one of those columns (written before it was added) is read whole."""
    return _read(storage, path, schema, expr, expr_columns)


def _read(
    storage: Storage,
    path: str,
    schema: pa.Schema,
    expr: pc.Expression | None = None,
    expr_columns: set[str] | None = None,
    lacking_gives_all: bool = True,
) -> pa.Table:
    instant = base_file_instant(path)
    sources = file_columns(schema, instant)

    def read(f: Any) -> pa.Table:
        pf = _parquet_file(storage, path, f)
        stored = set(pf.schema_arrow.names)
        if sources is None:
            columns = [c for c in schema.names if c in stored]
            present = stored
        else:  # by id: a column of `schema` is present under the name the file gave it
            columns = [s for c in schema.names if (s := sources.get(c, c)) is not None and s in stored]
            present = {c for c in schema.names if sources.get(c, c) == c and c in stored}
        if expr is not None and not (expr_columns or set()) <= present:
            return (
                pf.read(columns=columns)
                if lacking_gives_all
                else pf.schema_arrow.empty_table().select(columns)
            )
        if expr is None:
            return pf.read(columns=columns)
        if pf.metadata.num_row_groups <= 1:  # nothing to skip: filter in memory (no dataset scan set-up)
            wanted = sorted(set(columns) | (expr_columns or set()), key=pf.schema_arrow.names.index)
            return pf.read(columns=wanted).filter(expr).select(columns)
        return pq.read_table(f, columns=columns, filters=expr)

    return conform(_typed_read(storage, path, read), schema, instant)


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


__all__ = ["base_file_instant", "conform", "read_base_file", "read_columns", "read_filtered", "read_footer",
           "read_parquet_metadata", "remembered_footer", "footer_length"]
