"""The content of a DELETE log block: Avro `HoodieDeleteRecordList`, bytes in and out, as Arrow columns.

Content layout (HoodieDeleteBlock, version 3): int32 version, int32 length, then the Avro binary
datum (no container header) of

    record HoodieDeleteRecordList { array<HoodieDeleteRecord> deleteRecordList }
    record HoodieDeleteRecord {
        ["null", "string"] recordKey; ["null", "string"] partitionPath; orderingVal (a union) }

`orderingVal` branches (Hudi 0.14, `org.apache.hudi.avro.model.*Wrapper`, each `record {value: T}`):
0 null, 1 Boolean, 2 Int, 3 Long, 4 Float, 5 Double, 6 Bytes, 7 String, 8 Date (int days),
9 Decimal (bytes, decimal(30, 15)), 10 TimeMicros (long), 11 TimestampMicros (long). Hudi 1.1
appends 12 ArrayWrapper (multi-field ordering), which 0.14 never writes and we refuse.

Versions 1 and 2 were Java (Kryo) serialised `HoodieKey[]` / `DeleteRecord[]`: refused.
Pure functions; errors are `ValueError`s that the log-block layer turns into CorruptTableError.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

DELETE_BLOCK_VERSION = 3

# orderingVal union branch -> kind (the wrapper's name, snake case); index 0 is the null branch
ORDERING_KINDS: tuple[str, ...] = (
    "null",
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "bytes",
    "string",
    "date",
    "decimal",
    "time_micros",
    "timestamp_micros",
)
_BRANCH = {kind: i for i, kind in enumerate(ORDERING_KINDS)}
DECIMAL_WRAPPER_SCALE = 15
DECIMAL_WRAPPER_PRECISION = 30

KIND_TYPES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
    "date": pa.date32(),
    "decimal": pa.decimal128(DECIMAL_WRAPPER_PRECISION, DECIMAL_WRAPPER_SCALE),
    "time_micros": pa.time64("us"),
    "timestamp_micros": pa.timestamp("us", tz="UTC"),
}
"""The Arrow type of `decode_delete_records`' `ordering` column when every row shares a kind."""


def ordering_kind_for(arrow_type: pa.DataType) -> str:
    """The wrapper Hudi's `HoodieAvroUtils.wrapValueIntoAvro` picks for values of `arrow_type`."""
    t = arrow_type
    if pa.types.is_boolean(t):
        return "boolean"
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return "int"
    if t in (pa.int64(), pa.uint32()):
        return "long"
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytes"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_time(t):
        return "time_micros"
    if pa.types.is_timestamp(t):
        return "timestamp_micros"
    raise ValueError(f"no delete-block ordering wrapper holds values of type {t}")


# ----------------------------------------------------------------------------- encoding


