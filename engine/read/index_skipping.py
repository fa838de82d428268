"""Key lookups for filtered snapshot reads, as Apache Hudi's `RecordLevelIndexSupport` and
`SecondaryIndexSupport` prune files: when a pushed predicate is an equality (`=`, `IN`) on the
record key (`_hoodie_record_key`, or a table's one record-key field) or on the column of a
secondary index this engine keeps, the metadata table says which file groups hold the matching
records, and only their slices are read.

- record key: the keys the values render to (`engine.keygen.keys.record_key`);
- secondary index: the keys its entries `<value>$<record key>` pair with the values (the file
  group of each value, then the entries with that prefix);
- then the record index gives each key's (partition, file group).

Only for a snapshot of the latest instant (the indexes hold the latest state) and only where
both indexes can answer (in step with the data table); otherwise `None`: nothing is pruned, with
a notice. A predicate that matches no key prunes every slice, which is the right answer: no
record has that key or value.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from engine.constants import RECORD_KEY_COL
from engine.errors import InvalidInputError
from engine.index import metadata_record
from engine.keygen.keys import KeySpec, record_key
from engine.metadata import records as mdr
from engine.metadata import secondary_index as si
from engine.metadata import secondary_index_updates as siu
from engine.metadata.reader import MetadataTableReader
from engine.metadata.writer import keepable_partitions
from engine.read.prune import Predicate
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KeyHolders:
    """The file groups that may hold matching records (None: any), and how they were found."""

    groups: frozenset[tuple[str, str]] | None = None
    by: str | None = None  # "record key" or "secondary index <name>"
    keys: int = 0
    notice: str | None = None


def _values(pred: Predicate) -> list[object] | None:
    if pred.negated or pred.op not in ("eq", "in"):
        return None
    values = list(pred.value) if pred.op == "in" else [pred.value]
    return [v for v in values if v is not None]  # `= NULL` matches nothing


def _record_keys(meta: MetaClient, predicates: Sequence[Predicate]) -> list[str] | None:
    spec = KeySpec.from_config(meta.config)
    single = None if spec.complex_keys or len(spec.record_key_fields) != 1 else spec.record_key_fields[0]
    for pred in predicates:
        values = _values(pred)
        if values is None or pred.column not in (RECORD_KEY_COL, single):
            continue
        if pred.column == RECORD_KEY_COL:
            return [str(v) for v in values]
        keys = []
        for value in values:
            try:
                keys.append(record_key(spec, {pred.column: value}))
            except InvalidInputError:  # an empty key: no record has it
                continue
        return keys
    return None


def _secondary_keys(meta: MetaClient, reader: MetadataTableReader, timeline: Timeline,
                    predicates: Sequence[Predicate], types: Mapping[str, pa.DataType]) -> tuple[list[str], str] | None:
    kept, _why = siu.indexes(meta, timeline)
    by_column = {ix.column: ix for ix in kept}
    for pred in predicates:
        values = _values(pred)
        ix = by_column.get(pred.column)
        if values is None or ix is None or pred.column not in types:
            continue
        try:
            texts = si.texts(pa.array(values, type=types[pred.column]))
        except (pa.ArrowInvalid, pa.ArrowTypeError, si.UnsupportedValue):
            continue
        groups = sorted(sl.file_id for sl in reader.slices(ix.partition))
        prefixes = sorted({si.escape(t) + si.SEPARATOR for t in texts})
        if ix.version == "V1":
            wanted_groups = set(groups)  # V1 hashes the whole key: any group may hold a value
        else:  # V2: every key of a value is in the group its escaped value and `$` hash to
            wanted_groups = {groups[g] for g in si.file_groups_of(prefixes, len(groups), ix.version).tolist()}
        keys = []
        for key in reader.records(ix.partition, file_ids=sorted(wanted_groups)):
            if any(key.startswith(p) for p in prefixes):
                keys.append(si.split(key)[1])
        return keys, f"secondary index {ix.partition.removeprefix(si.PREFIX)}"
    return None


def key_holders(meta: MetaClient, timeline: Timeline, predicates: Sequence[Predicate],
                types: Mapping[str, pa.DataType]) -> KeyHolders:
    """The file groups holding the records the predicates' key or secondary-key equalities match."""
    if meta.config.version < 8 or not predicates:
        return KeyHolders()
    built = metadata_table.partitions_in(meta.config)
    if mdr.RECORD_INDEX not in built:
        return KeyHolders()
    try:
        keys = _record_keys(meta, predicates)
        by = "record key"
        if keys is None:
            if not any(p.startswith(si.PREFIX) for p in built):
                return KeyHolders()
            reader = MetadataTableReader(meta, timeline)
            reader.check_in_sync()
            kept = set(keepable_partitions(meta, reader))
            if mdr.RECORD_INDEX not in kept:
                return KeyHolders()
            found = _secondary_keys(meta, reader, timeline, predicates, types)
            if found is None:
                return KeyHolders()
            keys, by = found
        located = metadata_record.lookup(meta, pa.array(keys, pa.string()), timeline)
    except metadata_record.UNAVAILABLE as exc:
        notice = f"{meta.storage.base_uri}: no index lookup for the key filter, every file slice is read ({exc})"
        _log.warning("%s", notice)
        return KeyHolders(notice=notice)
    groups = frozenset(zip(located.column("partition").to_pylist(), located.column("file_id").to_pylist(),
                           strict=True))
    return KeyHolders(groups, by, len(keys))


__all__ = ["KeyHolders", "key_holders"]
