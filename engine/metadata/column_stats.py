"""Apache Hudi's column statistics index (`column_stats`, and the per-partition `partition_stats`
that share its record): the key of a file's column, the value types and wrappers of index
version V2, and a file's column ranges as Hudi computes them. Pure: Parquet footers and Arrow
tables in, metadata records out.

A record (type 3) is keyed `b64(xxhash64(column)) + b64(xxhash64(partition)) + b64(md5(file name))`
(`HashID`: XXHash64 with seed 0xdabadaba, MD5 for the file; the partition "." when the table is
not partitioned) and holds a `HoodieMetadataColumnStats`: the file and column names, the minimum
and maximum wrapped in the primitive wrapper of the column's value type (`ValueType`: a decimal's
unscaled value as the shortest big-endian two's-complement bytes with "precision,scale" beside
its ordinal, a date as days, a timestamp as its unit since the epoch), the value and null counts,
and the column chunks' compressed and uncompressed sizes.

- A base file's ranges come from its Parquet footer (`ParquetUtils.readColumnStatsFromMetadata`):
  each row group's column chunk statistics, merged (min of minimums, max of maximums, sums); a
  chunk without statistics counts all its values as nulls.
- A log file's ranges come from the records of its data blocks (sizes 0); a log file holding no
  records (deletes only) gets an empty range of value type NULL for every column.
- A file deleted (clean, rollback) gets a tombstone: no range, counts -1, `isDeleted`.

Records of one key merge as `HoodieTableMetadataUtil.mergeColumnStatsRecords` merges them: a
tombstone on either side gives the newer; a tight bound replaces; otherwise the ranges widen and
the counts add up.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

Record = dict[str, Any]
RECORD_TYPE = 3  # HoodieMetadataRecord's type of a column_stats record (engine.metadata.records)
SEED = 0xDABADABA | 0xFFFFFFFF00000000  # Hudi's int seed, sign-extended to the long XXHash64 takes
NON_PARTITIONED = "."

VALUE_TYPES = (
    "V1", "NULL", "BOOLEAN", "INT", "LONG", "FLOAT", "DOUBLE", "STRING", "BYTES", "FIXED", "DECIMAL", "UUID",
    "DATE", "TIME_MILLIS", "TIME_MICROS", "TIMESTAMP_MILLIS", "TIMESTAMP_MICROS", "TIMESTAMP_NANOS",
    "LOCAL_TIMESTAMP_MILLIS", "LOCAL_TIMESTAMP_MICROS", "LOCAL_TIMESTAMP_NANOS",
)
ORDINAL = {name: i for i, name in enumerate(VALUE_TYPES)}
_NS = "org.apache.hudi.avro.model."
WRAPPER = {  # ValueType -> the primitive wrapper its values are written in (index version V2)
    "BOOLEAN": "BooleanWrapper", "INT": "IntWrapper", "LONG": "LongWrapper", "FLOAT": "FloatWrapper",
    "DOUBLE": "DoubleWrapper", "STRING": "StringWrapper", "BYTES": "BytesWrapper", "FIXED": "BytesWrapper",
    "DECIMAL": "BytesWrapper", "UUID": "StringWrapper", "DATE": "IntWrapper", "TIME_MILLIS": "IntWrapper",
    "TIME_MICROS": "LongWrapper", "TIMESTAMP_MILLIS": "LongWrapper", "TIMESTAMP_MICROS": "LongWrapper",
    "TIMESTAMP_NANOS": "LongWrapper", "LOCAL_TIMESTAMP_MILLIS": "LongWrapper",
    "LOCAL_TIMESTAMP_MICROS": "LongWrapper", "LOCAL_TIMESTAMP_NANOS": "LongWrapper",
}


class UnsupportedColumn(ValueError):
    """A column whose type Apache Hudi's column statistics (index version V2) do not cover."""


