"""HFiles (version 3) as Apache Hudi 1.x writes them (hudi-io's native HFileWriterImpl, which writes
the base files of its metadata table and the content of its HFILE log blocks). Pure: cells in,
bytes out; `engine.data.hfile` reads them (and what HBase wrote).

The layout, written so Hudi's and hudi-rs's readers (and HBase's) read it:

    data blocks ("DATABLK*"), a new one when the next cell would take the block past the block
        size, except that cells of one key stay in one block; each cell is int32 key length, int32
        value length, key (int16 row length, row, family length 0, timestamp Long.MAX_VALUE, type
        Put), value, and a zero memstore timestamp (one byte)
    meta blocks ("METABLKc"), one value each
    the root data index ("IDXROOT2", one level: offset, on-disk size, vint key length, the first
        row of the block as int16 length + row; Hudi 1.0's writer put the whole key there, both
        read the same), the meta index ("IDXROOT2", the names as keys)
    the file info ("FILEINF2": "PBUF" and a length-delimited protobuf of name/value pairs:
        MAX_MEMSTORE_TS_KEY, hfile.LASTKEY, hfile.AVG_KEY_LEN, hfile.AVG_VALUE_LEN,
        hfile.CREATE_TIME_TS, KEY_VALUE_VERSION and the caller's, e.g. the metadata table's
        `schema`)
    the trailer (magic, the length-delimited TrailerProto, zeros, version byte 3 at the end)

Every block: the 33-byte header (magic, on-disk size without header, uncompressed size without
header, "previous block offset", checksum type 0 (NULL), 16384 bytes per checksum, on-disk data
size with header), the data compressed with the file's codec (NONE or GZ), and zeroed checksum
bytes (4 per 16 KB). Hudi's writer records its own start offset as a data block's "previous block
offset" (-1 for the first and for every other block); this writer does the same, so a file written
here with Hudi's settings is byte for byte the file Hudi writes (the tests compare them), name/value
pairs in the order Java's HashMap iterates them.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable

from engine.data.hfile import (
    BLOCK_HEADER_SIZE,
    CODEC_GZ,
    CODEC_NONE,
    DATA_BLOCK_MAGIC,
    FILE_INFO_MAGIC,
    META_BLOCK_MAGIC,
    PROTOBUF_MAGIC,
    ROOT_INDEX_MAGIC,
    T_COMPARATOR_CLASS_NAME,
    T_COMPRESSION_CODEC,
    T_DATA_INDEX_COUNT,
    T_ENTRY_COUNT,
    T_FILE_INFO_OFFSET,
    T_FIRST_DATA_BLOCK_OFFSET,
    T_LAST_DATA_BLOCK_OFFSET,
    T_LOAD_ON_OPEN_OFFSET,
    T_META_INDEX_COUNT,
    T_NUM_DATA_INDEX_LEVELS,
    T_UNCOMPRESSED_DATA_INDEX_SIZE,
    TRAILER_MAGIC,
    TRAILER_SIZE,
)

COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
DEFAULT_BLOCK_SIZE = 1024 * 1024  # HFileContext's default
BYTES_PER_CHECKSUM = 16 * 1024
LATEST_TIMESTAMP = 2**63 - 1
PUT = 4
CELL_OVERHEAD = 9  # int32 key length, int32 value length, memstore timestamp byte
KEY_OVERHEAD = 12  # around the row in a key: int16 row length, family length, int64 timestamp, type

MAX_MEMSTORE_TS_KEY = "MAX_MEMSTORE_TS_KEY"
LAST_KEY = "hfile.LASTKEY"
AVG_KEY_LEN = "hfile.AVG_KEY_LEN"
AVG_VALUE_LEN = "hfile.AVG_VALUE_LEN"
CREATE_TIME_TS = "hfile.CREATE_TIME_TS"
KEY_VALUE_VERSION = "KEY_VALUE_VERSION"


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative number (a negative int64 as its 64-bit two's complement)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def hadoop_vlong(n: int) -> bytes:
    """Hadoop WritableUtils.writeVLong (what `engine.data.hfile` reads back; HBase writes cells'
    memstore timestamps so, Hudi's writer always the one byte of 0)."""
    if -112 <= n <= 127:
        return struct.pack(">b", n)
    length = -112
    if n < 0:
        n ^= -1
        length = -120
    tmp = n
    while tmp:
        tmp >>= 8
        length -= 1
    size = -(length + 120) if length < -120 else -(length + 112)
    return struct.pack(">b", length) + n.to_bytes(size, "big")


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, bytes):
        return varint(number << 3 | 2) + varint(len(value)) + value
    return varint(number << 3) + varint(value)


