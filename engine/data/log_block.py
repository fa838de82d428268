"""Hudi log blocks (table version 6, log format version 1), bytes in and out: the codec shared by
merge-on-read log files and the archived timeline.

    "#HUDI#"  int64 length of the rest of the block (from the version to the trailing size, inclusive)
    int32 format version (1)   int32 block type
    header:   int32 count, per entry int32 key, int32 length, UTF-8 bytes
    int64 content length, content
    footer:   same form as the header
    int64 block size trailer: the bytes written before it, magic included (so the block's
          byte length minus 8); HoodieLogFileReader checks trailer - 6 == the length field

AVRO data block content (HoodieAvroDataBlock, version 3): int32 version, int32 record count, per
record int32 length + Avro binary datum. All integers are big-endian. Pure functions.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro

from engine.errors import CorruptTableError

MAGIC = b"#HUDI#"


LOG_FORMAT_VERSION = 1


AVRO_BLOCK_VERSION = 3  # HoodieAvroDataBlock: version 3 = records prefixed with their length


class BlockType:
    """HoodieLogBlockType ordinals."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey:
    """HoodieLogBlock.HeaderMetadataType ordinals."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3


@dataclass(frozen=True)
class LogBlock:
    """One block of a Hudi log file, undecoded: where it starts, its type, header, content, footer."""

    offset: int
    block_type: int
    header: dict[int, str]
    content: bytes
    footer: dict[int, str]


def _metadata_bytes(entries: Mapping[int, str]) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for key, value in entries.items():
        raw = value.encode("utf-8")
        out.append(struct.pack(">ii", key, len(raw)))
        out.append(raw)
    return b"".join(out)


def encode_log_block(block_type: int, header: Mapping[int, str], content: bytes,
                     footer: Mapping[int, str] | None = None) -> bytes:
    """One log block in Hudi's format version 1 (HoodieLogFormatWriter.appendBlocks)."""
    body = b"".join([
        struct.pack(">ii", LOG_FORMAT_VERSION, block_type),
        _metadata_bytes(header),
        struct.pack(">q", len(content)),
        content,
        _metadata_bytes(footer or {}),
    ])
    rest_length = len(body) + 8  # the trailing size field is counted here...
    written = len(MAGIC) + 8 + len(body)  # ...but not in itself: it is the bytes written before it
    return MAGIC + struct.pack(">q", rest_length) + body + struct.pack(">q", written)


class _Cursor:
    def __init__(self, data: bytes, pos: int, end: int, block_offset: int) -> None:
        self.data, self.pos, self.end, self.block_offset = data, pos, end, block_offset

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise CorruptTableError(
                f"log block at offset {self.block_offset}: truncated {what} "
                f"(needs {n} bytes at {self.pos}, block ends at {self.end})"
            )
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int32(self, what: str) -> int:
        return int(struct.unpack(">i", self.take(4, what))[0])

    def int64(self, what: str) -> int:
        return int(struct.unpack(">q", self.take(8, what))[0])

    def metadata(self, what: str) -> dict[int, str]:
        count = self.int32(f"{what} count")
        if count < 0:
            raise CorruptTableError(f"log block at offset {self.block_offset}: negative {what} count {count}")
        entries: dict[int, str] = {}
        for _ in range(count):
            key = self.int32(f"{what} key")
            raw = self.take(self.int32(f"{what} length"), f"{what} value")
            try:
                entries[key] = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptTableError(
                    f"log block at offset {self.block_offset}: {what} key {key} is not UTF-8"
                ) from exc
        return entries


def decode_log_blocks(data: bytes) -> list[LogBlock]:
    """Every block of a Hudi log file (format version 1), in order; CorruptTableError with the offset."""
    blocks: list[LogBlock] = []
    pos = 0
    while pos < len(data):
        if data[pos:pos + len(MAGIC)] != MAGIC:
            raise CorruptTableError(f"log block at offset {pos}: missing {MAGIC!r} magic")
        head = _Cursor(data, pos + len(MAGIC), len(data), pos)
        rest_length = head.int64("block length")
        end = head.pos + rest_length
        if rest_length < 8 or end > len(data):
            raise CorruptTableError(
                f"log block at offset {pos}: length {rest_length} runs past the end of the file ({len(data)} bytes)"
            )
        cur = _Cursor(data, head.pos, end, pos)
        version = cur.int32("format version")
        if version != LOG_FORMAT_VERSION:
            raise CorruptTableError(f"log block at offset {pos}: unsupported log format version {version}")
        block_type = cur.int32("block type")
        header = cur.metadata("header")
        content = cur.take(cur.int64("content length"), "content")
        footer = cur.metadata("footer")
        written = cur.int64("block size trailer")
        if cur.pos != end or written != end - pos - 8:
            raise CorruptTableError(
                f"log block at offset {pos}: trailer says {written} bytes before it, "
                f"block has {end - pos - 8} (length field {rest_length})"
            )
        blocks.append(LogBlock(pos, block_type, header, content, footer))
        pos = end
    return blocks


def encode_avro_content(records: list[dict[str, Any]], schema: Any) -> bytes:
    """HoodieAvroDataBlock content, version 3: count, then each record's length and Avro binary datum."""
    out = [struct.pack(">ii", AVRO_BLOCK_VERSION, len(records))]
    for record in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, record)
        datum = buf.getvalue()
        out.append(struct.pack(">i", len(datum)))
        out.append(datum)
    return b"".join(out)


def decode_avro_content(block: LogBlock, reader_schema: Any | None = None) -> list[dict[str, Any]]:
    """The records of an AVRO data block, read with the header's writer schema."""
    if block.block_type != BlockType.AVRO_DATA:
        raise CorruptTableError(f"log block at offset {block.offset}: type {block.block_type}, not AVRO (3)")
    if HeaderKey.SCHEMA not in block.header:
        raise CorruptTableError(f"log block at offset {block.offset}: AVRO block without a SCHEMA header")
    try:
        writer_schema = fastavro.parse_schema(json.loads(block.header[HeaderKey.SCHEMA]))
    except Exception as exc:
        raise CorruptTableError(f"log block at offset {block.offset}: bad SCHEMA header: {exc}") from exc
    cur = _Cursor(block.content, 0, len(block.content), block.offset)
    version = cur.int32("avro block version")
    if version != AVRO_BLOCK_VERSION:
        raise CorruptTableError(f"log block at offset {block.offset}: unsupported AVRO block version {version}")
    count = cur.int32("record count")
    records: list[dict[str, Any]] = []
    for i in range(count):
        datum = cur.take(cur.int32("record length"), f"record {i}")
        try:
            record = fastavro.schemaless_reader(io.BytesIO(datum), writer_schema, reader_schema)
        except Exception as exc:
            raise CorruptTableError(
                f"log block at offset {block.offset}: record {i} does not decode: {type(exc).__name__}: {exc}"
            ) from exc
        records.append(record)  # type: ignore[arg-type]
    if cur.pos != len(block.content):
        raise CorruptTableError(f"log block at offset {block.offset}: {len(block.content) - cur.pos} stray content bytes")
    return records


__all__ = [
    "AVRO_BLOCK_VERSION",
    "LOG_FORMAT_VERSION",
    "MAGIC",
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "decode_avro_content",
    "decode_log_blocks",
    "encode_avro_content",
    "encode_log_block",
]
