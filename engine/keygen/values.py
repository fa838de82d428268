"""How a record key or partition value of each type becomes text, as Apache Hudi renders it (pure).

Apache Hudi's writers (`KeyGenUtils.getPartitionPath` / `getRecordKey` on the Avro records of an
upsert, insert or delete: `HoodieAvroUtils.getNestedFieldValAsString`, then Java's `toString`):

- strings as they are; integers (byte, short, int, long) in decimal; booleans `true`/`false`;
- float and double as Java's `Float.toString` / `Double.toString` (`1.0E7`, `1.0E-4`, `0.001`,
  `100.0`, `NaN`, `-Infinity`): Spark's cast to string prints them the same way;
- decimals as Java's `BigDecimal.toString` (`0E-18`, `1.0E-7`, `123.45`): Spark's cast prints
  them in plain notation, so decimals are rendered here;
- dates as `LocalDate.toString` (`2024-01-15`), as Spark's cast prints them;
- timestamps as the epoch microseconds (`1705312800123456`), Avro's `timestamp-micros` value;
  with `hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled=true` as
  `java.sql.Timestamp.toString` (`2024-01-15 10:00:00.123`, the writer JVM's default zone, which
  we take to be UTC);
- binary as lowercase hex of the bytes.

(Hudi's row-writer bulk_insert renders timestamps as `Timestamp.toString` whatever the option
says, and binary as a Java object id: a Hudi table partitioned by such a column gets other folders
from bulk_insert than from upsert. We render every write as the upsert path does.)
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

CONSISTENT_TIMESTAMPS = "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled"


def java_double(value: float, digits: str | None = None) -> str:
    """Java's `Double.toString` (and `Float.toString`, given the float's shortest digits)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    text = digits if digits is not None else repr(value)
    sign = "-" if text.startswith("-") else ""
    d = Decimal(text.lstrip("-"))
    exponent = d.adjusted()
    mantissa = d.as_tuple().digits
    # strip trailing zeros of the significant digits (repr gives the shortest, but 100.0 -> 1, 0, 0)
    sig = "".join(map(str, mantissa)).rstrip("0") or "0"
    if 1e-3 <= abs(value) < 1e7:
        if exponent >= 0:
            whole = sig[: exponent + 1].ljust(exponent + 1, "0")
            frac = sig[exponent + 1:] or "0"
        else:
            whole = "0"
            frac = "0" * (-exponent - 1) + sig
        return f"{sign}{whole}.{frac}"
    frac = sig[1:] or "0"
    return f"{sign}{sig[0]}.{frac}E{exponent}"


def java_float(value: float) -> str:
    """Java's `Float.toString`: the shortest digits that round-trip as a float32."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return java_double(value)
    import numpy as np

    return java_double(float(value), np.format_float_scientific(np.float32(value), unique=True, trim="-")
                       .replace("e+", "e"))


def java_decimal(value: Decimal) -> str:
    """Java's `BigDecimal.toString` (the same scientific-notation rule as Python's `Decimal`)."""
    return str(value)


def java_timestamp(micros: int) -> str:
    """`new java.sql.Timestamp(micros / 1000).toString()` in UTC: the fraction without trailing
    zeros, but at least `.0`; Java's truncating division."""
    millis = int(micros / 1000) if micros >= 0 else -((-micros) // 1000)
    when = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=millis)
    fraction = f"{when.microsecond // 1000:03d}".rstrip("0") or "0"
    return when.strftime("%Y-%m-%d %H:%M:%S") + "." + fraction


def texts(values: pa.Array | pa.ChunkedArray, consistent_timestamps: bool = False) -> pa.Array:
    """Each value as Apache Hudi renders it (see the module docstring); nulls stay null."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return values.cast(pa.string())
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_date32(kind):
        return pc.cast(values, pa.string())
    if pa.types.is_floating(kind):
        fmt = java_float if kind == pa.float32() else java_double
        return pa.array([None if v is None else fmt(v) for v in values.to_pylist()], pa.string())
    if pa.types.is_decimal(kind):
        return pa.array([None if v is None else java_decimal(v) for v in values.to_pylist()], pa.string())
    if pa.types.is_timestamp(kind):
        micros = pc.cast(pc.cast(values, pa.timestamp("us", tz=kind.tz)), pa.int64())
        if not consistent_timestamps:
            return pc.cast(micros, pa.string())
        return pa.array([None if v is None else java_timestamp(v) for v in micros.to_pylist()], pa.string())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pa.array([None if v is None else v.hex() for v in values.to_pylist()], pa.string())
    return pc.cast(values, pa.string())


__all__ = ["CONSISTENT_TIMESTAMPS", "java_decimal", "java_double", "java_float", "java_timestamp", "texts"]
