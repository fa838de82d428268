"""Preparing a write's input on Spark: record keys, partition paths, the batch summary, in-batch
de-duplication and the operation of each row (upsert, or delete for deletes and `_hoodie_is_deleted`).

Also used by the read client (`engine.read.lookup`) to key a DataFrame the way a write does.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from engine.constants import DEFAULT_PARTITION_PATH, EMPTY_RECORD_KEY_PLACEHOLDER, NULL_RECORD_KEY_PLACEHOLDER
from engine.data.columns import KEY_COL, OP_DELETE, OP_UPSERT, PART_COL
from engine.data.slice_reader import IS_DELETED_COL
from engine.write.keygen import KeySpec
from engine.write.timestamp_keys import TimestampKeySpec, partition_paths

# batches up to this many records ship their keys to the driver and the index scan tasks (a few MB per million)
BROADCAST_KEYS_LIMIT = 2_000_000
ORDER_COL = "__hoodie_order"  # arrival order of the input rows (in-batch ties: the later row wins)


def record_key_expr(spec: KeySpec) -> Column:
    """The record key column; null where the key is invalid (null/empty)."""
    if not spec.complex_keys:
        (field,) = spec.record_key_fields
        value = F.col(field).cast("string")
        return F.when(value.isNull() | (value == ""), F.lit(None)).otherwise(value)
    parts, missing = [], []
    for field in spec.record_key_fields:
        value = F.col(field).cast("string")
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


def timestamp_partition_expr(spec: TimestampKeySpec, field: str, hive_style: bool) -> Column:
    """The timestamp-based key generator's partition path, computed on Arrow batches (pyarrow
    compute for numbers; DATE_STRING values are parsed one by one within the batch)."""
    prefix = field if hive_style else None

    def paths(values: pa.Array) -> pa.Array:
        return partition_paths(spec, values, prefix)

    return F.arrow_udf(paths, "string")(F.col(field))  # type: ignore[call-overload]


def partition_path_expr(spec: KeySpec) -> Column:
    """The partition path column of the table's key generator."""
    if not spec.partition_fields:
        return F.lit("")
    if spec.timestamp is not None:
        return timestamp_partition_expr(spec.timestamp, spec.partition_fields[0], spec.hive_style)
    segments = []
    for field in spec.partition_fields:
        value = F.col(field).cast("string")
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
        grouped = self.keys.group_by(PART_COL).aggregate([(KEY_COL, "distinct")])
        return {
            part: pa.array(keys, pa.string())
            for part, keys in zip(
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


def count_batch(records: DataFrame, group_cols: list[Column]) -> tuple[BatchSummary, list]:
    """One job for a batch nothing is looked up for: its record count per `group_cols` (which
    include the partition path), with the invalid keys counted alongside. The summary (no keys
    collected) and the count rows, which carry `count` and `bad` columns."""
    rows = (
        records.groupBy(*group_cols)
        .agg(F.count(F.lit(1)).alias("count"), F.sum(F.col(KEY_COL).isNull().cast("long")).alias("bad"))
        .collect()
    )
    summary = BatchSummary(
        total=sum(r["count"] for r in rows),
        bad=sum(r["bad"] for r in rows),
        partitions=sorted({r[PART_COL] for r in rows}),
        keys=None,
    )
    return summary, rows




def op_expr(is_delete: bool, columns: list[str]) -> Column:
    """Delete for delete operations, and (as in Apache Hudi) for rows whose `_hoodie_is_deleted` is true."""
    if is_delete:
        return F.lit(OP_DELETE)
    if IS_DELETED_COL in columns:
        return F.when(F.coalesce(F.col(IS_DELETED_COL), F.lit(False)), F.lit(OP_DELETE)).otherwise(F.lit(OP_UPSERT))
    return F.lit(OP_UPSERT)


def delete_columns(spec: KeySpec, pc_field: str | None) -> list[str]:
    cols = list(spec.fields)
    if pc_field and pc_field not in cols:
        cols.append(pc_field)
    return cols


def dedupe(records: DataFrame, pc_field: str | None, by: list[str]) -> DataFrame:
    """Keep one record per key (and partition): the largest precombine value, later input on ties."""
    order = [F.col(pc_field).desc_nulls_last()] if pc_field else []
    order.append(F.col(ORDER_COL).desc())
    w = Window.partitionBy(*by).orderBy(*order)
    rank = "__hoodie_rank"
    return records.withColumn(rank, F.row_number().over(w)).filter(F.col(rank) == 1).drop(rank)


__all__ = [
    "BROADCAST_KEYS_LIMIT",
    "IS_DELETED_COL",
    "ORDER_COL",
    "BatchSummary",
    "count_batch",
    "dedupe",
    "delete_columns",
    "op_expr",
    "partition_path_expr",
    "record_key_expr",
    "summarize",
    "timestamp_partition_expr",
]
