"""Indexes: the contract (`Index`) and its implementations, chosen by `IndexType`.

The Spark-facing symbols load lazily, so pure submodules (e.g. `engine.index.bloom_filter`,
used inside write tasks) can be imported without pulling in pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.config.table_config import IndexType
from engine.table.create import require_index_available

if TYPE_CHECKING:
    from engine.index.base import Index, TagContext

FILE_ID_COL = "__hoodie_file_id"  # the column `tag_location` adds: file id holding the key, null for new keys


def index_for(index_type: IndexType) -> Index:
    """The index implementation for `index_type` (InvalidConfigError if this version lacks it)."""
    from engine.index.bloom import BloomIndex, GlobalBloomIndex
    from engine.index.simple import GlobalSimpleIndex, SimpleIndex

    require_index_available(index_type)
    implementations: dict[IndexType, type[Index]] = {
        IndexType.SIMPLE: SimpleIndex,
        IndexType.GLOBAL_SIMPLE: GlobalSimpleIndex,
        IndexType.BLOOM: BloomIndex,
        IndexType.GLOBAL_BLOOM: GlobalBloomIndex,
    }
    return implementations[index_type]()


def __getattr__(name: str) -> Any:
    if name in ("Index", "TagContext"):
        from engine.index import base

        return getattr(base, name)
    raise AttributeError(name)


__all__ = ["FILE_ID_COL", "Index", "TagContext", "index_for"]
