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
record int32 length + Avro binary datum. PARQUET data block content: a complete parquet file.
HFILE data block content: a complete HFile (`engine.data.hfile_block`).
DELETE block content: see `engine.data.delete_records`. COMMAND blocks have no content; a
ROLLBACK command names the rolled-back instant in its TARGET_INSTANT_TIME header.
All integers are big-endian. Pure functions: bytes and Arrow tables in and out.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from engine.constants import META_COLUMNS
from engine.data.base_file import conform
from engine.data.delete_records import decode_delete_records, encode_delete_records
from engine.data.hfile_block import decode_hfile_content
from engine.errors import CorruptTableError, InvalidInputError, SchemaMismatchError
from engine.schema.avro import avro_to_arrow
from engine.schema.internal import file_columns, without_versions

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
    COMPACTED_BLOCK_TIMES = 4  # table versions 8, 9: a log compaction's merged block instants
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7  # "true": the block's records carry only some columns (partial updates)


class CommandBlockType:
    """HoodieCommandBlock.HoodieCommandBlockTypeEnum ordinals (the COMMAND_BLOCK_TYPE header value)."""

    ROLLBACK = 0


@dataclass(frozen=True)
class LogBlock:
    """One block of a Hudi log file, undecoded: where it starts, its type, header, content, footer."""

    offset: int
    block_type: int
    header: dict[int, str]
    content: bytes
    footer: dict[int, str]

    @property
    def instant(self) -> str | None:
        """The INSTANT_TIME header: the instant that wrote the block (None when absent)."""
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def is_partial(self) -> bool:
        """IS_PARTIAL is "true": the block's records carry only the columns of its SCHEMA header."""
        return (self.header.get(HeaderKey.IS_PARTIAL) or "").strip().lower() == "true"

    def schema_field_names(self) -> list[str]:
        """The top-level field names of the block's SCHEMA header (CorruptTableError if it has none
        or it is not a record schema)."""
        try:
            fields = json.loads(self.header[HeaderKey.SCHEMA])["fields"]
            return [str(f["name"]) for f in fields]
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptTableError(
                f"log block at offset {self.offset}: no record SCHEMA header ({exc})"
            ) from exc


def _metadata_bytes(entries: Mapping[int, str]) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for key, value in entries.items():
        raw = value.encode("utf-8")
        out.append(struct.pack(">ii", key, len(raw)))
        out.append(raw)
    return b"".join(out)


def encode_log_block(
    block_type: int, header: Mapping[int, str], content: bytes, footer: Mapping[int, str] | None = None
) -> bytes:
    """One log block in Hudi's format version 1 (HoodieLogFormatWriter.appendBlocks)."""
    body = b"".join(
        [
            struct.pack(">ii", LOG_FORMAT_VERSION, block_type),
            _metadata_bytes(header),
            struct.pack(">q", len(content)),
            content,
            _metadata_bytes(footer or {}),
        ]
    )
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
        chunk = self.data[self.pos : self.pos + n]
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


def _decode_block(data: bytes, pos: int) -> tuple[LogBlock, int]:
    """The block whose magic is at `pos` and the offset just past it; CorruptTableError if malformed."""
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
    return LogBlock(pos, block_type, header, content, footer), end


def decode_log_blocks(data: bytes) -> list[LogBlock]:
    """Every block of a Hudi log file (format version 1), in order; CorruptTableError with the offset.

    Strict: any malformed block raises (the archived timeline reads this way). Merge-on-read log
    files are read with `scan_log_blocks`, which skips corrupt blocks as Apache Hudi does."""
    blocks: list[LogBlock] = []
    pos = 0
    while pos < len(data):
        if data[pos : pos + len(MAGIC)] != MAGIC:
            raise CorruptTableError(f"log block at offset {pos}: missing {MAGIC!r} magic")
        block, pos = _decode_block(data, pos)
        blocks.append(block)
    return blocks


