"""Merge-on-read log blocks: command, delete and data blocks byte by byte, round trips, the blocks Hudi
wrote in the MOR samples, and errors."""

from __future__ import annotations

import datetime as dt
import io
import json
import struct
from decimal import Decimal
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.constants import META_COLUMNS
from engine.data import log_block as lb
from engine.data.delete_records import KIND_TYPES, encode_delete_records
from engine.errors import CorruptTableError, InvalidInputError
from engine.schema.avro import arrow_to_avro, avro_to_json, avro_with_meta_fields, with_meta_fields
from engine.table.meta_client import MetaClient
from tests.support import hudi_rs
from tests.support.samples import sample_table

T1 = "20250126040826878"
R = "20250126040936578"

# The rollback command block Apache Hudi wrote (.<fid>_20250126040823628.log.2_1-0-1 of hudi-rs's
# v6_nonpartitioned_rollback fixture, a Spark-written table): all 105 bytes.
HUDI_ROLLBACK_BLOCK = bytes.fromhex(
    "234855444923" "000000000000005b" "00000001" "00000000" "00000003"
    "00000000" "00000011" + b"20250126040936578".hex()
    + "00000003" "00000001" + b"0".hex()
    + "00000001" "00000011" + b"20250126040826878".hex()
    + "0000000000000000" "00000000" "0000000000000061"
)

# The content of the delete block Spark SQL's `DELETE FROM` wrote through Hudi (hudi-rs fixture
# v6_trips_8i3d, .6d3d1d6e-..._20250618054711154.log.1_0-26-85): three IntWrapper(0) entries.
HUDI_DELETE_CONTENT = bytes.fromhex(
    "00000003000000b606"
    "0248" + b"e96c4396-3fad-413a-a942-4cb36106d721".hex() + "0224" + b"city=san_francisco".hex() + "0400"
    "0248" + b"9909a8b1-2d15-4d3d-8ec9-efc48c536a00".hex() + "0224" + b"city=san_francisco".hex() + "0400"
    "0248" + b"334e26e9-8355-45cc-97c6-c31daf0df330".hex() + "0224" + b"city=san_francisco".hex() + "0400"
    "00"
)
DELETED_KEYS = [
    "e96c4396-3fad-413a-a942-4cb36106d721",
    "9909a8b1-2d15-4d3d-8ec9-efc48c536a00",
    "334e26e9-8355-45cc-97c6-c31daf0df330",
]


# ---- command blocks -----------------------------------------------------------------------


def test_rollback_block_is_the_one_hudi_writes_byte_for_byte() -> None:
    assert len(HUDI_ROLLBACK_BLOCK) == 105
    assert lb.encode_rollback_block(R, T1) == HUDI_ROLLBACK_BLOCK
    [block] = lb.decode_log_blocks(HUDI_ROLLBACK_BLOCK)
    assert (block.block_type, block.header, block.content, block.footer) == (
        lb.BlockType.COMMAND, {0: R, 3: "0", 1: T1}, b"", {}
    )
    assert list(block.header) == [lb.HeaderKey.INSTANT_TIME, lb.HeaderKey.COMMAND_BLOCK_TYPE, lb.HeaderKey.TARGET_INSTANT_TIME]
    assert block.instant == R
    assert lb.CommandBlockType.ROLLBACK == 0


# ---- delete blocks ------------------------------------------------------------------------


def test_delete_block_content_as_spark_sql_delete_wrote_it() -> None:
    block = lb.LogBlock(0, lb.BlockType.DELETE, {0: "20250618054714114"}, HUDI_DELETE_CONTENT, {})
    entries = lb.decode_delete_block(block)
    assert entries.to_pylist() == [
        {"key": k, "partition": "city=san_francisco", "ordering_kind": "int", "ordering": 0} for k in DELETED_KEYS
    ]
    assert entries.schema.field("ordering").type == pa.int32()
    assert encode_delete_records(DELETED_KEYS, ["city=san_francisco"] * 3) == HUDI_DELETE_CONTENT
    encoded = lb.encode_delete_block("20250618054714114", DELETED_KEYS, ["city=san_francisco"] * 3, '{"s":1}')
    [again] = lb.decode_log_blocks(encoded)
    assert (again.block_type, again.header, again.content, again.footer) == (
        1, {0: "20250618054714114", 2: '{"s":1}'}, HUDI_DELETE_CONTENT, {}
    )


