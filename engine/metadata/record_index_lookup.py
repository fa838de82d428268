"""Batch lookups in Apache Hudi's record index (the metadata table's `record_index` partition),
vectorized, with the files it has decoded kept for the next lookup.

A lookup of many keys (a RECORD write tags every key of its batch) reads each file of the file
groups the keys hash to (the base HFile, each log file's blocks) and merges them as
`MetadataTableReader.records` does: the base, then the log blocks whose instant counts, in order
(a ROLLBACK command block drops the earlier blocks of its target); a DELETE block resets a key.
Here each file is decoded once into columns (key, partition, file id, instant) and kept, keyed
by its path, size and modification time (a file rewritten under the same name, as an abandoned
deltacommit's log is, is decoded again), in a cache bounded by bytes (`CACHE_BYTES`, least
recently used first out). A lookup then filters each file's columns by the wanted keys
(`pyarrow.compute.is_in`) and keeps each key's last version.

Decoding a file is cheap per record because Apache Hudi's record-index values repeat: every
key written to the same file group at the same instant has the same Avro value (the key lives
in the HFile cell, the value's `key` field is empty), so each distinct value is decoded once.

A lookup of a few keys in a file not decoded yet (fewer than one key per `FEW` entries) reads
only their HFile blocks through the index and decodes nothing else, as before (a one-key read
in a new process costs one block, not the whole index); the file is not kept then.
"""

from __future__ import annotations

import io
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.data import log_file
from engine.data.hfile import HFileReader, UnsupportedHFileError
from engine.data.log_block import BlockType, CommandBlockType, HeaderKey, decode_delete_block
from engine.errors import CorruptTableError, UnsupportedFeatureError
from engine.metadata import record_index as ri
from engine.metadata import records as mdr
from engine.metadata.reader import MetadataSlice, MetadataTableReader

CACHE_BYTES = 512 << 20  # decoded record-index files kept per process
FEW = 64  # fewer wanted keys than entries / FEW: read through the HFile index, decode only theirs
LOCATIONS = pa.schema([("key", pa.string()), ("partition", pa.string()), ("file_id", pa.string())])
# as kept: the locations dictionary-encoded (a file's records name few file groups)
KEPT = pa.schema([("key", pa.string()), ("partition", pa.dictionary(pa.int32(), pa.string())),
                  ("file_id", pa.dictionary(pa.int32(), pa.string()))])


@dataclass(frozen=True)
class Piece:
    """One unit of a record-index file group in merge order: a base HFile, or one log block."""

    instant: str | None  # the block's instant (None: a base file)
    kind: str  # "records", "deletes" or "rollback" (a ROLLBACK command naming `target`)
    target: str | None
    table: pa.Table  # KEPT (deletes: null locations; a rollback: empty)

    @property
    def nbytes(self) -> int:
        return self.table.nbytes


class _Cache:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.items: OrderedDict[tuple, list[Piece]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, stamp: tuple) -> list[Piece] | None:
        with self.lock:
            pieces = self.items.get(stamp)
            if pieces is not None:
                self.items.move_to_end(stamp)
            return pieces

    def put(self, stamp: tuple, pieces: list[Piece]) -> None:
        size = sum(p.nbytes for p in pieces)
        if size > self.limit:
            return
        with self.lock:
            if stamp in self.items:
                return
            self.items[stamp] = pieces
            self.used += size
            while self.used > self.limit and self.items:
                _, gone = self.items.popitem(last=False)
                self.used -= sum(p.nbytes for p in gone)

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.used = 0


CACHE = _Cache(CACHE_BYTES)


