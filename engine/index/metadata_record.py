"""The RECORD index of a table whose metadata table keeps Apache Hudi's record index (issue 35):
lookups answered from the `record_index` partition, the index Apache Hudi's writers tag with,
instead of this engine's `.hoodie/.record_index/` files.

- chosen by `engine.index.resolve_index` for `hoodie.index.type=RECORD` (or Hudi's names
  `RECORD_INDEX`, `GLOBAL_RECORD_LEVEL_INDEX`) when the table's properties name a record index in
  its metadata table (`named`), and by `Table.read_keys` when no index is named and the record
  index can answer (`available`: kept by this engine, in step with the data table);
- a lookup (`locate`) hashes each key to its file group and reads only those groups (a batch
  lookup in the base HFile, the valid log blocks on top), as of the caller's timeline;
- global (a key is found in whichever partition holds it); it stores nothing itself: the
  metadata table's writer records every write's locations (`engine.metadata.writer`), and
  rollbacks take them away with the deltacommit. Inserts never go to log files (Apache Hudi's
  Spark record index cannot index log files either);
- a metadata table that cannot answer (behind the data table, unreadable, its record index
  dropped since) is never guessed from: tagging and `read_keys` read the data files instead
  (GLOBAL_SIMPLE), with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.data.keys import KEYS_SCHEMA
from engine.errors import CorruptTableError, StorageError, UnsupportedFeatureError
from engine.index.base import Index, TagContext, wanted_keys
from engine.index.simple import GlobalSimpleIndex
from engine.metadata import record_index as ri
from engine.metadata import record_index_lookup
from engine.metadata import records as mdr
from engine.metadata.reader import MetadataTableReader, MetadataTableUnavailable
from engine.metadata.writer import has_metadata_table, keepable_partitions, record_index_groups
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_log = logging.getLogger(__name__)
LOCATED_SCHEMA = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string())])
UNAVAILABLE = (MetadataTableUnavailable, CorruptTableError, UnsupportedFeatureError, StorageError)


def _names_it(meta: MetaClient) -> bool:
    config = meta.config
    return (config.version >= 8 and config.populate_meta_fields
            and mdr.RECORD_INDEX in metadata_table.partitions_in(config))


def named(meta: MetaClient) -> bool:
    """Whether the table (of version 8+, with meta fields) names a record index in its metadata
    table: its keys are indexed there and nowhere else, so RECORD means that index (answering from
    the data files while it cannot). Read from the properties as they are now, not when `meta`
    was opened."""
    return _names_it(MetaClient.open(meta.storage))


def available(meta: MetaClient) -> bool:
    """Whether the table's metadata table has a record index this engine keeps and can read, in
    step with the data table."""
    meta = MetaClient.open(meta.storage)  # its properties as they are now
    if not _names_it(meta):
        return False
    try:
        if not has_metadata_table(meta):
            return False
        reader = MetadataTableReader(meta, meta.timeline())
        reader.check_in_sync()
        return mdr.RECORD_INDEX in keepable_partitions(meta, reader)
    except UNAVAILABLE:
        return False


def lookup(meta: MetaClient, keys: pa.Array, timeline: Timeline | None = None) -> pa.Table:
    """(key, partition, file id) of the distinct `keys` the record index holds, as of `timeline`
    (default: the latest); raises MetadataTableUnavailable when it cannot answer for it."""
    meta = MetaClient.open(meta.storage)  # its properties as they are now
    reader = MetadataTableReader(meta, timeline if timeline is not None else meta.timeline())
    reader.check_in_sync()
    if mdr.RECORD_INDEX not in keepable_partitions(meta, reader):
        raise MetadataTableUnavailable("its record index is not built")
    groups = record_index_groups(reader)
    wanted = pc.unique(keys.cast(pa.string()).drop_null())
    if isinstance(wanted, pa.ChunkedArray):
        wanted = wanted.combine_chunks()
    hashed = ri.file_groups_of(wanted, len(groups))
    slices = {sl.file_id: sl for sl in reader.slices(mdr.RECORD_INDEX)}
    found = [record_index_lookup.lookup_group(reader, slices[groups[group]], wanted.filter(pa.array(hashed == group)))
             for group in np.unique(hashed).tolist() if groups[group] in slices]
    if not found:
        return LOCATED_SCHEMA.empty_table()
    return pa.concat_tables(found).cast(LOCATED_SCHEMA)


class MetadataRecordIndex(Index):
    """RECORD backed by Apache Hudi's record index in the metadata table (see the module docstring)."""

    name = "RECORD"
    is_global = True

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        self.options = dict(options or {})
        self._tag_stats: dict[str, int] = {}
        self._fallback = GlobalSimpleIndex()

    def locate(self, meta: MetaClient, keys: pa.Array, timeline: Timeline | None = None) -> pa.Table:
        """(key, partition, file id) of the keys the table holds, from the record index; raises
        MetadataTableUnavailable when it cannot answer (`engine.read.lookup` then reads the data
        files)."""
        return lookup(meta, keys, timeline)

    def _keys(self, ctx: TagContext, records: DataFrame | None) -> pa.Array:
        wanted = wanted_keys(ctx, True)
        if wanted is not None:
            (keys,) = wanted.values()
            return keys
        assert records is not None, "a driver-side lookup needs the batch's keys"
        from engine.columns import KEY_COL

        return records.select(KEY_COL).distinct().toArrow().column(0).combine_chunks().cast(pa.string())

    def _located(self, ctx: TagContext, records: DataFrame | None) -> pa.Table | None:
        keys = self._keys(ctx, records)
        try:
            found = lookup(ctx.meta, keys)
        except MetadataTableUnavailable as exc:
            _log.warning("%s: the metadata table's record index cannot answer (%s): tagging from the data files",
                         ctx.meta.storage.base_uri, exc)
            return None
        self._tag_stats = {"keys": len(keys), "found": found.num_rows, "metadata_table": 1}
        return found.rename_columns(KEYS_SCHEMA.names).cast(KEYS_SCHEMA)

    def tag_location(self, ctx: TagContext, records: DataFrame) -> DataFrame:
        from engine.index.spark_tagging import join_existing

        found = self._located(ctx, records)
        if found is None:
            tagged = self._fallback.tag_location(ctx, records)
            self._tag_stats = {"metadata_table": 0, **self._fallback.tagging_stats()}
            return tagged
        return join_existing(records, ctx.spark.createDataFrame(found), True, small=True)

    def locate_batch(self, ctx: TagContext) -> pa.Table:
        found = self._located(ctx, None)
        if found is None:
            found = self._fallback.locate_batch(ctx)
            self._tag_stats = {"metadata_table": 0, **self._fallback.tagging_stats()}
        return found

    def tagging_stats(self) -> dict[str, int]:
        """Keys looked up and found, and whether the metadata table answered, last tagging."""
        return dict(self._tag_stats)


__all__ = ["LOCATED_SCHEMA", "MetadataRecordIndex", "available", "lookup", "named"]
