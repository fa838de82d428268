"""HFiles as Apache Hudi and HBase write them (issue 35.1): engine.data.hfile reads every HFile of
hudi-rs's test data key for key, with point, batch and prefix lookups through the index;
engine.data.hfile_writer writes, byte for byte, the HFiles Hudi's HFileWriterImpl wrote; and
hudi-rs reads the metadata table's HFiles this writer wrote."""

from __future__ import annotations

import bisect
import io
import json
import shutil
import struct
import zipfile
from pathlib import Path

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.data.hfile import CODEC_GZ, CODEC_NONE, TRAILER_SIZE, HFileReader, read_hfile_cells
from engine.data.hfile_writer import HFileWriter, java_hashmap_order, write_hfile
from tests.support import hudi1x, hudi_rs

STANDARD_INFO = {
    "hfile.LASTKEY", "hfile.AVG_KEY_LEN", "hfile.AVG_VALUE_LEN", "hfile.CREATE_TIME_TS", "MAX_MEMSTORE_TS_KEY",
    "KEY_VALUE_VERSION",
}
LARGE_PREFIX = "hudi-key-" + "a" * 100 + "-"  # hudi-rs's large-key files: a 110-character prefix, then the number


def _key(i: int) -> str:
    return f"hudi-key-{i:09d}"


def _value(i: int) -> str:
    return f"hudi-value-{i:09d}"


# file -> (entries, the cells expected in order); as hudi-rs's reader tests assert them
HBASE_FILES = {
    "hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile": [(_key(i), _value(i)) for i in range(5000)],
    "hudi_1_0_hbase_2_4_9_64KB_NONE_5000.hfile": [(_key(i), _value(i)) for i in range(5000)],
    "hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile": [(_key(i), _value(i)) for i in range(20000)],
    "hudi_1_0_hbase_2_4_9_512KB_GZ_20000.hfile": [(_key(i), _value(i)) for i in range(20000)],
    "hudi_1_0_hbase_2_4_9_16KB_GZ_200_20_non_unique.hfile": [
        cell for i in range(200) for cell in [(_key(i), _value(i))] + [(_key(i), f"{_value(i)}_{j}") for j in range(20)]
    ],
    "hudi_1_0_hbase_2_4_13_16KB_GZ_20000_fake_first_key.hfile": [
        (f"{_key(i)}-abcdefghij", _value(i)) for i in range(20000)
    ],
    "hudi_1_0_hbase_2_4_13_1KB_GZ_20000_large_keys.hfile": [(f"{LARGE_PREFIX}{i:09d}", _value(i)) for i in range(20000)],
    "hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile": [
        (f"{LARGE_PREFIX}{i:09d}", _value(i)) for i in range(10000)
    ],
    "hudi_1_0_hbase_2_4_9_no_entry.hfile": [],
}


@pytest.fixture(scope="module")
def core_data() -> Path:
    return hudi1x.core_data_dir()


def _encoded(cells: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in cells]


