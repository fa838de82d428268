"""Table schemas: Arrow <-> the Avro schema JSON that Apache Hudi stores.

Apache Hudi keeps a table's schema as Avro JSON in three places, each in its own form:

* commit metadata ``extraMetadata.schema`` (and every later writer schema): what
  Spark's ``SchemaConverters.toAvroType`` produces, passed through Hudi's
  ``AvroConversionUtils.getAvroSchemaWithDefaults``: nullable types are unions
  ``["null", T]`` and nullable record fields carry ``"default": null``
  (:func:`arrow_to_avro`);
* ``hoodie.table.create.schema`` in ``hoodie.properties``: Spark's raw output,
  unions ``[T, "null"]`` and no defaults (:func:`arrow_to_create_schema`);
* base-file footers (``parquet.avro.schema``) and log-block headers: the commit form
  with the five meta columns first, each ``{"type": ["null", "string"], "doc": ""}``
  (:func:`avro_with_meta_fields`).

Named types follow Spark: the top record is ``<table>_record`` in namespace
``hoodie.<table>``; a struct field ``f`` of a record ``R`` in namespace ``N`` becomes a
record ``f`` in namespace ``N.R`` (also when the struct is the element of a list or the
value of a map); a decimal becomes ``fixed`` named ``fixed`` in namespace ``N.R.f``.
Keys are emitted in the order Avro's ``Schema.toString`` writes them, so
:func:`avro_to_json` reproduces Apache Hudi's strings character for character.

The module is pure: it imports neither pyspark nor any I/O layer.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from engine.constants import META_COLUMNS
from engine.errors import SchemaMismatchError
from engine.schema.avro_types import MAX_DECIMAL128_PRECISION, avro_to_arrow, avro_to_json, join_path

__all__ = [
    "META_FIELDS",
    "arrow_to_avro",
    "arrow_to_create_schema",
    "avro_for_table_create",
    "avro_to_arrow",
    "avro_to_json",
    "avro_with_meta_fields",
    "min_bytes_for_precision",
    "normalize_for_write",
    "record_name_and_namespace",
    "with_meta_fields",
    "without_meta_fields",
]

META_FIELDS: tuple[str, ...] = META_COLUMNS
"""The meta columns Apache Hudi writes first in every base file, in this order."""

# Avro's name rule (https://avro.apache.org/docs/current/specification/#names). Java Avro
# also admits non-ASCII letters, but hudi-rs (apache-avro crate) does not, so neither do we.
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INVALID_FIRST_CHAR = re.compile(r"[^A-Za-z_]")
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_]")
# Spark and Hudi read a struct whose fields are all nullable `member<N>` back into an Avro
# union (their representation of complex unions), which no reader here understands.
_UNION_MEMBER = re.compile(r"member\d+\Z")


# --------------------------------------------------------------------------- names


def record_name_and_namespace(table_name: str) -> tuple[str, str]:
    """The top record's name and namespace for a table, as Apache Hudi derives them.

    ``AvroConversionUtils.getAvroRecordNameAndNamespace``: the table name is sanitised
    (``HoodieAvroUtils.sanitizeName``: an invalid first character and then every
    character outside ``[A-Za-z0-9_]`` become ``__``), giving
    ``(f"{name}_record", f"hoodie.{name}")``.
    """
    if not table_name:
        raise SchemaMismatchError("a table name is needed to name the Avro record")
    name = table_name
    if _INVALID_FIRST_CHAR.match(name[0]):
        name = "__" + name[1:]
    name = _INVALID_CHARS.sub("__", name)
    return f"{name}_record", f"hoodie.{name}"


def _check_field_names(names: list[str], where: str) -> None:
    seen: set[str] = set()
    for name in names:
        path = join_path(where, name)
        if not _AVRO_NAME.match(name):
            raise SchemaMismatchError(
                f"field {path!r}: {name!r} is not a valid Avro name "
                "(letters, digits and '_', not starting with a digit)"
            )
        if name in seen:
            raise SchemaMismatchError(f"field {path!r} appears more than once")
        seen.add(name)


# --------------------------------------------------------------------------- Arrow -> Avro


def arrow_to_avro(schema: pa.Schema, table_name: str) -> dict[str, Any]:
    """The Avro schema Apache Hudi (via Spark) writes for ``schema``, in commit form.

    Nullable fields become ``{"name": f, "type": ["null", T], "default": null}``,
    non-nullable ones ``{"name": f, "type": T}``; list elements and map values are
    ``["null", T]`` when nullable. Only types Hudi can hold are accepted (see
    :func:`normalize_for_write`); anything else raises :class:`SchemaMismatchError`
    naming the field. Meta columns, if present, are converted like any other column:
    the commit schema is written without them (:func:`without_meta_fields`).
    """
    return _top_record(schema, table_name, _Style.COMMIT)


def arrow_to_create_schema(schema: pa.Schema, table_name: str) -> dict[str, Any]:
    """The Avro schema in the form ``hoodie.table.create.schema`` holds it.

    That property is Spark's raw ``SchemaConverters.toAvroType`` output: nullable
    types are ``[T, "null"]`` and no field has a default. Equal to
    ``avro_for_table_create(arrow_to_avro(schema, table_name))``.
    """
    return _top_record(schema, table_name, _Style.CREATE)


class _Style(enum.Enum):
    COMMIT = "commit"  # ["null", T] + "default": null on nullable record fields
    CREATE = "create"  # [T, "null"], no defaults


def _top_record(schema: pa.Schema, table_name: str, style: _Style) -> dict[str, Any]:
    name, namespace = record_name_and_namespace(table_name)
    return _record(list(schema), name, namespace, "", style)


def _record(fields: list[pa.Field], name: str, namespace: str, path: str, style: _Style) -> dict[str, Any]:
    if path and not fields:
        raise SchemaMismatchError(f"field {path!r}: a struct without fields cannot be stored")
    if path and _looks_like_union(fields):
        raise SchemaMismatchError(
            f"field {path!r}: a struct whose fields are all nullable 'member<N>' is written "
            "by Apache Hudi as an Avro union, which readers cannot map back; rename its fields"
        )
    _check_field_names([f.name for f in fields], path)
    child_namespace = f"{namespace}.{name}" if namespace else name
    avro_fields = []
    for field in fields:
        field_path = join_path(path, field.name)
        avro_type = _avro_type(field.type, field.nullable, field.name, child_namespace, field_path, style)
        entry: dict[str, Any] = {"name": field.name, "type": avro_type}
        if field.nullable and style == _Style.COMMIT:
            entry["default"] = None
        avro_fields.append(entry)
    return {"type": "record", "name": name, "namespace": namespace, "fields": avro_fields}


def _looks_like_union(fields: list[pa.Field]) -> bool:
    return bool(fields) and all(_UNION_MEMBER.match(f.name) and f.nullable for f in fields)


def _avro_type(
    arrow_type: pa.DataType, nullable: bool, record_name: str, namespace: str, path: str, style: _Style
) -> Any:
    """Spark's ``toAvroType(type, nullable, recordName, nameSpace)`` for one Arrow type."""
    avro = _non_null_avro_type(arrow_type, record_name, namespace, path, style)
    if not nullable:
        return avro
    return ["null", avro] if style == _Style.COMMIT else [avro, "null"]