def test_delete_block_without_schema_and_with_null_partitions() -> None:
    encoded = lb.encode_delete_block(T1, ["a", "b"], [None, "p"], None)
    [block] = lb.decode_log_blocks(encoded)
    assert block.header == {0: T1}
    # recordKey "a" (branch 1), partitionPath null (branch 0), IntWrapper(0) (branch 2, value 0)
    assert block.content[8:] == b"\x04" + b"\x02\x02a" + b"\x00" + b"\x04\x00" + b"\x02\x02b" + b"\x02\x02p" + b"\x04\x00" + b"\x00"
    assert lb.decode_delete_block(block).column("partition").to_pylist() == [None, "p"]


def test_empty_delete_block() -> None:
    [block] = lb.decode_log_blocks(lb.encode_delete_block(T1, [], [], None))
    assert block.content == struct.pack(">ii", 3, 1) + b"\x00"
    entries = lb.decode_delete_block(block)
    assert entries.num_rows == 0 and entries.schema.field("ordering").type == pa.null()


UTC = dt.UTC
WRAPPED = [
    ("boolean", pa.array([True, None, False])),
    ("int", pa.array([7, None, -3], pa.int32())),
    ("long", pa.array([2**40, None, -1], pa.int64())),
    ("float", pa.array([1.5, None, -0.25], pa.float32())),
    ("double", pa.array([0.1, None, 1e300], pa.float64())),
    ("bytes", pa.array([b"\x00\xff", None, b""], pa.binary())),
    ("string", pa.array(["zé", None, ""], pa.string())),
    ("date", pa.array([dt.date(2024, 2, 29), None, dt.date(1960, 1, 1)], pa.date32())),
    ("decimal", pa.array([Decimal("123.45"), None, Decimal("-0.01")], pa.decimal128(10, 2))),
    ("time_micros", pa.array([dt.time(12, 30, 1, 5), None, dt.time(0)], pa.time64("us"))),
    ("timestamp_micros", pa.array([dt.datetime(2024, 5, 1, 10, 15, 0, 123456, tzinfo=UTC), None,
                                   dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))),
]


@pytest.mark.parametrize(("kind", "values"), WRAPPED, ids=[k for k, _ in WRAPPED])
def test_every_ordering_wrapper_round_trips(kind: str, values: pa.Array) -> None:
    encoded = lb.encode_delete_block(T1, ["k1", "k2", "k3"], ["p"] * 3, None, ordering=values)
    entries = lb.decode_delete_block(lb.decode_log_blocks(encoded)[0])
    assert entries.column("ordering_kind").to_pylist() == [kind, None, kind]
    assert entries.schema.field("ordering").type == KIND_TYPES[kind]
    assert entries.column("ordering").to_pylist() == values.cast(KIND_TYPES[kind]).to_pylist()


def test_ordering_wrapper_bytes() -> None:
    def entry(ordering: pa.Array) -> bytes:
        content = encode_delete_records(["k"], [None], ordering)
        return content[8 + 1 + 3 + 1:-1]  # after version, length, count, key "k", null partition

    assert entry(pa.array([5], pa.int64())) == b"\x06\x0a"  # branch 3 LongWrapper, zigzag 5
    assert entry(pa.array([-1], pa.int32())) == b"\x04\x01"  # branch 2 IntWrapper, zigzag -1
    assert entry(pa.array([None], pa.int64())) == b"\x00"
    assert entry(pa.array([1.0], pa.float64())) == b"\x0a" + struct.pack("<d", 1.0)
    assert entry(pa.array(["ab"])) == b"\x0e\x04ab"
    # DecimalWrapper: unscaled value at scale 15, big-endian two's complement, shortest form
    assert entry(pa.array([Decimal("-1")], pa.decimal128(5, 0))) == b"\x12\x0e" + (-(10**15)).to_bytes(7, "big", signed=True)
    assert entry(pa.array([dt.date(1970, 1, 2)], pa.date32())) == b"\x10\x02"


