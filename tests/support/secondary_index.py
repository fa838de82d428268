"""The oracle for Apache Hudi's secondary indexes: each index's keys recomputed from the table's
rows as hudi-rs reads them (an independent reader: `<value>$<record key>` for every live record),
compared with what the metadata table holds, and every key checked to sit in the file group its
value hashes to."""

from __future__ import annotations

import pyarrow as pa

from engine.metadata import index_defs
from engine.metadata import secondary_index as si
from engine.metadata.reader import MetadataTableReader
from engine.table import metadata_table
from engine.table.meta_client import MetaClient
from tests.support import hudi_rs


def check(meta: MetaClient) -> dict[str, set[str]]:
    """Assert every built secondary index equals its recomputation; return partition -> keys."""
    meta.reload_config()
    built = [p for p in metadata_table.partitions_in(meta.config) if p.startswith(si.PREFIX)]
    if not built:
        return {}
    rows = hudi_rs.arrow_snapshot(meta.storage.base_uri)
    reader = MetadataTableReader(meta, meta.timeline())
    defs = index_defs.definitions(meta)
    out = {}
    for partition in built:
        definition = defs[partition]
        column = definition["sourceFields"][0]
        if rows is None or rows.num_rows == 0:
            want: set[str] = set()
        else:
            values = rows.column(column)
            if pa.types.is_timestamp(values.type):
                values = values.cast(pa.timestamp("us", values.type.tz))
            want = {si.key(v, str(k)) for k, v in zip(rows.column("_hoodie_record_key").to_pylist(), si.texts(values),
                                                       strict=True)}
        groups = sorted(sl.file_id for sl in reader.slices(partition))
        held: set[str] = set()
        for index, group in enumerate(groups):
            assert group == f"{si.group_prefix(partition)}{index:04d}-0", groups
            keys = list(reader.records(partition, file_ids=[group]))
            found = si.file_groups_of(keys, len(groups), str(definition.get("version") or "V1")).tolist()
            assert all(g == index for g in found), (partition, group, [k for k, g in zip(keys, found, strict=True) if g != index][:3])
            held |= set(keys)
        assert held == want, (partition, sorted(held - want)[:5], sorted(want - held)[:5])
        out[partition] = held
    return out
