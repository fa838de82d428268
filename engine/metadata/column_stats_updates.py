"""The column_stats partition's share of a metadata deltacommit, as Apache Hudi 1.x derives it
(`HoodieTableMetadataUtil.convertFilesToColumnStatsRecords`): the columns the index definition
names (`sourceFields`), ranged in every file a write adds (base files from their footers, log
files from their records: `engine.metadata.column_stats`), and a tombstone per column for every
file a clean or rollback deletes.

Kept only where this engine can keep it exactly (`indexed_columns`): an index definition of
version V2 naming its columns, each a column of the table of a type Hudi's V2 statistics cover.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa

from engine.data.base_file import read_parquet_metadata
from engine.data.file_names import parse_log_file_name
from engine.data.log_block import BlockType, HeaderKey, decode_data_block
from engine.data.log_file import read_log_blocks
from engine.errors import CorruptTableError, SchemaMismatchError
from engine.metadata import column_stats as cs
from engine.metadata import index_defs
from engine.metadata import records as mdr
from engine.schema.avro_types import avro_to_arrow
from engine.storage import Storage
from engine.table.meta_client import MetaClient

DATA_BLOCKS = (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.HFILE_DATA)


def indexed_columns(meta: MetaClient) -> tuple[list[str] | None, str]:
    """The columns the column_stats index covers, or None and why this engine cannot keep it."""
    definition = index_defs.definitions(meta).get(mdr.COLUMN_STATS)
    if not isinstance(definition, Mapping):
        return None, "no index definition names its columns"
    if str(definition.get("version") or "").upper() != "V2":
        return None, f"index version {definition.get('version') or 'V1'} (this engine keeps V2)"
    columns = [str(c) for c in definition.get("sourceFields") or []]
    if not columns:
        return None, "its index definition names no columns"
    if any("." in c for c in columns):
        return None, "nested columns are not kept yet"
    return columns, ""


def _log_table(storage: Storage, path: str) -> pa.Table:
    tables = []
    for block in read_log_blocks(storage, path):
        if block.block_type not in DATA_BLOCKS:
            continue
        try:
            schema = avro_to_arrow(block.header[HeaderKey.SCHEMA])
        except (KeyError, SchemaMismatchError) as exc:
            raise CorruptTableError(f"{storage.uri(path)}: data block at {block.offset} without a readable schema") from exc
        tables.append(decode_data_block(block, schema))
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 else tables[0]


def file_ranges(storage: Storage, partition: str, name: str, columns: Iterable[str]) -> list[cs.ColumnRange]:
    """The ranges of `columns` in the data file `name` of `partition` (a base or a log file)."""
    path = f"{partition}/{name}" if partition else name
    if parse_log_file_name(name) is not None:
        return cs.arrow_ranges(_log_table(storage, path), name, columns)
    metadata = read_parquet_metadata(storage, path)
    try:
        return cs.parquet_ranges(metadata, name, columns)
    except cs.UnsupportedColumn as exc:
        raise CorruptTableError(f"{storage.uri(path)}: {exc}") from exc


def written_records(meta: MetaClient, columns: list[str], files: Mapping[str, Iterable[str]]) -> list[mdr.Record]:
    """column_stats records of the files a write added (partition -> file names)."""
    out = []
    for partition, names in files.items():
        for name in sorted(set(names)):
            out += cs.records_of(partition, file_ranges(meta.storage, partition, name, columns))
    return out


def deleted_records(columns: list[str], files: Mapping[str, Iterable[str]]) -> list[mdr.Record]:
    """Tombstones for the files a clean or rollback deleted (partition -> file names)."""
    return [cs.tombstone(partition, name, column)
            for partition, names in files.items() for name in sorted(set(names)) for column in columns]


__all__ = ["deleted_records", "file_ranges", "indexed_columns", "written_records"]
