"""The cells of an HFile (HBase's sorted key-value file, version 3), as Apache Hudi writes them in
HFILE log data blocks (HoodieHFileDataBlock): bytes in, (row key, value) pairs out. Pure.

The subset read is what Hudi's writer (hudi-io's HFileWriterImpl) produces, read the way its
reader (HFileReaderImpl) and hudi-rs's `hfile/` read it:

    data blocks, from the trailer's first to its last data block offset, each
        33-byte header: magic "DATABLK*", int32 on-disk size without header, int32 uncompressed
        size without header, int64 previous block offset, byte checksum type, int32 bytes per
        checksum, int32 on-disk data size with header (header + compressed data; checksums follow)
        data: cells, compressed as a whole with the file's codec (NONE or GZ)
        cell: int32 key length, int32 value length, key, value, Hadoop vlong memstore timestamp
        key (HBase KeyValue): int16 row length, row, byte family length, family, qualifier,
            int64 timestamp, byte type; Hudi puts the record key in the row
    (HBase's writer puts leaf index and bloom chunks between the data blocks of big files)
    meta blocks: one value each, named in the meta index
    the load-on-open section, from the trailer's load-on-open offset:
        the root data index: per entry int64 block offset, int32 on-disk size, Hadoop vint key
            length, key (the first key of the block, or of the index block below it when the
            index has more levels; Hudi's writer keeps one level and writes the row only: int16
            length + row; HBase writes whole keys, and from 2.4.13 a "fake" key between the
            previous block's last and the block's first)
        the meta index (same entries, the key is the meta block's name without the int16)
        the file-info block: "PBUF", a length-delimited protobuf of (name, value) byte pairs
    leaf and intermediate index blocks (multi-level indexes): int32 entry count, int32 offsets
        of the entries after that table, entries of int64 offset, int32 on-disk size, key
    trailer, the last 4096 bytes: magic 'TRABLK"$', a length-delimited protobuf
        (FixedFileTrailer), zero padding, and the version (minor byte, major in three bytes: 3)

`HFileReader` opens a whole file (trailer, index, meta and file info) for point and prefix
lookups; `read_hfile_cells` reads every cell in order from the trailer and the data blocks
alone. The writer is `engine.data.hfile_writer`.

All integers are big-endian. Malformed input raises ValueError, with the offset where it went
wrong; the caller names the file.
"""

from __future__ import annotations

import bisect
import gzip
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

TRAILER_SIZE = 4096
TRAILER_MAGIC = b'TRABLK"$'
DATA_BLOCK_MAGIC = b"DATABLK*"
INLINE_BLOCK_MAGICS = (b"IDXLEAF2", b"BLMFBLK2")  # HBase writes these between data blocks of big files
BLOCK_HEADER_SIZE = 33

# Compression.Algorithm ordinals (the trailer's compression codec)
CODEC_LZO, CODEC_GZ, CODEC_NONE, CODEC_SNAPPY, CODEC_LZ4, CODEC_BZIP2, CODEC_ZSTD = range(7)
_CODEC_NAMES = ["LZO", "GZ", "NONE", "SNAPPY", "LZ4", "BZIP2", "ZSTD"]


class UnsupportedHFileError(ValueError):
    """A well-formed HFile this reader does not read (another version or codec, encoded blocks)."""


ROOT_INDEX_MAGIC = b"IDXROOT2"
LEAF_INDEX_MAGIC = b"IDXLEAF2"
INTERMEDIATE_INDEX_MAGIC = b"IDXINTE2"
META_BLOCK_MAGIC = b"METABLKc"
FILE_INFO_MAGIC = b"FILEINF2"
PROTOBUF_MAGIC = b"PBUF"

# TrailerProto field numbers (HBase's HFile.proto)
(T_FILE_INFO_OFFSET, T_LOAD_ON_OPEN_OFFSET, T_UNCOMPRESSED_DATA_INDEX_SIZE, T_TOTAL_UNCOMPRESSED_BYTES,
 T_DATA_INDEX_COUNT, T_META_INDEX_COUNT, T_ENTRY_COUNT, T_NUM_DATA_INDEX_LEVELS, T_FIRST_DATA_BLOCK_OFFSET,
 T_LAST_DATA_BLOCK_OFFSET, T_COMPARATOR_CLASS_NAME, T_COMPRESSION_CODEC, T_ENCRYPTION_KEY) = range(1, 14)