def _java_string_hash(text: str) -> int:
    """java.lang.String.hashCode (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """The order a java.util.HashMap<String, ?> filled with `keys` (in insertion order, default
    capacity and load factor) iterates them: by bucket of the final table, then insertion order."""
    unique = list(dict.fromkeys(keys))
    capacity = 16
    while len(unique) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(unique, key=lambda k: (bucket(k), unique.index(k)))


GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"  # Java's: no name, mtime 0, OS 0


def _gzip(body: bytes) -> bytes:
    """A gzip member as Java's GZIPOutputStream writes it (deflate at zlib's default level 6)."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = deflate.compress(body) + deflate.flush()
    return GZIP_HEADER + data + struct.pack("<II", zlib.crc32(body), len(body) & 0xFFFFFFFF)


def _key(row: bytes) -> bytes:
    """The HBase KeyValue key of `row`: no family or qualifier, the latest timestamp, type Put."""
    return struct.pack(">h", len(row)) + row + _KEY_SUFFIX


_KEY_SUFFIX = struct.pack(">bqb", 0, LATEST_TIMESTAMP, PUT)
_CELL_HEAD = struct.Struct(">iih")  # key length, value length, row length


def _checksum_size(on_disk_data_with_header: int) -> int:
    return 4 * -(-on_disk_data_with_header // BYTES_PER_CHECKSUM)


class HFileWriter:
    """Cells appended in key order (rows as bytes or str; equal rows allowed, kept in one block;
    a block is full when its cells' key, value and 9 bytes each pass the block size),
    file info and meta values by name; `finish()` returns the file. `codec` is CODEC_NONE or
    CODEC_GZ; `block_size` the uncompressed data block size Hudi's writer aims at
    (`hoodie.metadata` writes use 1 MB by default); `creation_time_ms` goes to hfile.CREATE_TIME_TS."""

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE, codec: int = CODEC_NONE,
                 creation_time_ms: int | None = None) -> None:
        if codec not in (CODEC_NONE, CODEC_GZ):
            raise ValueError(f"HFile codec {codec}: only NONE ({CODEC_NONE}) and GZ ({CODEC_GZ}) are written")
        if block_size <= 0:
            raise ValueError(f"HFile block size {block_size}: must be positive")
        self.block_size = block_size
        self.codec = codec
        self.creation_time_ms = int(time.time() * 1000) if creation_time_ms is None else creation_time_ms
        self._out = bytearray()
        self._block: list[tuple[bytes, bytes]] = []
        self._block_bytes = 0
        self._block_prev = -1
        self._index: list[tuple[bytes, int, int]] = []
        self._file_info: dict[str, bytes] = {MAX_MEMSTORE_TS_KEY: struct.pack(">q", 0)}
        self._meta: dict[str, bytes] = {}
        self._last_key = b""
        self._entries = self._key_bytes = self._value_bytes = self._data_bytes = 0
        self._first_data = -1
        self._last_data = 0
        self._finished = False

    def append(self, key: bytes | str, value: bytes) -> None:
        self.extend(((key, value),))

    def extend(self, cells: Iterable[tuple[bytes | str, bytes]]) -> None:
        """`append` every cell (the same checks and blocks, in one loop; after a refused cell the
        writer is not to be used further)."""
        if self._finished:
            raise ValueError("HFileWriter: append after finish()")
        block, block_bytes, last = self._block, self._block_bytes, self._last_key
        limit, overhead = self.block_size, KEY_OVERHEAD + CELL_OVERHEAD
        data_bytes = key_bytes = value_bytes = 0
        for key, value in cells:
            row = key.encode("utf-8") if isinstance(key, str) else bytes(key)
            n = len(row)
            if n > 0x7FFF:
                raise ValueError(f"HFile row of {n} bytes: rows are at most 32767 bytes")
            if row < last:
                raise ValueError(f"HFile rows must be appended in order: {row!r} after {last!r}")
            size = overhead + n + len(value)
            if block and block_bytes + size > limit and block[-1][0] != row:
                self._block, self._block_bytes = block, block_bytes
                self._flush_data_block()
                block, block_bytes = self._block, 0
            block.append((row, bytes(value)))
            block_bytes += size
            data_bytes += size
            key_bytes += n
            value_bytes += len(value)
            last = row
        self._block, self._block_bytes, self._last_key = block, block_bytes, last
        self._data_bytes += data_bytes
        self._key_bytes += key_bytes
        self._value_bytes += value_bytes

    def append_file_info(self, name: str, value: bytes) -> None:
        self._file_info[name] = bytes(value)

    def append_meta(self, name: str, value: bytes) -> None:
        self._meta[name] = bytes(value)

    def _block_bytes_out(self, magic: bytes, body: bytes, prev: int) -> bytes:
        data = _gzip(body) if self.codec == CODEC_GZ else body
        with_header = BLOCK_HEADER_SIZE + len(data)
        checksums = _checksum_size(with_header)
        header = magic + struct.pack(
            ">iiqbii", len(data) + checksums, len(body), prev, 0, BYTES_PER_CHECKSUM, with_header
        )
        return header + data + bytes(checksums)

    def _write(self, block: bytes) -> int:
        offset = len(self._out)
        self._out += block
        return offset

    def _flush_data_block(self) -> None:
        if not self._block:
            return
        head, suffix, overhead = _CELL_HEAD.pack, _KEY_SUFFIX, KEY_OVERHEAD
        parts: list[bytes] = []
        add = parts.append
        for row, value in self._block:  # key length, value length, the key, the value, memstore ts 0
            add(head(overhead + len(row), len(value), len(row)))
            add(row)
            add(suffix)
            add(value)
            add(b"\x00")
        block = self._block_bytes_out(DATA_BLOCK_MAGIC, b"".join(parts), self._block_prev)
        offset = self._write(block)
        if self._first_data < 0:
            self._first_data = offset
        self._last_data = offset
        self._entries += len(self._block)
        self._index.append((self._block[0][0], offset, len(block)))
        self._block, self._block_bytes = [], 0
        self._block_prev = len(self._out)  # Hudi's writer: the next block's own start offset

    def finish(self) -> bytes:
        """The whole HFile (the writer cannot be used after)."""
        if self._finished:
            raise ValueError("HFileWriter: finish() called twice")
        self._flush_data_block()
        self._finished = True
        meta_index = bytearray()
        for name in java_hashmap_order(self._meta):
            block = self._block_bytes_out(META_BLOCK_MAGIC, self._meta[name], -1)
            offset = self._write(block)
            encoded = name.encode("utf-8")
            meta_index += struct.pack(">qi", offset, len(block)) + varint(len(encoded)) + encoded
        load_on_open = len(self._out)
        root = bytearray()
        for row, offset, size in self._index:
            root += struct.pack(">qi", offset, size) + varint(len(row) + 2) + struct.pack(">h", len(row)) + row
        self._write(self._block_bytes_out(ROOT_INDEX_MAGIC, bytes(root), -1))
        self._write(self._block_bytes_out(ROOT_INDEX_MAGIC, bytes(meta_index), -1))
        info = self._file_info
        info[LAST_KEY] = struct.pack(">h", len(self._last_key)) + self._last_key if self._last_key else b""
        info[AVG_KEY_LEN] = struct.pack(">i", self._key_bytes // self._entries if self._entries else 0)
        info[CREATE_TIME_TS] = struct.pack(">q", self.creation_time_ms)
        info[AVG_VALUE_LEN] = struct.pack(">i", self._value_bytes // self._entries if self._entries else 0)
        info.setdefault(KEY_VALUE_VERSION, struct.pack(">i", 1))
        pairs = b"".join(
            _field(1, _field(1, name.encode("utf-8")) + _field(2, info[name])) for name in java_hashmap_order(info)
        )
        file_info_offset = self._write(
            self._block_bytes_out(FILE_INFO_MAGIC, PROTOBUF_MAGIC + varint(len(pairs)) + pairs, -1)
        )
        proto = b"".join([
            _field(T_FILE_INFO_OFFSET, file_info_offset),
            _field(T_LOAD_ON_OPEN_OFFSET, load_on_open),
            _field(T_UNCOMPRESSED_DATA_INDEX_SIZE, self._data_bytes),  # as Hudi's writer fills it
            _field(T_DATA_INDEX_COUNT, len(self._index)),
            _field(T_META_INDEX_COUNT, len(self._meta)),
            _field(T_ENTRY_COUNT, self._entries),
            _field(T_NUM_DATA_INDEX_LEVELS, 1),
            _field(T_FIRST_DATA_BLOCK_OFFSET, self._first_data),
            _field(T_LAST_DATA_BLOCK_OFFSET, self._last_data),
            _field(T_COMPARATOR_CLASS_NAME, COMPARATOR.encode("ascii")),
            _field(T_COMPRESSION_CODEC, self.codec),
        ])
        trailer = TRAILER_MAGIC + varint(len(proto)) + proto
        if len(trailer) > TRAILER_SIZE - 1:
            raise ValueError("HFile trailer does not fit its 4096 bytes")
        self._write(trailer + bytes(TRAILER_SIZE - 1 - len(trailer)) + b"\x03")
        return bytes(self._out)


def write_hfile(cells: Iterable[tuple[bytes | str, bytes]], *, file_info: dict[str, bytes] | None = None,
                meta: dict[str, bytes] | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                codec: int = CODEC_NONE, creation_time_ms: int | None = None) -> bytes:
    """An HFile of `cells` (in key order), with `file_info` and `meta` values by name."""
    writer = HFileWriter(block_size, codec, creation_time_ms)
    for name, value in (file_info or {}).items():
        writer.append_file_info(name, value)
    for name, value in (meta or {}).items():
        writer.append_meta(name, value)
    writer.extend(cells)
    return writer.finish()


__all__ = ["COMPARATOR", "DEFAULT_BLOCK_SIZE", "HFileWriter", "hadoop_vlong", "java_hashmap_order", "varint", "write_hfile"]
