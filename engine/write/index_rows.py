"""The rows a write hands to `Index.update_location` (Spark): where each written record went, and
the keys an insert_overwrite's replaced file groups held."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine.columns import FILE_ID_COL, KEY_COL, OP_COL, OP_DELETE, PART_COL, PREV_FILE_ID_COL
from engine.index.base import TagContext
from engine.write.planner import WritePlan
from engine.write.tasks import BUCKET_COL


def replaced_key_rows(ctx: TagContext, replaced: dict[str, list[str]]) -> DataFrame:
    """The `_located` rows of an insert_overwrite's replaced records: a delete of each key the
    replaced groups hold at their latest (merged) slice, located where it was."""
    from engine.data.keys import KEYS_SCHEMA, ScanFile
    from engine.data.scan import scan_keys

    groups = {(p, f) for p, ids in replaced.items() for f in ids}
    files = [ScanFile.of_slice(sl) for sl in ctx.view.latest_slices(replaced) if (sl.partition, sl.file_id) in groups]
    key, part, fid = KEYS_SCHEMA.names
    return scan_keys(ctx.spark, ctx.meta.storage, files, None, ctx.merge).select(
        F.col(key).alias(KEY_COL),
        F.col(part).alias(PART_COL),
        F.col(fid).alias(FILE_ID_COL),
        F.lit(OP_DELETE).alias(OP_COL),
        F.col(fid).alias(PREV_FILE_ID_COL),
    )


def located_rows(assigned: DataFrame, plan: WritePlan) -> DataFrame:
    """(key, partition, file id, op) of every record a write placed, from its bucket."""
    file_of = F.create_map(*[v for b in plan.buckets for v in (F.lit(b.index), F.lit(b.file_id))])
    return assigned.select(
        KEY_COL,
        PART_COL,
        file_of[F.col(BUCKET_COL)].alias(FILE_ID_COL),
        OP_COL,
        F.col(FILE_ID_COL).alias(PREV_FILE_ID_COL),  # the file tagging found: unchanged locations need no put
    )


__all__ = ["located_rows", "replaced_key_rows"]