@pytest.mark.parametrize("name", sorted(HBASE_FILES))
def test_hbase_written_files_read_key_for_key(core_data: Path, name: str) -> None:
    data = (core_data / "hfile" / name).read_bytes()
    expected = _encoded(HBASE_FILES[name])
    reader = HFileReader(data)
    assert reader.entry_count == len(expected)
    assert reader.cells() == expected
    assert read_hfile_cells(data) == expected  # the sequential read agrees with the indexed one
    if not expected:
        assert reader.index == [] and reader.get(b"hudi-key-000000000") == []
        return
    # point and batch lookups through the index: first, middle, last, absent keys on either side
    keys = [expected[0][0], expected[len(expected) // 2][0], expected[-1][0]]
    by_key: dict[bytes, list[bytes]] = {}
    for k, v in expected:
        by_key.setdefault(k, []).append(v)
    for k in keys:
        assert reader.get(k) == by_key[k]
    assert reader.get(b"hudi-key-") == [] and reader.get(b"zzz") == [] and reader.get(b"") == []
    assert reader.lookup(keys + [b"nope"]) == {k: by_key[k] for k in keys}
    # a lookup of every 997th key reads the same as the file
    sample = sorted(by_key)[::997]
    assert reader.lookup(sample) == {k: by_key[k] for k in sample}
    # HBase keeps a bloom filter as a meta block; its file info carries HBase's names
    assert b"bloomFilter" in reader.meta_index and reader.meta_block(b"bloomFilter")
    assert reader.meta_block(b"nothing") is None
    assert struct.unpack(">i", reader.file_info[b"KEY_VALUE_VERSION"]) == (1,)


def test_index_levels_and_fake_first_keys(core_data: Path) -> None:
    deep = HFileReader((core_data / "hfile" / "hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile").read_bytes())
    two = HFileReader((core_data / "hfile" / "hudi_1_0_hbase_2_4_13_1KB_GZ_20000_large_keys.hfile").read_bytes())
    assert (deep.trailer.data_index_levels, two.trailer.data_index_levels) == (3, 2)
    assert len(deep.index) > deep.trailer.data_index_count  # the leaves name more blocks than the root
    key = f"{LARGE_PREFIX}000005340".encode()
    assert two.get(key) == [b"hudi-value-000005340"] and deep.get(key) == [b"hudi-value-000005340"]
    fake = HFileReader((core_data / "hfile" / "hudi_1_0_hbase_2_4_13_16KB_GZ_20000_fake_first_key.hfile").read_bytes())
    rows = [row for row, _ in fake.cells()]
    fakes = [entry.first_row for entry in fake.index[1:] if entry.first_row not in set(rows)]
    # HBase 2.4.13 indexes a key between two blocks that is no cell's key; looking it up finds nothing
    assert len(fakes) == len(fake.index) - 1
    for key in fakes[:20]:
        assert fake.get(key) == []
        after = bisect.bisect_left(rows, key)
        assert rows[after - 1] < key < rows[after]
    assert fake.get(b"hudi-key-000000100-abcdefghij") == [b"hudi-value-000000100"]


def test_non_unique_keys_and_prefixes(core_data: Path) -> None:
    reader = HFileReader((core_data / "hfile" / "hudi_1_0_hbase_2_4_9_16KB_GZ_200_20_non_unique.hfile").read_bytes())
    assert reader.get(b"hudi-key-000000005") == [b"hudi-value-000000005"] + [
        f"hudi-value-000000005_{j}".encode() for j in range(20)
    ]
    rows = reader.prefix(b"hudi-key-00000001")  # keys 10..19
    assert [r for r, _ in rows] == [_key(i).encode() for i in range(10, 20) for _ in range(21)]
    assert reader.prefix(b"hudi-key-1") == [] and reader.prefix(b"a") == []
    assert len(reader.prefix(b"")) == 4200


def _records(reader: HFileReader) -> dict[str, dict]:
    schema = fastavro.parse_schema(json.loads(reader.file_info[b"schema"]))
    return {row.decode(): fastavro.schemaless_reader(io.BytesIO(v), schema, None) for row, v in reader.cells()}


def test_metadata_slices_decode_as_their_readme_says(core_data: Path) -> None:
    folder = core_data / "metadata_slices"
    live = _records(HFileReader((folder / "files-live.hfile").read_bytes()))
    entry = {"f00000000-0_0-1-1_20250101000000000.parquet": {"size": 1024, "isDeleted": False}}
    assert {k: (r["type"], r["filesystemMetadata"]) for k, r in live.items()} == {"city=p00000000": (2, entry)}
    tomb = _records(HFileReader((folder / "files-tombstone.hfile").read_bytes()))
    assert tomb["city=p00000000"]["filesystemMetadata"] == {
        "f00000000-0_0-1-1_20250101000000000.parquet": {"size": 0, "isDeleted": True}
    }
    everything = _records(HFileReader((folder / "allpartitions-dot.hfile").read_bytes()))
    assert {k: (r["type"], r["filesystemMetadata"]) for k, r in everything.items()} == {
        "__all_partitions__": (1, {".": {"size": 0, "isDeleted": False}})
    }
    multi = HFileReader((folder / "files-multiblock.hfile").read_bytes())
    assert len(multi.index) > 1
    records = _records(multi)
    assert list(records) == [f"city=p{i:08d}" for i in range(50)]
    assert [next(iter(r["filesystemMetadata"].values()))["size"] for r in records.values()] == [1024 + i for i in range(50)]
    assert multi.get(b"city=p00000031") and multi.get(b"city=p00000050") == []


def _rewrite(reader: HFileReader, **kwargs) -> bytes:
    """The cells, file info and meta blocks of `reader` written again by engine.data.hfile_writer."""
    info = {k.decode(): v for k, v in reader.file_info.items() if k.decode() not in STANDARD_INFO}
    meta = {k.decode(): reader.meta_block(k) or b"" for k in reader.meta_index}
    (created,) = struct.unpack(">q", reader.file_info[b"hfile.CREATE_TIME_TS"])
    kwargs.setdefault("codec", reader.trailer.compression_codec)
    return write_hfile(reader.cells(), file_info=info, meta=meta, creation_time_ms=created, **kwargs)


@pytest.mark.parametrize(("name", "block_size"), [
    ("files-multiblock.hfile", 1024), ("allpartitions-dot.hfile", 1 << 26),
    ("nonpartitioned-base.hfile", 1 << 26), ("nonpartitioned-log.hfile", 1 << 26),
])
def test_writer_reproduces_hudis_writer_byte_for_byte(core_data: Path, name: str, block_size: int) -> None:
    data = (core_data / "metadata_slices" / name).read_bytes()
    assert _rewrite(HFileReader(data), block_size=block_size) == data


@pytest.mark.parametrize("name", ["files-live.hfile", "files-tombstone.hfile"])
def test_files_of_an_earlier_writer_differ_only_in_the_root_index_key(core_data: Path, name: str) -> None:
    """These two were written by a HFileWriterImpl that put the whole key (row, family, timestamp,
    type) in the root index; today's puts the row; every reader reads both."""
    data = (core_data / "metadata_slices" / name).read_bytes()
    ours = _rewrite(HFileReader(data), block_size=1 << 26)
    assert len(data) - len(ours) == 10  # family length, timestamp and type of the one index key
    again = HFileReader(ours)
    original = HFileReader(data)
    assert again.cells() == original.cells() and again.file_info == original.file_info
    assert [e.first_row for e in again.index] == [e.first_row for e in original.index]


def _normalized(data: bytes, codec: int) -> bytes:
    """`data` with every block's checksum type and checksums zeroed and, with GZ, the gzip
    header's OS byte zeroed: the parts Hudi 1.0 (CRC32C checksums) and Hudi 1.1 differ in."""
    out = bytearray(data)
    pos, end = 0, len(out) - TRAILER_SIZE
    while pos < end:
        on_disk, _u, _p, _t, _b, with_header = struct.unpack_from(">iiqbii", out, pos + 8)
        out[pos + 24] = 0
        out[pos + with_header : pos + 33 + on_disk] = bytes(33 + on_disk - with_header)
        if codec == CODEC_GZ:
            out[pos + 33 + 9] = 0
        pos += 33 + on_disk
    return bytes(out)


def test_every_metadata_table_hfile_of_the_fixtures(core_data: Path) -> None:
    """Every base HFile of every metadata table in hudi-rs's fixture tables (files, column_stats,
    partition_stats, record_index, secondary indexes; empty ones too), rewritten from its cells,
    file info and bloom filter: Hudi 1.1's byte for byte; Hudi 1.0's (HBase's writer: CRC32C
    checksums, whole keys in the root index and the last key) the same cells, file info and meta
    blocks."""
    identical = normalized = same_content = 0
    for archive in sorted(hudi1x.data_dir().rglob("*.zip")):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.startswith("__MACOSX") or not name.endswith(".hfile"):
                    continue
                data = zf.read(name)
                original = HFileReader(data)
                ours = _rewrite(original)
                if ours == data:
                    identical += 1
                    continue
                codec = original.trailer.compression_codec
                if _normalized(ours, codec) == _normalized(data, codec):
                    normalized += 1  # the gzip OS byte (255) of the first files-partition HFile
                    continue
                again = HFileReader(ours)
                assert again.cells() == original.cells(), name
                # HBase's writer (Hudi 1.0) keeps whole keys in LASTKEY and AVG_KEY_LEN; ours the row
                # (and none in an empty file)
                whole_key = {b"hfile.LASTKEY", b"hfile.AVG_KEY_LEN"}
                assert {k: v for k, v in again.file_info.items() if k not in whole_key} == {
                    k: v for k, v in original.file_info.items() if k not in whole_key
                }, name
                last = b"hfile.LASTKEY"
                assert original.file_info.get(last, b"").startswith(again.file_info[last]), name
                assert {k: again.meta_block(k) for k in again.meta_index} == {
                    k: original.meta_block(k) for k in original.meta_index
                }, name
                assert data[24] == 2  # CRC32C: Hudi 1.0
                same_content += 1
    assert (identical, normalized, same_content) == (219, 2, 24)


def test_hudi_rs_reads_the_metadata_table_through_our_hfiles(tmp_path: Path) -> None:
    """hudi-rs lists a version 8 table's files through its metadata table. With the `files`
    partition's latest base HFile (HBase-written, GZ) replaced by ours (uncompressed) it reads the
    same rows; with one live base file left out of our HFile, it no longer reads that file."""
    fx = hudi1x.fixture("quickstart_trips_table/mor/avro/v8_trips_8i3u1d", tmp_path / "a")
    before = hudi_rs.snapshot(fx.table)
    base = sorted((fx.table / ".hoodie" / "metadata" / "files").glob("files-0000-0_*.hfile"))[-1]
    original = HFileReader(base.read_bytes())
    base.write_bytes(_rewrite(original, codec=CODEC_NONE))
    assert HFileReader(base.read_bytes()).trailer.compression_codec == CODEC_NONE
    assert _by_key(hudi_rs.snapshot(fx.table)) == _by_key(before)

    schema = fastavro.parse_schema(json.loads(original.file_info[b"schema"]))
    records = {row: fastavro.schemaless_reader(io.BytesIO(v), schema, None) for row, v in original.cells()}
    files = records[b"city=chennai"]["filesystemMetadata"]
    (dropped,) = set(files) & {r["_hoodie_file_name"] for r in before}  # the one the snapshot reads
    del files[dropped]
    writer = HFileWriter(codec=CODEC_GZ)
    for name, value in original.file_info.items():
        if name.decode() not in STANDARD_INFO:
            writer.append_file_info(name.decode(), value)
    for row, record in records.items():
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, record)
        writer.append(row, out.getvalue())
    base.write_bytes(writer.finish())
    after = hudi_rs.snapshot(fx.table)
    assert dropped not in {r["_hoodie_file_name"] for r in after}
    others = [r for r in before if r["city"] != "chennai"]
    assert _by_key([r for r in after if r["city"] != "chennai"]) == _by_key(others)
    shutil.rmtree(tmp_path / "a")


def _by_key(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r["_hoodie_record_key"])


def test_java_hashmap_order_is_javas() -> None:
    # the order Hudi's writer left its file info in (files-multiblock.hfile)
    assert java_hashmap_order([
        "MAX_MEMSTORE_TS_KEY", "schema", "hfile.LASTKEY", "hfile.AVG_KEY_LEN", "hfile.CREATE_TIME_TS",
        "hfile.AVG_VALUE_LEN", "KEY_VALUE_VERSION",
    ]) == ["schema", "hfile.LASTKEY", "hfile.AVG_VALUE_LEN", "hfile.AVG_KEY_LEN", "KEY_VALUE_VERSION",
           "MAX_MEMSTORE_TS_KEY", "hfile.CREATE_TIME_TS"]
    # past 12 keys the table doubles, and the order follows the bigger table
    many = [f"k{i}" for i in range(30)]
    assert sorted(java_hashmap_order(many)) == sorted(many) and java_hashmap_order(many) != many


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=300)), max_size=120),
    block_size=st.sampled_from([64, 512, 4096, 1 << 20]),
    codec=st.sampled_from([CODEC_NONE, CODEC_GZ]),
)
def test_written_files_read_back(rows: list[tuple[bytes, bytes]], block_size: int, codec: int) -> None:
    cells = sorted(rows, key=lambda c: c[0])
    data = write_hfile(cells, block_size=block_size, codec=codec, meta={"m": b"meta"}, file_info={"x": b"1"})
    reader = HFileReader(data)
    assert reader.cells() == cells and read_hfile_cells(data) == cells
    assert reader.entry_count == len(cells) and reader.meta_block(b"m") == b"meta" and reader.file_info[b"x"] == b"1"
    expected: dict[bytes, list[bytes]] = {}
    for k, v in cells:
        expected.setdefault(k, []).append(v)
    assert reader.lookup(list(expected) + [b"\xff" * 41]) == expected
    # a key's cells never straddle two blocks (Hudi's writer keeps them together)
    firsts = [e.first_row for e in reader.index]
    assert len(firsts) == len(set(firsts))
    last = struct.pack(">h", len(cells[-1][0])) + cells[-1][0] if cells and cells[-1][0] else b""  # as Java
    assert reader.file_info[b"hfile.LASTKEY"] == last