@dataclass(frozen=True)
class ValueKind:
    """A column's `ValueType` name and its additional info (a decimal's "precision,scale")."""

    name: str
    info: str | None = None

    def to_avro(self) -> dict[str, Any]:
        return {"typeOrdinal": ORDINAL[self.name], "additionalInfo": self.info}


NULL_KIND = ValueKind("NULL")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _hash64(text: str) -> str:
    return _b64(xxhash.xxh64(text.encode("utf-8"), seed=SEED).digest())


def partition_id(partition: str) -> str:
    return partition or NON_PARTITIONED


def column_stats_key(partition: str, file_name: str, column: str) -> str:
    return _hash64(column) + _hash64(partition_id(partition)) + _b64(hashlib.md5(file_name.encode("utf-8")).digest())


def partition_stats_key(partition: str, column: str) -> str:
    return _hash64(column) + _hash64(partition_id(partition))


# ---- value types -----------------------------------------------------------------------------------------

def _unit_suffix(unit: str) -> str:
    return {"s": "", "ms": "MILLIS", "us": "MICROS", "ns": "NANOS", "milliseconds": "MILLIS",
            "microseconds": "MICROS", "nanoseconds": "NANOS"}.get(unit, "")


def kind_of_parquet(column: pq.ColumnSchema) -> ValueKind:
    """The ValueType of a Parquet leaf column, as Hudi derives it (`ValueType.fromParquetPrimitiveType`)."""
    logical = column.logical_type
    ltype = logical.type if logical is not None else "NONE"
    physical = column.physical_type
    if ltype == "STRING":
        return ValueKind("STRING")
    if ltype == "DECIMAL":
        return ValueKind("DECIMAL", f"{column.precision},{column.scale}")
    if ltype == "DATE":
        return ValueKind("DATE")
    if ltype in ("TIME", "TIMESTAMP"):
        spec = json.loads(logical.to_json())
        unit = _unit_suffix(str(spec.get("timeUnit", "")))
        if not unit:
            raise UnsupportedColumn(f"{column.path}: time unit {spec.get('timeUnit')}")
        if ltype == "TIME":
            if unit == "NANOS":
                raise UnsupportedColumn(f"{column.path}: time in nanoseconds")
            return ValueKind(f"TIME_{unit}")
        local = "" if spec.get("isAdjustedToUTC") else "LOCAL_"
        return ValueKind(f"{local}TIMESTAMP_{unit}")
    if ltype == "UUID":
        return ValueKind("UUID")
    if ltype == "INT":  # a narrower or unsigned integer (Hudi's Avro writer annotates none): its width's type
        return ValueKind("LONG" if int(json.loads(logical.to_json()).get("bitWidth", 32)) > 32 else "INT")
    if ltype in ("JSON", "ENUM"):
        return ValueKind("STRING")
    if ltype != "NONE":
        raise UnsupportedColumn(f"{column.path}: Parquet logical type {ltype}")
    by_physical = {"INT64": "LONG", "INT32": "INT", "BOOLEAN": "BOOLEAN", "BYTE_ARRAY": "BYTES", "FLOAT": "FLOAT",
                   "DOUBLE": "DOUBLE", "FIXED_LEN_BYTE_ARRAY": "FIXED"}
    if physical not in by_physical:
        raise UnsupportedColumn(f"{column.path}: Parquet type {physical}")
    return ValueKind(by_physical[physical])


