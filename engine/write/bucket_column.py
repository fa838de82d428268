"""A write's bucket column as a Spark expression, for plans where it needs no insert numbering.

`engine.write.assign.assign_buckets` numbers each partition's inserts and looks the numbers up in
the planned `InsertRange`s, which takes a pass over the records in a Python task. When every
partition's inserts go to a single bucket (one range), the number does not matter: a record's
bucket follows from its (partition, file group) or, for an insert, its partition alone, and the
JVM can compute it in the map side of the write's shuffle. The buckets are exactly those of
`assign_buckets`; a record the plan does not know fails the task, as it does there.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from engine.columns import FILE_ID_COL, PART_COL
from engine.write.assign import PAIR_SEP
from engine.write.planner import InsertRange


def needs_numbering(ranges: Mapping[str, tuple[InsertRange, ...]]) -> bool:
    """Whether some partition spreads its inserts over several buckets (then only the numbered
    assignment places them)."""
    return any(len(r) > 1 for r in ranges.values())


def bucket_column(
    updates_idx: Mapping[tuple[str, str], int], ranges: Mapping[str, tuple[InsertRange, ...]]
) -> Column:
    """The bucket (int) of each record: by its file group if tagged, else its partition's insert
    bucket. Requires `not needs_numbering(ranges)`."""
    if needs_numbering(ranges):
        raise ValueError("a partition has several insert buckets: use assign_buckets")
    unknown = F.raise_error(
        F.concat(
            F.lit("record for a file group or partition the write plan does not have: "),
            F.col(PART_COL),
            F.lit(" "),
            F.coalesce(F.col(FILE_ID_COL), F.lit("(insert)")),
        )
    )
    none = F.lit(None).cast("int")
    if updates_idx:
        by_group = F.create_map(*[v for (p, f), b in updates_idx.items() for v in (F.lit(f"{p}{PAIR_SEP}{f}"), F.lit(b))])
        update = by_group[F.concat(F.col(PART_COL), F.lit(PAIR_SEP), F.col(FILE_ID_COL))]
    else:
        update = none
    if ranges:
        by_part = F.create_map(*[v for p, (r,) in ranges.items() for v in (F.lit(p), F.lit(r.bucket))])
        insert = by_part[F.col(PART_COL)]
    else:
        insert = none
    bucket = F.when(F.col(FILE_ID_COL).isNotNull(), update).otherwise(insert).cast("int")
    return F.when(bucket.isNull(), unknown).otherwise(bucket)


__all__ = ["bucket_column", "needs_numbering"]
