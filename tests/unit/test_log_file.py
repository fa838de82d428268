"""Log files through Storage: writing one exclusively, reading its blocks, listing its instants from the
headers alone, the next version of a slice, and corrupt files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.data import log_block as lb
from engine.data.file_names import log_file_name, parse_log_file_name
from engine.data.log_file import log_block_instants, next_log_version, read_log_blocks, write_log_file
from engine.errors import CorruptTableError, InvalidInputError
from engine.storage import Storage, storage_for
from tests.support.samples import sample_table

T1, T2, T3 = "20240101000000001", "20240101000000002", "20240101000000003"
FID = "11111111-1111-4111-8111-111111111111-0"
NAME = f"p/{log_file_name(FID, T1, 1, '0-1-0')}"


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return storage_for(str(tmp_path))


def _blocks() -> list[bytes]:
    return [
        lb.encode_delete_block(T2, ["a"], ["p"], None),
        lb.encode_rollback_block(T3, T2),
        lb.encode_log_block(lb.BlockType.DELETE, {lb.HeaderKey.SCHEMA: "{}", lb.HeaderKey.INSTANT_TIME: T3}, b"x"),
    ]


def test_write_then_read(storage: Storage, tmp_path: Path) -> None:
    blocks = _blocks()
    size = write_log_file(storage, NAME, blocks)
    assert size == sum(len(b) for b in blocks) == (tmp_path / NAME).stat().st_size
    assert (tmp_path / NAME).read_bytes() == b"".join(blocks)
    read = read_log_blocks(storage, NAME)
    assert [(b.offset, b.block_type, b.instant) for b in read] == [
        (0, 1, T2), (len(blocks[0]), 0, T3), (len(blocks[0]) + len(blocks[1]), 1, T3)
    ]
    assert log_block_instants(storage, NAME) == [T2, T3, T3]


def test_a_log_file_is_never_overwritten_nor_appended_to(storage: Storage, tmp_path: Path) -> None:
    write_log_file(storage, NAME, _blocks()[:1])
    with pytest.raises(FileExistsError):
        write_log_file(storage, NAME, _blocks()[1:])
    assert (tmp_path / NAME).read_bytes() == _blocks()[0]


def test_write_refuses_what_is_not_a_block(storage: Storage) -> None:
    with pytest.raises(InvalidInputError, match="at least one block"):
        write_log_file(storage, NAME, [])
    with pytest.raises(InvalidInputError, match="block 1 .* is not an encoded log block"):
        write_log_file(storage, NAME, [_blocks()[0], b"PAR1"])
    assert not storage.exists(NAME)


def test_instants_of_blocks_with_headers_longer_than_one_read(storage: Storage) -> None:
    # a 300 KB SCHEMA header: the header scan reads on until it has the whole header
    schema = json.dumps({"doc": "x" * 300_000})
    big = [lb.encode_log_block(lb.BlockType.AVRO_DATA, {lb.HeaderKey.SCHEMA: schema, lb.HeaderKey.INSTANT_TIME: t},
                               b"\x00" * 1000) for t in (T1, T2)]
    write_log_file(storage, NAME, [big[0], lb.encode_rollback_block(T3, T1), big[1]])
    assert log_block_instants(storage, NAME) == [T1, T3, T2]


def test_missing_file(storage: Storage) -> None:
    with pytest.raises(FileNotFoundError):
        read_log_blocks(storage, NAME)
    with pytest.raises(FileNotFoundError):
        log_block_instants(storage, NAME)


def _corrupt(storage: Storage, data: bytes) -> str:
    storage.write_bytes(NAME, data)
    return storage.uri(NAME)


@pytest.mark.parametrize(
    ("cut", "instants"), [(lambda b: b[:-1], [T2]), (lambda b: b[:-60], [T2]), (lambda b: b + b"#HU", [T2, T3]),
                          (lambda b: b[:90], [T2]), (lambda b: b[:len(b) // 2] + b, [T2, T2, T3])],
)
def test_header_scans_skip_the_blocks_reads_skip(storage: Storage, caplog, cut, instants: list[str]) -> None:  # type: ignore[no-untyped-def]
    # rollback and archival list a file's instants as readers count its blocks
    _corrupt(storage, cut(b"".join(_blocks()[:2])))
    with caplog.at_level("WARNING", logger="engine.data.log_file"):
        assert [b.instant for b in read_log_blocks(storage, NAME)] == instants
        read_warnings = list(caplog.messages)
        caplog.clear()
        assert log_block_instants(storage, NAME) == instants
    assert caplog.messages == read_warnings


@pytest.mark.parametrize(("cut", "reason"), [(1, "length 91 runs past the end"), (60, "length 91 runs past the end")])
def test_a_torn_tail_block_is_skipped_with_a_warning(storage: Storage, caplog, cut: int, reason: str) -> None:  # type: ignore[no-untyped-def]
    blocks = _blocks()[:2]
    uri = _corrupt(storage, b"".join(blocks)[:-cut])
    with caplog.at_level("WARNING", logger="engine.data.log_file"):
        read = read_log_blocks(storage, NAME)
    assert [(b.offset, b.block_type, b.instant) for b in read] == [(0, 1, T2)]
    assert caplog.messages == [f"{uri}: skipping the corrupt log block at offset {len(blocks[0])}: "
                               f"{reason} of the file ({sum(map(len, blocks)) - cut} bytes)"]


def test_a_magic_cut_short_after_the_last_block_ends_the_file(storage: Storage, caplog) -> None:  # type: ignore[no-untyped-def]
    blocks = _blocks()[:2]
    _corrupt(storage, b"".join(blocks) + b"#HU")
    with caplog.at_level("WARNING"):
        assert [b.instant for b in read_log_blocks(storage, NAME)] == [T2, T3]
    assert caplog.messages == []


def test_a_corrupt_block_in_the_middle_is_skipped_up_to_the_next_magic(storage: Storage, caplog) -> None:  # type: ignore[no-untyped-def]
    first, second, third = _blocks()
    torn = second[:40]  # a writer died 40 bytes into the block; the next write starts a new block
    uri = _corrupt(storage, first + torn + third)
    with caplog.at_level("WARNING", logger="engine.data.log_file"):
        read = read_log_blocks(storage, NAME)
    assert [(b.offset, b.block_type, b.instant) for b in read] == [(0, 1, T2), (len(first) + 40, 1, T3)]
    # its length field reaches into the third block, whose bytes there are no size trailer
    data = first + torn + third
    end = len(first) + len(second)
    trailer = int.from_bytes(data[end - 8:end], "big", signed=True)
    assert caplog.messages == [f"{uri}: skipping the corrupt log block at offset {len(first)}: "
                               f"length {len(second) - 14} disagrees with the size trailer ({trailer} bytes before it)"]


def test_a_block_followed_by_garbage_is_corrupt_too(storage: Storage, caplog) -> None:  # type: ignore[no-untyped-def]
    # HoodieLogFileReader.isBlockCorrupt: a block is whole only if the next magic (or the end) follows
    first, second = _blocks()[:2]
    uri = _corrupt(storage, first + b"#HUDX#" + second[6:] + second)
    with caplog.at_level("WARNING", logger="engine.data.log_file"):
        read = read_log_blocks(storage, NAME)
    assert [(b.offset, b.instant) for b in read] == [(len(first) + len(second), T3)]
    assert caplog.messages == [f"{uri}: skipping the corrupt log block at offset 0: no magic after its size trailer"]


def test_bad_magic_at_the_start_names_the_file_and_offset(storage: Storage) -> None:
    first = _blocks()[0]
    uri = _corrupt(storage, b"#HUDX#" + first[6:])
    for read in (read_log_blocks, log_block_instants):
        with pytest.raises(CorruptTableError, match=rf"^{uri}: log block at offset 0: missing b'#HUDI#' magic"):
            read(storage, NAME)


def test_a_block_that_passes_the_size_checks_but_does_not_parse_raises(storage: Storage) -> None:
    first = bytearray(_blocks()[0])
    first[14:18] = (2).to_bytes(4, "big")  # format version 2: whole, but not a block we can read
    uri = _corrupt(storage, bytes(first))
    with pytest.raises(CorruptTableError, match=rf"^{uri}: log block at offset 0: unsupported log format version 2"):
        read_log_blocks(storage, NAME)


def test_a_block_without_instant_is_corrupt_in_a_data_log(storage: Storage) -> None:
    uri = _corrupt(storage, lb.encode_log_block(lb.BlockType.AVRO_DATA, {lb.HeaderKey.SCHEMA: "{}"}, b""))
    with pytest.raises(CorruptTableError, match=rf"^{uri}: log block at offset 0 \(type 3\) has no INSTANT_TIME"):
        log_block_instants(storage, NAME)


def test_next_log_version() -> None:
    assert next_log_version([]) == 1
    names = [parse_log_file_name(log_file_name(FID, T1, v, tok)) for v, tok in ((1, "0-1-0"), (10, "1-0-1"), (2, "0-9-9"))]
    version = next_log_version(n for n in names if n is not None)
    assert version == 11
    assert log_file_name(FID, T1, version, "0-1-0") == f".{FID}_{T1}.log.11_0-1-0"
    assert next_log_version(iter([parse_log_file_name(f".{FID}_{T1}.log.9_0-1-0")])) == 10  # type: ignore[list-item]


def test_instants_of_the_samples_log_files(tmp_path: Path) -> None:
    expected = {
        "mor_parquet_v6_nonpartitioned": "20250117083136333",
        "mor_parquet_v6_simplekeygen_nonhivestyle": "20250121000557095",
        "trips_mor_avro_v6_trips_8i1u": "20250331030645735",
    }
    for name, instant in expected.items():
        table = sample_table(name, tmp_path)
        storage = storage_for(str(table))
        [log] = [p for p in table.rglob(".*.log.*") if ".hoodie" not in p.parts]
        rel = str(log.relative_to(table))
        assert log_block_instants(storage, rel) == [instant]
        assert [b.instant for b in read_log_blocks(storage, rel)] == [instant]


def test_header_scans_resync_past_a_long_torn_block(storage: Storage) -> None:
    big = lb.encode_log_block(lb.BlockType.DELETE, {lb.HeaderKey.INSTANT_TIME: T1}, b"\x00" * 2_500_000)
    last = _blocks()[2]
    _corrupt(storage, big[:-10] + last)  # the next magic lies 2.5 MB on, past the 1 MB scan window
    assert log_block_instants(storage, NAME) == [T3]
    assert [b.instant for b in read_log_blocks(storage, NAME)] == [T3]
