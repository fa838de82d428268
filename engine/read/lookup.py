"""The read client (Apache Hudi's HoodieReadClient): point lookups and de-duplication through the index.

- `read_keys`: the records with the given record keys, reading only the files that hold them
  (the index locates the keys — with BLOOM, by footer key ranges and bloom filters).
- `filter_exists`: the rows of a DataFrame whose keys are not in the table yet.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.columns import EXISTING_PART_COL, FILE_ID_COL, KEY_COL, PART_COL
from engine.constants import META_COLUMNS
from engine.data.keys import ANY_PARTITION
from engine.data.scan import scan_files
from engine.errors import IndexChangedError, InvalidInputError
from engine.index.base import Index, TagContext
from engine.keygen.keys import KeySpec
from engine.keygen.spark_keys import partition_path_expr, record_key_expr, summarize
from engine.metadata.reader import MetadataTableUnavailable
from engine.read.reader import scan_latest, slice_merge, table_schema_or_empty
from engine.table.meta_client import MetaClient

_log = logging.getLogger(__name__)


def read_keys(spark: SparkSession, meta: MetaClient, index: Index, keys: Iterable[str]) -> DataFrame:
    """The latest version of the records whose `_hoodie_record_key` is in `keys` (absent keys: no row)."""
    wanted = sorted({str(k) for k in keys if k is not None and str(k) != ""})
    timeline = meta.timeline()
    schema = table_schema_or_empty(meta, timeline)
    if not wanted:
        return spark.createDataFrame([], scan_files(spark, meta.storage, [], schema).schema)
    view = meta.file_system_view(timeline)
    key_array = pa.array(wanted, pa.string())
    locate = getattr(index, "locate", None)
    found = None
    if callable(locate):  # an index that answers on the driver (RECORD): no Spark job to locate
        for attempt in range(3):
            try:  # the index as of the same timeline as the files read below
                found = locate(meta, key_array, timeline)
                break
            except IndexChangedError:
                if attempt == 2:
                    raise
                timeline = meta.timeline()
                view = meta.file_system_view(timeline)
            except MetadataTableUnavailable as exc:  # never a guess: the data files answer
                _log.warning("%s: the metadata table's record index cannot answer (%s): reading the data files",
                             meta.storage.base_uri, exc)
                from engine.index.simple import GlobalSimpleIndex

                index = GlobalSimpleIndex()
                break
    if found is not None:
        holders = set(zip(found.column("partition").to_pylist(), found.column("file_id").to_pylist(), strict=True))
    else:
        probe = spark.createDataFrame([(k, "") for k in wanted], f"{KEY_COL} string, {PART_COL} string")
        ctx = TagContext(spark, meta, view, view.partitions, {ANY_PARTITION: key_array}, slice_merge(meta, timeline, view))
        located = _global_lookup(index, ctx, probe)
        holders = {(r[EXISTING_PART_COL], r[FILE_ID_COL]) for r in located.collect() if r[FILE_ID_COL] is not None}
    slices = [s for s in view.latest_slices() if (s.partition, s.file_id) in holders]
    return scan_latest(spark, meta, timeline, slices, schema, keys=key_array)


def _global_lookup(index: Index, ctx: TagContext, probe: DataFrame) -> DataFrame:
    """Tag `probe` (keys without partitions) with the global variant of the table's index."""
    from engine.config.table_config import IndexType
    from engine.index import index_for

    global_variant = {
        "SIMPLE": IndexType.GLOBAL_SIMPLE,
        "BLOOM": IndexType.GLOBAL_BLOOM,
    }.get(index.name)
    finder = index_for(global_variant) if global_variant is not None else index
    if not finder.is_global:
        raise InvalidInputError(f"index {index.name} cannot look keys up without their partition")
    return finder.tag_location(ctx, probe)


def filter_exists(spark: SparkSession, meta: MetaClient, index: Index, df: DataFrame) -> DataFrame:
    """The rows of `df` whose record keys are not in the table (as the table's index sees them)."""
    spec = KeySpec.from_config(meta.config)
    missing = [f for f in spec.fields if f not in df.columns]
    if missing:
        raise InvalidInputError(f"the input lacks key column(s) {', '.join(missing)}")
    columns = [c for c in df.columns if c not in META_COLUMNS]
    keyed = df.select(
        *[F.col(f"`{c}`") for c in columns],
        record_key_expr(spec, df.schema).alias(KEY_COL),
        partition_path_expr(spec, df.schema).alias(PART_COL),
    )
    summary = summarize(keyed)
    if summary.bad:
        raise InvalidInputError(f"{summary.bad} input record(s) have a null or empty record key")
    timeline = meta.timeline()
    view = meta.file_system_view(timeline)
    ctx = TagContext(spark, meta, view, summary.partitions, summary.keys_by_partition(), slice_merge(meta, timeline, view))
    tagged = index.tag_location(ctx, keyed)
    return tagged.filter(F.col(FILE_ID_COL).isNull()).select(*[F.col(f"`{c}`") for c in columns])