def test_writer_refuses_bad_input() -> None:
    writer = HFileWriter()
    writer.append("b", b"1")
    with pytest.raises(ValueError, match="in order"):
        writer.append("a", b"2")
    with pytest.raises(ValueError, match="32767"):
        writer.append("c" * 40000, b"")
    with pytest.raises(ValueError, match="codec"):
        HFileWriter(codec=3)
    writer.finish()
    with pytest.raises(ValueError, match="after finish"):
        writer.append("z", b"")


def test_corrupt_files_raise_value_errors_naming_the_offset(core_data: Path) -> None:
    data = bytearray((core_data / "metadata_slices" / "files-multiblock.hfile").read_bytes())
    reader = HFileReader(bytes(data))
    root = reader.trailer.load_on_open_offset
    broken = bytearray(data)
    broken[root : root + 8] = b"XXXXXXXX"
    with pytest.raises(ValueError, match=f"HFile block at {root}"):
        HFileReader(bytes(broken))
    cut = bytearray(data)
    struct.pack_into(">i", cut, 8, 10**6)  # the first data block claims a million bytes
    with pytest.raises(ValueError, match="HFile block at 0"):
        HFileReader(bytes(cut)).cells()
    with pytest.raises(ValueError, match="too short"):
        HFileReader(b"\x00" * 100)
