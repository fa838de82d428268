"""engine.data.avro_encode: a table's datums encoded column-wise equal fastavro's record by
record, byte for byte (nulls in unions either way round, negative and huge longs, unicode, empty
strings, nested records, logical types); unsupported types give None."""

from __future__ import annotations

import datetime as dt
import io

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from engine.config.cdc import CdcMode, cdc_log_schema
from engine.data.avro_encode import avro_block_content, encode_datums
from engine.data.log_block import AVRO_BLOCK_VERSION, encode_avro_content

INNER = {"type": "record", "name": "r", "namespace": "hoodie.t", "fields": [
    {"name": "i", "type": ["null", "int"], "default": None},
    {"name": "l", "type": ["null", "long"], "default": None},
    {"name": "s", "type": ["null", "string"], "default": None},
    {"name": "b", "type": ["null", "boolean"], "default": None},
    {"name": "f", "type": ["null", "float"], "default": None},
    {"name": "d", "type": ["null", "double"], "default": None},
    {"name": "raw", "type": ["null", "bytes"], "default": None},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
    {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
    {"name": "req", "type": "long"},
]}
ARROW = pa.struct([("i", pa.int32()), ("l", pa.int64()), ("s", pa.string()), ("b", pa.bool_()), ("f", pa.float32()),
                   ("d", pa.float64()), ("raw", pa.binary()), ("day", pa.date32()), ("at", pa.timestamp("us", "UTC")),
                   ("req", pa.int64())])


def _rows(n: int, seed: int = 1) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        def maybe(v):
            return None if rng.random() < 0.2 else v
        out.append({
            "i": maybe(int(rng.integers(-2**31, 2**31))), "l": maybe(int(rng.integers(-2**63, 2**63 - 1))),
            "s": maybe(["", "a", "é漢字", "x" * 300][k % 4]), "b": maybe(bool(k % 2)), "f": maybe(float(np.float32(k / 3))),
            "d": maybe(float(rng.normal())), "raw": maybe(bytes(rng.integers(0, 256, k % 5).astype(np.uint8))),
            "day": maybe(dt.date(1960 + k % 100, 1 + k % 12, 1 + k % 28)),
            "at": maybe(dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(rng.integers(-10**15, 10**15)))),
            "req": k * 1_000_003 - 500,
        })
    return out


def _fastavro(records: list[dict], schema: dict) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for r in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        out.append(buf.getvalue())
    return out


@pytest.mark.parametrize("n", [0, 1, 257])
def test_records_encode_as_fastavro_encodes_them(n):
    rows = _rows(n)
    table = pa.Table.from_pylist(rows, schema=pa.schema(list(ARROW)))
    got = encode_datums(table, INNER)
    assert got is not None and got.to_pylist() == _fastavro(rows, INNER)


def test_a_cdc_block_is_byte_for_byte_fastavros():
    for mode in CdcMode:
        schema = cdc_log_schema(mode, INNER)
        images = _rows(40, seed=3)
        records = []
        for k, img in enumerate(images):
            op = "iud"[k % 3]
            before = None if op == "i" else img
            after = None if op == "d" else {**img, "s": "after"}
            if mode is CdcMode.OP_KEY_ONLY:
                records.append({"op": op, "record_key": f"k{k}"})
            elif mode is CdcMode.DATA_BEFORE:
                records.append({"op": op, "record_key": f"k{k}", "before": before})
            else:
                records.append({"op": op, "ts_ms": "20260101000000000", "before": before, "after": after})
        fields = [f["name"] for f in schema["fields"]]
        types = {"op": pa.string(), "record_key": pa.string(), "ts_ms": pa.string(), "before": ARROW, "after": ARROW}
        table = pa.Table.from_pylist(records, schema=pa.schema([(f, types[f]) for f in fields]))
        datums = encode_datums(table, schema)
        assert datums is not None, mode
        want = encode_avro_content(records, fastavro.parse_schema(schema))
        assert avro_block_content(datums, AVRO_BLOCK_VERSION) == want, mode


def test_unions_with_null_second_and_unsupported_types():
    schema = {"type": "record", "name": "R", "fields": [{"name": "op", "type": ["string", "null"]}]}
    rows = [{"op": "i"}, {"op": None}, {"op": "d"}]
    table = pa.Table.from_pylist(rows, schema=pa.schema([("op", pa.string())]))
    assert encode_datums(table, schema).to_pylist() == _fastavro(rows, schema)
    dec = {"type": "record", "name": "R", "fields": [
        {"name": "x", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}}]}
    assert encode_datums(pa.table({"x": pa.array([1], pa.int64())}), dec) is None
    arr = {"type": "record", "name": "R", "fields": [{"name": "x", "type": {"type": "array", "items": "long"}}]}
    assert encode_datums(pa.table({"x": pa.array([[1]])}), arr) is None
    assert avro_block_content(pa.array([], pa.large_binary()), AVRO_BLOCK_VERSION) == encode_avro_content([], schema)
