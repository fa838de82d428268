"""Task-side CDC logging: the `.cdc` log file Apache Hudi's `HoodieCDCLogger` leaves beside a file
group a write rewrites (tables with `hoodie.table.cdc.enabled=true`). No Spark here.

One file per rewritten file group, `.<fileId>_<instant>.log.1_<writeToken>.cdc` in the group's
partition, holding one CDC_DATA block (header INSTANT_TIME and SCHEMA, content as an AVRO data
block's) of the records the table's logging mode keeps: `op` (`i`, `u`, `d`) and the record key,
or the key and the image before, or the commit time and both images. Images are the data columns
(no meta fields), as `HoodieCDCLogger.removeCommitMetadata` leaves them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import fastavro
import numpy as np
import pyarrow as pa

from engine.config.cdc import AFTER, BEFORE, OP, RECORD_KEY, TS_MS, CdcMode, cdc_log_schema
from engine.config.table_config import TableConfig
from engine.data.avro_encode import avro_block_content, encode_datums
from engine.data.file_names import CDC_SUFFIX, LogFileName, join_path
from engine.data.log_block import (
    AVRO_BLOCK_VERSION,
    BlockType,
    HeaderKey,
    encode_avro_content,
    encode_log_block,
)
from engine.data.log_file import write_log_file
from engine.errors import SchemaMismatchError
from engine.schema.avro import arrow_to_avro, avro_to_json, without_meta_fields
from engine.storage import Storage

CDC_LOG_VERSION = 1  # HoodieLogFile.LOGFILE_BASE_VERSION: a new file per write


@dataclass(frozen=True)
class CdcLog:
    """What a task needs to log changes: the mode, the data columns and the block's Avro schema."""

    mode: CdcMode
    data_columns: tuple[str, ...]
    schema_json: str

    @classmethod
    def for_table(cls, mode: CdcMode, data_schema: pa.Schema, table_name: str) -> CdcLog:
        """The CDC log of a table whose data columns (no meta fields) are `data_schema`."""
        avro = cdc_log_schema(mode, arrow_to_avro(data_schema, table_name))
        return cls(mode, tuple(data_schema.names), avro_to_json(avro))

    @classmethod
    def of_table(cls, config: TableConfig, write_schema: pa.Schema) -> CdcLog | None:
        """What a write with `write_schema` (data columns, meta columns or not) logs; None when the
        table has no CDC logging."""
        mode = config.cdc_mode
        if mode is None:
            return None
        return cls.for_table(mode, without_meta_fields(write_schema), config.name)


@dataclass(frozen=True)
class Changes:
    """One rewritten file group's changes: keys and ops in order, and the images the mode keeps
    (structs of the data columns, null where an op has none; None where the mode keeps none)."""

    keys: pa.Array
    ops: pa.Array
    before: pa.Array | None
    after: pa.Array | None

    def __len__(self) -> int:
        return len(self.ops)


def _images(rows: pa.Table, columns: tuple[str, ...]) -> pa.Table:
    """`rows`' data columns (columns the rows lack are null), as a table."""
    arrays = [rows.column(c).combine_chunks() if c in rows.column_names else pa.nulls(rows.num_rows) for c in columns]
    return pa.Table.from_arrays(arrays, names=list(columns))


def _struct(parts: list[tuple[pa.Table, bool]], columns: tuple[str, ...]) -> pa.Array:
    """The images of `parts` in order, each (rows, present): absent parts are null structs."""
    typed = next((p for p, present in parts if present and p.num_columns), None)
    schema = typed.schema if typed is not None else pa.schema([(c, pa.null()) for c in columns])
    tables, valid = [], []
    for rows, present in parts:
        if present:
            tables.append(rows.cast(schema) if rows.schema != schema else rows)
        else:
            tables.append(pa.Table.from_arrays([pa.nulls(rows.num_rows, f.type) for f in schema], schema=schema))
        valid.append(np.full(rows.num_rows, present))
    table = pa.concat_tables(tables)
    arrays = [table.column(i).combine_chunks() for i in range(table.num_columns)]
    mask = pa.array(~np.concatenate(valid) if valid else np.zeros(0, bool))
    return pa.StructArray.from_arrays(arrays, fields=list(schema), mask=mask)


