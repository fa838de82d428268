"""Preparing a write's input on Spark: the batch count, in-batch de-duplication and the operation
of each row (upsert, or delete for deletes and `_hoodie_is_deleted`). Keys and partition paths come
from `engine.keygen.spark_keys`, which the read client (`engine.read.lookup`) shares."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from engine.columns import KEY_COL, OP_DELETE, OP_UPSERT, PART_COL
from engine.data.slice_reader import IS_DELETED_COL
from engine.keygen.keys import KeySpec, delete_columns  # noqa: F401  (re-exported)
from engine.keygen.spark_keys import (  # noqa: F401  (re-exported for the write pipeline)
    BROADCAST_KEYS_LIMIT,
    BatchSummary,
    partition_path_expr,
    record_key_expr,
    summarize,
    value_text_expr,
)

ORDER_COL = "__hoodie_order"  # arrival order of the input rows (in-batch ties: the later row wins)


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
        return F.when(F.coalesce(F.col(IS_DELETED_COL), F.lit(False)), F.lit(OP_DELETE)).otherwise(
            F.lit(OP_UPSERT)
        )
    return F.lit(OP_UPSERT)


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
    "value_text_expr",
]