@dataclass(frozen=True)
class Trailer:
    """The fields of an HFile's fixed trailer (offsets of absent blocks read as 2**64 - 1)."""

    major_version: int
    first_data_block_offset: int
    last_data_block_offset: int
    entry_count: int
    compression_codec: int
    file_info_offset: int = 0
    load_on_open_offset: int = 0
    data_index_count: int = 0
    meta_index_count: int = 0
    data_index_levels: int = 1
    comparator: str = ""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError(f"bad protobuf varint at {pos}")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _protobuf_fields(data: bytes) -> dict[int, int | bytes]:
    """Field number -> value (varints as int, length-delimited as bytes) of a protobuf message."""
    fields: dict[int, int | bytes] = {}
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            fields[number], pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError(f"protobuf field {number} runs past the end of the trailer")
            fields[number], pos = data[pos : pos + length], pos + length
        elif wire == 1:
            fields[number], pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == 5:
            fields[number], pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"protobuf wire type {wire} (field {number}) in the trailer")
    return fields


def read_trailer(data: bytes) -> Trailer:
    """The trailer of the HFile `data` (the whole file)."""
    if len(data) < TRAILER_SIZE:
        raise ValueError(f"{len(data)} bytes: too short for an HFile trailer ({TRAILER_SIZE} bytes)")
    trailer = data[-TRAILER_SIZE:]
    if trailer[: len(TRAILER_MAGIC)] != TRAILER_MAGIC:
        raise ValueError(f"no HFile trailer magic at {len(data) - TRAILER_SIZE}")
    major = int.from_bytes(trailer[-3:], "big")
    if major != 3:
        raise UnsupportedHFileError(f"HFile version {major}.{trailer[-4]}; only version 3 is read")
    length, start = _varint(trailer, len(TRAILER_MAGIC))
    if start + length > TRAILER_SIZE - 4:
        raise ValueError("the HFile trailer's protobuf runs past the trailer")
    fields = _protobuf_fields(trailer[start : start + length])

    def number(n: int, default: int = 0) -> int:
        value = fields.get(n, default)
        if not isinstance(value, int):
            raise ValueError(f"HFile trailer field {n} is not a number")
        return value

    comparator = fields.get(T_COMPARATOR_CLASS_NAME, b"")
    return Trailer(
        major, number(T_FIRST_DATA_BLOCK_OFFSET), number(T_LAST_DATA_BLOCK_OFFSET), number(T_ENTRY_COUNT),
        number(T_COMPRESSION_CODEC, CODEC_NONE), number(T_FILE_INFO_OFFSET), number(T_LOAD_ON_OPEN_OFFSET),
        number(T_DATA_INDEX_COUNT), number(T_META_INDEX_COUNT), number(T_NUM_DATA_INDEX_LEVELS, 1),
        comparator.decode("utf-8", "replace") if isinstance(comparator, bytes) else "",
    )


def _decompress(raw: bytes, codec: int, size: int, offset: int) -> bytes:
    if codec == CODEC_NONE:
        out = raw
    elif codec == CODEC_GZ:
        try:
            out = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"HFile block at {offset}: GZ data does not decompress: {exc}") from exc
    else:
        name = _CODEC_NAMES[codec] if 0 <= codec < len(_CODEC_NAMES) else str(codec)
        raise UnsupportedHFileError(f"HFile compressed with {name}; only NONE and GZ are read")
    if len(out) != size:
        raise ValueError(f"HFile block at {offset}: {len(out)} bytes of data, its header says {size}")
    return out


def _vlong_size(first: int) -> int:
    """Bytes of a Hadoop WritableUtils vlong whose first byte is `first`."""
    signed = first - 256 if first > 127 else first
    if signed >= -112:
        return 1
    return (-119 - signed) if signed < -120 else (-111 - signed)


_CELL_HEAD = struct.Struct(">iih")


def _cells(block: bytes, offset: int) -> list[tuple[bytes, bytes]]:
    cells: list[tuple[bytes, bytes]] = []
    append = cells.append
    unpack = _CELL_HEAD.unpack_from
    size = len(block)
    pos = 0
    while pos < size:
        if pos + 10 > size:
            raise ValueError(f"HFile block at {offset}: a cell header cut short at {pos}")
        key_length, value_length, row_length = unpack(block, pos)
        key_at = pos + 8
        value_at = key_at + key_length
        end = value_at + value_length
        if key_length < 12 or value_length < 0 or end > size:
            raise ValueError(
                f"HFile block at {offset}: cell at {pos} (key {key_length}, value {value_length} bytes) "
                f"runs past the block ({size} bytes)"
            )
        if row_length < 0 or 2 + row_length > key_length:
            raise ValueError(f"HFile block at {offset}: cell at {pos} has a row of {row_length} bytes")
        if end >= size:
            raise ValueError(f"HFile block at {offset}: cell at {pos} has no memstore timestamp")
        append((block[key_at + 2 : key_at + 2 + row_length], block[value_at:end]))
        first = block[end]
        pos = end + (1 if first < 128 else _vlong_size(first))
    return cells


