"""Avro binary datums for a whole Arrow table at once (pure: Arrow in, bytes out).

`fastavro.schemaless_writer` encodes a record at a time from Python dicts, about 25 us for a
record of twenty fields: most of what writing a CDC log costs. This module builds each column's
encoding for every row with numpy and pyarrow (zig-zag varints, little-endian floats, length-
prefixed strings, union branch indexes) and joins the columns row by row, giving the same bytes.

Types handled: null, boolean, int, long (and their logical types date, time-millis, time-micros,
timestamp-millis, timestamp-micros, local-timestamp-*), float, double, string, bytes, records
of those, and unions of `null` with one of them. Anything else (enums, fixed, decimals, arrays,
maps) gives None: the caller encodes with fastavro.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.data.avro_batch import inline_named_types

_EMPTY = pa.scalar(b"", pa.large_binary())
_INT_UNITS = {"timestamp-millis": "ms", "timestamp-micros": "us", "local-timestamp-millis": "ms",
              "local-timestamp-micros": "us"}


class _Unsupported(Exception):
    pass


def _binary(lengths: np.ndarray, data: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _fixed(raw: np.ndarray, width: int) -> pa.Array:
    return _binary(np.full(len(raw) // width if width else 0, width, dtype=np.int64), raw)


def _varints(values: np.ndarray) -> pa.Array:
    """Zig-zag varints (Avro int and long) of int64 `values`."""
    v = values.astype(np.int64, copy=False)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    nbytes = np.ones(len(z), dtype=np.int64)
    rest = z >> np.uint64(7)
    while rest.any():
        more = rest != 0
        nbytes += more
        rest = rest >> np.uint64(7)
    offsets = np.zeros(len(z) + 1, dtype=np.int64)
    np.cumsum(nbytes, out=offsets[1:])
    data = np.zeros(int(offsets[-1]), dtype=np.uint8)
    for k in range(int(nbytes.max()) if len(z) else 0):
        rows = nbytes > k
        byte = (z[rows] >> np.uint64(7 * k)) & np.uint64(0x7F)
        cont = (nbytes[rows] > k + 1).astype(np.uint64) << np.uint64(7)
        data[offsets[:-1][rows] + k] = (byte | cont).astype(np.uint8)
    return _binary(nbytes, data)


def _strings(col: pa.Array) -> pa.Array:
    """Length-prefixed bytes (Avro string and bytes); nulls as empty."""
    raw = col.cast(pa.large_binary()) if not pa.types.is_large_binary(col.type) else col
    raw = pc.fill_null(raw, _EMPTY)
    lengths = pc.binary_length(raw).to_numpy(zero_copy_only=False).astype(np.int64)
    return pc.binary_join_element_wise(_varints(lengths), raw, _EMPTY)


def _integers(col: pa.Array, logical: str | None) -> pa.Array:
    t = col.type
    if pa.types.is_timestamp(t):
        unit = _INT_UNITS.get(logical or "")
        if unit is None:
            raise _Unsupported(f"timestamp as {logical}")
        col = col.cast(pa.timestamp(unit, t.tz)).cast(pa.int64())
    elif pa.types.is_date32(t) or pa.types.is_time32(t) or pa.types.is_time64(t):
        col = col.cast(pa.int32() if not pa.types.is_time64(t) else pa.int64())
    elif pa.types.is_date64(t):
        col = col.cast(pa.date32()).cast(pa.int32())
    elif not pa.types.is_integer(t):
        raise _Unsupported(f"{t} as an Avro integer")
    values = pc.fill_null(col.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    return _varints(values)


def _floats(col: pa.Array, kind: str) -> pa.Array:
    if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
        raise _Unsupported(f"{col.type} as {kind}")
    dtype, width = ("<f8", 8) if kind == "double" else ("<f4", 4)
    values = pc.fill_null(col.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False).astype(dtype)
    return _fixed(values.view(np.uint8), width)


def _booleans(col: pa.Array) -> pa.Array:
    if not pa.types.is_boolean(col.type):
        raise _Unsupported(f"{col.type} as boolean")
    values = pc.fill_null(col, False).to_numpy(zero_copy_only=False).astype(np.uint8)
    return _fixed(values, 1)


def _repeat(raw: bytes, n: int) -> pa.Array:
    return _fixed(np.frombuffer(raw * n, dtype=np.uint8) if n else np.zeros(0, np.uint8), len(raw))


def _encode(col: pa.Array, avro: Any) -> pa.Array:
    """Every row's encoding of `col` as the Avro type `avro` (a large_binary array)."""
    n = len(col)
    if isinstance(avro, list):  # a union: the branch index, then the branch's encoding
        if len(avro) != 2 or "null" not in avro:
            raise _Unsupported("unions other than [null, T]")
        null_at = avro.index("null")
        other = avro[1 - null_at]
        tag = bytes([2 * (1 - null_at)])  # zig-zag of the branch index
        body = pc.binary_join_element_wise(_repeat(tag, n), _encode(col, other), _EMPTY)
        return pc.if_else(pc.is_null(col), pa.scalar(bytes([2 * null_at]), pa.large_binary()), body)
    if isinstance(avro, Mapping):
        kind = avro.get("type")
        if kind == "record":
            if not pa.types.is_struct(col.type):
                raise _Unsupported(f"{col.type} as a record")
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks()
            names = [col.type.field(i).name for i in range(col.type.num_fields)]
            parts = []
            for f in avro["fields"]:
                if f["name"] not in names:
                    raise _Unsupported(f"record field {f['name']} missing")
                parts.append(_encode(col.field(names.index(f["name"])), f["type"]))
            if not parts:
                return _repeat(b"", n)
            return pc.binary_join_element_wise(*parts, _EMPTY)
        if isinstance(kind, str) and kind in _PRIMITIVE_ENCODERS and "logicalType" not in avro:
            return _encode(col, kind)
        if kind in ("int", "long") and avro.get("logicalType") in (
                "date", "time-millis", "time-micros", *_INT_UNITS):
            return _integers(col, avro["logicalType"])
        raise _Unsupported(f"Avro type {avro}")
    if avro in ("int", "long"):
        return _integers(col, None)
    if avro in _PRIMITIVE_ENCODERS:
        return _PRIMITIVE_ENCODERS[avro](col)
    raise _Unsupported(f"Avro type {avro!r}")


