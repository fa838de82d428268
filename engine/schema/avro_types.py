"""Avro -> Arrow: the Arrow schema of the Avro schema JSON a Hudi table stores (its commits,
`hoodie.properties`, file footers and log-block headers), and the compact JSON text Avro writes.
The other direction and the Avro forms Hudi keeps are `engine.schema.avro`, which re-exports
`avro_to_arrow` and `avro_to_json`. Pure: no pyspark, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from engine.errors import SchemaMismatchError

MAX_DECIMAL128_PRECISION = 38


def join_path(parent: str, name: str) -> str:
    """A field's dotted path in messages (``parent.name``; ``name`` at the top)."""
    return f"{parent}.{name}" if parent else name


def avro_to_json(avro: Mapping[str, Any] | list[Any] | str) -> str:
    """Compact JSON of an Avro schema, as Avro's ``Schema.toString()`` writes it.

    Keys keep their insertion order (the converters here build them in Avro's order)
    and non-ASCII characters are written as is, as Jackson does.
    """
    return json.dumps(avro, separators=(",", ":"), ensure_ascii=False)

def avro_to_arrow(avro: Mapping[str, Any] | str) -> pa.Schema:
    """The Arrow schema of a Hudi table's Avro schema (a record, as dict or JSON text).

    Accepts both union orders (``["null", T]`` and ``[T, "null"]``); a union of null and
    one type is that type, nullable. Logical types: ``date`` -> date32,
    ``timestamp-millis/micros/nanos`` -> timestamp[ms/us/ns, tz="UTC"],
    ``local-timestamp-*`` -> timestamp without zone, ``decimal`` (bytes or fixed) ->
    decimal128, ``time-millis/micros`` -> time32[ms]/time64[us], ``uuid`` -> string.
    Enums are strings, other fixed types fixed_size_binary, records structs, arrays
    ``list<element>`` and maps ``map<string, value>``. Other unions, a bare ``null`` and
    decimals wider than 38 digits raise :class:`SchemaMismatchError`.
    """
    if isinstance(avro, str):
        try:
            avro = json.loads(avro)
        except json.JSONDecodeError as exc:
            raise SchemaMismatchError(f"the Avro schema is not valid JSON: {exc}") from exc
    if not isinstance(avro, Mapping) or avro.get("type") != "record":
        raise SchemaMismatchError("a table schema must be an Avro record")
    reader = _AvroReader()
    struct = reader.named(avro, namespace="", path="")
    assert isinstance(struct, pa.StructType)
    return pa.schema(list(struct))


class _AvroReader:
    """One pass over an Avro schema; remembers named types so references resolve."""

    def __init__(self) -> None:
        self._named: dict[str, pa.DataType] = {}

    def field(self, name: str, avro: Any, namespace: str, path: str) -> pa.Field:
        arrow_type, nullable = self.nullable_type(avro, namespace, path)
        return pa.field(name, arrow_type, nullable=nullable)

    def nullable_type(self, avro: Any, namespace: str, path: str) -> tuple[pa.DataType, bool]:
        if isinstance(avro, list):
            branches = [b for b in avro if b != "null" and not _is_null_object(b)]
            if len(branches) == 1:
                return self.type(branches[0], namespace, path), len(branches) < len(avro)
            raise SchemaMismatchError(
                f"field {path!r}: union {avro_to_json(avro)} is not supported "
                "(only a union of null and one type)"
            )
        return self.type(avro, namespace, path), False

    def type(self, avro: Any, namespace: str, path: str) -> pa.DataType:
        if isinstance(avro, str):
            return self._by_name(avro, namespace, path)
        if isinstance(avro, list):
            raise SchemaMismatchError(f"field {path!r}: nested unions are not supported")
        if not isinstance(avro, Mapping) or "type" not in avro:
            raise SchemaMismatchError(f"field {path!r}: invalid Avro schema {avro!r}")
        kind = avro["type"]
        if isinstance(kind, (list, Mapping)):
            # {"type": {...}} wraps a full schema; Avro's parser accepts it.
            arrow_type, nullable = self.nullable_type(kind, namespace, path)
            if nullable:
                raise SchemaMismatchError(f"field {path!r}: nested unions are not supported")
            return arrow_type
        logical = avro.get("logicalType")
        if kind in ("record", "error", "enum", "fixed"):
            return self.named(avro, namespace, path)
        if kind == "array":
            element = self.field("element", avro.get("items"), namespace, path)
            return pa.list_(element)
        if kind == "map":
            value = self.field("value", avro.get("values"), namespace, path)
            return pa.map_(pa.string(), value)
        if kind == "bytes" and logical == "decimal":
            return _decimal(avro, path)
        if kind == "int" and logical == "date":
            return pa.date32()
        if kind == "int" and logical == "time-millis":
            return pa.time32("ms")
        if kind == "long" and logical in _LONG_LOGICAL:
            return _LONG_LOGICAL[logical]
        # Unknown logical types are ignored, as the Avro specification requires.
        return self._by_name(kind, namespace, path)

    def named(self, avro: Mapping[str, Any], namespace: str, path: str) -> pa.DataType:
        name, space = _full_name(avro, namespace)
        kind = avro["type"]
        if kind in ("record", "error"):
            fields = []
            for f in avro.get("fields", []):
                fields.append(self.field(f["name"], f["type"], space, join_path(path, f["name"])))
            arrow_type: pa.DataType = pa.struct(fields)
        elif kind == "enum":
            arrow_type = pa.string()
        elif avro.get("logicalType") == "decimal":
            arrow_type = _decimal(avro, path)
        else:
            arrow_type = pa.binary(int(avro["size"]))
        self._named[name] = arrow_type
        return arrow_type

    def _by_name(self, name: str, namespace: str, path: str) -> pa.DataType:
        primitive = _AVRO_PRIMITIVES.get(name)
        if primitive is not None:
            return primitive
        if name == "null":
            raise SchemaMismatchError(f"field {path!r}: a field of type null alone is not supported")
        for candidate in (name, f"{namespace}.{name}" if namespace else name):
            if candidate in self._named:
                return self._named[candidate]
        raise SchemaMismatchError(f"field {path!r}: unknown Avro type {name!r}")


def _is_null_object(branch: Any) -> bool:
    return isinstance(branch, Mapping) and branch.get("type") == "null"


def _full_name(avro: Mapping[str, Any], enclosing: str) -> tuple[str, str]:
    """(full name, namespace for nested names) of a named Avro type."""
    name = avro["name"]
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    space = avro.get("namespace", enclosing) or ""
    return (f"{space}.{name}" if space else name), space


def _decimal(avro: Mapping[str, Any], path: str) -> pa.DataType:
    precision = int(avro["precision"])
    scale = int(avro.get("scale", 0))
    if not 1 <= precision <= MAX_DECIMAL128_PRECISION or not 0 <= scale <= precision:
        raise SchemaMismatchError(
            f"field {path!r}: decimal({precision}, {scale}) is outside decimal128 "
            f"(precision 1..{MAX_DECIMAL128_PRECISION}, 0 <= scale <= precision)"
        )
    return pa.decimal128(precision, scale)


_AVRO_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}

_LONG_LOGICAL: dict[str, pa.DataType] = {
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "timestamp-nanos": pa.timestamp("ns", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "local-timestamp-nanos": pa.timestamp("ns"),
    "time-micros": pa.time64("us"),
}


__all__ = ["MAX_DECIMAL128_PRECISION", "avro_to_arrow", "avro_to_json", "join_path"]