def kind_of_arrow(t: pa.DataType) -> ValueKind:
    """The ValueType of an Arrow column read from a log block (Hudi: `ValueType.fromSchema`)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return ValueKind("STRING")
    if pa.types.is_decimal(t):
        return ValueKind("DECIMAL", f"{t.precision},{t.scale}")
    if pa.types.is_date32(t):
        return ValueKind("DATE")
    if pa.types.is_timestamp(t):
        local = "" if t.tz else "LOCAL_"
        unit = _unit_suffix(t.unit)
        if not unit:
            raise UnsupportedColumn(f"timestamp in {t.unit}")
        return ValueKind(f"{local}TIMESTAMP_{unit}")
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        return ValueKind(f"TIME_{_unit_suffix(t.unit)}")
    if pa.types.is_integer(t):  # narrower integers are written as Avro ints
        return ValueKind("LONG" if t.bit_width > 32 else "INT")
    simple = [(pa.types.is_boolean, "BOOLEAN"),
              (pa.types.is_float32, "FLOAT"), (pa.types.is_float64, "DOUBLE"),
              (pa.types.is_fixed_size_binary, "FIXED"), (pa.types.is_binary, "BYTES"),
              (pa.types.is_large_binary, "BYTES"), (pa.types.is_null, "NULL")]
    for check, name in simple:
        if check(t):
            return ValueKind(name)
    raise UnsupportedColumn(f"Arrow type {t}")


def _decimal_bytes(unscaled: int) -> bytes:
    """BigInteger.toByteArray: the shortest big-endian two's complement."""
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def _from_parquet(kind: ValueKind, value: Any) -> Any:
    """A Parquet statistic's physical value as Hudi stores it for `kind`."""
    if value is None:
        return None
    if kind.name == "STRING":
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)
    if kind.name == "DECIMAL":
        unscaled = int.from_bytes(value, "big", signed=True) if isinstance(value, bytes) else int(value)
        return unscaled  # kept as the unscaled integer until wrapped (ranges compare numerically)
    if kind.name == "UUID":
        return str(uuid.UUID(bytes=bytes(value)))
    return value


_EPOCH = dt.datetime(1970, 1, 1)
_UNITS = {"MILLIS": 1_000, "MICROS": 1_000_000, "NANOS": 1_000_000_000}


def _from_arrow(kind: ValueKind, value: Any) -> Any:
    """An Arrow scalar's Python value as Hudi stores it for `kind` (before wrapping)."""
    if value is None:
        return None
    if kind.name == "DECIMAL":
        scale = int(str(kind.info).split(",")[1])
        return int(decimal.Decimal(value).scaleb(scale))
    if kind.name == "DATE":
        return (value - dt.date(1970, 1, 1)).days
    if "TIMESTAMP" in kind.name:
        per_second = _UNITS[kind.name.rsplit("_", 1)[1]]
        naive = value.replace(tzinfo=None) if value.tzinfo is None else value.astimezone(dt.UTC).replace(tzinfo=None)
        delta = naive - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * per_second + delta.microseconds * per_second // 1_000_000
    if kind.name.startswith("TIME_"):
        per_second = _UNITS[kind.name.rsplit("_", 1)[1]]
        seconds = value.hour * 3600 + value.minute * 60 + value.second
        return seconds * per_second + value.microsecond * per_second // 1_000_000
    if kind.name == "UUID":
        return str(value)
    return value


def wrap(kind: ValueKind, value: Any) -> dict[str, Any] | None:
    """`value` in its wrapper record, named for the Avro union (fastavro's "-type")."""
    if value is None or kind.name in ("NULL", "V1"):
        return None
    if kind.name == "DECIMAL" and isinstance(value, int):
        value = _decimal_bytes(value)
    return {"-type": _NS + WRAPPER[kind.name], "value": value}


# ---- ranges ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ColumnRange:
    """One column's range in one file (`HoodieColumnRangeMetadata`)."""

    file_name: str
    column: str
    kind: ValueKind
    min: Any
    max: Any
    null_count: int
    value_count: int
    total_size: int = 0
    total_uncompressed_size: int = 0

    def merge(self, other: ColumnRange) -> ColumnRange:
        lows = [v for v in (self.min, other.min) if v is not None]
        highs = [v for v in (self.max, other.max) if v is not None]
        return replace(
            self, min=min(lows) if lows else None, max=max(highs) if highs else None,
            null_count=self.null_count + other.null_count, value_count=self.value_count + other.value_count,
            total_size=self.total_size + other.total_size,
            total_uncompressed_size=self.total_uncompressed_size + other.total_uncompressed_size,
        )