_PRIMITIVE_ENCODERS = {
    "null": lambda col: _repeat(b"", len(col)),
    "boolean": _booleans,
    "float": lambda col: _floats(col, "float"),
    "double": lambda col: _floats(col, "double"),
    "string": _strings,
    "bytes": _strings,
    "int": lambda col: _integers(col, None),
    "long": lambda col: _integers(col, None),
}


def encode_datums(table: pa.Table, schema: Mapping[str, Any]) -> pa.Array | None:
    """Each row of `table` as the Avro binary datum of the record `schema` (fields matched by
    name), or None when a type is not one this module encodes."""
    struct_col = pa.StructArray.from_arrays(
        [table.column(i).combine_chunks() for i in range(table.num_columns)], names=table.column_names)
    try:
        return _encode(struct_col, inline_named_types(dict(schema)))  # references to named records resolved
    except (_Unsupported, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def avro_block_content(datums: pa.Array, version: int) -> bytes:
    """HoodieAvroDataBlock content: version, count, then each datum with its 4-byte length."""
    n = len(datums)
    lengths = pc.binary_length(datums).to_numpy(zero_copy_only=False).astype(">i4")
    prefixed = pc.binary_join_element_wise(_fixed(lengths.view(np.uint8), 4), datums, _EMPTY)
    if isinstance(prefixed, pa.ChunkedArray):
        prefixed = prefixed.combine_chunks()
    offsets = np.frombuffer(prefixed.buffers()[1], dtype=np.int64)[prefixed.offset: prefixed.offset + n + 1]
    body = prefixed.buffers()[2].to_pybytes()[int(offsets[0]): int(offsets[-1])] if n else b""
    return struct.pack(">ii", version, n) + body


__all__ = ["avro_block_content", "encode_datums"]
