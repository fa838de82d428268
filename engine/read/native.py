"""Base files read by Spark's own parquet reader, as Apache Hudi's Spark datasource reads a
copy-on-write snapshot: the driver picks the latest base files, Spark scans them (vectorised, in
the JVM, one task per file split, with column pruning and predicate pushdown).

Used only where it returns exactly what the pyarrow scan (`engine.data.scan.scan_files`) does:
- the table is on a local filesystem (there is no s3a connector here; S3 tables are read by the
  Python tasks through `pyarrow.fs`);
- every file was written under the table's current schema: the commit that wrote it records the
  same schema (so no column needs the casts `conform` would apply); files of archived or
  schema-less commits keep the pyarrow scan;
- every path is plain (Spark globs `*?[]{}` and Hadoop paths refuse `:`), so it names one file;
  it is given as a `file://` URI, so no `fs.defaultFS` of the session redirects it;
- the DataFrame's schema is the same: Spark's file sources make every field nullable, so a schema
  with a non-nullable field (a column of `F.lit`, say) keeps the pyarrow scan;
- Spark reads every column type as pyarrow does: timestamps with a time zone in ms or us only
  (no nanoseconds, none without a time zone: old writers store local timestamps as plain INT64);
- the session does not skip missing or corrupt files (`spark.sql.files.ignoreMissingFiles`,
  `ignoreCorruptFiles`), which the pyarrow scan reports.
Partition inference is off (`recursiveFileLookup`): the partition columns are read from the files,
as written, not parsed from `city=paris/` folder names. Sessions from `engine.spark.build_session`
stat the files on the driver (`spark.sql.sources.parallelPartitionDiscovery.threshold`), where
Spark's default runs a listing job for more than 32 paths.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from engine.constants import COMMIT_TIME_COL
from engine.data.base_file import base_file_instant
from engine.data.keys import ScanFile
from engine.errors import EngineError
from engine.schema.avro import avro_to_arrow, with_meta_fields
from engine.schema.internal import file_columns
from engine.storage import Storage
from engine.table.meta_client import MetaClient
from engine.timeline.timeline import Timeline

_PLAIN_PATH = re.compile(r"/[A-Za-z0-9._\-=][A-Za-z0-9._\-=/]*")


def _local_paths(storage: Storage, files: Sequence[ScanFile]) -> list[str] | None:
    from engine.storage.local import LocalStorage

    if not isinstance(storage, LocalStorage):
        return None
    paths = []
    for f in files:
        if f.path is None:
            return None
        path = storage.fs_path(f.path)
        if not _PLAIN_PATH.fullmatch(path):
            return None
        paths.append(f"file://{path}")
    return paths


def _same_in_spark(t: pa.DataType) -> bool:
    """Whether Spark's parquet reader reads a column of this type as pyarrow does."""
    if pa.types.is_timestamp(t):
        return t.unit in ("ms", "us") and t.tz is not None
    if pa.types.is_struct(t):
        return all(_same_in_spark(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _same_in_spark(t.value_type)
    if pa.types.is_map(t):
        return _same_in_spark(t.key_type) and _same_in_spark(t.item_type)
    return True


def _nullable_throughout(t: DataType) -> bool:
    if isinstance(t, StructType):
        return all(f.nullable and _nullable_throughout(f.dataType) for f in t.fields)
    if isinstance(t, ArrayType):
        return t.containsNull and _nullable_throughout(t.elementType)
    if isinstance(t, MapType):
        return t.valueContainsNull and _nullable_throughout(t.keyType) and _nullable_throughout(t.valueType)
    return True


def _written_under(meta: MetaClient, timeline: Timeline, files: Sequence[ScanFile], schema: pa.Schema) -> bool:
    """Whether every file's commit recorded `schema` (meta columns + data columns)."""
    instants = set()
    for f in files:
        instant = base_file_instant(f.path) if f.path else None
        if instant is None:
            return False
        instants.add(instant)
    seen: dict[str, bool] = {}
    for time in instants:
        columns = file_columns(schema, time)
        if columns is not None and any(held != name for name, held in columns.items()):
            return False  # written under other column names (schema on read): read by id
        found = timeline.get(time)
        if found is None or not found.is_completed:
            return False  # archived (its metadata is not at hand) or not a write on this timeline
        try:
            avro = meta.commit_metadata(found).schema
        except EngineError:
            return False
        if not avro:
            return False
        if avro not in seen:
            try:
                seen[avro] = with_meta_fields(avro_to_arrow(avro)).equals(schema)
            except EngineError:  # a schema this engine cannot convert: not the current one
                seen[avro] = False
        if not seen[avro]:
            return False
    return True


def native_scan(
    spark: SparkSession,
    meta: MetaClient,
    timeline: Timeline,
    files: Sequence[ScanFile],
    schema: pa.Schema,
    commit_range: tuple[str | None, str | None] | None = None,
) -> DataFrame | None:
    """The rows of `files` (conformed to `schema`, meta columns included; optionally those
    committed in `commit_range` (start, end]) read by Spark's parquet reader, or None where that
    reader would not return exactly what the pyarrow scan does (see the module doc)."""
    if not files or not all(_same_in_spark(f.type) for f in schema):
        return None
    spark_schema = from_arrow_schema(schema)
    if not _nullable_throughout(spark_schema):
        return None
    for skip in ("spark.sql.files.ignoreMissingFiles", "spark.sql.files.ignoreCorruptFiles"):
        if str(spark.conf.get(skip, "false")).lower() == "true":
            return None
    paths = _local_paths(meta.storage, files)
    if paths is None or not _written_under(meta, timeline, files, schema):
        return None
    try:
        df = spark.read.schema(spark_schema).option("recursiveFileLookup", "true").parquet(*paths)
    except AnalysisException:  # e.g. a file already gone: the pyarrow scan reports it as a typed error
        return None
    if commit_range is not None:
        start, end = commit_range
        cond = F.col(COMMIT_TIME_COL).isNotNull()
        if start is not None:
            cond = cond & (F.col(COMMIT_TIME_COL) > F.lit(start))
        if end is not None:
            cond = cond & (F.col(COMMIT_TIME_COL) <= F.lit(end))
        df = df.filter(cond)
    return df


__all__ = ["native_scan"]
