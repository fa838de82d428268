"""The secondary indexes' share of a metadata deltacommit, as Apache Hudi 1.x derives it
(`SecondaryIndexRecordGenerationUtils.convertWriteStatsToSecondaryIndexRecords`; the keys and
records: `engine.metadata.secondary_index`).

For every file group a write touches, the (record key, secondary value) pairs of its live records
before the write and after it (`record_index_updates.written_slices`): a pair the group holds
after but not before is inserted, one it held before but not after is deleted (a changed value
is both), and every pair of a group the write replaces is deleted; an insert of the same key
elsewhere in the write wins over its delete (a partition move, clustering). Compactions change no
pair: nothing.

Kept where this engine renders the values as Hudi does (`indexes`): an index definition of type
`secondary_index` with the identity function over one top-level column of a supported type, on a
table with meta fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from engine.constants import RECORD_KEY_COL
from engine.data.keys import ScanFile, SliceMerge
from engine.data.slice_reader import read_slice
from engine.metadata import index_defs
from engine.metadata import secondary_index as si
from engine.metadata.record_index_updates import WrittenSlices
from engine.storage import Storage
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline


@dataclass(frozen=True)
class SecondaryIndex:
    partition: str  # secondary_index_<name>
    column: str
    version: str  # V1 or V2: how keys pick their file group


@dataclass
class SecondaryChanges:
    """The index keys a write inserts and deletes in one secondary index."""

    inserted: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)


def indexes(meta: MetaClient, timeline: Timeline | None = None) -> tuple[list[SecondaryIndex], dict[str, str]]:
    """The built secondary indexes this engine keeps, and why each other one is not kept."""
    built = [p for p in metadata_table.partitions_in(meta.config) if p.startswith(si.PREFIX)]
    if not built:
        return [], {}
    defs = index_defs.definitions(meta)
    schema = meta.latest_schema(timeline) if timeline is not None else meta.latest_schema()
    kept, why = [], {}
    for partition in built:
        definition = defs.get(partition)
        reason = unkept_reason(meta, definition, schema)
        if reason:
            why[partition] = reason
            continue
        assert isinstance(definition, Mapping)
        kept.append(SecondaryIndex(partition, str(definition["sourceFields"][0]),
                                   str(definition.get("version") or "V1").upper()))
    return kept, why


def unkept_reason(meta: MetaClient, definition: object, schema: pa.Schema | None) -> str:
    if not isinstance(definition, Mapping) or str(definition.get("indexType") or "") != "secondary_index":
        return "no secondary index definition names it"
    if str(definition.get("indexFunction") or "identity") != "identity":
        return f"its expression {definition.get('indexFunction')!r} is not evaluated by this engine"
    fields = [str(f) for f in definition.get("sourceFields") or []]
    if len(fields) != 1 or "." in fields[0]:
        return "it is not over one top-level column"
    if not meta.config.populate_meta_fields:
        return "the table does not store its record keys (meta fields)"
    if schema is None or fields[0] not in schema.names:
        return f"{fields[0]} is not a column of the table"
    if not si.supports(schema.field(fields[0]).type):
        return f"{fields[0]} is of type {schema.field(fields[0]).type}, whose secondary keys this engine does not render"
    return ""


def slice_pairs(storage: Storage, file: ScanFile | None, merge: SliceMerge, schema: pa.Schema,
           columns: list[str]) -> dict[str, dict[str, str | None]]:
    """Column -> {record key: secondary text} of a slice's live records (none for no slice)."""
    if file is None or (file.path is None and not file.log_paths):
        return {c: {} for c in columns}
    fields = [pa.field(RECORD_KEY_COL, pa.string()), *(schema.field(c) for c in columns)]
    if merge.ordering is not None and merge.ordering.name not in columns:
        fields.append(merge.ordering)
    table = read_slice(storage, file.slice_files, pa.schema(fields),
                       ordering_field=merge.ordering.name if merge.ordering is not None else None,
                       mode=merge.mode, is_committed=merge.committed, columns=[RECORD_KEY_COL, *columns])
    keys = [str(k) for k in table.column(RECORD_KEY_COL).to_pylist()]
    return {c: dict(zip(keys, si.texts(table.column(c)), strict=True)) for c in columns}


def changes(meta: MetaClient, timeline: Timeline, slices: WrittenSlices,
            kept: list[SecondaryIndex]) -> dict[str, SecondaryChanges]:
    """Partition -> the keys the write (`slices`) inserts into and deletes from each kept index."""
    out = {ix.partition: SecondaryChanges() for ix in kept}
    if not kept:
        return out
    schema = meta.latest_schema(timeline)
    assert schema is not None
    columns = sorted({ix.column for ix in kept})
    for _partition, _file_id, before_files, after_files in slices.written:
        before = slice_pairs(meta.storage, before_files, slices.before_merge, schema, columns)
        after = slice_pairs(meta.storage, after_files, slices.after_merge, schema, columns)
        for ix in kept:
            old, new = before[ix.column], after[ix.column]
            change = out[ix.partition]
            for rk, value in new.items():
                if rk not in old or old[rk] != value:
                    change.inserted.add(si.key(value, rk))
            for rk, value in old.items():
                if rk not in new or new[rk] != value:
                    change.deleted.add(si.key(value, rk))
    for found in slices.replaced:
        gone = slice_pairs(meta.storage, found, slices.before_merge, schema, columns)
        for ix in kept:
            out[ix.partition].deleted |= {si.key(v, rk) for rk, v in gone[ix.column].items()}
    for change in out.values():
        change.deleted -= change.inserted  # reduceByKeys: the non-deleted record wins
    return out


__all__ = ["SecondaryChanges", "SecondaryIndex", "changes", "indexes", "slice_pairs", "unkept_reason"]