def test_delete_block_mixing_wrappers_reads_its_values_as_text() -> None:
    # hudi-rs refuses such a block ("mixes ordering types"); we decode it, values as text
    first = encode_delete_records(["a"], [""], pa.array([5], pa.int64()))[9:-1]
    second = encode_delete_records(["b"], [""], pa.array([b"\x01"], pa.binary()))[9:-1]
    third = encode_delete_records(["c"], [""], pa.array([None], pa.int64()))[9:-1]
    body = b"\x06" + first + second + third + b"\x00"
    block = lb.LogBlock(0, 1, {0: T1}, struct.pack(">ii", 3, len(body)) + body, {})
    entries = lb.decode_delete_block(block)
    assert entries.to_pylist() == [
        {"key": "a", "partition": "", "ordering_kind": "long", "ordering": "5"},
        {"key": "b", "partition": "", "ordering_kind": "bytes", "ordering": "01"},
        {"key": "c", "partition": "", "ordering_kind": None, "ordering": None},
    ]


@pytest.mark.parametrize("version", [1, 2])
def test_kryo_delete_blocks_are_refused(version: int) -> None:
    content = struct.pack(">ii", version, 4) + b"\x01\x00\x63\x6f"
    data = lb.encode_log_block(lb.BlockType.AVRO_DATA, {0: T1}, b"") + lb.encode_log_block(1, {0: T1}, content)
    block = lb.decode_log_blocks(data)[1]
    with pytest.raises(CorruptTableError, match=rf"offset {block.offset}: delete block version {version} holds Java \(Kryo\)"):
        lb.decode_delete_block(block)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (HUDI_DELETE_CONTENT[:-5], "says 182 bytes of records, has 177"),
        (HUDI_DELETE_CONTENT[:4] + struct.pack(">i", 181) + HUDI_DELETE_CONTENT[8:-1], "end early"),
        (struct.pack(">ii", 3, 5) + b"\x02\x00\x00\x18\x00", r"branch 12 .*\(ArrayWrapper"),
        (struct.pack(">ii", 3, 3) + b"\x00\x00\x00", "2 stray bytes"),
        (struct.pack(">ii", 9, 1) + b"\x00", "unsupported delete block version 9"),
        (b"\x00\x00", "no version and length"),
    ],
    ids=["short", "truncated", "array-wrapper", "stray", "version", "tiny"],
)
def test_malformed_delete_content(content: bytes, message: str) -> None:
    block = lb.LogBlock(42, lb.BlockType.DELETE, {0: T1}, content, {})
    with pytest.raises(CorruptTableError, match=f"log block at offset 42: .*{message}"):
        lb.decode_delete_block(block)


def test_delete_block_refuses_mismatched_lengths() -> None:
    with pytest.raises(InvalidInputError, match="2 keys but 1 partitions"):
        lb.encode_delete_block(T1, ["a", "b"], ["p"], None)
    with pytest.raises(InvalidInputError, match="no delete-block ordering wrapper"):
        lb.encode_delete_block(T1, ["a"], ["p"], None, ordering=pa.array([[1]]))


# ---- data blocks --------------------------------------------------------------------------

