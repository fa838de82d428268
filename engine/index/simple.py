"""SIMPLE index: join incoming keys with the keys read from the latest base files of the touched partitions."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine.index.base import FILE_ID_COL, Index, TagContext
from engine.read.scan import KEYS_SCHEMA, ScanFile, scan_keys
from engine.write.file_writer import KEY_COL, PART_COL


class SimpleIndex(Index):
    """Non-global: a key is looked up in its own partition only."""

    name = "SIMPLE"
    is_global = False

    def tag_location(self, ctx: TagContext, records: DataFrame) -> DataFrame:
        files = [
            ScanFile(b.path, b.partition, b.file_id) for b in ctx.view.latest_base_files(ctx.partitions)
        ]
        if not files:
            return records.withColumn(FILE_ID_COL, F.lit(None).cast("string"))
        existing = scan_keys(ctx.spark, ctx.meta.storage, files, ctx.incoming_keys)
        if ctx.incoming_keys is not None:
            # filtered at the source: at most one row per incoming key, small enough to broadcast
            existing = F.broadcast(existing)
        key, part, fid = KEYS_SCHEMA.names
        cond = (records[KEY_COL] == existing[key]) & (records[PART_COL] == existing[part])
        return records.join(existing, cond, "left").drop(key, part).withColumnRenamed(fid, FILE_ID_COL)
