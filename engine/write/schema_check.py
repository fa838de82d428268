"""Checking incoming data against the table schema and choosing the write schema (pure)."""

from __future__ import annotations

import pyarrow as pa

from engine.constants import META_COLUMNS
from engine.data.columns import INTERNAL_PREFIX
from engine.errors import InvalidInputError, SchemaMismatchError
from engine.table.schema import normalize_for_write
from engine.write.keygen import KeySpec

# incoming type -> table types it may be written as without loss
_WIDENING = {
    ("int32", "int64"),
    ("int32", "float"),
    ("int32", "double"),
    ("int64", "double"),
    ("float", "double"),
}


def canonical_type(t: pa.DataType) -> object:
    """A structural description of a type that ignores nested field names, nullability and tz."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ("list", canonical_type(t.value_type))
    if pa.types.is_map(t):
        return ("map", canonical_type(t.key_type), canonical_type(t.item_type))
    if pa.types.is_struct(t):
        return ("struct", tuple((f.name, canonical_type(f.type)) for f in t))
    if pa.types.is_timestamp(t):
        return ("timestamp", t.unit)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    return str(t)


def _describe(t: pa.DataType) -> str:
    return str(t)


def resolve_write_schema(
    incoming: pa.Schema,
    table: pa.Schema | None,
    spec: KeySpec,
    precombine_field: str | None,
    *,
    deleting: bool = False,
) -> pa.Schema:
    """The data schema (no meta columns) the write will produce; raises typed errors for bad input.

    Rules: key and partition columns must be present; the precombine column too (except for
    deletes); a column the table has must keep a compatible type (same, or a lossless
    widening); columns the table lacks are added (schema evolution); a write that lacks a
    table column is refused.
    """
    names = [n for n in incoming.names if n not in META_COLUMNS]
    reserved = [n for n in names if n.startswith(INTERNAL_PREFIX)]
    if reserved:
        raise InvalidInputError(f"column name(s) {', '.join(reserved)} use the reserved prefix {INTERNAL_PREFIX!r}")
    for f in spec.record_key_fields:
        if f not in names:
            raise InvalidInputError(f"the input has no record key column {f!r} (columns: {', '.join(names)})")
    for f in spec.partition_fields:
        if f not in names:
            raise InvalidInputError(f"the input has no partition column {f!r} (columns: {', '.join(names)})")
    if precombine_field and not deleting and precombine_field not in names:
        raise InvalidInputError(f"the input has no precombine column {precombine_field!r}")
    data = normalize_for_write(pa.schema([incoming.field(n) for n in names]))
    if "_hoodie_is_deleted" in data.names and not pa.types.is_boolean(data.field("_hoodie_is_deleted").type):
        raise SchemaMismatchError("column '_hoodie_is_deleted' must be boolean (true deletes the record)")
    if deleting:
        if table is not None:
            _check_types(data, table, only=set(data.names) & set(table.names))
            return table
        return data
    if table is None:
        return pa.schema([f.with_nullable(True) for f in data])
    missing = [n for n in table.names if n not in data.names]
    if missing:
        raise SchemaMismatchError(
            f"the input lacks table column(s) {', '.join(missing)}; every column of the table must be present"
        )
    _check_types(data, table, only=set(table.names))
    added = [data.field(n).with_nullable(True) for n in data.names if n not in table.names]
    return pa.schema(list(table) + added)


def _check_types(data: pa.Schema, table: pa.Schema, only: set[str]) -> None:
    for name in data.names:
        if name not in only:
            continue
        got, want = data.field(name).type, table.field(name).type
        if canonical_type(got) == canonical_type(want):
            continue
        if (str(got), str(want)) in _WIDENING:
            continue
        raise SchemaMismatchError(
            f"column {name!r} is {_describe(got)} in the input but {_describe(want)} in the table"
        )
