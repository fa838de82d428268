"""HFILE log data blocks (HoodieHFileDataBlock): the block's content is a whole HFile
(`engine.data.hfile`) whose cells map each record key (the row) to the record, Avro binary
written with the block's SCHEMA header. Pure: bytes in, records out
(`engine.data.log_block` reads the block around them).

The writer empties a field named `key` in each record (HoodieHFileDataBlock.serializeRecord
truncates HoodieAvroHFileReader's KEY_FIELD_NAME, the metadata table's key field, "to avoid
duplicating the key w/in payload"), whatever the table's record key field is; the reader puts
the cell's key back where that field is an empty string (HoodieAvroHFileReaderImplBase.deserialize).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Collection
from typing import Any

import fastavro

from engine.data.hfile import HFileReader, UnsupportedHFileError, read_hfile_cells
from engine.errors import CorruptTableError, UnsupportedFeatureError

KEY_FIELD = "key"  # HoodieAvroHFileReader.KEY_FIELD_NAME


def decode_value(value: bytes, schema: Any, memo: dict[bytes, dict] | None,
                 shared: Callable[[dict], bool] | None) -> Any:
    """One cell's Avro record. With `memo`, a value decoded before gives a shallow copy of that
    record when `shared` says records like it may be shared so (a record-index location: every
    key written to one file group at one instant has the same value)."""
    template = memo.get(value) if memo is not None else None
    if template is not None:
        return dict(template)
    record = fastavro.schemaless_reader(io.BytesIO(value), schema, None)
    if memo is not None and shared is not None and isinstance(record, dict) and shared(record):
        memo[value] = record
        return dict(record)
    return record


def decode_hfile_content(
    content: bytes, writer_schema: Any, offset: int, keys: Collection[bytes] | None = None,
    shared: Callable[[dict], bool] | None = None,
) -> list[dict[str, Any]]:
    """The records of an HFILE data block (its `content`, the parsed Avro `writer_schema` of its
    SCHEMA header, its `offset` in the log file for messages), in key order, with an empty `key`
    field given back its cell's key (as Apache Hudi and hudi-rs read them); only those whose
    cell key is among `keys`, when given (found through the HFile's index: the data blocks that
    cannot hold them are not read, the records of other keys not decoded).
    A malformed HFile raises CorruptTableError; one in a codec or layout not read (only the
    uncompressed and GZ version 3 files Hudi writes are), UnsupportedFeatureError."""
    where = f"log block at offset {offset}"
    try:
        if keys is not None:
            reader = HFileReader(content)
            if len(keys) * 8 < reader.entry_count:  # a few keys: through the index, only their blocks read
                found = reader.lookup(keys)
                cells = [(key, value) for key in sorted(found) for value in found[key]]
            else:  # many: every cell read once, only theirs decoded
                cells = [(key, value) for key, value in reader.cells() if key in keys]
        else:
            cells = read_hfile_cells(content)
    except UnsupportedHFileError as exc:
        raise UnsupportedFeatureError(f"{where}: HFILE block: {exc}") from exc
    except ValueError as exc:
        raise CorruptTableError(f"{where}: HFILE content: {exc}") from exc
    records: list[dict[str, Any]] = []
    memo: dict[bytes, dict] | None = {} if shared is not None else None
    for i, (key, value) in enumerate(cells):
        try:
            record: Any = decode_value(value, writer_schema, memo, shared)
        except Exception as exc:
            raise CorruptTableError(
                f"{where}: HFILE record {i} does not decode: {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(record, dict) and record.get(KEY_FIELD) == "":
            try:
                record[KEY_FIELD] = key.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptTableError(f"{where}: HFILE record {i} has a key that is not UTF-8") from exc
        records.append(record)
    return records


__all__ = ["decode_hfile_content", "decode_value"]
