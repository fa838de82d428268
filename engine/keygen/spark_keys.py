"""Keying a DataFrame on Spark as a write does: record keys, partition paths (Apache Hudi's
rendering, `engine.keygen.values`) and the summary of the keyed rows the driver learns before
tagging. Shared by the write pipeline (`engine.write.prepare`) and the read client
(`engine.read.lookup`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, DataType, DecimalType, StructType, TimestampType

from engine.columns import KEY_COL, PART_COL
from engine.constants import (
    DEFAULT_PARTITION_PATH,
    EMPTY_RECORD_KEY_PLACEHOLDER,
    NULL_RECORD_KEY_PLACEHOLDER,
    RECORD_KEY_COL,
)
from engine.keygen.keys import AUTO_KEY, TIMESTAMP_PART, KeySpec, partition_paths
from engine.keygen.values import texts

# batches up to this many records ship their keys to the driver and the index scan tasks (a few MB per million)
BROADCAST_KEYS_LIMIT = 2_000_000


def value_text_expr(name: str, kind: DataType, consistent_timestamps: bool = False) -> Column:
    """Column `name` (of Spark type `kind`) as text, as Apache Hudi renders key and partition
    values (`engine.keygen.values`): Spark's cast where it prints the same (strings, integers,
    booleans, floats, doubles, dates), else the rendering itself."""
    col = F.col(name)
    if isinstance(kind, TimestampType) and not consistent_timestamps:
        return F.unix_micros(col).cast("string")
    if isinstance(kind, BinaryType):
        return F.lower(F.hex(col))
    if isinstance(kind, DecimalType | TimestampType):

        def render(values: pa.Array) -> pa.Array:
            return texts(values, consistent_timestamps)

        return F.arrow_udf(render, "string")(col)  # type: ignore[call-overload]
    return col.cast("string")


def record_key_expr(spec: KeySpec, schema: StructType) -> Column:
    """The record key column of input rows of `schema`; null where the key is invalid (null/empty).
    Auto-generated keys: the rows' `_hoodie_record_key` (an update or delete of rows read from the
    table), else AUTO_KEY, which the writing task replaces (`engine.write.bulk_files`)."""
    if spec.auto:
        if RECORD_KEY_COL in schema.fieldNames():
            value = F.col(RECORD_KEY_COL).cast("string")
            return F.when(value.isNull() | (value == ""), F.lit(None)).otherwise(value)
        return F.lit(AUTO_KEY)
    if not spec.complex_keys:
        (field,) = spec.record_key_fields
        value = value_text_expr(field, schema[field].dataType, spec.consistent_timestamps)
        return F.when(value.isNull() | (value == ""), F.lit(None)).otherwise(value)
    parts, missing = [], []
    for field in spec.record_key_fields:
        value = value_text_expr(field, schema[field].dataType, spec.consistent_timestamps)
        shown = (
            F.when(value.isNull(), F.lit(NULL_RECORD_KEY_PLACEHOLDER))
            .when(value == "", F.lit(EMPTY_RECORD_KEY_PLACEHOLDER))
            .otherwise(value)
        )
        parts.append(F.concat(F.lit(f"{field}:"), shown))
        missing.append(value.isNull() | (value == ""))
    all_missing = missing[0]
    for m in missing[1:]:
        all_missing = all_missing & m
    return F.when(all_missing, F.lit(None)).otherwise(F.concat_ws(",", *parts))


def partition_path_expr(spec: KeySpec, schema: StructType) -> Column:
    """The partition path column of the table's key generator, for input rows of `schema`: Spark
    expressions for simple parts, the engine's own rendering (`engine.keygen.keys.partition_paths`,
    on Arrow batches) where a part is a time (timestamp-based or custom generators) or values are
    URL-encoded."""
    if not spec.partition_fields:
        return F.lit("")
    if TIMESTAMP_PART in spec.partition_kinds or spec.url_encode:
        fields = list(spec.partition_fields)

        def paths(*values: pa.Array) -> pa.Array:
            return partition_paths(spec, dict(zip(fields, values, strict=True)))

        return F.arrow_udf(paths, "string")(*[F.col(f) for f in fields])  # type: ignore[call-overload]
    segments = []
    for field in spec.partition_fields:
        value = value_text_expr(field, schema[field].dataType, spec.consistent_timestamps)
        value = F.when(value.isNull() | (value == ""), F.lit(DEFAULT_PARTITION_PATH)).otherwise(value)
        segments.append(F.concat(F.lit(f"{field}="), value) if spec.hive_style else value)
    return F.concat_ws("/", *segments)


@dataclass
class BatchSummary:
    """What the driver learns about the incoming batch before tagging."""

    total: int
    bad: int
    partitions: list[str]
    keys: pa.Table | None  # (key, partition) of every record, for batches up to BROADCAST_KEYS_LIMIT

    def may_have_duplicates(self, by: list[str]) -> bool:
        if self.keys is None:
            return True
        return self.keys.group_by(by).aggregate([]).num_rows < self.total

    def keys_by_partition(self) -> dict[str, pa.Array] | None:
        """partition path -> the distinct incoming keys (None for big batches)."""
        if self.keys is None:
            return None
        return keys_by_partition(self.keys)


def keys_by_partition(keys: pa.Table) -> dict[str, pa.Array]:
    """partition path -> the distinct keys of the (KEY_COL, PART_COL) rows `keys`."""
    grouped = keys.group_by(PART_COL).aggregate([(KEY_COL, "distinct")])
    return {
        part: pa.array(found, pa.string())
        for part, found in zip(
            grouped.column(PART_COL).to_pylist(),
            grouped.column(f"{KEY_COL}_distinct").to_pylist(),
            strict=True,
        )
    }


def summarize(prepared: DataFrame) -> BatchSummary:
    """One job for small batches: collect (key, partition) through Arrow; else aggregate per partition."""
    keys = prepared.select(KEY_COL, PART_COL).limit(BROADCAST_KEYS_LIMIT + 1).toArrow()
    if keys.num_rows <= BROADCAST_KEYS_LIMIT:
        bad = keys.column(KEY_COL).null_count
        parts = sorted(p for p in pc.unique(keys.column(PART_COL)).to_pylist() if p is not None)
        return BatchSummary(keys.num_rows, bad, parts, keys if not bad else None)
    rows = (
        prepared.groupBy(PART_COL)
        .agg(F.count(F.lit(1)).alias("n"), F.sum(F.col(KEY_COL).isNull().cast("long")).alias("bad"))
        .collect()
    )
    return BatchSummary(
        total=sum(r["n"] for r in rows),
        bad=sum(r["bad"] for r in rows),
        partitions=sorted(r[PART_COL] for r in rows),
        keys=None,
    )


__all__ = [
    "BROADCAST_KEYS_LIMIT",
    "BatchSummary",
    "keys_by_partition",
    "partition_path_expr",
    "record_key_expr",
    "summarize",
    "value_text_expr",
]
