"""Apache Hudi's record index in the metadata table (issue 35): the file group of a key and the
encoding of its location, checked against every record index Apache Hudi 1.x wrote in the fixture
tables: recomputed from the data files (the live keys of each latest file slice), the index holds
exactly those keys, each in the file group its hash names, at the partition and file id of its
record."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from engine.metadata import record_index as ri
from engine.table.meta_client import MetaClient
from engine.timeline.instant import parse_instant_time
from tests.support import hudi1x, record_index

WITH_RECORD_INDEX = [
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d",
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


def test_file_group_of_a_key_is_javas_string_hash() -> None:
    # String.hashCode: "TXN-018" = 1, "a" = 97; Integer.MIN_VALUE's hash ("polygenelubricants") maps to 2^31 % n
    assert ri.file_group_of("a", 10) == 7
    assert ri.file_group_of("polygenelubricants", 10) == (2**31) % 10
    assert ri.file_group_id(3) == "record-index-0003-0"


def test_locations_encode_and_decode() -> None:
    fid = "a7c7d197-4f4c-4552-9b08-b19ad21297b3-0"
    info = ri.encode("region=eu", fid, "20260307222456179")
    # as Apache Hudi wrote this file id's key in the v9_txns_simple_meta fixture (its instant in UTC)
    assert (info["fileIdHighBits"], info["fileIdLowBits"]) == (-6356881901209500334, -7275369919509522509)
    assert (info["fileIndex"], info["fileId"], info["fileIdEncoding"]) == (0, "", 0)
    assert info["instantTime"] == 1772922296179
    assert ri.decode(info) == ri.Location("region=eu", fid, 1772922296179)
    raw = ri.encode("", "not-a-uuid-7", "20260101000000000")
    assert (raw["fileIdEncoding"], raw["fileId"], raw["fileIdHighBits"], raw["fileIdLowBits"], raw["fileIndex"]) == (
        1, "not-a-uuid-7", -1, -1, -1)
    assert ri.decode(raw).file_id == "not-a-uuid-7"
    bare = ri.encode("p", fid[:-2], "20260101000000000")  # a bare UUID: no file index
    assert (bare["fileIdEncoding"], bare["fileIndex"]) == (0, -1)
    assert ri.decode(bare).file_id == fid[:-2]
    assert str(uuid.UUID(fid[:-2])) == fid[:-2]
    with pytest.raises(ValueError):
        ri.encode("", fid, "yesterday")
    # exact integer milliseconds (a float product is 1 ms short for this one)
    assert ri.instant_millis("20040127173551643") == 1075224951643


@pytest.mark.parametrize("name", WITH_RECORD_INDEX)
def test_record_index_of_apache_hudi_matches_the_data_files(name: str, tmp_path: Path) -> None:
    fx = hudi1x.fixture(name, tmp_path)
    meta = MetaClient.open(str(fx.table))
    timeline = meta.timeline()
    first = parse_instant_time(min(i.time for i in timeline.instants)).timestamp() * 1000
    last = parse_instant_time(timeline.last_time).timestamp() * 1000
    for loc in record_index.check(meta).values():
        # the writer's instants are in its own time zone: within a day of the timeline's
        assert first - 86_400_000 <= loc.instant_millis <= last + 86_400_000


def test_record_index_cells_encode_as_each_record_alone(tmp_path: Path) -> None:
    """Records at one location share their encoded value; the bytes equal encoding each alone."""
    import io
    import json

    import fastavro

    from engine.metadata import hfiles
    from engine.metadata.reader import MetadataTableReader
    from engine.metadata.writer import schema_of

    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    meta = MetaClient.open(str(fx.table))
    schema_json = schema_of(MetadataTableReader(meta, meta.timeline()))
    fid = "a7c7d197-4f4c-4552-9b08-b19ad21297b3-0"
    records = [ri.location_record(f"k{i}", "p=1" if i % 2 else "p=2", fid, "20260101000000000") for i in range(50)]
    records.append({**ri.location_record("odd", "p=1", fid, "20260101000000001"), "_hoodie_file_name": "x"})
    got = hfiles.cells(records, schema_json)
    parsed = fastavro.parse_schema(json.loads(schema_json))
    alone = []
    for r in sorted(records, key=lambda r: r["key"]):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {**r, "key": ""})
        alone.append((r["key"], buf.getvalue()))
    assert got == alone
    assert len({v for _, v in got}) == 3
    keys = [f"k{i}" for i in range(1000)] + ["polygenelubricants", "é-ü"]
    assert ri.file_groups_of(keys, 10).tolist() == [ri.file_group_of(k, 10) for k in keys]


def test_an_hfile_block_decodes_only_the_keys_asked_for(tmp_path: Path) -> None:
    """Few keys: found through the block's HFile index; many: every cell read, only theirs decoded.
    Either way the records equal those of a full decode (a key absent gives nothing)."""
    import json

    import fastavro

    from engine.data.hfile_block import decode_hfile_content
    from engine.metadata import hfiles
    from engine.metadata.reader import MetadataTableReader
    from engine.metadata.writer import schema_of

    fx = hudi1x.fixture("sample_table/cow/v9_txns_simple_meta", tmp_path)
    meta = MetaClient.open(str(fx.table))
    schema_json = schema_of(MetadataTableReader(meta, meta.timeline()))
    fid = "a7c7d197-4f4c-4552-9b08-b19ad21297b3-0"
    records = [ri.location_record(f"key-{i:05d}", f"p={i % 7}", fid, "20260101000000000") for i in range(5000)]
    content = hfiles.log_block_content(records, schema_json)
    schema = fastavro.parse_schema(json.loads(schema_json))
    every = {r["key"]: r for r in decode_hfile_content(content, schema, 0)}
    assert len(every) == 5000
    for wanted in (["key-00007", "key-04999", "absent"], [f"key-{i:05d}" for i in range(0, 5000, 3)]):
        got = decode_hfile_content(content, schema, 0, {k.encode() for k in wanted})
        assert [r["key"] for r in got] == sorted(k for k in wanted if k in every)
        assert all(r == every[r["key"]] for r in got)


@pytest.mark.parametrize("name", [WITH_RECORD_INDEX[0], WITH_RECORD_INDEX[6], WITH_RECORD_INDEX[8]])
def test_batch_lookups_answer_as_the_reader_merges(tmp_path: Path, name: str) -> None:
    """`engine.metadata.record_index_lookup` (vectorized, decoded files kept) finds what the
    reader's record-by-record merge finds: every key at its location, none of the others; a
    lookup of a few keys reads through the HFile index and keeps nothing; a file whose size or
    time changed is decoded again."""
    import os

    import pyarrow as pa

    from engine.index.metadata_record import lookup
    from engine.metadata import record_index_lookup as ril
    from engine.metadata import records as mdr
    from engine.metadata.reader import MetadataTableReader

    meta = MetaClient.open(str(hudi1x.fixture(name, tmp_path).table))
    reader = MetadataTableReader(meta, meta.timeline())
    expected = {k: (loc.partition, loc.file_id) for k, r in reader.records(mdr.RECORD_INDEX).items()
                for loc in [ri.decode(r["recordIndexMetadata"])]}
    assert expected
    keys = pa.array([*sorted(expected), "no-such-key", None], pa.string())

    def found(table: pa.Table) -> dict:
        return {r["key"]: (r["partition"], r["file_id"]) for r in table.to_pylist()}

    ril.CACHE.clear()
    one = sorted(expected)[0]
    if len(expected) >= ril.FEW:  # a few keys among many: nothing decoded whole, nothing kept
        assert found(lookup(meta, pa.array([one]))) == {one: expected[one]}
        assert not ril.CACHE.items
    assert found(lookup(meta, keys)) == expected  # every key: the files decoded and kept
    kept = len(ril.CACHE.items)
    assert kept >= 1 and ril.CACHE.used > 0
    assert found(lookup(meta, keys)) == expected  # from what was kept
    assert len(ril.CACHE.items) == kept
    # a file rewritten in place (its time changed) is not answered from the old decoding
    slices = reader.slices(mdr.RECORD_INDEX)
    read = next(sl for sl in slices if sl.file_id == ri.file_group_id(ri.file_group_of(one, len(slices))))
    os.utime(Path(meta.storage.base_uri) / ".hoodie" / "metadata" / (read.base or read.logs[0]), ns=(0, 0))
    assert found(lookup(meta, keys)) == expected
    assert len(ril.CACHE.items) == kept + 1


def test_location_cells_are_the_cells_of_location_records() -> None:
    """A deltacommit's record-index block is encoded straight from (key, partition, file id): the
    same bytes as the records `location_record` makes, each location's value encoded once."""
    from engine.metadata import hfiles
    from engine.metadata.build_record_index import with_record_index_field
    from engine.metadata.create import FILES_SCHEMA_JSON

    schema = with_record_index_field(FILES_SCHEMA_JSON)
    fid = "a7c7d197-4f4c-4552-9b08-b19ad21297b3-0"
    located = sorted((f"key-{i:03d}", f"region={'eu' if i % 3 else 'us'}", fid if i % 2 else "raw-id-1")
                     for i in range(40))
    got = hfiles.location_cells(located, "20260307222456179", schema)
    want = hfiles.cells([ri.location_record(k, p, f, "20260307222456179") for k, p, f in located], schema)
    assert got == want and len(got) == 40
    assert len({v for _, v in got}) == 4  # two partitions x two file ids: four distinct values