def read_hfile_cells(data: bytes) -> list[tuple[bytes, bytes]]:
    """Every cell of the HFile `data` as (row key, value), in file (key) order."""
    trailer = read_trailer(data)
    cells: list[tuple[bytes, bytes]] = []
    if trailer.entry_count == 0:
        return cells
    offset = trailer.first_data_block_offset
    end_of_data = len(data) - TRAILER_SIZE
    while offset <= trailer.last_data_block_offset:
        if offset + BLOCK_HEADER_SIZE > end_of_data:
            raise ValueError(
                f"HFile block at {offset}: header runs past the data section ({end_of_data} bytes)"
            )
        magic = data[offset : offset + 8]
        on_disk, uncompressed, _prev, _checksum_type, _per_checksum, data_with_header = struct.unpack_from(
            ">iiqbii", data, offset + 8
        )
        if (
            magic in INLINE_BLOCK_MAGICS
            and 0 <= on_disk
            and offset + BLOCK_HEADER_SIZE + on_disk <= end_of_data
        ):
            offset += BLOCK_HEADER_SIZE + on_disk  # a leaf index or bloom chunk among the data blocks
            continue
        if magic != DATA_BLOCK_MAGIC:
            if magic == b"DATABLKE":
                raise UnsupportedHFileError(f"HFile block at {offset}: an encoded data block (DATABLKE)")
            raise ValueError(f"HFile block at {offset}: magic {magic!r}, not a data block")
        if (
            on_disk < 0
            or offset + BLOCK_HEADER_SIZE + on_disk > end_of_data
            or not (BLOCK_HEADER_SIZE <= data_with_header <= BLOCK_HEADER_SIZE + on_disk)
        ):
            raise ValueError(
                f"HFile block at {offset}: sizes {on_disk}/{data_with_header} do not fit the file"
            )
        raw = data[offset + BLOCK_HEADER_SIZE : offset + data_with_header]
        cells.extend(_cells(_decompress(raw, trailer.compression_codec, uncompressed, offset), offset))
        offset += BLOCK_HEADER_SIZE + on_disk
    if len(cells) != trailer.entry_count:
        raise ValueError(
            f"HFile has {len(cells)} cells in its data blocks, its trailer says {trailer.entry_count}"
        )
    return cells


def _hadoop_vint(data: bytes, pos: int) -> tuple[int, int]:
    """A Hadoop WritableUtils vint/vlong at `pos`: (value, position after it)."""
    if pos >= len(data):
        raise ValueError(f"a vint runs past the end at {pos}")
    size = _vlong_size(data[pos])
    first = data[pos] - 256 if data[pos] > 127 else data[pos]
    if size == 1:
        return first, pos + 1
    if pos + size > len(data):
        raise ValueError(f"a vint of {size} bytes runs past the end at {pos}")
    value = int.from_bytes(data[pos + 1 : pos + size], "big")
    return (~value if first < -120 else value), pos + size  # below -120: a negative number


def read_block(data: bytes, offset: int, codec: int, end: int) -> tuple[bytes, bytes, int]:
    """The block at `offset` of the HFile `data` (its blocks end at `end`): (magic, uncompressed
    body, offset of the next block)."""
    if offset < 0 or offset + BLOCK_HEADER_SIZE > end:
        raise ValueError(f"HFile block at {offset}: header runs past the block section ({end} bytes)")
    magic = data[offset : offset + 8]
    on_disk, uncompressed, _prev, _checksum_type, _per_checksum, data_with_header = struct.unpack_from(
        ">iiqbii", data, offset + 8
    )
    if (
        on_disk < 0
        or uncompressed < 0
        or offset + BLOCK_HEADER_SIZE + on_disk > end
        or not (BLOCK_HEADER_SIZE <= data_with_header <= BLOCK_HEADER_SIZE + on_disk)
    ):
        raise ValueError(f"HFile block at {offset}: sizes {on_disk}/{data_with_header} do not fit the file")
    raw = data[offset + BLOCK_HEADER_SIZE : offset + data_with_header]
    return magic, _decompress(raw, codec, uncompressed, offset), offset + BLOCK_HEADER_SIZE + on_disk


