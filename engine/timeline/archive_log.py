"""The archived timeline: `.hoodie/archived/.commits_.archive.<N>_1-0-1` log files (Hudi 0.14, table v6).

Hudi's archiver (HoodieTimelineArchiver) appends instants it removes from the active timeline to
a Hudi log file (fileId `commits`, base instant "", extension `.archive`, write token `1-0-1`).
Each batch is one AVRO data block (HoodieAvroDataBlock) of HoodieArchivedMetaEntry records:

    "#HUDI#"  int64 length of the rest of the block (from the version to the trailing size, inclusive)
    int32 format version (1)   int32 block type (AVRO = 3)
    header:   int32 count, per entry int32 key, int32 length, UTF-8 bytes   (only SCHEMA = 2)
    int64 content length, content:
              int32 version (3), int32 record count, per record int32 length + Avro binary datum
    footer:   same form as the header (empty: count 0)
    int64 block size trailer: the bytes written before it, magic included (so the block's
          byte length minus 8); HoodieLogFileReader checks trailer - 6 == the length field

All integers are big-endian. Pure functions: bytes in, bytes or records out.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro

from engine.errors import CorruptTableError, InvalidInputError
from engine.table.commit_metadata import CommitMetadata
from engine.timeline.avro_models import commit_metadata_to_avro, parsed_schema, schema_json, validate_record
from engine.timeline.instant import Action

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


ARCHIVED_ENTRY = "HoodieArchivedMetaEntry"
ARCHIVE_WRITE_TOKEN = "1-0-1"  # HoodieLogFile default (unknown) write token
_ARCHIVE_NAME_RE = re.compile(r"^\.commits_\.archive\.(\d+)_(.+)$")


def archive_file_name(version: int) -> str:
    """`.commits_.archive.<version>_1-0-1`, the name of archive log file number `version` (from 1)."""
    if version < 1:
        raise InvalidInputError(f"archive file versions start at 1, got {version}")
    return f".commits_.archive.{version}_{ARCHIVE_WRITE_TOKEN}"


def parse_archive_file_name(name: str) -> int | None:
    """The version of an archive log file name; None for any other name (e.g. the merge plan)."""
    match = _ARCHIVE_NAME_RE.match(name)
    return int(match.group(1)) if match else None


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


def archive_schema_header() -> str:
    """The SCHEMA header of archive blocks: HoodieArchivedMetaEntry's schema as compact JSON."""
    return json.dumps(schema_json(ARCHIVED_ENTRY), separators=(",", ":"))


def encode_archive_block(entries: list[dict[str, Any]]) -> bytes:
    """One AVRO data block of HoodieArchivedMetaEntry records, header {SCHEMA}, empty footer.

    Hudi's archiver (`writeToFile`) sets only the SCHEMA header key.
    """
    if not entries:
        raise InvalidInputError("an archive block needs at least one entry")
    for entry in entries:
        validate_record(ARCHIVED_ENTRY, entry)
    content = encode_avro_content(entries, parsed_schema(ARCHIVED_ENTRY))
    return encode_log_block(BlockType.AVRO_DATA, {HeaderKey.SCHEMA: archive_schema_header()}, content)


def decode_archive_file(data: bytes) -> list[dict[str, Any]]:
    """All HoodieArchivedMetaEntry records of an archive log file, block by block, in order."""
    entries: list[dict[str, Any]] = []
    for block in decode_log_blocks(data):
        entries.extend(decode_avro_content(block, parsed_schema(ARCHIVED_ENTRY)))
    return entries


# Which HoodieArchivedMetaEntry field carries each completed action's metadata
# (MetadataConversionUtils.createMetaWrapper).
_METADATA_FIELD = {
    Action.COMMIT: "hoodieCommitMetadata",
    Action.DELTA_COMMIT: "hoodieCommitMetadata",
    Action.CLEAN: "hoodieCleanMetadata",
    Action.ROLLBACK: "hoodieRollbackMetadata",
    Action.SAVEPOINT: "hoodieSavePointMetadata",
}


def archived_entry(
    instant_time: str,
    action: Action | str,
    state: str,
    metadata: CommitMetadata | Mapping[str, Any] | None,
    state_transition_time: str | None = None,
) -> dict[str, Any]:
    """A HoodieArchivedMetaEntry for a completed instant, as Hudi 0.14's archiver builds it.

    `metadata`: our CommitMetadata for commit/deltacommit; the Avro record (HoodieCleanMetadata,
    HoodieRollbackMetadata, HoodieSavepointMetadata) for clean/rollback/savepoint; None for an
    instant whose completed file is empty (`createMetaWrapperForEmptyInstant`). `actionState` is
    the state name ("COMPLETED"); `version` stays null because Hudi builds the entry with the Avro
    no-arg constructor. `stateTransitionTime` is the instant's completion time when known.

    Restore instants are refused: Hudi 0.14 never archives them (the archiver selects only
    clean/rollback and completed write instants, and createMetaWrapper has no restore case, it
    throws UnsupportedOperationException); they stay on the active timeline.
    """
    act = Action(action)
    if act not in _METADATA_FIELD:
        raise InvalidInputError(f"Hudi 0.14 does not archive {act.value} instants")
    entry: dict[str, Any] = {f["name"]: None for f in schema_json(ARCHIVED_ENTRY)["fields"]}
    entry |= {
        "commitTime": instant_time,
        "actionType": act.value,
        "actionState": state.upper(),
        "version": None,
        "stateTransitionTime": state_transition_time,
    }
    field_name = _METADATA_FIELD[act]
    if metadata is not None:
        if isinstance(metadata, CommitMetadata):
            if field_name != "hoodieCommitMetadata":
                raise InvalidInputError(f"{act.value} metadata must be an Avro record, not CommitMetadata")
            entry[field_name] = commit_metadata_to_avro(metadata)
        else:
            if field_name == "hoodieCommitMetadata":
                raise InvalidInputError(f"{act.value} metadata must be a CommitMetadata")
            entry[field_name] = dict(metadata)
    validate_record(ARCHIVED_ENTRY, entry)
    return entry
