"""Checking incoming data against the table schema and choosing the write schema (pure).

The rules follow Apache Hudi's writer (`HoodieSchemaUtils.deduceWriterSchema`): the incoming
schema is first canonicalised against the table's (a column whose type the table's type can hold
is written as the table's type: `AvroSchemaEvolutionUtils.reconcileSchemaRequirements`), then the
result must be a valid evolution of the table's schema (`HoodieSchemaCompatibility
.checkValidEvolution`: the new schema reads every record of the old one). So a wider input type
moves the table's schema forward and a narrower one is written as the table's type; anything else
is refused naming the column and both types.
"""

from __future__ import annotations

import pyarrow as pa

from engine.columns import INTERNAL_PREFIX
from engine.constants import META_COLUMNS
from engine.errors import InvalidInputError, SchemaMismatchError
from engine.keygen.keys import KeySpec
from engine.schema.avro import normalize_for_write

# Avro's promotions (Apache Hudi's schema compatibility): a value of the first type is read, without
# loss of its meaning, as any of the second
_PROMOTIONS: dict[str, frozenset[str]] = {
    "int32": frozenset({"int64", "float", "double"}),
    "int64": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
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


def _is_nested(t: pa.DataType) -> bool:
    return pa.types.is_struct(t) or pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t)


def _digits(t: pa.Decimal128Type) -> tuple[int, int]:
    """(integer digits, scale) of a decimal."""
    return t.precision - t.scale, t.scale


def is_written_as(incoming: pa.DataType, table: pa.DataType) -> bool:
    """Whether a primitive value of `incoming` type is written, unchanged in meaning, as `table`'s
    type: Avro's numeric promotions, string <-> bytes, and a decimal whose integer digits and
    scale both fit (Apache Hudi's `SchemaChangeUtils.shouldPromoteType`, less the conversions of
    numbers to strings and decimals, which this engine does not make)."""
    a, b = canonical_type(incoming), canonical_type(table)
    if a == b:
        return True
    if isinstance(a, str) and b in _PROMOTIONS.get(a, ()):
        return True
    if {a, b} == {"string", "binary"}:
        return True
    if pa.types.is_decimal(incoming) and pa.types.is_decimal(table):
        (ia, sa), (ib, sb) = _digits(incoming), _digits(table)
        return ia <= ib and sa <= sb
    return False


def promote(incoming: pa.DataType, table: pa.DataType, path: str, missing: list[str], fill_missing: bool) -> pa.DataType:
    """The type a table column of type `table` has after a write of `incoming` values.

    The table's type when it can hold the incoming values (see `is_written_as`); the incoming type
    when it reads every stored value (the table's column is promoted: int -> long/float/double,
    long -> float/double, float -> double, a decimal with no fewer integer digits and no smaller
    scale); structs by field name (new fields appended, table fields the input lacks added to
    `missing` unless `fill_missing`), list elements and map values by the same rules. Anything
    else raises SchemaMismatchError naming `path` and both types."""
    if canonical_type(incoming) == canonical_type(table):
        return table
    if pa.types.is_struct(incoming) and pa.types.is_struct(table):
        return pa.struct(_promote_fields(list(incoming), list(table), path, missing, fill_missing))
    if (pa.types.is_list(incoming) or pa.types.is_large_list(incoming)) and pa.types.is_list(table):
        element = table.value_field
        t = promote(incoming.value_type, element.type, f"{path}.element", missing, fill_missing)
        return pa.list_(element.with_type(t))
    if pa.types.is_map(incoming) and pa.types.is_map(table):
        if canonical_type(incoming.key_type) != canonical_type(table.key_type):
            raise _mismatch(f"{path}.key", incoming.key_type, table.key_type)
        item = table.item_field
        t = promote(incoming.item_type, item.type, f"{path}.value", missing, fill_missing)
        return pa.map_(table.key_field, item.with_type(t))
    if _is_nested(incoming) or _is_nested(table):
        raise _mismatch(path, incoming, table)
    if is_written_as(incoming, table):
        return table
    if is_written_as(table, incoming):
        return incoming
    raise _mismatch(path, incoming, table)


def _promote_fields(
    incoming: list[pa.Field], table: list[pa.Field], path: str, missing: list[str], fill_missing: bool
) -> list[pa.Field]:
    by_name = {f.name: f for f in incoming}
    out = []
    for f in table:
        where = f"{path}.{f.name}" if path else f.name
        if f.name in by_name:
            out.append(f.with_type(promote(by_name[f.name].type, f.type, where, missing, fill_missing)))
        else:
            if not fill_missing:
                missing.append(where)
            out.append(f)
    known = {f.name for f in table}
    out.extend(f.with_nullable(True) for f in incoming if f.name not in known)
    return out


def _mismatch(path: str, got: pa.DataType, want: pa.DataType) -> SchemaMismatchError:
    return SchemaMismatchError(f"column {path!r} is {got} in the input but {want} in the table")


def resolve_write_schema(
    incoming: pa.Schema,
    table: pa.Schema | None,
    spec: KeySpec,
    precombine_field: str | None,
    *,
    deleting: bool = False,
    fill_missing: bool = False,
) -> pa.Schema:
    """The data schema (no meta columns) the write will produce; raises typed errors for bad input.

    Rules: key and partition columns must be present; the precombine column too (except for
    deletes); a column the table has keeps its type, is written as it when the input's is
    narrower, or is promoted when the input's is wider (`promote`); columns the table lacks are
    added, also inside structs (schema evolution); a write that lacks a table column is refused
    unless `fill_missing` (`hoodie.write.set.null.for.missing.columns`), when the column is
    written as nulls. Deletes never change the table's schema.
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
            for name in set(data.names) & set(table.names):
                promote(data.field(name).type, table.field(name).type, name, [], True)
            return table
        return data
    if table is None:
        return pa.schema([f.with_nullable(True) for f in data])
    missing: list[str] = []
    fields = _promote_fields(list(data), list(table), "", missing, fill_missing)
    if missing:
        raise SchemaMismatchError(
            f"the input lacks table column(s) {', '.join(missing)}; every column of the table must be present "
            "(or set hoodie.write.set.null.for.missing.columns=true to write them as nulls)"
        )
    if all(a.equals(b) for a, b in zip(fields, table, strict=False)) and len(fields) == len(table):
        return table
    return pa.schema(fields, metadata=table.metadata)
