"""hoodie engine: Apache Hudi tables (table versions 4 to 9) from Python on PySpark.

Public API: `Table`, `WriteResult`, `Operation`, `TableLock`, the config enums and the errors.
"""

from engine.config.table_config import IndexType, TableConfig, TableType
from engine.config.write_config import WriteConfig
from engine.errors import (
    CommitConflictError,
    ConcurrentWriteError,
    CorruptTableError,
    EngineError,
    IndexChangedError,
    InstantNotFoundError,
    InvalidConfigError,
    InvalidInputError,
    PendingClusteringError,
    RollbackRefusedError,
    SchemaMismatchError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
)
from engine.metadata import writer as _metadata_writer  # noqa: F401  (its hooks keep metadata tables in step)

__all__ = [
    "CommitConflictError",
    "ConcurrentWriteError",
    "CorruptTableError",
    "EngineError",
    "IndexType",
    "InstantNotFoundError",
    "IndexChangedError",
    "PendingClusteringError",
    "RollbackRefusedError",
    "InvalidConfigError",
    "InvalidInputError",
    "Operation",
    "SchemaMismatchError",
    "StorageError",
    "Table",
    "TableConfig",
    "TableExistsError",
    "TableLock",
    "TableNotFoundError",
    "TableType",
    "WriteConfig",
    "WriteResult",
]


def __getattr__(name: str):
    # Spark-facing symbols load lazily so `import engine` stays cheap for the console.
    if name == "Table":
        from engine.api import Table

        return Table
    if name in ("WriteResult", "Operation"):
        from engine.write import operation

        return getattr(operation, name)
    if name == "TableLock":
        from engine.transaction.lock import TableLock

        return TableLock
    raise AttributeError(name)
