"""Apache Hudi's column_stats partition (issue 35): keys, value types and wrappers, and every
file's column ranges recomputed from the data files (base files from their footers, log files
from their records) equal, record for record, what Apache Hudi 1.x wrote in the fixture tables."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from engine.metadata import column_stats as cs
from engine.metadata import column_stats_updates as csu
from engine.metadata import hfiles
from engine.metadata import records as mdr
from engine.table.meta_client import MetaClient
from tests.support import column_stats, hudi1x

WITH_COLUMN_STATS = [
    "quickstart_trips_table/mor/avro/table_evo_add_col",
    "quickstart_trips_table/mor/avro/table_evo_promotion",
    "sample_table/cow/v9_timebasedkeygen_epochmillis",
    "sample_table/cow/v9_timebasedkeygen_nonhivestyle",
    "sample_table/cow/v9_timebasedkeygen_unixtimestamp",
    "sample_table/cow/v9_txns_complex_meta",
    "sample_table/cow/v9_txns_nonpart_meta",
    "sample_table/cow/v9_txns_simple_meta",
    "sample_table/cow/v9_txns_simple_overwrite",
    "sample_table/mor/avro/v9_nonpartitioned_rollback",
    "sample_table/mor/avro/v9_timebasedkeygen_nonhivestyle",
    "sample_table/mor/avro/v9_txns_complex_meta",
    "sample_table/mor/avro/v9_txns_nonpart_meta",
    "sample_table/mor/avro/v9_txns_simple_meta",
    "sample_table/mor/avro/v9_txns_simple_overwrite",
]


def test_keys_hash_column_partition_and_file_as_hudi() -> None:
    # as Apache Hudi keyed the currency column of this file in the v9_txns_simple_meta fixture
    name = "c7bbe63e-fa43-40ba-94a9-03158165edc6-0_0-78-180_20260307162442820.parquet"
    assert cs.column_stats_key("region=us", name, "currency") == "/m6lxu4Dh5w=431THTTwO5Q=1qxsa6U1YTx1Gt2LItwPFg=="
    assert cs.partition_stats_key("region=us", "currency") == "/m6lxu4Dh5w=431THTTwO5Q="
    assert cs.column_stats_key("", name, "currency").startswith("/m6lxu4Dh5w=") and cs.partition_id("") == "."


def test_decimals_are_their_unscaled_value_in_the_fewest_bytes() -> None:
    dec = cs.ValueKind("DECIMAL", "10,2")
    for unscaled, want in [(0, b"\x00"), (2500, b"\t\xc4"), (-1, b"\xff"), (128, b"\x00\x80"), (-128, b"\x80"),
                           (-129, b"\xff\x7f")]:
        assert cs.wrap(dec, unscaled)["value"] == want
    table = pa.table({"d": pa.array([None, Decimal("25"), Decimal("-1.28")], pa.decimal128(10, 2))})
    rng = cs.arrow_ranges(table, ".f.log.1_0-0-0", ["d"])[0]
    assert (rng.min, rng.max, rng.null_count, rng.value_count) == (-128, 2500, 1, 3)


def test_log_ranges_of_every_type_and_an_empty_log() -> None:
    import datetime as dt

    table = pa.table({
        "s": ["b", None, "a"], "l": pa.array([3, 1, None], pa.int64()), "b": [True, False, None],
        "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC), None, None], pa.timestamp("us", "UTC")),
        "d": pa.array([dt.date(1970, 1, 3), None, None], pa.date32()),
    })
    got = {r.column: (r.kind.name, r.min, r.max, r.null_count, r.value_count)
           for r in cs.arrow_ranges(table, ".f", ["s", "l", "b", "ts", "d", "absent"])}
    assert got == {"s": ("STRING", "a", "b", 1, 3), "l": ("LONG", 1, 3, 1, 3), "b": ("BOOLEAN", False, True, 1, 3),
                   "ts": ("TIMESTAMP_MICROS", 1704067200000000, 1704067200000000, 2, 3), "d": ("DATE", 2, 2, 2, 3)}
    empty = cs.arrow_ranges(pa.table({}), ".f", ["s", "l"])
    assert [(r.column, r.kind.name, r.value_count, r.min) for r in empty] == [("s", "NULL", 0, None), ("l", "NULL", 0, None)]


def test_merging_follows_hudi() -> None:
    long = cs.ValueKind("LONG")
    a = cs.record("p", cs.ColumnRange("f", "c", long, 5, 9, 1, 4, 10, 20))
    b = cs.record("p", cs.ColumnRange("f", "c", long, 2, 7, 0, 3, 5, 6))
    merged = mdr.merge(a, b)["ColumnStatsMetadata"]
    assert (merged["minValue"]["value"], merged["maxValue"]["value"], merged["nullCount"], merged["valueCount"],
            merged["totalSize"], merged["totalUncompressedSize"]) == (2, 9, 1, 7, 15, 26)
    gone = cs.tombstone("p", "f", "c")
    assert mdr.merge_all([a, gone]) is None  # a deleted file's statistics read as absent
    assert mdr.merge_all([a, gone, b]) == b  # a record after a tombstone stands alone
    tight = json.loads(json.dumps(cs.comparable(b)))
    tight["isTightBound"] = True
    assert mdr.merge(a, {**b, "ColumnStatsMetadata": tight})["ColumnStatsMetadata"] == tight


def test_records_encode_in_their_wrappers_after_being_read_back(tmp_path: Path) -> None:
    """Read-back records lose their union branch; `typed` names it from the value type, so a long
    of 5 stays a LongWrapper and a date an IntWrapper through the metadata table's compaction."""
    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    from engine.metadata.reader import MetadataTableReader
    from engine.metadata.writer import schema_of

    meta = MetaClient.open(str(fx.table))
    reader = MetadataTableReader(meta, meta.timeline())
    schema_json = schema_of(reader, mdr.COLUMN_STATS)
    long_five = cs.record("p", cs.ColumnRange("f", "txn_ts", cs.ValueKind("LONG"), 5, 6, 0, 2))
    read_back = {**long_five, "ColumnStatsMetadata": cs.comparable(long_five)}
    assert "-type" not in read_back["ColumnStatsMetadata"]["minValue"]
    content = hfiles.log_block_content([cs.typed(read_back)], schema_json)
    from engine.data.hfile_block import decode_hfile_content

    schema = fastavro.parse_schema(json.loads(schema_json))
    (decoded,) = decode_hfile_content(content, schema, 0)
    writer = io.BytesIO()
    fastavro.schemaless_writer(writer, schema, {**decoded, "ColumnStatsMetadata": cs.typed(decoded)["ColumnStatsMetadata"]})
    assert cs.comparable(decoded) == cs.comparable(long_five)
    branch = fastavro.schemaless_reader(io.BytesIO(writer.getvalue()), schema, return_record_name=True)
    assert branch["ColumnStatsMetadata"][1]["minValue"][0].endswith("LongWrapper")


