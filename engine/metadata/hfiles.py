"""The HFiles of the metadata table (pure): records in, bytes out, as Apache Hudi writes them.

- the content of an HFILE log block: the records keyed and sorted, each record's own `key` left
  empty (the cell holds it), GZ, the file info `schema`;
- a base file: the same cells with `_hoodie_file_name` naming the base file, and the file info
  (`schema`, `bloomFilterTypeCode`, `minRecordKey`, `maxRecordKey`) and `bloomFilter` meta block
  Hudi's base files of the metadata table carry (DYNAMIC_V0, 10,000 entries, fpp 1e-9, at most
  100,000, over the keys in file order).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable

import fastavro

from engine.data.bloom_filter import TYPE_DYNAMIC_V0, build_for_keys, footer_entries
from engine.data.hfile import CODEC_GZ
from engine.data.hfile_writer import write_hfile
from engine.metadata import column_stats
from engine.metadata.record_index import location_record
from engine.metadata.records import (
    TYPE_COLUMN_STATS,
    TYPE_PARTITION_STATS,
    TYPE_RECORD_INDEX,
    TYPE_SECONDARY_INDEX,
    Record,
)

BLOOM_ENTRIES, BLOOM_FPP, BLOOM_MAX_ENTRIES = 10_000, 1e-9, 100_000


def _signature(record: Record) -> tuple | None:
    """What a record-index or secondary-index record's cell value depends on (None: another
    record, not memoised): the objects in every field but the key. Records at one location
    share them (`location_record`, `secondary_index.record`, and records read back through
    `engine.data.hfile_block.decode_value`), so they are encoded once; all of them are alive
    while `cells` runs, so no two distinct objects have one id."""
    if record.get("type") not in (TYPE_RECORD_INDEX, TYPE_SECONDARY_INDEX):
        return None
    return tuple((k, id(v)) for k, v in record.items() if k != "key")


def cells(records: Iterable[Record], schema_json: str, base_name: str | None = None) -> list[tuple[str, bytes]]:
    """(key, Avro bytes) in key order; `base_name`: the base file the records go to.

    The cell's value leaves the key out, so record-index records at one location (every key one
    write put in one file group) encode to the same bytes: they are encoded once."""
    schema = fastavro.parse_schema(json.loads(schema_json))
    extra = {"key": ""} if base_name is None else {"key": "", "_hoodie_file_name": base_name}
    out = []
    same: dict[tuple, bytes] = {}
    for record in sorted(records, key=lambda r: str(r["key"])):
        signature = _signature(record)
        value = same.get(signature) if signature is not None else None
        if value is None:
            buf = io.BytesIO()
            if record.get("type") in (TYPE_COLUMN_STATS, TYPE_PARTITION_STATS):
                record = column_stats.typed(record)  # read back, its wrappers lost their union branch
            fastavro.schemaless_writer(buf, schema, {**record, **extra})
            value = buf.getvalue()
            if signature is not None:
                same[signature] = value
        out.append((str(record["key"]), value))
    return out


def location_cells(located: Iterable[tuple[str, str, str]], instant: str, schema_json: str) -> list[tuple[str, bytes]]:
    """The cells of record-index locations (key, partition, file id), in the order given (key
    order), written at `instant`: the bytes `cells` gives their `location_record`s, each
    location encoded once and no record made per key."""
    schema = fastavro.parse_schema(json.loads(schema_json))
    values: dict[tuple[str, str], bytes] = {}
    out = []
    for key, partition, file_id in located:
        value = values.get((partition, file_id))
        if value is None:
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, schema, {**location_record("", partition, file_id, instant), "key": ""})
            value = values[(partition, file_id)] = buf.getvalue()
        out.append((key, value))
    return out


def log_block_from_cells(found: list[tuple[str, bytes]], schema_json: str) -> bytes:
    """The HFile of an HFILE log block holding `found` (key, Avro bytes) cells, in key order."""
    return write_hfile(found, file_info={"schema": schema_json.encode("utf-8")}, codec=CODEC_GZ)


def log_block_content(records: Iterable[Record], schema_json: str) -> bytes:
    """The HFile of an HFILE log block holding `records`."""
    return log_block_from_cells(cells(records, schema_json), schema_json)


def base_file(records: Iterable[Record], schema_json: str, base_name: str) -> tuple[bytes, int]:
    """The base HFile `base_name` holding `records`, and how many it holds."""
    found = cells(records, schema_json, base_name)
    keys = [k for k, _ in found]
    info = {"schema": schema_json.encode("utf-8"), "bloomFilterTypeCode": TYPE_DYNAMIC_V0.encode("ascii")}
    if keys:
        info["minRecordKey"], info["maxRecordKey"] = keys[0].encode("utf-8"), keys[-1].encode("utf-8")
    bloom = build_for_keys(keys, BLOOM_ENTRIES, BLOOM_FPP, BLOOM_MAX_ENTRIES)
    (text,) = [v for k, v in footer_entries(bloom).items() if "type" not in k]
    data = write_hfile(found, file_info=info, meta={"bloomFilter": text}, codec=CODEC_GZ)
    return data, len(found)


__all__ = ["BLOOM_ENTRIES", "BLOOM_FPP", "BLOOM_MAX_ENTRIES", "base_file", "cells", "location_cells", "log_block_content",
           "log_block_from_cells"]
