"""Indexes: the contract (`Index`) and its implementations, chosen by `IndexType`.

The Spark-facing symbols load lazily, so pure submodules (e.g. `engine.index.bloom_filter`,
used inside write tasks) can be imported without pulling in pyspark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.columns import FILE_ID_COL  # the column `tag_location` adds (re-exported)
from engine.config.table_config import IndexType, TableConfig
from engine.config.write_config import WriteConfig
from engine.errors import InvalidConfigError
from engine.table.create import DEFAULT_INDEX, VIRTUAL_KEY_INDEXES, require_index_available

if TYPE_CHECKING:
    from engine.index.base import Index, TagContext
    from engine.table.meta_client import MetaClient


def index_for(
    index_type: IndexType, options: Mapping[str, str] | None = None, table_name: str | None = None
) -> Index:
    """The index implementation for `index_type` (InvalidConfigError if this version lacks it).

    `options` are the index's own settings (e.g. `hoodie.index.hbase.*`, `hoodie.record.index.*`); `table_name` names
    per-table resources (the HBase table `hudi_index_<name>`).
    """
    require_index_available(index_type)
    if index_type is IndexType.HBASE:
        from engine.index.hbase import HBaseIndex

        return HBaseIndex(options, table_name=table_name)
    if index_type is IndexType.RECORD:
        from engine.index.record import RecordIndex

        return RecordIndex(options)
    from engine.index.bloom import BloomIndex, GlobalBloomIndex
    from engine.index.simple import GlobalSimpleIndex, SimpleIndex

    implementations: dict[IndexType, type[Index]] = {
        IndexType.SIMPLE: SimpleIndex,
        IndexType.GLOBAL_SIMPLE: GlobalSimpleIndex,
        IndexType.BLOOM: BloomIndex,
        IndexType.GLOBAL_BLOOM: GlobalBloomIndex,
    }
    return implementations[index_type]()


def resolve_index(table: TableConfig, write: WriteConfig, meta: MetaClient | None = None) -> Index:
    """The one way the engine picks a table's index (writes, reads by key, table services): the
    write's `hoodie.index.type`, else the table's, else the default (`write_index_type`). RECORD
    on a table (`meta`) whose metadata table keeps Apache Hudi's record index is that index
    (`engine.index.metadata_record`), not this engine's own files."""
    itype = write_index_type(table, write.index_type)
    if itype is IndexType.RECORD and meta is not None:
        from engine.index import metadata_record

        if metadata_record.named(meta):  # when it cannot answer, lookups read the data files
            return metadata_record.MetadataRecordIndex(dict(write.index_options))
    return index_for(itype, dict(write.index_options), table.name)


def write_index_type(config: TableConfig, requested: str | None) -> IndexType:
    """The index type a write uses: `requested` (the write's `hoodie.index.type`), else the table's,
    else the default (SIMPLE for a table without meta fields, whose files carry no bloom filter); a
    table without meta fields takes SIMPLE or GLOBAL_SIMPLE only: Hudi writes its files without
    bloom filter or key range."""
    virtual = not config.populate_meta_fields
    named = requested or (config.index_type.value if config.index_type is not None else None)
    itype = IndexType.parse(named) if named else (IndexType.SIMPLE if virtual else DEFAULT_INDEX)
    if virtual and itype not in VIRTUAL_KEY_INDEXES:
        raise InvalidConfigError(
            f"index {itype.value} cannot serve a table without meta fields (hoodie.populate.meta.fields=false): "
            "use hoodie.index.type SIMPLE or GLOBAL_SIMPLE"
        )
    return itype


def __getattr__(name: str) -> Any:
    if name in ("Index", "TagContext"):
        from engine.index import base

        return getattr(base, name)
    raise AttributeError(name)


__all__ = ["FILE_ID_COL", "Index", "TagContext", "index_for", "resolve_index", "write_index_type"]
