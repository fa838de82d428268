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
from typing import Any

import fastavro
import pyarrow as pa

from engine.config.cdc import AFTER, BEFORE, OP, RECORD_KEY, TS_MS, CdcMode, cdc_log_schema
from engine.config.table_config import TableConfig
from engine.data.file_names import CDC_SUFFIX, LogFileName, join_path
from engine.data.log_block import BlockType, HeaderKey, encode_avro_content, encode_log_block
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
    """One rewritten file group's changes: keys and ops in order, and the images (data columns;
    None where an op has none)."""

    keys: list[str]
    ops: list[str]
    before: list[dict[str, Any] | None]
    after: list[dict[str, Any] | None]

    def __len__(self) -> int:
        return len(self.ops)


def images(rows: pa.Table, columns: tuple[str, ...]) -> list[dict[str, Any] | None]:
    """`rows`' data columns as Avro-ready records (columns the rows lack are null)."""
    present = [c for c in columns if c in rows.column_names]
    records = rows.select(present).to_pylist(maps_as_pydicts="strict")
    if len(present) == len(columns):
        return list(records)
    return [{c: r.get(c) for c in columns} for r in records]


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
    keep_before = log.mode is not CdcMode.OP_KEY_ONLY
    keep_after = log.mode is CdcMode.DATA_BEFORE_AFTER
    keys = [*uk.to_pylist(), *ik.to_pylist(), *dk.to_pylist()]
    ops = ["u"] * len(uk) + ["i"] * len(ik) + ["d"] * len(dk)
    before: list[dict[str, Any] | None] = [None] * len(ops)
    after: list[dict[str, Any] | None] = [None] * len(ops)
    if keep_before:
        before = [*images(ub, cols), *([None] * len(ik)), *images(db, cols)]
    if keep_after:
        after = [*images(ua, cols), *images(ia, cols), *([None] * len(dk))]
    return Changes([str(k) for k in keys], ops, before, after)


def cdc_file_name(file_id: str, instant: str, token: str) -> str:
    """The CDC log file a write at `instant` leaves in file group `file_id`."""
    return LogFileName(file_id, instant, CDC_LOG_VERSION, token).name + CDC_SUFFIX


def encode_cdc_block(log: CdcLog, instant: str, changes: Changes) -> bytes:
    """The CDC_DATA block of `changes` (`HoodieCDCDataBlock`)."""
    schema = fastavro.parse_schema(json.loads(log.schema_json))
    records: list[dict[str, Any]]
    if log.mode is CdcMode.OP_KEY_ONLY:
        records = [{OP: o, RECORD_KEY: k} for o, k in zip(changes.ops, changes.keys, strict=True)]
    elif log.mode is CdcMode.DATA_BEFORE:
        records = [
            {OP: o, RECORD_KEY: k, BEFORE: b}
            for o, k, b in zip(changes.ops, changes.keys, changes.before, strict=True)
        ]
    else:
        records = [
            {OP: o, TS_MS: instant, BEFORE: b, AFTER: a}
            for o, b, a in zip(changes.ops, changes.before, changes.after, strict=True)
        ]
    try:
        content = encode_avro_content(records, schema)
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


__all__ = ["CDC_LOG_VERSION", "CdcLog", "Changes", "cdc_file_name", "changes_of", "encode_cdc_block", "write_cdc_file"]