def corrupt_reason(read_at: Callable[[int, int], bytes], size: int, pos: int) -> str | None:
    """Why the block whose magic is at `pos` is corrupt by HoodieLogFileReader.isBlockCorrupt's
    checks, or None when it passes them: its length field is cut off or runs past the end of
    the file, the size trailer at the end it names disagrees with it, or what follows it is
    neither the end of the file (or less than a magic's worth of bytes) nor the next magic.
    `read_at(n, offset)` reads the file (of `size` bytes); two small reads at most."""
    start = pos + len(MAGIC)
    if start + 8 > size:
        return f"length field cut off ({size} bytes)"
    (rest_length,) = struct.unpack(">q", read_at(8, start))
    end = start + 8 + rest_length
    if rest_length < 8 or end > size:
        return f"length {rest_length} runs past the end of the file ({size} bytes)"
    tail = read_at(min(8 + len(MAGIC), size - (end - 8)), end - 8)
    (written,) = struct.unpack(">q", tail[:8])
    if written - len(MAGIC) != rest_length:
        return f"length {rest_length} disagrees with the size trailer ({written} bytes before it)"
    following = tail[8:]
    if len(following) == len(MAGIC) and following != MAGIC:
        return "no magic after its size trailer"
    return None


def scan_log_blocks(data: bytes) -> tuple[list[LogBlock], list[tuple[int, str]]]:
    """The readable blocks of a merge-on-read log file, in order, as HoodieLogFileReader reads them,
    and the corrupt blocks it skips as (offset, reason).

    A block that fails `corrupt_reason`'s checks (a writer that died mid-block, a torn tail)
    is a HoodieCorruptBlock, which the log scanners skip: it spans from its magic to the next
    magic after it (or the end of the file), and reading resumes at that magic. Fewer than six
    bytes after the last block are a magic cut short and end the file. A file that does not start
    with the magic, and a block that passes those checks but does not parse (bad version, header
    or content lengths that disagree with its length), raise CorruptTableError as before: Apache
    Hudi fails on those too.
    """
    blocks: list[LogBlock] = []
    skipped: list[tuple[int, str]] = []
    pos = 0
    while len(data) - pos >= len(MAGIC):
        if data[pos : pos + len(MAGIC)] != MAGIC:
            raise CorruptTableError(f"log block at offset {pos}: missing {MAGIC!r} magic")
        reason = corrupt_reason(lambda n, at: data[at : at + n], len(data), pos)
        if reason is None:
            block, pos = _decode_block(data, pos)
            blocks.append(block)
            continue
        found = data.find(MAGIC, pos + len(MAGIC))
        end = found if found >= 0 else len(data)
        skipped.append((pos, reason))
        pos = end
    return blocks, skipped


def decode_block_head(data: bytes, offset: int = 0) -> tuple[int, int, dict[int, str]] | None:
    """(byte length, type, header) of the block at the start of `data`, which may stop anywhere after
    the header: what a reader needs to list a file's blocks without their content. None when `data`
    ends inside the header (read more and call again). `offset` (the block's place in its file)
    only names it in errors."""
    if len(data) < len(MAGIC) + 8:
        return None
    if data[: len(MAGIC)] != MAGIC:
        raise CorruptTableError(f"log block at offset {offset}: missing {MAGIC!r} magic")
    (rest_length,) = struct.unpack(">q", data[len(MAGIC) : len(MAGIC) + 8])
    if rest_length < 8:
        raise CorruptTableError(f"log block at offset {offset}: bad block length {rest_length}")
    total = len(MAGIC) + 8 + rest_length
    cur = _Cursor(data, len(MAGIC) + 8, min(len(data), total), offset)
    try:
        version = cur.int32("format version")
        if version != LOG_FORMAT_VERSION:
            raise CorruptTableError(f"log block at offset {offset}: unsupported log format version {version}")
        block_type = cur.int32("block type")
        header = cur.metadata("header")
    except CorruptTableError:
        if len(data) < total:
            return None  # cut by the caller's read, not by the file
        raise
    return total, block_type, header


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


def header_writer_schema(block: LogBlock, kind: str) -> Any:
    """The parsed Avro writer schema of a `kind` data block's SCHEMA header (CorruptTableError
    naming the block when it is missing or unreadable)."""
    if HeaderKey.SCHEMA not in block.header:
        raise CorruptTableError(f"log block at offset {block.offset}: {kind} block without a SCHEMA header")
    try:
        return fastavro.parse_schema(json.loads(block.header[HeaderKey.SCHEMA]))
    except Exception as exc:
        raise CorruptTableError(f"log block at offset {block.offset}: bad SCHEMA header: {exc}") from exc


