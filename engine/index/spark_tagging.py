"""Spark helpers shared by the index implementations' `tag_location` (Spark-only; the contract in
`engine.index.base` imports no Spark)."""

from __future__ import annotations

from pyspark.accumulators import AccumulatorParam
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine.columns import EXISTING_PART_COL, FILE_ID_COL, KEY_COL, PART_COL
from engine.data.keys import KEYS_SCHEMA


class CountsParam(AccumulatorParam):
    """Spark accumulator of named counts (index statistics gathered in tasks)."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        return dict.fromkeys(value, 0)

    def addInPlace(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:  # noqa: N802 (Spark's name)
        for k, v in b.items():
            a[k] = a.get(k, 0) + v
        return a


def untagged(records: DataFrame, is_global: bool) -> DataFrame:
    """`records` tagged as all new (no file id; no existing partition for a global index)."""
    out = records.withColumn(FILE_ID_COL, F.lit(None).cast("string"))
    return out.withColumn(EXISTING_PART_COL, F.lit(None).cast("string")) if is_global else out


def join_existing(records: DataFrame, existing: DataFrame, is_global: bool, small: bool) -> DataFrame:
    """Attach (file id[, existing partition]) of found keys; `existing` has KEYS_SCHEMA columns.

    Non-global indexes match (key, partition); global ones match the key alone and report the
    partition where it lives. `small`: `existing` was filtered to the batch's keys, so broadcast it.
    """
    key, part, fid = KEYS_SCHEMA.names
    if small:
        existing = F.broadcast(existing)
    cond = records[KEY_COL] == existing[key]
    if not is_global:
        cond = cond & (records[PART_COL] == existing[part])
    joined = records.join(existing, cond, "left").drop(key).withColumnRenamed(fid, FILE_ID_COL)
    return joined.withColumnRenamed(part, EXISTING_PART_COL) if is_global else joined.drop(part)


__all__ = ["CountsParam", "join_existing", "untagged"]
