"""The archived timeline log file: names, block layout byte by byte, entries, errors, a real Hudi log file."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from engine.data import log_block as lb
from engine.errors import CorruptTableError, InvalidInputError
from engine.table import archive_log as al
from engine.timeline import avro_models as am
from engine.timeline.commit_metadata import CommitMetadata, WriteStat
from engine.timeline.instant import Action
from tests.support.samples import sample_table

T0 = "20240501101500123"
T1 = "20240501103000456"
T2 = "20240501110000789"


def test_archive_file_names() -> None:
    assert al.archive_file_name(1) == ".commits_.archive.1_1-0-1"
    assert al.archive_file_name(12) == ".commits_.archive.12_1-0-1"
    assert al.parse_archive_file_name(".commits_.archive.12_1-0-1") == 12
    assert al.parse_archive_file_name(".commits_.archive.3_0-1-7") == 3
    for other in ("mergeArchivePlan", ".commits_.archive.x_1-0-1", "commits_.archive.1_1-0-1", ".commits_.archive.1"):
        assert al.parse_archive_file_name(other) is None
    with pytest.raises(InvalidInputError):
        al.archive_file_name(0)


def _commit() -> CommitMetadata:
    stat = WriteStat(fileId="a1b2-0", path=f"city=paris/a1b2-0_0-10-20_{T0}.parquet", partitionPath="city=paris",
                     numWrites=3, numInserts=3, totalWriteBytes=900, fileSizeInBytes=900)
    return CommitMetadata({"city=paris": [stat]}, "INSERT", {"schema": "{}"})


def _entries() -> list[dict]:
    rollback = am.rollback_metadata(T2, 5, [(T1, "commit")], [am.RollbackPartitionStat(
        "city=paris", deleted=(f"file:/t/city=paris/a1b2-0_0-11-21_{T1}.parquet",))])
    clean = am.clean_metadata(T2, 7, T0, T1, am.KEEP_LATEST_FILE_VERSIONS, [am.CleanPartitionStat(
        "city=paris", (f"a1b2-0_0-10-20_{T0}.parquet",), (f"a1b2-0_0-10-20_{T0}.parquet",))])
    savepoint = am.savepoint_metadata("bob", 1714557600000, "", {"city=paris": [f"a1b2-0_0-10-20_{T0}.parquet"]})
    return [
        al.archived_entry(T0, Action.COMMIT, "COMPLETED", _commit(), state_transition_time="20240501101501000"),
        al.archived_entry(T1, "deltacommit", "completed", _commit()),
        al.archived_entry(T2, Action.ROLLBACK, "COMPLETED", rollback),
        al.archived_entry(T2, Action.CLEAN, "COMPLETED", clean),
        al.archived_entry(T1, Action.SAVEPOINT, "COMPLETED", savepoint),
        al.archived_entry(T1, Action.COMMIT, "COMPLETED", None),  # an empty completed instant
    ]


def test_archived_entry_fields() -> None:
    commit, delta, rollback, clean, savepoint, empty = _entries()
    assert (commit["commitTime"], commit["actionType"], commit["actionState"]) == (T0, "commit", "COMPLETED")
    assert commit["version"] is None
    assert commit["stateTransitionTime"] == "20240501101501000"
    assert commit["hoodieCommitMetadata"]["operationType"] == "INSERT"
    assert delta["actionType"] == "deltacommit" and delta["actionState"] == "COMPLETED"
    assert rollback["hoodieRollbackMetadata"]["commitsRollback"] == [T1]
    assert clean["hoodieCleanMetadata"]["partitionMetadata"]["city=paris"]["policy"] == "KEEP_LATEST_FILE_VERSIONS"
    assert savepoint["hoodieSavePointMetadata"]["savepointedBy"] == "bob"
    assert empty["hoodieCommitMetadata"] is None and empty["actionType"] == "commit"
    filled = {"hoodieCommitMetadata", "hoodieCleanMetadata", "hoodieRollbackMetadata", "hoodieSavePointMetadata"}
    for entry in (commit, rollback, clean, savepoint):
        assert sum(entry[f] is not None for f in filled) == 1


def test_restore_and_other_actions_are_not_archived() -> None:
    restore = am.restore_metadata(T2, 1, [(T1, "commit")], {})
    with pytest.raises(InvalidInputError, match="does not archive restore"):
        al.archived_entry(T2, Action.RESTORE, "COMPLETED", restore)
    with pytest.raises(InvalidInputError, match="compaction"):
        al.archived_entry(T2, Action.COMPACTION, "COMPLETED", None)


def test_a_replacecommit_is_archived_with_its_replaced_file_groups() -> None:
    # MetadataConversionUtils.createMetaWrapper -> ReplaceArchivalHelper.convertReplaceCommitMetadata
    metadata = _commit()
    metadata.operation_type = "INSERT_OVERWRITE_TABLE"
    metadata.partition_to_replace_file_ids = {"city=paris": ["f1-0"], "city=rome": []}
    entry = al.archived_entry(T2, Action.REPLACE_COMMIT, "COMPLETED", metadata)
    replace = entry["hoodieReplaceCommitMetadata"]
    assert (entry["actionType"], entry["hoodieCommitMetadata"]) == ("replacecommit", None)
    assert replace["operationType"] == "INSERT_OVERWRITE_TABLE"
    assert replace["partitionToReplaceFileIds"] == {"city=paris": ["f1-0"], "city=rome": []}
    assert replace["extraMetadata"]["ROLLING_STAT"] == ""
    assert al.decode_archive_file(al.encode_archive_block([entry]))[0]["hoodieReplaceCommitMetadata"] == replace


def test_archived_entry_checks_the_metadata_kind() -> None:
    with pytest.raises(InvalidInputError, match="CommitMetadata"):
        al.archived_entry(T0, Action.COMMIT, "COMPLETED", {"partitionToWriteStats": {}})
    with pytest.raises(InvalidInputError, match="Avro record"):
        al.archived_entry(T0, Action.CLEAN, "COMPLETED", _commit())
    with pytest.raises(InvalidInputError, match="startCleanTime"):
        al.archived_entry(T0, Action.CLEAN, "COMPLETED", {"policy": "KEEP_LATEST_COMMITS"})


def test_block_layout_byte_by_byte() -> None:
    entries = _entries()[:2]
    block = al.encode_archive_block(entries)
    assert block[:6] == b"#HUDI#"
    (rest_length,) = struct.unpack(">q", block[6:14])
    assert rest_length == len(block) - 14  # everything after magic and the length field
    assert struct.unpack(">ii", block[14:22]) == (1, 3)  # format version 1, AVRO data block
    pos = 22
    (header_count,) = struct.unpack(">i", block[pos:pos + 4])
    assert header_count == 1
    key, length = struct.unpack(">ii", block[pos + 4:pos + 12])
    assert key == 2  # SCHEMA
    schema = json.loads(block[pos + 12:pos + 12 + length].decode("utf-8"))
    assert schema["name"] == "HoodieArchivedMetaEntry" and schema["namespace"] == "org.apache.hudi.avro.model"
    pos += 12 + length
    (content_length,) = struct.unpack(">q", block[pos:pos + 8])
    content = block[pos + 8:pos + 8 + content_length]
    assert struct.unpack(">ii", content[:8]) == (3, 2)  # content version 3, two records
    (first_len,) = struct.unpack(">i", content[8:12])
    (second_len,) = struct.unpack(">i", content[12 + first_len:16 + first_len])
    assert 16 + first_len + second_len == content_length
    pos += 8 + content_length
    assert struct.unpack(">i", block[pos:pos + 4]) == (0,)  # empty footer
    pos += 4
    (trailer,) = struct.unpack(">q", block[pos:pos + 8])
    assert pos + 8 == len(block)
    # HoodieLogFormatWriter writes the bytes written so far (magic included) as the trailer,
    # and HoodieLogFileReader checks trailer - len(magic) == the length field
    assert trailer == len(block) - 8 == rest_length + 6


def test_archive_file_round_trip_over_several_blocks() -> None:
    entries = _entries()
    data = al.encode_archive_block(entries[:2]) + al.encode_archive_block(entries[2:5]) + al.encode_archive_block(entries[5:])
    assert al.decode_archive_file(data) == entries
    blocks = lb.decode_log_blocks(data)
    assert [b.block_type for b in blocks] == [3, 3, 3]
    assert blocks[1].offset == len(al.encode_archive_block(entries[:2]))
    assert all(b.footer == {} and list(b.header) == [2] for b in blocks)


def test_empty_file_has_no_entries() -> None:
    assert al.decode_archive_file(b"") == []


def test_empty_block_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        al.encode_archive_block([])


def test_truncated_file_names_the_block_offset() -> None:
    first = al.encode_archive_block(_entries()[:1])
    second = al.encode_archive_block(_entries()[1:2])
    data = first + second
    for cut in (len(first) + 3, len(first) + 20, len(data) - 1):
        with pytest.raises(CorruptTableError, match=f"offset {len(first)}"):
            al.decode_archive_file(data[:cut])


def test_garbled_blocks_raise_corrupt_table_error() -> None:
    block = bytearray(al.encode_archive_block(_entries()[:1]))
    bad_magic = b"#HUDX#" + bytes(block[6:])
    with pytest.raises(CorruptTableError, match="offset 0: missing"):
        al.decode_archive_file(bad_magic)
    bad_trailer = bytes(block[:-1]) + bytes([block[-1] ^ 0xFF])
    with pytest.raises(CorruptTableError, match="trailer"):
        al.decode_archive_file(bad_trailer)
    bad_version = bytes(block[:14]) + struct.pack(">i", 2) + bytes(block[18:])
    with pytest.raises(CorruptTableError, match="format version 2"):
        al.decode_archive_file(bad_version)
    # a record datum cut short inside a well-formed block
    content = bytearray(lb.encode_avro_content([_entries()[0]], am.parsed_schema("HoodieArchivedMetaEntry")))
    struct.pack_into(">i", content, 8, 5)
    broken = lb.encode_log_block(3, {2: al.archive_schema_header()}, bytes(content[:13]))
    with pytest.raises(CorruptTableError, match="record 0"):
        al.decode_archive_file(broken)


def test_non_avro_block_is_refused() -> None:
    command = lb.encode_log_block(lb.BlockType.COMMAND, {0: T1, 1: T0, 3: "0"}, b"")
    with pytest.raises(CorruptTableError, match="not AVRO"):
        al.decode_archive_file(command)


# --- a log file written by Apache Hudi ----------------------------------------------------
# The samples' .hoodie/archived/ folders are empty and they hold no Avro timeline files, so the
# real Hudi bytes we can check the block format against are the MOR sample's log file: the
# same HoodieLogFormatWriter and HoodieAvroDataBlock the archiver uses.


@pytest.fixture(scope="module")
def trips(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample_table("trips_mor_avro_v6_trips_8i1u", tmp_path_factory.mktemp("hudi-samples-archive-log"))


def test_samples_have_no_archived_instants(trips: Path) -> None:
    assert list((trips / ".hoodie" / "archived").iterdir()) == []


def test_decodes_a_log_file_written_by_hudi(trips: Path) -> None:
    [log] = [p for p in trips.rglob(".*.log.*") if ".hoodie" not in p.parts]
    assert log.name == ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85"
    data = log.read_bytes()
    [block] = lb.decode_log_blocks(data)
    assert (block.offset, block.block_type, sorted(block.header), block.footer) == (0, 3, [0, 2], {})
    assert block.header[0] == "20250331030645735"  # INSTANT_TIME: the deltacommit that wrote it
    (trailer,) = struct.unpack(">q", data[-8:])
    assert trailer == len(data) - 8
    [record] = lb.decode_avro_content(block)
    assert record["_hoodie_commit_time"] == "20250331030645735"
    assert record["_hoodie_record_key"] == "9909a8b1-2d15-4d3d-8ec9-efc48c536a00"
    assert record["_hoodie_partition_path"] == "city=san_francisco"
    # re-encoding the same header and content gives Hudi's bytes back
    assert lb.encode_log_block(block.block_type, block.header, block.content, block.footer) == data