def parquet_ranges(metadata: pq.FileMetaData, file_name: str, columns: Iterable[str]) -> list[ColumnRange]:
    """The ranges of `columns` (dotted leaf paths) in a base file, from its footer."""
    wanted = set(columns)
    schema = metadata.schema
    kinds: dict[int, ValueKind] = {}
    for i in range(len(schema)):
        if schema.column(i).path in wanted:
            try:
                kinds[i] = kind_of_parquet(schema.column(i))
            except UnsupportedColumn:
                continue  # no statistics for it: never skipped by, never wrong
    merged: dict[int, ColumnRange] = {}
    for rg in range(metadata.num_row_groups):
        group = metadata.row_group(rg)
        for i, kind in kinds.items():
            chunk = group.column(i)
            stats = chunk.statistics
            values = int(chunk.num_values)
            low = high = None
            if stats is not None and stats.has_min_max:
                low, high = _from_parquet(kind, stats.min_raw), _from_parquet(kind, stats.max_raw)
            empty = stats is None or (not stats.has_min_max and not stats.has_null_count)
            nulls = values if empty else int(stats.null_count or 0)
            rng = ColumnRange(file_name, chunk.path_in_schema, kind, low, high, nulls, values,
                              int(chunk.total_compressed_size), int(chunk.total_uncompressed_size))
            merged[i] = merged[i].merge(rng) if i in merged else rng
    return [merged[i] for i in sorted(merged)]


def arrow_ranges(table: pa.Table, file_name: str, columns: Iterable[str]) -> list[ColumnRange]:
    """The ranges of `columns` over the records of a log file (`table`; sizes 0); no records:
    empty ranges of value type NULL."""
    if table.num_rows == 0:
        return [ColumnRange(file_name, c, NULL_KIND, None, None, 0, 0) for c in columns]
    names = [c for c in columns if c in table.column_names]
    out = []
    for name in names:
        col = table.column(name)
        try:
            kind = kind_of_arrow(col.type)
        except UnsupportedColumn:
            continue
        low = high = None
        if col.null_count < len(col) and kind.name != "NULL":
            mm = pc.min_max(col)
            low, high = _from_arrow(kind, mm["min"].as_py()), _from_arrow(kind, mm["max"].as_py())
        out.append(ColumnRange(file_name, name, kind, low, high, int(col.null_count), len(col)))
    return out


def record(partition: str, rng: ColumnRange) -> Record:
    """The column_stats record of a range."""
    return {
        "key": column_stats_key(partition, rng.file_name, rng.column), "type": RECORD_TYPE,
        "ColumnStatsMetadata": {
            "fileName": rng.file_name, "columnName": rng.column,
            "minValue": wrap(rng.kind, rng.min), "maxValue": wrap(rng.kind, rng.max),
            "valueCount": rng.value_count, "nullCount": rng.null_count, "totalSize": rng.total_size,
            "totalUncompressedSize": rng.total_uncompressed_size, "isDeleted": False, "isTightBound": False,
            "valueType": rng.kind.to_avro(),
        },
    }


def tombstone(partition: str, file_name: str, column: str) -> Record:
    """The column_stats record of a deleted file's column (`HoodieColumnRangeMetadata.stub`)."""
    rec = record(partition, ColumnRange(file_name, column, NULL_KIND, None, None, -1, -1, -1, -1))
    rec["ColumnStatsMetadata"]["isDeleted"] = True
    return rec


