"""Reading table files on Spark: one task per group of files, each read with pyarrow through Storage.

This works the same for local paths and S3 (there is no s3a connector): the file list is
distributed, and each task opens its files with `pyarrow.fs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from engine.constants import COMMIT_TIME_COL, RECORD_KEY_COL
from engine.data.base_file import conform, read_base_file
from engine.data.keys import KEYS_SCHEMA, ScanFile, file_keys, file_ordering, ordering_schema
from engine.storage import Storage

_FILE_LIST_SCHEMA = "path string, partition string, file_id string"


def scan_parallelism(spark: SparkSession, items: int) -> int:
    """Tasks for `items` units of Python work: about two per core.

    Each Python task costs tens of milliseconds before it does anything, so one task per
    file would spend more time starting than reading; each task loops over its files.
    """
    return max(1, min(items, 2 * spark.sparkContext.defaultParallelism))


def file_frame(spark: SparkSession, files: Sequence[ScanFile]) -> DataFrame:
    """A DataFrame of (path, partition, file id), about two tasks per core."""
    rows = [(f.path, f.partition, f.file_id) for f in files]
    return spark.sparkContext.parallelize(rows, scan_parallelism(spark, len(rows))).toDF(_FILE_LIST_SCHEMA)


def _read_files_task(
    storage: Storage,
    schema: pa.Schema,
    commit_range: tuple[str | None, str | None] | None,
    keys: Broadcast | None = None,
):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        wanted = keys.value if keys is not None else None
        for batch in batches:
            for path in batch.column(0).to_pylist():
                table = conform(read_base_file(storage, path), schema)
                if wanted is not None:
                    table = table.filter(pc.is_in(table.column(RECORD_KEY_COL), value_set=wanted))
                if commit_range is not None:
                    start, end = commit_range
                    times = table.column(COMMIT_TIME_COL)
                    mask = pc.is_valid(times)
                    if start is not None:
                        mask = pc.and_(mask, pc.greater(times, start))
                    if end is not None:
                        mask = pc.and_(mask, pc.less_equal(times, end))
                    table = table.filter(mask)
                yield from table.to_batches(max_chunksize=65536)

    return run


def scan_files(
    spark: SparkSession,
    storage: Storage,
    files: Sequence[ScanFile],
    schema: pa.Schema,
    commit_range: tuple[str | None, str | None] | None = None,
    keys: pa.Array | None = None,
) -> DataFrame:
    """A DataFrame of the rows of `files`, conformed to `schema`, optionally only those committed
    in `commit_range` (start, end] or whose record key is in `keys`."""
    spark_schema = from_arrow_schema(schema)
    if not files:
        return spark.createDataFrame([], spark_schema)
    shared = spark.sparkContext.broadcast(keys) if keys is not None else None
    task = _read_files_task(storage, schema, commit_range, shared)
    return file_frame(spark, files).mapInArrow(task, spark_schema)


def _read_keys_task(storage: Storage, wanted: Broadcast | None):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        lookup = wanted.value if wanted is not None else None
        for batch in batches:
            for path, partition, file_id in zip(*(c.to_pylist() for c in batch.columns), strict=True):
                found = file_keys(storage, path, partition, file_id, lookup)
                if found is not None:
                    yield found

    return run


def _read_ordering_task(storage: Storage, field: pa.Field, wanted: Broadcast | None):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keys = wanted.value if wanted is not None else None
        for batch in batches:
            for path, partition, file_id in zip(*(c.to_pylist() for c in batch.columns), strict=True):
                yield from file_ordering(storage, path, partition, file_id, field, keys).to_batches()

    return run


def scan_ordering(
    spark: SparkSession, storage: Storage, files: Sequence[ScanFile], field: pa.Field, keys: pa.Array | None = None
) -> DataFrame:
    """(key, partition, file id, stored ordering value) of the records of `files` (only of `keys`
    when given): what a write compares incoming records with before it moves or deletes them."""
    schema = from_arrow_schema(ordering_schema(field.type))
    if not files:
        return spark.createDataFrame([], schema)
    shared = spark.sparkContext.broadcast(keys) if keys is not None else None
    return file_frame(spark, files).mapInArrow(_read_ordering_task(storage, field, shared), schema)


def scan_keys(
    spark: SparkSession,
    storage: Storage,
    files: Iterable[ScanFile],
    wanted: Mapping[str, pa.Array] | None = None,
) -> DataFrame:
    """(record key, partition, file id) of the records in `files`, reading only the key column.

    With `wanted` (partition -> candidate keys, or ANY_PARTITION -> keys), only records whose
    key is a candidate come back: the filter runs in the scan task, so a lookup of a small
    batch against a big table moves little data.
    """
    files = list(files)
    spark_schema = from_arrow_schema(KEYS_SCHEMA)
    if not files:
        return spark.createDataFrame([], spark_schema)
    shared = spark.sparkContext.broadcast(dict(wanted)) if wanted is not None else None
    return file_frame(spark, files).mapInArrow(_read_keys_task(storage, shared), spark_schema)
