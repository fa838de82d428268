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
    index, meta and file-info blocks (not needed to read every cell in order; leaf index and bloom
        chunks that HBase's writer puts between the data blocks of big files are stepped over)
    trailer, the last 4096 bytes: magic 'TRABLK"$', a length-delimited protobuf
        (FixedFileTrailer), zero padding, and the version (minor byte, major in three bytes: 3)

All integers are big-endian. Malformed input raises ValueError, with the offset where it went
wrong; the caller names the file.
"""

from __future__ import annotations

import gzip
import struct
import zlib
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


@dataclass(frozen=True)
class Trailer:
    """The fields of an HFile's fixed trailer that reading its cells needs."""

    major_version: int
    first_data_block_offset: int
    last_data_block_offset: int
    entry_count: int
    compression_codec: int


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

    return Trailer(major, number(9), number(10), number(7), number(12, CODEC_NONE))


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


def _cells(block: bytes, offset: int) -> list[tuple[bytes, bytes]]:
    cells = []
    pos = 0
    while pos < len(block):
        if pos + 8 > len(block):
            raise ValueError(f"HFile block at {offset}: a cell header cut short at {pos}")
        key_length, value_length = struct.unpack_from(">ii", block, pos)
        key_at = pos + 8
        value_at = key_at + key_length
        end = value_at + value_length
        if key_length < 12 or value_length < 0 or end > len(block):
            raise ValueError(
                f"HFile block at {offset}: cell at {pos} (key {key_length}, value {value_length} bytes) "
                f"runs past the block ({len(block)} bytes)"
            )
        (row_length,) = struct.unpack_from(">h", block, key_at)
        if row_length < 0 or 2 + row_length > key_length:
            raise ValueError(f"HFile block at {offset}: cell at {pos} has a row of {row_length} bytes")
        row = block[key_at + 2 : key_at + 2 + row_length]
        if end >= len(block):
            raise ValueError(f"HFile block at {offset}: cell at {pos} has no memstore timestamp")
        cells.append((row, block[value_at:end]))
        pos = end + _vlong_size(block[end])
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


__all__ = ["Trailer", "UnsupportedHFileError", "read_hfile_cells", "read_trailer"]