def decode_avro_content(block: LogBlock, reader_schema: Any | None = None) -> list[dict[str, Any]]:
    """The records of an AVRO data block (or a CDC data block, whose content is an AVRO block's),
    read with the header's writer schema."""
    if block.block_type not in (BlockType.AVRO_DATA, BlockType.CDC_DATA):
        raise CorruptTableError(f"log block at offset {block.offset}: type {block.block_type}, not AVRO (3)")
    writer_schema = header_writer_schema(block, "AVRO" if block.block_type == BlockType.AVRO_DATA else "CDC")
    cur = _Cursor(block.content, 0, len(block.content), block.offset)
    version = cur.int32("avro block version")
    if version != AVRO_BLOCK_VERSION:
        raise CorruptTableError(
            f"log block at offset {block.offset}: unsupported AVRO block version {version}"
        )
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
        raise CorruptTableError(
            f"log block at offset {block.offset}: {len(block.content) - cur.pos} stray content bytes"
        )
    return records


# ----------------------------------------------------------------------------- command blocks


def encode_rollback_block(instant: str, target: str) -> bytes:
    """A ROLLBACK command block: `instant` (the rollback) undoes the blocks `target` wrote.

    Header in the order Apache Hudi's rollback writer left it in the samples: INSTANT_TIME,
    COMMAND_BLOCK_TYPE "0", TARGET_INSTANT_TIME; no content, empty footer (105 bytes in all).
    """
    header = {
        HeaderKey.INSTANT_TIME: instant,
        HeaderKey.COMMAND_BLOCK_TYPE: str(CommandBlockType.ROLLBACK),
        HeaderKey.TARGET_INSTANT_TIME: target,
    }
    return encode_log_block(BlockType.COMMAND, header, b"")


# ----------------------------------------------------------------------------- delete blocks


def encode_delete_block(
    instant: str,
    keys: Sequence[str],
    partitions: Sequence[str | None],
    schema_json: str | None,
    ordering: pa.Array | None = None,
) -> bytes:
    """A DELETE block (version 3 `HoodieDeleteRecordList`) of `keys`, each in its partition.

    Header INSTANT_TIME, then SCHEMA (the writer schema, as data blocks carry it) when given.
    Every entry carries IntWrapper(0), the natural-order delete Spark SQL's DELETE writes, unless
    `ordering` gives a value per key (tests use it to write the other wrappers Hudi writes).
    """
    header = {HeaderKey.INSTANT_TIME: instant}
    if schema_json is not None:
        header[HeaderKey.SCHEMA] = schema_json
    try:
        content = encode_delete_records(keys, partitions, ordering)
    except ValueError as exc:
        raise InvalidInputError(f"cannot write a delete block: {exc}") from exc
    return encode_log_block(BlockType.DELETE, header, content)


def decode_delete_block(block: LogBlock) -> pa.Table:
    """The entries of a DELETE block: columns `key`, `partition`, `ordering_kind`, `ordering`.

    See `engine.data.delete_records.decode_delete_records` for the ordering columns (typed when
    every row shares one wrapper kind). Kryo blocks (versions 1, 2) raise CorruptTableError.
    """
    if block.block_type != BlockType.DELETE:
        raise CorruptTableError(
            f"log block at offset {block.offset}: type {block.block_type}, not DELETE (1)"
        )
    try:
        return decode_delete_records(block.content)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptTableError(f"log block at offset {block.offset}: {exc}") from exc


# ----------------------------------------------------------------------------- data blocks


def _data_header(instant: str, table: pa.Table, writer_schema_json: str) -> dict[int, str]:
    if tuple(table.column_names[: len(META_COLUMNS)]) != META_COLUMNS:
        raise InvalidInputError(
            f"log block records must carry the meta columns {', '.join(META_COLUMNS)} first, "
            f"got {table.column_names[: len(META_COLUMNS)]}"
        )
    return {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: writer_schema_json}


def encode_parquet_block(
    instant: str, table: pa.Table, writer_schema_json: str, compression: str = "snappy"
) -> bytes:
    """A PARQUET data block: header INSTANT_TIME + SCHEMA (the writer schema with the meta fields),
    content a complete parquet file of `table` in one row group.

    `table` holds the records as they are to be read back: the five meta columns first, with
    `_hoodie_file_name` the bare file id (what Hudi writes in log records).
    """
    header = _data_header(instant, table, writer_schema_json)
    table = table.replace_schema_metadata(without_versions(table.schema).metadata)
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, table.schema, compression=compression, store_schema=False) as writer:
        writer.write_table(table, row_group_size=max(1, table.num_rows))
    return encode_log_block(BlockType.PARQUET_DATA, header, buf.getvalue())