def _row_of_key(key: bytes, where: str) -> bytes:
    """The row of an index key: Hudi's (int16 length, row) and HBase's whole keys both start so."""
    if len(key) < 2:
        raise ValueError(f"{where}: an index key of {len(key)} bytes")
    (length,) = struct.unpack_from(">h", key, 0)
    if length < 0 or 2 + length > len(key):
        raise ValueError(f"{where}: an index key with a row of {length} bytes in {len(key)}")
    return key[2 : 2 + length]


@dataclass(frozen=True)
class IndexEntry:
    """A block an index names: the first row under it (or a row between the previous block's last
    and its first, HBase's "fake" first key), where it starts and its size on disk."""

    first_row: bytes
    offset: int
    size: int


def _root_entries(body: bytes, count: int, with_row_length: bool, where: str) -> list[IndexEntry]:
    entries = []
    pos = 0
    for _ in range(count):
        if pos + 12 > len(body):
            raise ValueError(f"{where}: {count} entries do not fit its {len(body)} bytes")
        block_offset, size = struct.unpack_from(">qi", body, pos)
        key_length, pos = _hadoop_vint(body, pos + 12)
        if key_length < 0 or pos + key_length > len(body):
            raise ValueError(f"{where}: a key of {key_length} bytes runs past the block")
        key = body[pos : pos + key_length]
        pos += key_length
        entries.append(IndexEntry(_row_of_key(key, where) if with_row_length else key, block_offset, size))
    return entries


def _non_root_entries(body: bytes, where: str) -> list[IndexEntry]:
    if len(body) < 4:
        raise ValueError(f"{where}: too short for an index block")
    (count,) = struct.unpack_from(">i", body, 0)
    table_end = 4 + 4 * (count + 1)
    if count < 0 or table_end > len(body):
        raise ValueError(f"{where}: {count} entries do not fit its {len(body)} bytes")
    offsets = struct.unpack_from(f">{count + 1}i", body, 4)
    entries = []
    for i in range(count):
        start, stop = table_end + offsets[i], table_end + offsets[i + 1]
        if not (table_end <= start and start + 12 <= stop <= len(body)):
            raise ValueError(f"{where}: entry {i} ({start}..{stop}) does not fit the block")
        block_offset, size = struct.unpack_from(">qi", body, start)
        entries.append(IndexEntry(_row_of_key(body[start + 12 : stop], where), block_offset, size))
    return entries


def _file_info(body: bytes, where: str) -> dict[bytes, bytes]:
    if body[:4] != PROTOBUF_MAGIC:
        raise ValueError(f"{where}: no PBUF magic in the file-info block")
    length, pos = _varint(body, 4)
    if pos + length > len(body):
        raise ValueError(f"{where}: the file-info message runs past the block")
    message = body[pos : pos + length]
    info: dict[bytes, bytes] = {}
    pos = 0
    while pos < len(message):
        tag, pos = _varint(message, pos)
        if tag != (1 << 3 | 2):
            raise ValueError(f"{where}: unexpected protobuf tag {tag} in the file info")
        size, pos = _varint(message, pos)
        pair = _protobuf_fields(message[pos : pos + size])
        pos += size
        name, value = pair.get(1, b""), pair.get(2, b"")
        if not isinstance(name, bytes) or not isinstance(value, bytes):
            raise ValueError(f"{where}: a file-info pair that is not two byte strings")
        info[name] = value
    return info


