"""HFILE log data blocks: the HFile reader (engine.data.hfile) on hand-made files and on the one
Apache Hudi wrote in hudi-rs's table_hfile_log_block fixture, their records (engine.data.hfile_block),
and a slice that holds one."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from engine.data import hfile
from engine.data import log_block as lb
from engine.data.hfile_block import decode_hfile_content
from engine.data.slice_reader import MergeMode, SliceFiles, read_slice
from engine.errors import CorruptTableError, UnsupportedFeatureError
from engine.storage.local import LocalStorage
from tests.support.hfiles import cell, hfile_bytes, vlong
from tests.support.mor_tables import FID, I, MorTable

KEYED = pa.schema([pa.field("key", pa.string()), pa.field("ts", pa.int64()), pa.field("val", pa.string())])


@pytest.mark.parametrize("codec", [hfile.CODEC_GZ, hfile.CODEC_NONE])
def test_cells_of_several_data_blocks_in_order(codec: int) -> None:
    data = hfile_bytes([[cell(b"a", b"1"), cell(b"b", b"22", memstore_ts=300)], [cell(b"c", b"")]], codec)
    assert hfile.read_hfile_cells(data) == [(b"a", b"1"), (b"b", b"22"), (b"c", b"")]
    assert hfile.read_trailer(data).compression_codec == codec


def test_leaf_index_blocks_among_the_data_blocks_are_stepped_over() -> None:
    data = hfile_bytes([[cell(b"a", b"1")], [cell(b"b", b"2")], [cell(b"c", b"3")]], inline_leaf_index=True)
    assert hfile.read_hfile_cells(data) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]


def test_vlongs_of_every_width() -> None:
    for n in (0, 127, 128, -112, -113, 300, 2**40):
        data = hfile_bytes([[cell(b"k", b"v", memstore_ts=n), cell(b"l", b"w")]], hfile.CODEC_NONE)
        assert hfile.read_hfile_cells(data) == [(b"k", b"v"), (b"l", b"w")], n
    assert vlong(300) == b"\x8e\x01\x2c"


def test_an_empty_hfile_has_no_cells() -> None:
    assert hfile.read_hfile_cells(hfile_bytes([], hfile.CODEC_NONE)) == []


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: b"x" * 100, ValueError, "too short for an HFile trailer"),
        (lambda: b"\x00" * 4096, ValueError, "no HFile trailer magic"),
        (lambda: hfile_bytes([[cell(b"a", b"1")]])[:-1] + b"\x02", hfile.UnsupportedHFileError, "HFile version 2"),
        (lambda: hfile_bytes([[cell(b"a", b"1")]], codec=hfile.CODEC_SNAPPY), hfile.UnsupportedHFileError,
         "compressed with SNAPPY"),
        (lambda: hfile_bytes([[cell(b"a", b"1")]], entry_count=2), ValueError, "1 cells in its data blocks, its trailer says 2"),
        (lambda: hfile_bytes([[cell(b"a", b"1")[:-3]]], hfile.CODEC_NONE), ValueError, "runs past the block"),
        (lambda: b"DATABLKE" + hfile_bytes([[cell(b"a", b"1")]])[8:], hfile.UnsupportedHFileError, "encoded data block"),
    ],
)
def test_malformed_and_unsupported_hfiles(make, error: type, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        hfile.read_hfile_cells(make())


def _t(tmp_path: Path) -> MorTable:
    t = MorTable(tmp_path, data_schema=KEYED)
    t.base_file(I[1], [{"id": "k1", "key": "k1", "ts": 1, "val": "base"}, {"id": "k2", "key": "k2", "ts": 1, "val": "base"}])
    return t


def _hfile_block(t: MorTable, instant: str, rows: list[dict], codec: int = hfile.CODEC_GZ) -> bytes:
    """As HoodieHFileDataBlock writes it: records sorted by key, their `key` field emptied."""
    schema = fastavro.parse_schema(json.loads(t.writer_schema))
    cells = []
    for record in sorted(t.records(instant, rows, FID).to_pylist(), key=lambda r: r["_hoodie_record_key"]):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, {**record, "key": ""})
        cells.append(cell(record["_hoodie_record_key"].encode(), buf.getvalue()))
    header = {lb.HeaderKey.INSTANT_TIME: instant, lb.HeaderKey.SCHEMA: t.writer_schema}
    return lb.encode_log_block(lb.BlockType.HFILE_DATA, header, hfile_bytes([cells], codec))


def test_records_take_back_their_key_field_from_the_cell(tmp_path: Path) -> None:
    t = _t(tmp_path)
    [block] = lb.decode_log_blocks(_hfile_block(t, I[2], [{"id": "k2", "key": "k2", "ts": 5, "val": "x"},
                                                          {"id": "k0", "key": "k0", "ts": 6, "val": "y"}]))
    records = decode_hfile_content(block.content, lb.header_writer_schema(block, "HFILE"), block.offset)
    assert [(r["_hoodie_record_key"], r["key"], r["ts"], r["val"]) for r in records] == [
        ("k0", "k0", 6, "y"), ("k2", "k2", 5, "x")]


def test_a_slice_with_an_hfile_block(tmp_path: Path) -> None:
    t = _t(tmp_path)
    path = t.log_file([_hfile_block(t, I[2], [{"id": "k2", "key": "k2", "ts": 5, "val": "x"}]),
                       t.delete_block(I[3], ["k1"]),
                       _hfile_block(t, I[4], [{"id": "k3", "key": "k3", "ts": 7, "val": "z"}], hfile.CODEC_NONE)],
                      base_instant=I[1], version=1)
    files = SliceFiles("", FID, I[1], f"{FID}_0-1-0_{I[1]}.parquet", (path,))
    rows = read_slice(LocalStorage(str(t.root)), files, t.schema, ordering_field="ts", mode=MergeMode.EVENT_TIME,
                      is_committed=lambda i: True)
    assert sorted((r["_hoodie_commit_time"], r["_hoodie_record_key"], r["key"], r["ts"], r["val"])
                  for r in rows.to_pylist()) == [(I[2], "k2", "k2", 5, "x"), (I[4], "k3", "k3", 7, "z")]


def test_unreadable_hfile_blocks_raise_typed_errors(tmp_path: Path) -> None:
    t = _t(tmp_path)
    header = {lb.HeaderKey.INSTANT_TIME: I[2], lb.HeaderKey.SCHEMA: t.writer_schema}
    snappy = lb.LogBlock(9, lb.BlockType.HFILE_DATA, header, hfile_bytes([[cell(b"a", b"")]], hfile.CODEC_SNAPPY), {})
    with pytest.raises(UnsupportedFeatureError, match="offset 9: HFILE block: HFile compressed with SNAPPY"):
        lb.decode_data_block(snappy, t.schema)
    garbled = lb.LogBlock(9, lb.BlockType.HFILE_DATA, header, hfile_bytes([[cell(b"a", b"\xff")]]), {})
    with pytest.raises(CorruptTableError, match="offset 9: HFILE record 0 does not decode"):
        lb.decode_data_block(garbled, t.schema)
    with pytest.raises(CorruptTableError, match="offset 9: HFILE content: no HFile trailer magic"):
        lb.decode_data_block(lb.LogBlock(9, 4, header, b"\x00" * 5000, {}), t.schema)


def test_the_block_apache_hudi_wrote(tmp_path: Path) -> None:
    from tests.support import hudi1x

    fx = hudi1x.fixture("quickstart_trips_table/mor/avro/table_hfile_log_block", tmp_path)
    [log] = [p for p in fx.table.iterdir() if ".log." in p.name]
    [block] = lb.decode_log_blocks(log.read_bytes())
    assert block.block_type == lb.BlockType.HFILE_DATA
    trailer = hfile.read_trailer(block.content)
    assert (trailer.compression_codec, trailer.entry_count) == (hfile.CODEC_GZ, 2)
    assert [(r["_hoodie_record_key"], r["key"], r["value"], r["num"]) for r in decode_hfile_content(block.content, lb.header_writer_schema(block, "HFILE"), block.offset)] == [
        ("k1", "k1", "v1_upd", 11), ("k2", "k2", "v1_upd", 11)]