@pytest.mark.parametrize("name", WITH_COLUMN_STATS)
def test_column_stats_of_apache_hudi_match_the_data_files(name: str, tmp_path: Path) -> None:
    fx = hudi1x.fixture(name, tmp_path)
    held = column_stats.check(MetaClient.open(str(fx.table)))
    assert held and all(not v["isDeleted"] for v in held.values())


def test_indexes_this_engine_cannot_keep_exactly_are_named(tmp_path: Path) -> None:
    fx = hudi1x.fixture("quickstart_trips_table/mor/avro/v8_trips_8i3u1d", tmp_path)
    assert csu.indexed_columns(MetaClient.open(str(fx.table))) == (None, "index version V1 (this engine keeps V2)")


@pytest.mark.parametrize("name", [n for n in WITH_COLUMN_STATS if "quickstart" not in n])
def test_the_columns_a_build_indexes_are_the_ones_hudi_chose(name: str, tmp_path: Path) -> None:
    """Hudi's `getColumnsToIndex` with its defaults, recomputed from the table's schema, names the
    columns Apache Hudi's index definition holds."""
    from engine.metadata.build_column_stats import columns_to_index

    fx = hudi1x.fixture(name, tmp_path)
    meta = MetaClient.open(str(fx.table))
    schema = meta.latest_schema(meta.timeline())
    assert schema is not None
    columns, _ = csu.indexed_columns(meta)
    assert columns_to_index(schema, meta.config.populate_meta_fields) == columns


def test_columns_to_index_skip_nested_and_take_the_first_ones() -> None:
    from engine.errors import InvalidConfigError
    from engine.metadata.build_column_stats import columns_to_index

    schema = pa.schema([("_hoodie_commit_time", pa.string()), ("a", pa.int64()), ("s", pa.struct([("x", pa.int32())])),
                        ("l", pa.list_(pa.int32())), ("b", pa.string()), ("c", pa.date32())])
    meta3 = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key"]
    assert columns_to_index(schema, True) == [*meta3, "a", "b", "c"]
    assert columns_to_index(schema, False, max_columns=2) == ["a", "b"]
    assert columns_to_index(schema, True, named=["c", "s"]) == [*meta3, "c"]  # a struct is not covered
    with pytest.raises(InvalidConfigError, match="nope"):
        columns_to_index(schema, True, named=["nope"])