def _long(n: int) -> bytes:
    """Avro long: zigzag, then base-128 varint."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _text(value: str | bytes) -> bytes:
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return _long(len(raw)) + raw


def _optional_text(value: str | None) -> bytes:
    return b"\x00" if value is None else b"\x02" + _text(value)


def _ordering_values(ordering: pa.Array) -> tuple[str, list[Any]]:
    """(kind, Python values) with temporal values as the integers the wrappers carry."""
    kind = ordering_kind_for(ordering.type)
    arr = ordering
    if kind == "date":
        arr = arr.cast(pa.date32()).view(pa.int32())
    elif kind == "time_micros":
        arr = arr.cast(pa.time64("us")).view(pa.int64())
    elif kind == "timestamp_micros":
        arr = arr.cast(pa.timestamp("us", tz=arr.type.tz)).view(pa.int64())
    elif kind == "decimal":
        arr = arr.cast(pa.decimal128(38, DECIMAL_WRAPPER_SCALE))
    elif kind == "bytes":
        arr = arr.cast(pa.binary())
    return kind, arr.to_pylist()


def _wrapped(kind: str, value: Any) -> bytes:
    if value is None:
        return b"\x00"
    head = _long(_BRANCH[kind])
    if kind == "boolean":
        return head + (b"\x01" if value else b"\x00")
    if kind in ("int", "long", "date", "time_micros", "timestamp_micros"):
        return head + _long(int(value))
    if kind == "float":
        return head + struct.pack("<f", value)
    if kind == "double":
        return head + struct.pack("<d", value)
    if kind in ("bytes", "string"):
        return head + _text(value)
    # decimal: the unscaled value at scale 15, big-endian two's complement, as few bytes as Java's
    # BigInteger.toByteArray gives
    unscaled = int(Decimal(value).scaleb(DECIMAL_WRAPPER_SCALE))
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    raw = unscaled.to_bytes(bits // 8 + 1, "big", signed=True)
    return head + _text(raw)


def encode_delete_records(
    keys: Sequence[str | None] | pa.Array,
    partitions: Sequence[str | None] | pa.Array,
    ordering: pa.Array | None = None,
) -> bytes:
    """Delete block content (version 3) for `keys` in `partitions` (same length).

    Without `ordering` every entry carries IntWrapper(0), the natural-order delete Spark SQL's
    DELETE writes; with it, each entry wraps its value as Hudi does for that Arrow type (a null
    value takes the null branch).
    """
    key_list = keys.to_pylist() if isinstance(keys, pa.Array | pa.ChunkedArray) else list(keys)
    parts = partitions.to_pylist() if isinstance(partitions, pa.Array | pa.ChunkedArray) else list(partitions)
    if len(parts) != len(key_list):
        raise ValueError(f"{len(key_list)} keys but {len(parts)} partitions")
    if ordering is None:
        natural = _wrapped("int", 0)
        tails = [natural] * len(key_list)
    else:
        if len(ordering) != len(key_list):
            raise ValueError(f"{len(key_list)} keys but {len(ordering)} ordering values")
        kind, values = _ordering_values(ordering)
        tails = [_wrapped(kind, v) for v in values]
    part_bytes: dict[str | None, bytes] = {}
    items = []
    for key, part, tail in zip(key_list, parts, tails, strict=True):
        pb = part_bytes.get(part)
        if pb is None:
            pb = part_bytes[part] = _optional_text(part)
        items.append(_optional_text(key) + pb + tail)
    body = (_long(len(items)) + b"".join(items) if items else b"") + b"\x00"
    return struct.pack(">ii", DELETE_BLOCK_VERSION, len(body)) + body


# ----------------------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes, pos: int, end: int) -> None:
        self.data, self.pos, self.end = data, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ValueError(f"delete records end early at content byte {self.pos}")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def long(self) -> int:
        shift = z = 0
        while True:
            b = self.byte()
            z |= (b & 0x7F) << shift
            if not b & 0x80:
                return (z >> 1) ^ -(z & 1)
            shift += 7
            if shift > 63:
                raise ValueError(f"bad varint at content byte {self.pos}")

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise ValueError(f"delete records end early at content byte {self.pos} (needs {n} bytes)")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def text(self) -> str:
        return self.raw(self.long()).decode("utf-8")

    def optional_text(self) -> str | None:
        branch = self.long()
        if branch == 0:
            return None
        if branch != 1:
            raise ValueError(f"union branch {branch} of a [null, string] field at content byte {self.pos}")
        return self.text()

    def ordering(self) -> tuple[str, Any]:
        branch = self.long()
        if not 0 <= branch < len(ORDERING_KINDS):
            raise ValueError(
                f"orderingVal union branch {branch} at content byte {self.pos} is not one Hudi 0.14 writes"
                + (" (ArrayWrapper: Hudi 1.1 multi-field ordering)" if branch == 12 else "")
            )
        kind = ORDERING_KINDS[branch]
        if kind == "null":
            return kind, None
        if kind == "boolean":
            return kind, self.byte() != 0
        if kind in ("int", "long", "date", "time_micros", "timestamp_micros"):
            return kind, self.long()
        if kind == "float":
            return kind, struct.unpack("<f", self.raw(4))[0]
        if kind == "double":
            return kind, struct.unpack("<d", self.raw(8))[0]
        if kind == "bytes":
            return kind, self.raw(self.long())
        if kind == "string":
            return kind, self.text()
        unscaled = int.from_bytes(self.raw(self.long()), "big", signed=True)
        return kind, Decimal(unscaled).scaleb(-DECIMAL_WRAPPER_SCALE)


DELETE_RECORDS_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("partition", pa.string()),
        pa.field("ordering_kind", pa.string()),
    ]
)
"""The first three columns of `decode_delete_records`; `ordering` follows, typed per block."""


def decode_delete_records(content: bytes) -> pa.Table:
    """The entries of a delete block's content as columns `key`, `partition`, `ordering_kind`,
    `ordering`.

    `ordering_kind` is the wrapper's kind (`ORDERING_KINDS`: "int", "long", ...; null for the null
    branch). `ordering` holds the wrapped values: typed (`KIND_TYPES[kind]`) when every non-null row
    shares one kind, of type null when no row has a value, and otherwise (a block mixing kinds,
    which hudi-rs refuses to read) as strings: `str()` of the value, hex for bytes.
    Raises ValueError on anything malformed, including Kryo blocks (versions 1 and 2).
    """
    if len(content) < 8:
        raise ValueError(f"delete block content of {len(content)} bytes has no version and length")
    version, length = struct.unpack(">ii", content[:8])
    if version in (1, 2):
        raise ValueError(
            f"delete block version {version} holds Java (Kryo) serialised keys, written by Hudi before "
            "0.10; it cannot be read here: compact or rewrite the file group with Apache Hudi first"
        )
    if version != DELETE_BLOCK_VERSION:
        raise ValueError(f"unsupported delete block version {version}")
    if length != len(content) - 8:
        raise ValueError(f"delete block says {length} bytes of records, has {len(content) - 8}")
    r = _Reader(content, 8, len(content))
    keys: list[str | None] = []
    parts: list[str | None] = []
    kinds: list[str | None] = []
    values: list[Any] = []
    while True:
        count = r.long()
        if count == 0:
            break
        if count < 0:  # Avro allows a negative count followed by the block's byte size
            count = -count
            r.long()
        for _ in range(count):
            keys.append(r.optional_text())
            parts.append(r.optional_text())
            kind, value = r.ordering()
            kinds.append(None if kind == "null" else kind)
            values.append(value)
    if r.pos != len(content):
        raise ValueError(f"{len(content) - r.pos} stray bytes after the delete records")
    present = {k for k in kinds if k is not None}
    ordering: pa.Array
    if not present:
        ordering = pa.nulls(len(values))
    elif len(present) == 1:
        kind = present.pop()
        ordering = _typed(kind, values)
    else:
        ordering = pa.array(
            [None if v is None else (v.hex() if isinstance(v, bytes) else str(v)) for v in values],
            pa.string(),
        )
    return pa.table(
        [pa.array(keys, pa.string()), pa.array(parts, pa.string()), pa.array(kinds, pa.string()), ordering],
        names=["key", "partition", "ordering_kind", "ordering"],
    )


def _typed(kind: str, values: list[Any]) -> pa.Array:
    target = KIND_TYPES[kind]
    if kind == "date":
        return pa.array(values, pa.int32()).view(target)
    if kind in ("time_micros", "timestamp_micros"):
        return pa.array(values, pa.int64()).view(target)
    if kind == "float":
        return pc.cast(pa.array(values, pa.float64()), target)
    return pa.array(values, target)


__all__ = [
    "DECIMAL_WRAPPER_PRECISION",
    "DECIMAL_WRAPPER_SCALE",
    "DELETE_BLOCK_VERSION",
    "DELETE_RECORDS_SCHEMA",
    "KIND_TYPES",
    "ORDERING_KINDS",
    "decode_delete_records",
    "encode_delete_records",
    "ordering_kind_for",
]
