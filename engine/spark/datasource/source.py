"""`HudiDataSource`: the engine as Spark's `hudi` data source (`pyspark.sql.datasource`).

Spark creates it in Python workers, never in the user's process: `schema()` and `reader()` run in
driver-side workers without a SparkSession, `read()` in executor tasks (`reader.HudiReader`), the
writer's `write()` in executor tasks and its `commit()` in a driver-side worker that hands the
write to the commit service in the driver process (`writer.HudiWriter`, `service`).

Catalog tables: Spark 4's session catalog gives a Python source its options only when the table is
created (`CREATE TABLE t USING hudi LOCATION '...'` calls `schema()`), not when it is read or
written later; so `schema()` keeps the location and Hudi options of such a table in the metadata
of its first column, and `reader()` / `writer()` find them there.
"""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructField, StructType

from engine.config.write_config import WriteConfig
from engine.errors import InvalidConfigError, TableNotFoundError
from engine.read.plan import table_schema_or_empty
from engine.spark.datasource.changes import CHANGES_SCHEMA, HudiChangesReader
from engine.spark.datasource.options import (
    META_KEY,
    ReadOptions,
    WriteOptions,
    pack_catalog_options,
    save_mode_operation,
    storage_options,
    table_path,
    unpack_catalog_options,
)
from engine.spark.datasource.reader import HudiReader
from engine.spark.datasource.writer import HudiWriter, Service
from engine.storage import storage_for
from engine.table.meta_client import MetaClient

_CATALOG_MARKERS = ("provider", "location")


def _as_of(opts: dict[str, str]) -> str | None:
    """A time-travel read's instant: its rows have the schema the table had then (as in Apache
    Hudi). None without one, or for a malformed one (the reader's option parsing refuses it)."""
    try:
        return ReadOptions.parse(opts).as_of
    except InvalidConfigError:
        return None


def _is_cdc(opts: dict[str, str]) -> bool:
    try:
        return ReadOptions.parse(opts).cdc
    except InvalidConfigError:
        return False


class HudiDataSource(DataSource):
    """Apache Hudi tables for `spark.read/write.format("hudi")` and `USING hudi`."""

    short_name: ClassVar[str] = "hudi"
    service: ClassVar[Service | None] = None  # set on the subclass `register` makes

    @classmethod
    def name(cls) -> str:
        return cls.short_name

    def _options(self, schema: StructType | None = None) -> dict[str, str]:
        opts = {str(k).lower(): str(v) for k, v in self.options.items()}
        if table_path(opts) is None and schema is not None and schema.fields:
            opts = {**unpack_catalog_options(schema.fields[0].metadata.get(META_KEY)), **opts}
        return opts

    def _path(self, opts: dict[str, str]) -> str:
        path = table_path(opts)
        if path is None:
            raise InvalidConfigError(
                "no table path: spark.read.format('hudi').load(path), df.write.format('hudi').save(path), "
                "or CREATE TABLE t USING hudi LOCATION 'path' (without a column list: the table's own "
                "schema is used); CREATE TABLE ... AS SELECT and saveAsTable are not supported through "
                "Spark's Python data source API: write with save(path), then CREATE TABLE ... LOCATION"
            )
        return path

    def schema(self) -> StructType:
        opts = self._options()
        if _is_cdc(opts):
            return CHANGES_SCHEMA
        meta = MetaClient.open(self._path(opts), storage_options(opts) or None)
        schema = from_arrow_schema(table_schema_or_empty(meta, meta.timeline(), _as_of(opts)))
        if any(k in opts for k in _CATALOG_MARKERS) and schema.fields:
            first = schema.fields[0]
            tagged = StructField(first.name, first.dataType, first.nullable,
                                 {**first.metadata, META_KEY: pack_catalog_options(opts)})
            schema = StructType([tagged, *schema.fields[1:]])
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = self._options(schema)
        read = ReadOptions.parse(opts)
        if read.cdc:
            return HudiChangesReader(self._path(opts), storage_options(opts), read)
        return HudiReader(self._path(opts), storage_options(opts), read, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts = self._options(schema)
        # absolute here, on the driver: tasks and the commit service may run in other folders
        path = storage_for(self._path(opts), storage_options(opts) or None).base_uri
        write = WriteOptions.parse(opts)  # bad options fail here, before any task runs
        # a catalog table's INSERT OVERWRITE (its options come from the schema, not save(path))
        sql = table_path({str(k).lower(): str(v) for k, v in self.options.items()}) is None
        _op, replaces_table = save_mode_operation(write.operation, overwrite, sql)  # Apache Hudi's save-mode rules
        WriteConfig.from_options(write.engine_options)  # unknown or bad engine options, too
        try:
            meta = MetaClient.open(path, storage_options(opts) or None)
        except TableNotFoundError:
            problem = write.creation_problem()
            if problem is not None:
                raise InvalidConfigError(problem) from None
        else:
            from engine.spark.datasource.service import check_conflicts

            if not replaces_table:  # a table mode("overwrite") replaces may be created otherwise
                check_conflicts(write, meta.config, path)
        hoodie_opts = {k: v for k, v in opts.items() if k.startswith("hoodie.")}
        return HudiWriter(path, storage_options(opts), hoodie_opts, overwrite, self.service, sql=sql)


class HoodieDataSource(HudiDataSource):
    """The same source under the name `hoodie` (for sessions where Apache Hudi's JVM source owns `hudi`)."""

    short_name = "hoodie"