def encode_avro_data_block(instant: str, table: pa.Table, writer_schema_json: str) -> bytes:
    """An AVRO data block (content version 3) of `table`'s rows, written with the writer schema.

    Same header and record conventions as `encode_parquet_block`. The writer schema must hold every
    column (Avro binary has no field names); values are converted as fastavro converts Python
    values (datetimes for timestamps, Decimals for decimals, dicts for maps).
    """
    header = _data_header(instant, table, writer_schema_json)
    try:
        schema = fastavro.parse_schema(json.loads(writer_schema_json))
    except Exception as exc:
        raise SchemaMismatchError(f"bad writer schema for an AVRO block: {exc}") from exc
    records = table.to_pylist(maps_as_pydicts="strict")
    try:
        content = encode_avro_content(records, schema)
    except Exception as exc:
        raise SchemaMismatchError(
            f"records do not fit the writer schema: {type(exc).__name__}: {exc}"
        ) from exc
    return encode_log_block(BlockType.AVRO_DATA, header, content)


_UNSUPPORTED_DATA = {BlockType.CDC_DATA: "CDC", BlockType.CORRUPT: "CORRUPT"}


def decode_data_block(block: LogBlock, schema: pa.Schema) -> pa.Table:
    """The records of a PARQUET, AVRO or HFILE data block, conformed to `schema` (by column name:
    the block's other columns are dropped, a column it lacks comes back as nulls, types are cast
    to `schema`'s; by column id when `schema` carries the table's internal schema versions). CDC
    blocks raise CorruptTableError ("unsupported")."""
    wanted = _stored_names(schema, block.instant)
    if block.block_type == BlockType.PARQUET_DATA:
        try:
            pf = pq.ParquetFile(pa.BufferReader(block.content))
            present = set(pf.schema_arrow.names)
            table = pf.read(columns=[n for n in wanted if n in present])
        except (pa.ArrowInvalid, OSError) as exc:
            raise CorruptTableError(
                f"log block at offset {block.offset}: PARQUET content does not read: {exc}"
            ) from exc
    elif block.block_type == BlockType.AVRO_DATA:
        table = _records_table(block, decode_avro_content(block), wanted)
    elif block.block_type == BlockType.HFILE_DATA:
        records = decode_hfile_content(block.content, header_writer_schema(block, "HFILE"), block.offset)
        table = _records_table(block, records, wanted)
    else:
        name = _UNSUPPORTED_DATA.get(block.block_type, f"type {block.block_type}")
        raise CorruptTableError(f"log block at offset {block.offset}: {name} data blocks are unsupported")
    try:
        return conform(table, schema, block.instant)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise CorruptTableError(
            f"log block at offset {block.offset}: records do not convert to the table schema: {exc}"
        ) from exc


def _stored_names(schema: pa.Schema, instant: str | None) -> list[str]:
    """The names the block written at `instant` holds `schema`'s columns under."""
    sources = file_columns(schema, instant)
    if sources is None:
        return list(schema.names)
    return [s for n in schema.names if (s := sources.get(n, n)) is not None]


def _records_table(block: LogBlock, records: list[dict[str, Any]], names: list[str]) -> pa.Table:
    """Decoded Avro records of a block as Arrow (the columns `names`), in the block's SCHEMA
    header's types."""
    try:
        written = avro_to_arrow(block.header[HeaderKey.SCHEMA])
    except SchemaMismatchError as exc:
        raise CorruptTableError(f"log block at offset {block.offset}: SCHEMA header: {exc}") from exc
    wanted = pa.schema([f for f in written if f.name in set(names)])
    try:
        return pa.Table.from_pylist(records, schema=wanted)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise CorruptTableError(
            f"log block at offset {block.offset}: AVRO records do not convert: {exc}"
        ) from exc


__all__ = [
    "AVRO_BLOCK_VERSION",
    "LOG_FORMAT_VERSION",
    "MAGIC",
    "BlockType",
    "CommandBlockType",
    "HeaderKey",
    "LogBlock",
    "decode_avro_content",
    "decode_block_head",
    "decode_data_block",
    "decode_delete_block",
    "corrupt_reason",
    "decode_log_blocks",
    "encode_avro_content",
    "encode_avro_data_block",
    "encode_delete_block",
    "encode_log_block",
    "encode_parquet_block",
    "encode_rollback_block",
    "scan_log_blocks",
]
