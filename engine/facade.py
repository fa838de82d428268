"""The console's door into the engine: every name `webui/` uses, from one module.

Importing it never imports pyspark: the web process browses tables, plans table services and
checks uploads with the Spark-free modules below. `Table` (the write API) and `build_session`
(a SparkSession) load on first use, in the job runner's process only
(`tests/webui/test_console_api.py::test_web_process_never_imports_pyspark`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.config.table_config import CREATE_VERSIONS, TableType
from engine.config.write_config import CONCURRENCY_MODES, SINGLE_WRITER, WriteConfig
from engine.constants import TABLE_VERSION
from engine.data.file_names import parse_log_file_name
from engine.errors import (
    EngineError,
    InstantNotFoundError,
    InvalidConfigError,
    InvalidInputError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
)
from engine.keygen.keys import KeySpec
from engine.metadata.create import create_table
from engine.metadata.summary import summarize as summarize_metadata
from engine.read.changes import HistoryUnavailableError, read_instant_changes
from engine.schema import internal as internal_schema
from engine.schema.avro import META_FIELDS, avro_to_arrow, without_meta_fields
from engine.schema.evolution import canonical_type, resolve_write_schema
from engine.schema.internal import LATEST_SCHEMA_KEY, InternalSchema
from engine.schema.internal import search as schema_version_at
from engine.serial import to_doc
from engine.services.archive import read_archived_entries, timeline_files
from engine.services.compaction import deltacommits_since_compaction
from engine.services.maintenance import Maintenance
from engine.storage import storage_for
from engine.storage.uri import canonical_uri, is_within
from engine.table.clustering import pending_clustering
from engine.table.compaction_plan import read_plan
from engine.table.create import AVAILABLE_INDEXES, DEFAULT_INDEX, new_table_config
from engine.table.fs_report import file_group_report
from engine.table.fs_view import FileSystemView
from engine.table.meta_client import MetaClient
from engine.table.metadata_table import partitions_in as metadata_partitions
from engine.table.placement import enclosing_table
from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.instant import Action, Instant, State, is_valid_instant_time, parse_instant_time
from engine.timeline.timeline import Timeline
from engine.transaction.liveness import process_start

if TYPE_CHECKING:
    from engine.api import Table
    from engine.spark.session import build_session

_SPARK = {"Table": ("engine.api", "Table"), "build_session": ("engine.spark.session", "build_session")}


def __getattr__(name: str) -> Any:
    """`Table` and `build_session` on first use (they import pyspark)."""
    if name in _SPARK:
        import importlib

        module, attr = _SPARK[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'engine.facade' has no attribute {name!r}")


__all__ = [
    "HistoryUnavailableError",
    "InstantNotFoundError",
    "read_instant_changes",
    "create_table",
    "metadata_partitions",
    "AVAILABLE_INDEXES",
    "CONCURRENCY_MODES",
    "CREATE_VERSIONS",
    "DEFAULT_INDEX",
    "LATEST_SCHEMA_KEY",
    "META_FIELDS",
    "SINGLE_WRITER",
    "TABLE_VERSION",
    "Action",
    "CommitMetadata",
    "EngineError",
    "FileSystemView",
    "Instant",
    "InternalSchema",
    "InvalidConfigError",
    "InvalidInputError",
    "KeySpec",
    "Maintenance",
    "MetaClient",
    "SchemaMismatchError",
    "State",
    "Table",
    "TableExistsError",
    "TableNotFoundError",
    "TableType",
    "Timeline",
    "WriteConfig",
    "avro_to_arrow",
    "build_session",
    "canonical_type",
    "canonical_uri",
    "deltacommits_since_compaction",
    "enclosing_table",
    "file_group_report",
    "internal_schema",
    "is_valid_instant_time",
    "is_within",
    "new_table_config",
    "parse_instant_time",
    "parse_log_file_name",
    "pending_clustering",
    "process_start",
    "read_archived_entries",
    "read_plan",
    "resolve_write_schema",
    "schema_version_at",
    "storage_for",
    "summarize_metadata",
    "timeline_files",
    "to_doc",
    "without_meta_fields",
]
