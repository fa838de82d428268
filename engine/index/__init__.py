"""Indexes: the contract (`Index`) and its implementations, chosen by `IndexType`."""

from __future__ import annotations

from engine.config.table_config import IndexType
from engine.errors import InvalidConfigError
from engine.index.base import FILE_ID_COL, Index, TagContext


def index_for(index_type: IndexType) -> Index:
    """The index implementation for `index_type`."""
    from engine.index.simple import SimpleIndex

    if index_type is IndexType.SIMPLE:
        return SimpleIndex()
    raise InvalidConfigError(f"index {index_type.value} is not available in this version; use SIMPLE")


__all__ = ["FILE_ID_COL", "Index", "TagContext", "index_for"]
