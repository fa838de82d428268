"""engine.data.avro_batch: a block's datums wrapped in an Avro container and read by polars give
the records fastavro gives, for the CDC log's schemas (a named record used twice) and the types a
table holds; what polars cannot read gives None (the caller then decodes with fastavro)."""

from __future__ import annotations

import datetime as dt
import json

import fastavro
import pyarrow as pa
import pytest

from engine.config.cdc import CdcMode, cdc_log_schema
from engine.data.avro_batch import container, datums, decode_block_arrow, inline_named_types
from engine.data.log_block import AVRO_BLOCK_VERSION, encode_avro_content

DATA = {
    "type": "record", "name": "trips_record", "namespace": "hoodie.trips",
    "fields": [
        {"name": "id", "type": ["null", "long"], "default": None},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "ok", "type": ["null", "boolean"], "default": None},
        {"name": "fare", "type": ["null", "double"], "default": None},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
        {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
        {"name": "tags", "type": ["null", {"type": "array", "items": ["null", "string"]}], "default": None},
        {"name": "raw", "type": ["null", "bytes"], "default": None},
    ],
}


def _records() -> list[dict]:
    row = {"id": 7, "name": "a", "ok": True, "fare": 1.5, "day": dt.date(2026, 1, 2),
           "at": dt.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=dt.UTC), "tags": ["x", None], "raw": b"\x00\xff"}
    other = {**row, "id": 8, "name": None, "tags": [], "raw": None}
    return [{"op": "u", "ts_ms": "20260101000000000", "before": row, "after": other},
            {"op": "i", "ts_ms": "20260101000000000", "before": None, "after": row},
            {"op": "d", "ts_ms": "20260101000000000", "before": other, "after": None}]


def test_a_cdc_block_reads_as_fastavro_reads_it():
    schema = cdc_log_schema(CdcMode.DATA_BEFORE_AFTER, DATA)
    records = _records()
    content = encode_avro_content(records, fastavro.parse_schema(schema))
    table = decode_block_arrow(content, AVRO_BLOCK_VERSION, json.dumps(schema))
    assert table is not None and table.column_names == ["op", "ts_ms", "before", "after"]
    got = table.to_pylist()
    for g, want in zip(got, records, strict=True):
        assert (g["op"], g["ts_ms"]) == (want["op"], want["ts_ms"])
        for side in ("before", "after"):
            if want[side] is None:
                assert g[side] is None
                continue
            w = want[side]
            assert {k: g[side][k] for k in ("id", "name", "ok", "fare", "day", "tags", "raw")} == {
                k: w[k] for k in ("id", "name", "ok", "fare", "day", "tags", "raw")}
            assert pa.scalar(g[side]["at"]).cast(pa.timestamp("us", "UTC")).as_py() == w["at"]


def test_named_references_are_inlined_under_new_names():
    schema = cdc_log_schema(CdcMode.DATA_BEFORE_AFTER, DATA)
    assert schema["fields"][3]["type"] == ["null", "hoodie.trips.trips_record"]
    inlined = inline_named_types(schema)
    after = inlined["fields"][3]["type"][1]
    assert after["type"] == "record" and after["name"] == "trips_record_1"
    assert [f["name"] for f in after["fields"]] == [f["name"] for f in DATA["fields"]]
    assert schema["fields"][3]["type"] == ["null", "hoodie.trips.trips_record"]  # the input is untouched


def test_what_the_fast_path_cannot_read_gives_none():
    schema = {"type": "record", "name": "R", "fields": [{"name": "op", "type": ["null", "string"]}]}
    content = encode_avro_content([{"op": "i"}, {"op": "d"}], fastavro.parse_schema(schema))
    assert decode_block_arrow(content, AVRO_BLOCK_VERSION, json.dumps(schema)).to_pylist() == [{"op": "i"}, {"op": "d"}]
    assert decode_block_arrow(content[:-1], AVRO_BLOCK_VERSION, json.dumps(schema)) is None  # cut short
    assert decode_block_arrow(content, 2, json.dumps(schema)) is None  # another block version
    assert datums(content + b"\x00", AVRO_BLOCK_VERSION) is None  # stray bytes
    bad = {"type": "record", "name": "R", "fields": [{"name": "op", "type": "nope"}]}
    assert decode_block_arrow(content, AVRO_BLOCK_VERSION, json.dumps(bad)) is None


@pytest.mark.parametrize("n", [0, 1, 300])
def test_the_container_holds_the_datums_unchanged(n):
    import io

    schema = {"type": "record", "name": "R", "fields": [{"name": "v", "type": "long"}]}
    content = encode_avro_content([{"v": i * 1000} for i in range(n)], fastavro.parse_schema(schema))
    count, body = datums(content, AVRO_BLOCK_VERSION)
    assert count == n
    assert [r["v"] for r in fastavro.reader(io.BytesIO(container(json.dumps(schema), count, body)))] == [
        i * 1000 for i in range(n)]
