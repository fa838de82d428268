"""Corrupt log blocks in a file slice: skipped as Apache Hudi's log scanners skip a HoodieCorruptBlock
(the blocks before and after them still count), with a warning naming the file and offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.data.slice_reader import MergeMode, SliceFiles, read_slice
from engine.storage.local import LocalStorage
from tests.support.mor_tables import FID, I, MorTable, values


def _read(t: MorTable, log_paths: tuple[str, ...], mode: MergeMode = MergeMode.EVENT_TIME) -> list[tuple]:
    files = SliceFiles("", FID, I[1], f"{FID}_0-1-0_{I[1]}.parquet", log_paths)
    rows = read_slice(LocalStorage(str(t.root)), files, t.schema, ordering_field="ts", mode=mode,
                      is_committed=lambda i: True)
    return sorted(values(rows.to_pylist(), "_hoodie_commit_time", "id", "ts", "val"), key=lambda r: r[1])


@pytest.fixture
def t(tmp_path: Path) -> MorTable:
    table = MorTable(tmp_path)
    table.base_file(I[1], [("a", 1, "base"), ("b", 1, "base"), ("c", 1, "base")])
    return table


@pytest.mark.parametrize("mode", list(MergeMode))
def test_a_corrupt_block_in_the_middle_is_skipped_and_the_next_one_counts(t: MorTable, caplog, mode) -> None:  # type: ignore[no-untyped-def]
    first = t.avro_block(I[2], [("a", 2, "T2")])
    torn = t.avro_block(I[3], [("b", 3, "T3"), ("c", 3, "T3")])[:-25]  # the writer died in the block
    last = t.parquet_block(I[4], [("c", 4, "T4")])
    path = t.log_file([first, torn, last], base_instant=I[1], version=1)
    with caplog.at_level("WARNING", logger="engine.data.log_file"):
        rows = _read(t, (path,), mode)
    assert rows == [(I[2], "a", 2, "T2"), (I[1], "b", 1, "base"), (I[4], "c", 4, "T4")]
    [message] = caplog.messages
    assert message.startswith(f"{t.root}/{path}: skipping the corrupt log block at offset {len(first)}: ")


def test_a_corrupt_tail_block_is_skipped(t: MorTable, caplog) -> None:  # type: ignore[no-untyped-def]
    # table_corrupt_tail_block's shape: a whole block, then a magic and a length of 1,000,000
    first = t.avro_block(I[2], [("a", 2, "T2")])
    tail = b"#HUDI#" + (1_000_000).to_bytes(8, "big") + b"\x01\x02\x03\x04"
    older = t.log_file([t.avro_block(I[2], [("b", 2, "T2")])], base_instant=I[1], version=1)
    path = t.log_file([first, tail], base_instant=I[1], version=2)
    with caplog.at_level("WARNING", logger="engine.data.log_file"):
        rows = _read(t, (older, path), MergeMode.COMMIT_TIME)
    assert rows == [(I[2], "a", 2, "T2"), (I[2], "b", 2, "T2"), (I[1], "c", 1, "base")]
    assert caplog.messages == [
        f"{t.root}/{path}: skipping the corrupt log block at offset {len(first)}: "
        f"length 1000000 runs past the end of the file ({len(first) + 18} bytes)"
    ]


def test_a_log_file_of_one_torn_block_adds_nothing(t: MorTable) -> None:
    path = t.log_file([t.avro_block(I[2], [("a", 2, "T2")])[:100]], base_instant=I[1], version=1)
    assert _read(t, (path,)) == [(I[1], "a", 1, "base"), (I[1], "b", 1, "base"), (I[1], "c", 1, "base")]


def test_a_rollback_block_after_a_corrupt_one_still_applies(t: MorTable) -> None:
    from engine.data import log_block as lb

    blocks = [t.avro_block(I[2], [("a", 2, "T2")]), t.avro_block(I[3], [("b", 3, "T3")])[:-1],
              lb.encode_rollback_block(I[4], I[2]), t.avro_block(I[5], [("c", 5, "T5")])]
    path = t.log_file(blocks, base_instant=I[1], version=1)
    assert _read(t, (path,)) == [(I[1], "a", 1, "base"), (I[1], "b", 1, "base"), (I[5], "c", 5, "T5")]