def _locations(cells: Iterable[tuple[bytes, bytes]], schema: dict, where: str) -> pa.Table:
    """The (key, partition, file id) of record-index cells (the key is the cell's row), each
    distinct value decoded once."""
    decoded: dict[bytes, tuple[str, str]] = {}
    keys: list[str] = []
    partitions: list[str] = []
    file_ids: list[str] = []
    for row, value in cells:
        location = decoded.get(value)
        if location is None:
            try:
                record = fastavro.schemaless_reader(io.BytesIO(value), schema, None)
            except Exception as exc:
                raise CorruptTableError(f"{where}: record {row!r} does not decode: {exc}") from exc
            info = record.get("recordIndexMetadata") if isinstance(record, dict) else None
            if not isinstance(record, dict) or record.get("type") != mdr.TYPE_RECORD_INDEX or not isinstance(info, dict):
                raise CorruptTableError(f"{where}: record {row!r} is no location")
            loc = ri.decode(info)
            location = decoded[value] = (loc.partition, loc.file_id)
        try:
            keys.append(row.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise CorruptTableError(f"{where}: a record key that is not UTF-8") from exc
        partitions.append(location[0])
        file_ids.append(location[1])
    return pa.table([pa.array(keys, pa.string()), pa.array(partitions, pa.string()).dictionary_encode(),
                     pa.array(file_ids, pa.string()).dictionary_encode()], schema=KEPT)


def _deleted(keys: pa.Array) -> pa.Table:
    """A DELETE block's keys, with no location."""
    nothing = pa.DictionaryArray.from_arrays(pa.nulls(len(keys), pa.int32()), pa.array([], pa.string()))
    return pa.table([keys, nothing, nothing], schema=KEPT)


def _hfile_cells(data: bytes, wanted: pa.Array, where: str) -> tuple[HFileReader, list[tuple[bytes, bytes]], bool]:
    """The HFile's cells: every cell (the third value True), or only those of the `wanted` keys
    when they are few, found through its index."""
    try:
        reader = HFileReader(data)
        if not _few(wanted, reader.entry_count):
            return reader, reader.cells(), True
        found = reader.lookup([k.encode() for k in wanted.to_pylist()])
        return reader, [(k, v) for k in sorted(found) for v in found[k]], False
    except UnsupportedHFileError as exc:
        raise UnsupportedFeatureError(f"{where}: {exc}") from exc
    except (ValueError, KeyError) as exc:
        raise CorruptTableError(f"{where}: not a readable metadata HFile: {exc}") from exc


def _schema(text: str | bytes | None, where: str) -> dict:
    try:
        return fastavro.parse_schema(json.loads(text))  # type: ignore[arg-type, return-value]
    except (TypeError, ValueError) as exc:
        raise CorruptTableError(f"{where}: an HFile without a readable schema") from exc


def _few(wanted: pa.Array, entries: int) -> bool:
    return len(wanted) * FEW < entries


def _base_pieces(reader: MetadataTableReader, path: str, wanted: pa.Array) -> tuple[list[Piece], bool]:
    where = reader.meta.storage.uri(path)
    hfile, cells, whole = _hfile_cells(reader.meta.storage.read_bytes(path), wanted, where)
    table = _locations(cells, _schema(hfile.file_info.get(b"schema"), where), where)
    return [Piece(None, "records", None, table)], whole


def _log_pieces(reader: MetadataTableReader, path: str, wanted: pa.Array) -> tuple[list[Piece], bool]:
    where = reader.meta.storage.uri(path)
    pieces: list[Piece] = []
    whole = True
    for block in log_file.read_log_blocks(reader.meta.storage, path):
        if block.block_type == BlockType.COMMAND:
            if block.header.get(HeaderKey.COMMAND_BLOCK_TYPE) == str(CommandBlockType.ROLLBACK):
                target = block.header.get(HeaderKey.TARGET_INSTANT_TIME)
                pieces.append(Piece(block.instant, "rollback", target, KEPT.empty_table()))
            continue
        if block.block_type == BlockType.HFILE_DATA:
            at = f"{where}: HFILE block at {block.offset}"
            schema = _schema(block.header.get(HeaderKey.SCHEMA), at)
            _, cells, all_cells = _hfile_cells(block.content, wanted, at)
            whole = whole and all_cells
            pieces.append(Piece(block.instant, "records", None, _locations(cells, schema, where)))
        elif block.block_type == BlockType.DELETE:
            keys = decode_delete_block(block).column("key").cast(pa.string()).combine_chunks()
            pieces.append(Piece(block.instant, "deletes", None, _deleted(keys)))
        else:
            raise CorruptTableError(f"{where}: a block of type {block.block_type} in a metadata log file")
    return pieces, whole


def _pieces(reader: MetadataTableReader, path: str, base: bool, wanted: pa.Array) -> list[Piece]:
    stamp = (reader.meta.storage.uri(path), *reader.stamp(path))
    pieces = CACHE.get(stamp) if stamp[1] is not None else None
    if pieces is None:
        pieces, whole = (_base_pieces if base else _log_pieces)(reader, path, wanted)
        if whole and stamp[1] is not None:
            CACHE.put(stamp, pieces)
    return pieces


def lookup_group(reader: MetadataTableReader, sl: MetadataSlice, wanted: pa.Array) -> pa.Table:
    """LOCATIONS of the `wanted` keys (distinct, strings) file group `sl` holds, as of `reader`."""
    ordered: list[Piece] = []
    if sl.base is not None:
        ordered += _pieces(reader, sl.base, True, wanted)
    for path in sl.logs:
        for piece in _pieces(reader, path, False, wanted):
            if piece.kind == "rollback":
                ordered = [p for p in ordered if p.instant is None or p.instant != piece.target]
            elif reader.counts(piece.instant):
                ordered.append(piece)
    tables = [p.table for p in ordered if p.table.num_rows]
    if not tables:
        return LOCATIONS.empty_table()
    merged = pa.concat_tables(tables)  # in merge order; one set lookup over all of them
    hit = merged.filter(pc.is_in(merged.column("key"), value_set=wanted))
    if not hit.num_rows:
        return LOCATIONS.empty_table()
    hit = hit.append_column("row", pa.array(np.arange(hit.num_rows, dtype=np.int64)))
    # each key's last version (deletes: a null location)
    last = hit.group_by("key", use_threads=False).aggregate([("row", "max")])
    found = hit.take(last.column("row_max"))
    found = pa.table([found.column("key"), found.column("partition").cast(pa.string()),
                      found.column("file_id").cast(pa.string())], schema=LOCATIONS)
    return found.filter(pc.is_valid(found.column("file_id")))


__all__ = ["CACHE", "CACHE_BYTES", "KEPT", "LOCATIONS", "Piece", "lookup_group"]
