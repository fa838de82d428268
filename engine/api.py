"""`Table`: the public, Spark-facing handle on one Hudi table."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from engine.config.table_config import IndexType, TableConfig, TableType
from engine.config.write_config import WriteConfig
from engine.constants import TABLE_VERSION
from engine.errors import InvalidConfigError, InvalidInputError, UnsupportedFeatureError
from engine.index import index_for
from engine.read import reader
from engine.services.alter import AlterResult
from engine.services.maintenance import Maintenance
from engine.services.transaction import Transaction
from engine.storage import Storage, storage_for
from engine.table import upgrade
from engine.table.commit_metadata import CommitMetadata
from engine.table.create import DEFAULT_INDEX, new_table_config, require_writable, write_index
from engine.table.fs_view import FileSystemView
from engine.table.meta_client import MetaClient
from engine.table.schema_changes import Change
from engine.timeline.timeline import Timeline
from engine.write.executor import WriteJob
from engine.write.keygen import KeySpec
from engine.write.operation import Operation, WriteResult

Progress = Callable[[str], None]


class Table:
    """A Hudi table: create/open it, write Spark DataFrames into it, read it back.

    Metadata (timeline, file groups, commit details) is available without Spark through
    `Table.meta` / `MetaClient`; reads and writes need the SparkSession given at open.
    """

    def __init__(self, spark: SparkSession | None, meta: MetaClient) -> None:
        self.spark = spark
        self.meta = meta

    # ---- lifecycle ---------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        spark: SparkSession | None,
        path: str,
        *,
        name: str,
        record_key: str | Sequence[str],
        partition_fields: str | Sequence[str] | None = None,
        precombine_field: str | None = None,
        table_type: str | TableType = TableType.COPY_ON_WRITE,
        index: str | IndexType = DEFAULT_INDEX,
        hive_style: bool = False,
        schema: pa.Schema | None = None,
        storage_options: Mapping[str, str] | None = None,
        record_index_buckets: int | None = None,
        record_index_hash: str | None = None,
        table_version: int = TABLE_VERSION,
        key_generator: str | None = None,
        key_generator_options: Mapping[str, str] | None = None,
        populate_meta_fields: bool = True,
    ) -> Table:
        """Create an empty table at `path` (local path or s3://bucket/prefix).

        `record_index_buckets` / `record_index_hash`: index RECORD only, fixed for the table's life
        (default 16 buckets, Java's String.hashCode). `table_version`: 6 (default), 8 or 9 (the
        formats of Apache Hudi 0.14/0.15, 1.0 and 1.1). `key_generator="TIMESTAMP"` with its
        `hoodie.keygen.timebased.*` options in `key_generator_options`: partition by time, as Apache
        Hudi's `TimestampBasedKeyGenerator` does (one record key field, one partition field).
        `populate_meta_fields=False`: Apache Hudi's virtual keys (copy-on-write, index SIMPLE or
        GLOBAL_SIMPLE; no incremental reads or key lookups)."""
        config = new_table_config(
            name=name,
            record_key=record_key,
            partition_fields=partition_fields,
            precombine_field=precombine_field,
            table_type=table_type,
            index=index,
            hive_style=hive_style,
            schema=schema,
            record_index_buckets=record_index_buckets,
            record_index_hash=record_index_hash,
            table_version=table_version,
            key_generator=key_generator,
            key_generator_options=key_generator_options,
            populate_meta_fields=populate_meta_fields,
        )
        storage = storage_for(path, dict(storage_options) if storage_options else None)
        return cls(spark, MetaClient.create(storage, config))

    @classmethod
    def open(cls, spark: SparkSession | None, path: str | Storage, storage_options: Mapping[str, str] | None = None) -> Table:
        """Open an existing table; raises TableNotFoundError if `path` holds none."""
        return cls(spark, MetaClient.open(path, dict(storage_options) if storage_options else None))

    # ---- metadata ----------------------------------------------------------------------
    @property
    def config(self) -> TableConfig:
        return self.meta.config

    @property
    def path(self) -> str:
        return self.meta.storage.base_uri

    def timeline(self) -> Timeline:
        return self.meta.timeline()

    def commit_metadata(self, instant: str) -> CommitMetadata:
        return self.meta.commit_metadata(instant)

    def file_system_view(self, as_of: str | None = None) -> FileSystemView:
        return self.meta.file_system_view(as_of=as_of)

    def schema(self) -> pa.Schema | None:
        """The table's data schema (None before the first write)."""
        from engine.table.internal_schema import without_versions

        schema = self.meta.latest_schema()
        return without_versions(schema) if schema is not None else None

    # ---- writes ------------------------------------------------------------------------
    def _write(
        self, op: Operation, df: DataFrame, options: Mapping[str, object] | None, progress: Progress | None
    ) -> WriteResult:
        if not isinstance(df, DataFrame):
            raise InvalidInputError(f"expected a Spark DataFrame, got {type(df).__name__}")
        config = WriteConfig.from_options(options)
        require_writable(self.meta.config, self.meta.properties_uri)  # before the lock and repair: a refused write changes nothing
        upgrade.check_allowed(self.meta.config, config.auto_upgrade, self.meta.properties_uri)
        if config.schema_on_read and self.meta.config.version != 6:
            raise UnsupportedFeatureError(
                f"hoodie.schema.on.read.enable: an internal schema for a version {self.meta.config.version} table "
                "is not built (version 6 tables only)")
        KeySpec.from_config(self.meta.config, config.keygen_options)  # so are unusable key generator options
        itype = write_index(self.config, config.index_type)
        index = index_for(itype, dict(config.index_options), self.config.name)
        if self.spark is None:
            self.spark = df.sparkSession
        with Transaction(self.meta, config, index, op.value.lower()) as tx:
            tx.spark = self.spark
            job = WriteJob(self.meta, index, config, op, progress or (lambda _msg: None), guard=tx.guard)
            result = job.run(df)
            if result.instant is not None:
                services = tx.after_commit()
                result = replace(result, services={k: _summary(v) for k, v in services.items()})
            if tx.repair_report is not None and not tx.repair_report.nothing_done:
                result = replace(result, repaired=tx.repair_report)
        return result

    def alter(
        self,
        *changes: Change,
        rename: Mapping[str, str] | None = None,
        drop: Iterable[str] = (),
        types: Mapping[str, str | pa.DataType] | None = None,
        options: Mapping[str, object] | None = None,
    ) -> AlterResult:
        """Change columns under schema on read, in one `alter_schema` commit (no file rewritten):
        `rename={"fare": "amount"}`, `drop=["tip"]`, `types={"val": "long"}` (widening only), and
        `schema_changes.Move("amount", after="id")` style changes, applied in that order after any
        positional `changes`. Older files are read by column id. See the README, "Schema on read"."""
        from engine.table.schema_changes import ChangeType, Drop, Rename, parse_type

        todo: list[Change] = list(changes)
        todo += [Rename(old, new) for old, new in (rename or {}).items()]
        todo += [Drop(name) for name in drop]
        todo += [ChangeType(n, parse_type(t) if isinstance(t, str) else t) for n, t in (types or {}).items()]
        return Maintenance(self.meta, options).alter(todo)

    @property
    def maintenance(self) -> Maintenance:
        """Rollback, restore, savepoints, clean, archival and repair (no SparkSession needed)."""
        return Maintenance(self.meta)

    def upsert(self, df: DataFrame, options: Mapping[str, object] | None = None, progress: Progress | None = None) -> WriteResult:
        """Insert new records and update existing ones (by record key), in one commit."""
        return self._write(Operation.UPSERT, df, options, progress)

    def insert(self, df: DataFrame, options: Mapping[str, object] | None = None, progress: Progress | None = None) -> WriteResult:
        """Insert records without looking them up (a key already in the table is duplicated)."""
        return self._write(Operation.INSERT, df, options, progress)

    def bulk_insert(self, df: DataFrame, options: Mapping[str, object] | None = None, progress: Progress | None = None) -> WriteResult:
        """Like insert, but always writes new file groups (no small-file packing): for initial loads."""
        return self._write(Operation.BULK_INSERT, df, options, progress)

    def delete(self, df: DataFrame, options: Mapping[str, object] | None = None, progress: Progress | None = None) -> WriteResult:
        """Delete the records whose keys appear in `df` (key and partition columns suffice)."""
        return self._write(Operation.DELETE, df, options, progress)

    def insert_overwrite_table(
        self, df: DataFrame, options: Mapping[str, object] | None = None, progress: Progress | None = None
    ) -> WriteResult:
        """Replace the whole table with `df`: one `replacecommit` writing the records as new file
        groups and replacing every existing one (they stay on storage until cleaned, for time
        travel and rollback). An empty `df` changes nothing."""
        return self._write(Operation.INSERT_OVERWRITE_TABLE, df, options, progress)

    def insert_overwrite(
        self, df: DataFrame, options: Mapping[str, object] | None = None, progress: Progress | None = None
    ) -> WriteResult:
        """Replace the partitions `df` has records for with those records (other partitions are
        kept): one `replacecommit`, as `insert_overwrite_table` but per partition."""
        return self._write(Operation.INSERT_OVERWRITE, df, options, progress)

    # ---- reads -------------------------------------------------------------------------
    def _spark(self) -> SparkSession:
        if self.spark is None:
            raise InvalidConfigError("this Table was opened without a SparkSession; reads and writes need one")
        return self.spark

    def read(self, as_of: str | None = None, read_optimized: bool = False) -> DataFrame:
        """Snapshot read (meta columns first), or the table as of a completed instant.
        `read_optimized`: base files only (merge-on-read: log files are not merged)."""
        return reader.read_snapshot(self._spark(), self.meta, as_of, read_optimized=read_optimized)

    def read_incremental(self, start: str, end: str | None = None) -> DataFrame:
        """Records committed in (start, end]."""
        return reader.read_incremental(self._spark(), self.meta, start, end)

    def _index(self, options: Mapping[str, object] | None = None):
        from engine.index import index_for

        cfg = WriteConfig.from_options(options)
        return index_for(write_index(self.config, cfg.index_type), dict(cfg.index_options), self.config.name)

    def read_keys(self, keys: Iterable[str], options: Mapping[str, object] | None = None) -> DataFrame:
        """The records with these record keys (as in `_hoodie_record_key`), reading only the files
        the index says hold them; absent keys give no row. `options`: the index's settings, as
        for writes (e.g. `hoodie.index.hbase.thrift.host`)."""
        from engine.read.lookup import read_keys

        if not self.config.populate_meta_fields:
            raise UnsupportedFeatureError(
                "key lookups read _hoodie_record_key, which tables without meta fields "
                "(hoodie.populate.meta.fields=false) leave empty: filter table.read() on the key field instead"
            )
        return read_keys(self._spark(), self.meta, self._index(options), keys)

    def filter_exists(self, df: DataFrame, options: Mapping[str, object] | None = None) -> DataFrame:
        """The rows of `df` whose keys are not in the table yet (de-duplicate before an insert);
        `options` as for `read_keys`."""
        from engine.read.lookup import filter_exists

        if not isinstance(df, DataFrame):
            raise InvalidInputError(f"expected a Spark DataFrame, got {type(df).__name__}")
        return filter_exists(self._spark(), self.meta, self._index(options), df)

    def __repr__(self) -> str:
        return f"Table({self.config.name!r}, {self.path!r}, {self.config.table_type.value})"


def _summary(value: object) -> object:
    """A short, JSON-friendly account of an automatic service's result."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, str):
        return value
    written = getattr(value, "files", None)
    if written is not None:  # a compaction: the base files it wrote
        return {"instant": getattr(value, "instant", None), "files": len(written)}
    deleted = getattr(value, "deleted", None)
    return {"instant": getattr(value, "instant", None), "deleted": len(deleted) if deleted is not None else 0}