class HFileReader:
    """A whole HFile in memory, opened through its trailer, index, meta index and file info: point,
    batch and prefix lookups read only the data blocks that can hold the keys. Keys are rows
    (bytes), in the byte order the file is sorted in. Malformed input raises ValueError naming the
    offset; an unsupported layout UnsupportedHFileError."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.trailer = trailer = read_trailer(data)
        self._end = len(data) - TRAILER_SIZE
        self._blocks: dict[int, list[tuple[bytes, bytes]]] = {}
        self._rows: dict[int, list[bytes]] = {}
        codec, end = trailer.compression_codec, self._end
        magic, body, pos = read_block(data, trailer.load_on_open_offset, codec, end)
        if magic != ROOT_INDEX_MAGIC:
            raise ValueError(f"HFile block at {trailer.load_on_open_offset}: magic {magic!r}, not the root index")
        where = f"HFile root index at {trailer.load_on_open_offset}"
        entries = _root_entries(body, trailer.data_index_count, True, where)
        for level in range(1, trailer.data_index_levels):
            entries = self._children(entries, level)
        self.index: list[IndexEntry] = entries
        magic, body, _ = read_block(data, pos, codec, end)
        if magic != ROOT_INDEX_MAGIC:
            raise ValueError(f"HFile block at {pos}: magic {magic!r}, not the meta index")
        self.meta_index = {
            e.first_row: e for e in _root_entries(body, trailer.meta_index_count, False, f"HFile meta index at {pos}")
        }
        magic, body, _ = read_block(data, trailer.file_info_offset, codec, end)
        if magic != FILE_INFO_MAGIC:
            raise ValueError(f"HFile block at {trailer.file_info_offset}: magic {magic!r}, not the file info")
        self.file_info = _file_info(body, f"HFile file info at {trailer.file_info_offset}")
        self._firsts = [e.first_row for e in self.index]

    def _children(self, entries: list[IndexEntry], level: int) -> list[IndexEntry]:
        out: list[IndexEntry] = []
        for entry in entries:
            magic, body, _ = read_block(self.data, entry.offset, self.trailer.compression_codec, self._end)
            if magic not in (LEAF_INDEX_MAGIC, INTERMEDIATE_INDEX_MAGIC):
                raise ValueError(f"HFile block at {entry.offset}: magic {magic!r}, not an index block (level {level})")
            out += _non_root_entries(body, f"HFile index block at {entry.offset}")
        return out

    @property
    def entry_count(self) -> int:
        return self.trailer.entry_count

    def meta_block(self, name: bytes) -> bytes | None:
        """The value of meta block `name`, None if the file has none by that name."""
        entry = self.meta_index.get(name)
        if entry is None:
            return None
        magic, body, _ = read_block(self.data, entry.offset, self.trailer.compression_codec, self._end)
        if magic != META_BLOCK_MAGIC:
            raise ValueError(f"HFile block at {entry.offset}: magic {magic!r}, not a meta block")
        return body

    def _block_cells(self, i: int) -> list[tuple[bytes, bytes]]:
        cells = self._blocks.get(i)
        if cells is None:
            entry = self.index[i]
            magic, body, _ = read_block(self.data, entry.offset, self.trailer.compression_codec, self._end)
            if magic != DATA_BLOCK_MAGIC:
                raise ValueError(f"HFile block at {entry.offset}: magic {magic!r}, not a data block")
            cells = self._blocks[i] = _cells(body, entry.offset)
        return cells

    def cells(self) -> list[tuple[bytes, bytes]]:
        """Every (row, value) in key order, through the index."""
        out: list[tuple[bytes, bytes]] = []
        for i in range(len(self.index)):
            out += self._block_cells(i)
        return out

    def _scan_from(self, key: bytes) -> int:
        """The first block that can hold `key` (a key equal to a block's first row may also end the
        block before it, where HBase lets equal keys span blocks)."""
        return max(bisect.bisect_left(self._firsts, key) - 1, 0)

    def get(self, key: bytes) -> list[bytes]:
        """The values of every cell whose row is `key` (none: [])."""
        return self.lookup([key]).get(key, [])

    def _block_rows(self, i: int) -> list[bytes]:
        rows = self._rows.get(i)
        if rows is None:
            rows = self._rows[i] = [row for row, _ in self._block_cells(i)]
        return rows

    def lookup(self, keys: Iterable[bytes]) -> dict[bytes, list[bytes]]:
        """Row -> values for the `keys` found, each data block read at most once; a key is found
        by binary search in its block (equal rows may continue into the next blocks)."""
        found: dict[bytes, list[bytes]] = {}
        n = len(self.index)
        for key in sorted(set(keys)):
            i = self._scan_from(key) if n else 0
            while i < n:
                rows = self._block_rows(i)
                j = bisect.bisect_left(rows, key)
                cells = self._block_cells(i)
                while j < len(rows) and rows[j] == key:
                    found.setdefault(key, []).append(cells[j][1])
                    j += 1
                if j < len(rows):
                    break  # a row past the key in this block
                i += 1
                if i < n and self._firsts[i] > key:
                    break
        return found

    def prefix(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        """Every (row, value) whose row starts with `prefix`, in key order."""
        return list(self._from(prefix, lambda row: row.startswith(prefix), lambda row: row[: len(prefix)] > prefix))

    def _from(self, key: bytes, match: Callable[[bytes], bool], past: Callable[[bytes], bool]
              ) -> Iterator[tuple[bytes, bytes]]:
        for i in range(self._scan_from(key) if self.index else 0, len(self.index)):
            if i and past(self._firsts[i]) and not match(self._firsts[i]):
                return
            for row, value in self._block_cells(i):
                if match(row):
                    yield row, value
                elif past(row):
                    return


__all__ = [
    "HFileReader", "IndexEntry", "Trailer", "UnsupportedHFileError", "read_block", "read_hfile_cells", "read_trailer",
]