def kind_of(stats: Mapping[str, Any]) -> ValueKind | None:
    """The value type a record's statistics name (`valueType`; None: none, or an unknown ordinal)."""
    info = stats.get("valueType")
    if not isinstance(info, Mapping):
        return None
    ordinal = info.get("typeOrdinal")
    if not isinstance(ordinal, int) or not 0 <= ordinal < len(VALUE_TYPES):
        return None
    return ValueKind(VALUE_TYPES[ordinal], info.get("additionalInfo"))


def typed(rec: Record) -> Record:
    """`rec` with its wrappers named for encoding (records read back lose the union branch; their
    value type names it)."""
    stats = rec.get("ColumnStatsMetadata")
    if not isinstance(stats, Mapping):
        return rec
    kind = kind_of(stats)
    if kind is None:
        raise UnsupportedColumn(f"column stats of {stats.get('fileName')} without a V2 value type")
    name = kind.name
    out = dict(stats)
    for side in ("minValue", "maxValue"):
        wrapped = stats.get(side)
        if isinstance(wrapped, Mapping) and "-type" not in wrapped:
            if name not in WRAPPER:
                raise UnsupportedColumn(f"column stats of {stats.get('fileName')}: a {name} value")
            out[side] = {"-type": _NS + WRAPPER[name], "value": wrapped.get("value")}
    return {**rec, "ColumnStatsMetadata": out}


def unwrapped(stats: Mapping[str, Any], side: str) -> Any:
    """A record's minimum or maximum as ranges hold it (a decimal as its unscaled integer)."""
    wrapped = stats.get(side)
    value = wrapped.get("value") if isinstance(wrapped, Mapping) else None
    kind = kind_of(stats)
    if isinstance(value, bytes) and kind is not None and kind.name == "DECIMAL":
        return int.from_bytes(value, "big", signed=True)
    return value


def merge(older: Record, newer: Record) -> Record:
    """Two versions of one column-stats (or partition-stats) key, as Hudi merges them."""
    old, new = older.get("ColumnStatsMetadata") or {}, newer.get("ColumnStatsMetadata") or {}
    if new.get("isDeleted") or old.get("isDeleted") or new.get("isTightBound"):
        return newer
    kind = kind_of(new) or ValueKind("V1")
    lows = [v for v in (unwrapped(old, "minValue"), unwrapped(new, "minValue")) if v is not None]
    highs = [v for v in (unwrapped(old, "maxValue"), unwrapped(new, "maxValue")) if v is not None]

    def total(name: str) -> int:
        return int(old.get(name) or 0) + int(new.get(name) or 0)

    merged = {
        **new, "minValue": wrap(kind, min(lows)) if lows else None, "maxValue": wrap(kind, max(highs)) if highs else None,
        "valueCount": total("valueCount"), "nullCount": total("nullCount"), "totalSize": total("totalSize"),
        "totalUncompressedSize": total("totalUncompressedSize"),
    }
    return {**newer, "ColumnStatsMetadata": merged}


def is_deleted(rec: Record) -> bool:
    stats = rec.get("ColumnStatsMetadata")
    return isinstance(stats, Mapping) and bool(stats.get("isDeleted"))


def comparable(rec: Record) -> dict[str, Any]:
    """A record's statistics with the wrappers unnamed (as read back), for comparing records."""
    stats = dict(rec.get("ColumnStatsMetadata") or {})
    for side in ("minValue", "maxValue"):
        if isinstance(stats.get(side), Mapping):
            stats[side] = {"value": stats[side].get("value")}
    return stats


def records_of(partition: str, ranges: Sequence[ColumnRange]) -> list[Record]:
    return [record(partition, r) for r in ranges]


__all__ = [
    "ColumnRange", "NULL_KIND", "ORDINAL", "UnsupportedColumn", "VALUE_TYPES", "ValueKind", "arrow_ranges",
    "column_stats_key", "comparable", "is_deleted", "kind_of", "kind_of_arrow", "kind_of_parquet", "merge",
    "parquet_ranges", "partition_stats_key", "record", "records_of", "tombstone", "typed", "unwrapped", "wrap",
]
