"""Configuration: the table's `hoodie.properties` and the writer's options (pure, immutable)."""

from engine.config.table_config import IndexType, TableConfig, TableType, table_checksum
from engine.config.write_config import WriteConfig

__all__ = ["IndexType", "TableConfig", "TableType", "WriteConfig", "table_checksum"]
