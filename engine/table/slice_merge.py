"""How this table's file slices merge with their log files, for reads of record keys (index
lookups, the metadata table's record index): the table's merge mode, which instants' blocks count
(the timeline's completed writes), its ordering field and, for a table without meta fields, how
keys are computed from the key fields. No Spark."""

from __future__ import annotations

from engine.data.keys import SliceMerge
from engine.data.slice_reader import merge_mode_for
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import CommittedInstants, Timeline


def merge_context(meta: MetaClient, timeline: Timeline) -> SliceMerge:
    """The `SliceMerge` of the table at `meta` as of `timeline`."""
    virtual = None
    if not meta.config.populate_meta_fields:  # no meta fields: keys come from the key fields
        from engine.keygen.keys import KeySpec

        virtual = KeySpec.from_config(meta.config)
    schema = meta.latest_schema(timeline)
    pc_name = meta.config.precombine_field
    ordering = schema.field(pc_name) if schema is not None and pc_name and pc_name in schema.names else None
    return SliceMerge(merge_mode_for(meta.config), CommittedInstants.of(timeline), ordering, virtual)


__all__ = ["merge_context"]
