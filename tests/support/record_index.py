"""The metadata table's record index checked against the data files (issue 35): recomputed from
the live keys of every latest file slice, it must hold exactly those keys, each in the file group
its hash names, at the partition and file id of its record (a key stored twice, which an `insert`
of an existing key leaves, at one of them)."""

from __future__ import annotations

from engine.data.keys import ScanFile, live_keys
from engine.metadata import record_index as ri
from engine.metadata import records as mdr
from engine.metadata.reader import MetadataTableReader
from engine.table.meta_client import MetaClient
from engine.table.slice_merge import merge_context


def live_locations(meta: MetaClient) -> dict[str, list[tuple[str, str]]]:
    """Record key -> the (partition, file id) of each live record with that key, read from the
    data files (two for a key an `insert` wrote again into another file group)."""
    timeline = meta.timeline()
    view = meta.file_system_view(timeline)
    merge = merge_context(meta, timeline)
    out: dict[str, list[tuple[str, str]]] = {}
    for sl in view.latest_slices():
        for key in live_keys(meta.storage, ScanFile.of_slice(sl), merge=merge).to_pylist():
            out.setdefault(key, []).append((sl.partition, sl.file_id))
    return out


def index_locations(meta: MetaClient) -> dict[str, ri.Location]:
    """Key -> location the record index holds; asserts each key is in the file group its hash names."""
    reader = MetadataTableReader(meta, meta.timeline())
    slices = reader.slices(mdr.RECORD_INDEX)
    count = len(slices)
    assert count >= 1, "no record index file group"
    found: dict[str, ri.Location] = {}
    for sl in slices:
        for key, record in reader.records(mdr.RECORD_INDEX, file_ids=[sl.file_id]).items():
            assert ri.file_group_id(ri.file_group_of(key, count)) == sl.file_id, key
            found[key] = ri.decode(record["recordIndexMetadata"])
    return found


def check(meta: MetaClient) -> dict[str, ri.Location]:
    """The record index holds exactly the live keys, each at its record's location (for a key
    stored twice, at one of them); returns it."""
    found = index_locations(meta)
    live = live_locations(meta)
    assert sorted(found) == sorted(live)
    wrong = {k: (v.partition, v.file_id) for k, v in found.items() if (v.partition, v.file_id) not in live[k]}
    assert wrong == {}, {k: (wrong[k], live[k]) for k in list(wrong)[:5]}
    return found