def changes_of(
    log: CdcLog,
    updated: tuple[pa.Table, pa.Table, pa.Array],
    inserted: tuple[pa.Table, pa.Array],
    deleted: tuple[pa.Table, pa.Array],
) -> Changes:
    """The changes of a rewrite: (before rows, after rows, keys) of updates, (rows, keys) of
    inserts and of deletes."""
    ub, ua, uk = updated
    ia, ik = inserted
    db, dk = deleted
    cols = log.data_columns
    keys = pa.concat_arrays([pa.array(k, pa.string()) if not isinstance(k, (pa.Array, pa.ChunkedArray))
                             else (k.combine_chunks() if isinstance(k, pa.ChunkedArray) else k).cast(pa.string())
                             for k in (uk, ik, dk)])
    ops = pa.array(["u"] * len(uk) + ["i"] * len(ik) + ["d"] * len(dk), pa.string())
    before = after = None
    if log.mode is not CdcMode.OP_KEY_ONLY:
        b_u, b_d = _images(ub, cols), _images(db, cols)
        before = _struct([(b_u, True), (_images(ia, cols), False), (b_d, True)], cols)
    if log.mode is CdcMode.DATA_BEFORE_AFTER:
        a_u, a_i = _images(ua, cols), _images(ia, cols)
        after = _struct([(a_u, True), (a_i, True), (_images(db, cols), False)], cols)
    return Changes(keys, ops, before, after)


def cdc_file_name(file_id: str, instant: str, token: str) -> str:
    """The CDC log file a write at `instant` leaves in file group `file_id`."""
    return LogFileName(file_id, instant, CDC_LOG_VERSION, token).name + CDC_SUFFIX


def cdc_records(log: CdcLog, instant: str, changes: Changes) -> pa.Table:
    """The CDC log's records of `changes` as a table in the block's field order."""
    n = len(changes)
    if log.mode is CdcMode.OP_KEY_ONLY:
        return pa.table({OP: changes.ops, RECORD_KEY: changes.keys})
    if log.mode is CdcMode.DATA_BEFORE:
        return pa.table({OP: changes.ops, RECORD_KEY: changes.keys, BEFORE: changes.before})
    return pa.table({OP: changes.ops, TS_MS: pa.array([instant] * n, pa.string()), BEFORE: changes.before,
                     AFTER: changes.after})


def encode_cdc_block(log: CdcLog, instant: str, changes: Changes) -> bytes:
    """The CDC_DATA block of `changes` (`HoodieCDCDataBlock`): encoded a column at a time
    (`engine.data.avro_encode`), or by fastavro a record at a time for types that cannot be."""
    schema = json.loads(log.schema_json)
    records = cdc_records(log, instant, changes)
    datums = encode_datums(records, schema)
    try:
        if datums is not None:
            content = avro_block_content(datums, AVRO_BLOCK_VERSION)
        else:
            content = encode_avro_content(records.to_pylist(maps_as_pydicts="strict"), fastavro.parse_schema(schema))
    except Exception as exc:
        raise SchemaMismatchError(f"CDC records do not fit the CDC log schema: {type(exc).__name__}: {exc}") from exc
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: log.schema_json}
    return encode_log_block(BlockType.CDC_DATA, header, content)


def write_cdc_file(
    storage: Storage, log: CdcLog, partition: str, file_id: str, instant: str, token: str, changes: Changes
) -> tuple[str, int]:
    """Write the group's CDC log file; its table-relative path and size."""
    path = join_path(partition, cdc_file_name(file_id, instant, token))
    size = write_log_file(storage, path, [encode_cdc_block(log, instant, changes)])
    return path, size


__all__ = ["CDC_LOG_VERSION", "CdcLog", "Changes", "cdc_file_name", "cdc_records", "changes_of", "encode_cdc_block",
           "write_cdc_file"]