RICH = pa.schema(
    [
        pa.field("id", pa.int32()),
        pa.field("name", pa.string()),
        pa.field("flag", pa.bool_()),
        pa.field("big", pa.int64()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("dec", pa.decimal128(10, 5)),
        pa.field("day", pa.date32()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("raw", pa.binary()),
        pa.field("items", pa.list_(pa.field("element", pa.struct([("f1", pa.string()), ("f2", pa.int32())])))),
        pa.field("props", pa.map_(pa.string(), pa.struct([("v1", pa.float64()), ("v2", pa.bool_())]))),
        pa.field("nested", pa.struct([("a", pa.string()), ("child", pa.struct([("x", pa.float64())]))])),
    ]
)
RICH_ROWS = [
    {"id": 1, "name": "Alice", "flag": True, "big": 2**40, "f32": 1.5, "f64": 3.14159, "dec": Decimal("12345.67891"),
     "day": dt.date(2024, 1, 31), "at": dt.datetime(2024, 1, 31, 12, 0, 0, 1, tzinfo=UTC), "raw": b"\x00\x01",
     "items": [{"f1": "a", "f2": 1}, {"f1": None, "f2": 2}], "props": {"k": {"v1": 0.5, "v2": False}},
     "nested": {"a": "x", "child": {"x": 2.5}}},
    {"id": 2, "name": None, "flag": None, "big": None, "f32": None, "f64": None, "dec": None, "day": None, "at": None,
     "raw": None, "items": None, "props": None, "nested": None},
]


def _rich() -> tuple[pa.Table, str, pa.Schema]:
    schema = with_meta_fields(RICH)
    fid = "abc-0"
    meta = [pa.array([T1, T1]), pa.array([f"{T1}_0_0", f"{T1}_0_1"]), pa.array(["1", "2"]), pa.array(["", ""]),
            pa.array([fid, fid])]
    data = pa.Table.from_pylist(RICH_ROWS, schema=RICH)
    table = pa.Table.from_arrays(meta + list(data.columns), schema=schema)
    writer = avro_to_json(avro_with_meta_fields(arrow_to_avro(RICH, "rich")))
    return table, writer, schema


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_data_block_round_trip(fmt: str) -> None:
    table, writer, schema = _rich()
    encode = lb.encode_parquet_block if fmt == "parquet" else lb.encode_avro_data_block
    [block] = lb.decode_log_blocks(encode(T1, table, writer))
    assert block.block_type == (lb.BlockType.PARQUET_DATA if fmt == "parquet" else lb.BlockType.AVRO_DATA)
    assert list(block.header.items()) == [(0, T1), (2, writer)] and block.footer == {}
    decoded = lb.decode_data_block(block, schema)
    assert decoded.schema == schema
    assert decoded.to_pylist() == table.to_pylist()


def test_parquet_block_content_is_one_parquet_file() -> None:
    table, writer, _ = _rich()
    for codec, expected in (("snappy", "SNAPPY"), ("gzip", "GZIP")):
        [block] = lb.decode_log_blocks(lb.encode_parquet_block(T1, table, writer, compression=codec))
        assert block.content[:4] == block.content[-4:] == b"PAR1"
        md = pq.ParquetFile(io.BytesIO(block.content)).metadata
        assert (md.num_rows, md.num_row_groups, md.row_group(0).column(0).compression) == (2, 1, expected)
        assert b"ARROW:schema" not in (md.metadata or {})


def test_avro_block_records_follow_the_writer_schema() -> None:
    table, writer, _ = _rich()
    [block] = lb.decode_log_blocks(lb.encode_avro_data_block(T1, table, writer))
    assert struct.unpack(">ii", block.content[:8]) == (3, 2)
    first = lb.decode_avro_content(block)[0]
    assert list(first)[:6] == [*META_COLUMNS, "id"]
    assert first["props"] == {"k": {"v1": 0.5, "v2": False}} and first["dec"] == Decimal("12345.67891")


def test_data_block_is_conformed_to_the_asked_schema() -> None:
    table, writer, _ = _rich()
    wanted = pa.schema([pa.field("_hoodie_record_key", pa.string()), pa.field("id", pa.int64()),
                        pa.field("added", pa.string()), pa.field("nested", pa.struct([("a", pa.string()), ("b", pa.int32())]))])
    for encode in (lb.encode_parquet_block, lb.encode_avro_data_block):
        [block] = lb.decode_log_blocks(encode(T1, table, writer))
        assert lb.decode_data_block(block, wanted).to_pylist() == [
            {"_hoodie_record_key": "1", "id": 1, "added": None, "nested": {"a": "x", "b": None}},
            {"_hoodie_record_key": "2", "id": 2, "added": None, "nested": None},
        ]


def test_data_blocks_need_the_meta_columns_first() -> None:
    table, writer, _ = _rich()
    with pytest.raises(InvalidInputError, match="meta columns"):
        lb.encode_parquet_block(T1, table.select(table.column_names[1:]), writer)
    with pytest.raises(InvalidInputError, match="meta columns"):
        lb.encode_avro_data_block(T1, table.select(["id", *table.column_names[:5]]), writer)


@pytest.mark.parametrize(("block_type", "name"), [(6, "CDC"), (2, "CORRUPT"), (9, "type 9")])
def test_unsupported_data_blocks(block_type: int, name: str) -> None:
    block = lb.LogBlock(7, block_type, {0: T1}, b"x", {})
    with pytest.raises(CorruptTableError, match=f"offset 7: {name} data blocks are unsupported"):
        lb.decode_data_block(block, pa.schema([pa.field("a", pa.int32())]))


def test_garbled_data_block_content() -> None:
    with pytest.raises(CorruptTableError, match="offset 3: PARQUET content does not read"):
        lb.decode_data_block(lb.LogBlock(3, 5, {0: T1}, b"PAR1 not parquet PAR1", {}), pa.schema([("a", pa.int32())]))
    _, writer, _ = _rich()
    with pytest.raises(CorruptTableError, match="offset 3: truncated record 0"):
        content = struct.pack(">iii", 3, 1, 50) + b"\x00" * 10
        lb.decode_data_block(lb.LogBlock(3, 3, {0: T1, 2: writer}, content, {}), pa.schema([("id", pa.int32())]))


def test_block_heads_read_without_the_content() -> None:
    data = lb.encode_rollback_block(R, T1)
    assert lb.decode_block_head(data[:84]) is None  # cut inside the header, which ends at byte 85
    assert lb.decode_block_head(data[:85]) == (105, 0, {0: R, 3: "0", 1: T1})
    assert lb.decode_block_head(data) == (105, 0, {0: R, 3: "0", 1: T1})
    assert lb.decode_block_head(data[:13]) is None
    with pytest.raises(CorruptTableError, match="offset 9: missing"):
        lb.decode_block_head(b"#HUDX#" + data[6:], 9)


# ---- the log files of the MOR samples -----------------------------------------------------

MOR_SAMPLES = ["mor_parquet_v6_nonpartitioned", "mor_parquet_v6_simplekeygen_nonhivestyle", "trips_mor_avro_v6_trips_8i1u"]


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mor-samples-blocks")
    return {name: sample_table(name, root) for name in MOR_SAMPLES}


@pytest.mark.parametrize("name", MOR_SAMPLES)
def test_sample_log_files_byte_by_byte(samples: dict[str, Path], name: str) -> None:
    table = samples[name]
    [log] = [p for p in table.rglob(".*.log.*") if ".hoodie" not in p.parts]
    data = log.read_bytes()
    [block] = lb.decode_log_blocks(data)
    meta = MetaClient.open(str(table))
    instants = [i.time for i in meta.timeline().completed_writes]
    assert (block.offset, block.footer, sorted(block.header)) == (0, {}, [0, 2])
    assert block.instant == instants[-1] and log.name.split("_")[1].startswith(instants[0])
    assert data[:6] == b"#HUDI#" and struct.unpack(">q", data[6:14])[0] == len(data) - 14
    assert struct.unpack(">ii", data[14:22]) == (1, block.block_type)
    assert struct.unpack(">q", data[-8:])[0] == len(data) - 8
    assert lb.encode_log_block(block.block_type, block.header, block.content, block.footer) == data
    # the writer schema: the table schema with the meta fields first, as Hudi writes it
    assert json.loads(block.header[2])["fields"][:5] == json.loads(avro_to_json(avro_with_meta_fields(
        json.loads(meta.latest_avro_schema() or "{}"))))["fields"][:5]
    schema = with_meta_fields(meta.latest_schema() or pa.schema([]))
    records = lb.decode_data_block(block, schema)
    if block.block_type == lb.BlockType.PARQUET_DATA:
        md = pq.ParquetFile(io.BytesIO(block.content)).metadata
        assert md.created_by.startswith("parquet-mr version 1.13.1")
        assert md.row_group(0).column(0).compression == "GZIP"
    else:
        assert block.block_type == lb.BlockType.AVRO_DATA
        # Avro binary is canonical: the records re-encode to Hudi's bytes, and the whole block too
        writer = fastavro.parse_schema(json.loads(block.header[2]))
        assert lb.encode_avro_content(lb.decode_avro_content(block), writer) == block.content
        assert lb.encode_avro_data_block(block.instant or "", records, block.header[2]) == data
    # the log records are the rows hudi-rs returns for them (they all won: the samples only update)
    file_id = log.name[1:].split("_")[0]
    theirs = [r for r in hudi_rs.snapshot(table) if r["_hoodie_file_name"] == file_id]
    assert records.num_rows >= 1
    assert sorted(records.to_pylist(), key=repr) == sorted(theirs, key=repr)
