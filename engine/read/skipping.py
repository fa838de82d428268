"""Which file slices a filtered read reads: the one decision behind `format("hudi")`'s pushed
filters and `Table.read(filters=...)`, in three steps, each of which only ever drops slices that
hold no matching record:

1. partition pruning by the partition path (`engine.read.prune.slice_may_match`), where the path
   holds the values as text (not with URL encoding or the timestamp key generator);
2. for a read of the latest snapshot, partitions whose partition statistics (`partition_stats`:
   a range per partition and column) rule a predicate out (`engine.read.data_skipping.
   load_partitions`), and key lookups: an equality on the record key or on a column with a
   secondary index keeps only the file groups the metadata table's record index names
   (`engine.read.index_skipping`);
3. data skipping by the metadata table's column statistics (`engine.read.data_skipping`).

Steps 2 and 3 follow `hoodie.enable.data.skipping` (`data_skipping`). The rows still go through
the filters afterwards: skipping decides what is read, never what is returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from engine.data.slice_reader import SliceFiles
from engine.read import data_skipping, index_skipping
from engine.read.prune import Predicate, slice_may_match
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline


def prunable(meta: MetaClient) -> bool:
    """Whether partition paths hold the partition columns' values as text."""
    config = meta.config
    return not config.url_encode and not (config.keygen_class or "").lower().endswith("timestampbasedkeygenerator")


def kept_slices(
    meta: MetaClient,
    timeline: Timeline,
    slices: Sequence[SliceFiles],
    predicates: Sequence[Predicate],
    types: Mapping[str, pa.DataType],
    *,
    latest: bool,
    data_skipping_on: bool = True,
) -> list[int]:
    """The indexes of the `slices` that may hold a record matching every predicate."""
    if not predicates:
        return list(range(len(slices)))
    config = meta.config
    kept = list(range(len(slices)))
    if prunable(meta):
        kept = [i for i in kept if slice_may_match(slices[i].partition, predicates, tuple(config.partition_fields),
                                                   config.hive_style, types)]
    if data_skipping_on and latest and kept and config.partition_fields:
        # the partition statistics cover the latest slices (not older snapshots)
        ranges = data_skipping.load_partitions(meta, timeline, {slices[i].partition for i in kept},
                                               {p.column for p in predicates})
        if ranges.stats:
            kept = [i for i in kept if ranges.partition_may_match(slices[i].partition, predicates, types)]
    if data_skipping_on and latest and kept:
        holders = index_skipping.key_holders(meta, timeline, predicates, types)
        if holders.groups is not None:
            kept = [i for i in kept if (slices[i].partition, slices[i].file_id) in holders.groups]
    if data_skipping_on and kept:
        stats = data_skipping.load(meta, timeline, [slices[i] for i in kept], {p.column for p in predicates})
        kept = [i for i in kept if stats.slice_may_match(slices[i], predicates, types)]
    return kept


__all__ = ["kept_slices", "prunable"]