_PRIMITIVES: dict[pa.DataType, str] = {
    pa.bool_(): "boolean",
    pa.int8(): "int",
    pa.int16(): "int",
    pa.int32(): "int",
    pa.int64(): "long",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.binary(): "bytes",
}


def _non_null_avro_type(t: pa.DataType, record_name: str, namespace: str, path: str, style: _Style) -> Any:
    primitive = _PRIMITIVES.get(t)
    if primitive is not None:
        return primitive
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t) and t.unit in ("us", "ms"):
        # Spark has no zone-less timestamp in Hudi 0.x: every timestamp is an instant,
        # and hudi-rs 0.5 cannot read `local-timestamp-*`.
        logical = "timestamp-micros" if t.unit == "us" else "timestamp-millis"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_decimal128(t):
        _check_decimal(t, path)
        fixed_namespace = f"{namespace}.{record_name}" if namespace else record_name
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": fixed_namespace,
            "size": min_bytes_for_precision(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_struct(t):
        return _record(list(t), record_name, namespace, path, style)
    if pa.types.is_map(t):
        if t.key_type != pa.string():
            raise SchemaMismatchError(
                f"field {path!r}: map keys must be strings in Hudi's Avro schema, got {t.key_type}"
            )
        item = t.item_field
        values = _avro_type(item.type, item.nullable, record_name, namespace, path, style)
        return {"type": "map", "values": values}
    if pa.types.is_list(t):
        element = t.value_field
        items = _avro_type(element.type, element.nullable, record_name, namespace, path, style)
        return {"type": "array", "items": items}
    hint = " as is; call normalize_for_write first" if _can_normalize(t) else ""
    raise SchemaMismatchError(f"field {path!r}: type {t} cannot be stored in a Hudi table{hint}")


def _can_normalize(t: pa.DataType) -> bool:
    try:
        _normalize_type(t, "")
    except SchemaMismatchError:
        return False
    return True


def _check_decimal(t: pa.DataType, path: str) -> None:
    if t.precision > MAX_DECIMAL128_PRECISION or not 0 <= t.scale <= t.precision:
        raise SchemaMismatchError(
            f"field {path!r}: {t} is outside what Hudi stores "
            f"(precision 1..{MAX_DECIMAL128_PRECISION}, 0 <= scale <= precision)"
        )


def min_bytes_for_precision(precision: int) -> int:
    """Bytes of the Avro ``fixed`` Spark uses for a decimal of ``precision`` digits.

    Spark's ``minBytesForPrecision``: the least n with 2^(8n-1) >= 10^precision.
    """
    n = 1
    while 2 ** (8 * n - 1) < 10**precision:
        n += 1
    return n


# --------------------------------------------------------------------------- Avro forms


def avro_for_table_create(avro: Mapping[str, Any]) -> dict[str, Any]:
    """The commit-form schema rewritten as ``hoodie.table.create.schema`` holds it.

    Unions with null become ``[T, "null"]`` and record fields lose ``"default": null``.
    """
    result = _create_form(avro)
    assert isinstance(result, dict)
    return result


def _create_form(node: Any) -> Any:
    if isinstance(node, list):
        branches = [_create_form(branch) for branch in node]
        return [b for b in branches if b != "null"] + ["null"] * branches.count("null")
    if not isinstance(node, Mapping):
        return node
    out = {
        key: _create_form(value) if key in ("type", "items", "values") else value
        for key, value in node.items()
    }
    if node.get("type") in ("record", "error") and "fields" in node:
        out["fields"] = [
            {
                k: _create_form(v) if k == "type" else v
                for k, v in f.items()
                if not (k == "default" and v is None)
            }
            for f in node["fields"]
        ]
    return out


def avro_with_meta_fields(avro: Mapping[str, Any]) -> dict[str, Any]:
    """The writer schema: the five meta columns first, as ``HoodieAvroUtils.addMetadataFields``.

    This is the schema in base-file footers (``parquet.avro.schema``) and in the SCHEMA
    header of log blocks. Existing fields of those names are dropped first.
    """
    if avro.get("type") != "record":
        raise SchemaMismatchError("the table schema must be an Avro record")
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in META_FIELDS]
    out = dict(avro)  # "fields" keeps its place in Avro's key order
    out["fields"] = meta + [dict(f) for f in avro["fields"] if f["name"] not in META_FIELDS]
    return out


