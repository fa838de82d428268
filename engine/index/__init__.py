"""Indexes: the contract (`Index`) and its implementations, chosen by `IndexType`."""

from __future__ import annotations

from engine.config.table_config import IndexType
from engine.index.base import FILE_ID_COL, Index, TagContext
from engine.table.create import require_index_available


def index_for(index_type: IndexType) -> Index:
    """The index implementation for `index_type` (InvalidConfigError if this version lacks it)."""
    from engine.index.simple import SimpleIndex

    require_index_available(index_type)
    return {IndexType.SIMPLE: SimpleIndex}[index_type]()


__all__ = ["FILE_ID_COL", "Index", "TagContext", "index_for"]