# --------------------------------------------------------------------------- meta columns


def with_meta_fields(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the five nullable string meta columns first (replacing any present)."""
    meta = [pa.field(name, pa.string(), nullable=True) for name in META_FIELDS]
    return pa.schema(meta + list(without_meta_fields(schema)), metadata=schema.metadata)


def without_meta_fields(schema: pa.Schema) -> pa.Schema:
    """``schema`` without the meta columns (schema-level metadata kept)."""
    return pa.schema([f for f in schema if f.name not in META_FIELDS], metadata=schema.metadata)


# --------------------------------------------------------------------------- normalisation


def normalize_for_write(schema: pa.Schema) -> pa.Schema:
    """Map Arrow types Hudi cannot hold to ones it can, or raise naming the field.

    int8/int16/uint8/uint16 -> int32, uint32 -> int64, uint64 -> decimal128(20, 0) (as
    Spark reads parquet UINT_64), float16 -> float32, large/view strings -> string,
    large/view/fixed-size binary -> binary, date64 -> date32, timestamp[s/ns] ->
    timestamp[us] (zone kept; timestamp[ms] stays), decimal32/64 and decimal256 up to 38
    digits -> decimal128, dictionaries -> their value type, large/view/fixed-size lists
    -> list<element>. Duration, interval, time, union, null, run-end-encoded and
    extension types, maps with non-string keys, empty structs and names that are not
    valid Avro names raise :class:`SchemaMismatchError`. Field nullability and metadata
    are kept.
    """
    _check_field_names(schema.names, "")
    fields = [_normalize_field(f, f.name) for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def _normalize_field(field: pa.Field, path: str) -> pa.Field:
    return field.with_type(_normalize_type(field.type, path))


def _normalize_type(t: pa.DataType, path: str) -> pa.DataType:
    if pa.types.is_struct(t):
        if t.num_fields == 0:
            raise SchemaMismatchError(f"field {path!r}: a struct without fields cannot be stored")
        if _looks_like_union(list(t)):
            raise SchemaMismatchError(
                f"field {path!r}: a struct whose fields are all nullable 'member<N>' is written "
                "by Apache Hudi as an Avro union, which readers cannot map back; rename its fields"
            )
        _check_field_names([f.name for f in t], path)
        return pa.struct([_normalize_field(f, join_path(path, f.name)) for f in t])
    if pa.types.is_map(t):
        key = _normalize_type(t.key_type, path)
        if key != pa.string():
            raise SchemaMismatchError(
                f"field {path!r}: map keys must be strings in Hudi's Avro schema, got {t.key_type}"
            )
        return pa.map_(key, _normalize_field(t.item_field, path))
    if _is_any_list(t):
        element = t.value_field
        return pa.list_(pa.field("element", _normalize_type(element.type, path), element.nullable))
    if pa.types.is_dictionary(t):
        return _normalize_type(t.value_type, path)
    normalized = _normalized(t)
    if normalized is not None:
        return normalized
    raise SchemaMismatchError(f"field {path!r}: type {t} cannot be stored in a Hudi table")


def _is_any_list(t: pa.DataType) -> bool:
    checks = ("is_list", "is_large_list", "is_fixed_size_list", "is_list_view", "is_large_list_view")
    return any(getattr(pa.types, check, lambda _t: False)(t) for check in checks)


def _normalized(t: pa.DataType) -> pa.DataType | None:
    """The storable scalar type for ``t`` (``t`` itself if fine), or None if there is none."""
    if t in _PRIMITIVES or pa.types.is_date32(t):
        return pa.int32() if t in (pa.int8(), pa.int16()) else t
    widened = _WIDENED.get(t)
    if widened is not None:
        return widened
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_timestamp(t):
        return t if t.unit in ("us", "ms") else pa.timestamp("us", tz=t.tz)
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_decimal(t):
        if t.precision > MAX_DECIMAL128_PRECISION or not 0 <= t.scale <= t.precision:
            return None
        return pa.decimal128(t.precision, t.scale)
    return None


def _optional_types() -> Iterator[tuple[pa.DataType, pa.DataType]]:
    yield pa.uint8(), pa.int32()
    yield pa.uint16(), pa.int32()
    yield pa.uint32(), pa.int64()
    yield pa.uint64(), pa.decimal128(20, 0)
    yield pa.float16(), pa.float32()
    yield pa.large_string(), pa.string()
    yield pa.large_binary(), pa.binary()
    for name, target in (("string_view", pa.string()), ("binary_view", pa.binary())):
        factory = getattr(pa, name, None)  # pyarrow >= 16
        if factory is not None:
            yield factory(), target


_WIDENED: dict[pa.DataType, pa.DataType] = dict(_optional_types())


# --------------------------------------------------------------------------- type names
# the primitive types by the names Apache Hudi's internal schema gives them (`Type.toString`),
# and the SQL aliases a user may write (`hoodie alter --type`): one table for both directions
_NAMED_TYPES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(), "int": pa.int32(), "integer": pa.int32(), "long": pa.int64(), "bigint": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "date": pa.date32(),
    "binary": pa.binary(),
}
_DECIMAL_NAME = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)\Z")


def type_from_name(text: str) -> pa.DataType:
    """The Arrow type of a primitive type name (`int`, `long`, `decimal(10,2)`...); ValueError otherwise."""
    t = text.strip().lower()
    if t in _NAMED_TYPES:
        return _NAMED_TYPES[t]
    m = _DECIMAL_NAME.match(t)
    if m:
        return pa.decimal128(int(m[1]), int(m[2]))
    raise ValueError(f"unknown type name {text!r}")


def type_name(t: pa.DataType) -> str:
    """The name Apache Hudi's internal schema gives a primitive Arrow type; ValueError for others."""
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "long" if t.bit_width > 32 else "int"
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision}, {t.scale})"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_time(t):
        return "time"
    if pa.types.is_fixed_size_binary(t):
        return f"fixed[{t.byte_width}]"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    raise ValueError(f"type {t} has no name")
