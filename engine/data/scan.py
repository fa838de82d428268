"""Reading table files on Spark: one task per group of files, each read with pyarrow through Storage.

This works the same for local paths and S3 (there is no s3a connector): the file list is
distributed, and each task opens its files with `pyarrow.fs`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.broadcast import Broadcast
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from engine.constants import RECORD_KEY_COL
from engine.data.base_file import base_file_instant, conform, read_base_file
from engine.data.keys import KEYS_SCHEMA, ScanFile, SliceMerge, file_keys, file_ordering, ordering_schema
from engine.data.slice_read import SliceRead, commit_filter
from engine.data.slice_reader import SliceFiles, read_slice
from engine.storage import Storage

T = TypeVar("T")
R = TypeVar("R")

_FILE_LIST_SCHEMA = "file string"


def scan_parallelism(spark: SparkSession, items: int) -> int:
    """Tasks for `items` units of Python work: about two per core.

    Each Python task costs tens of milliseconds before it does anything, so one task per
    file would spend more time starting than reading; each task loops over its files.
    """
    return max(1, min(items, 2 * spark.sparkContext.defaultParallelism))


def run_tasks(spark: SparkSession, instant: str, description: str, items: Sequence[T],
              work: Callable[[T, str], R]) -> list[R]:
    """`work(item, write token)` for each item, as the Spark tasks of one job in the job group of
    `instant` (which a cancel stops), about two per core; results in item order. A table service's
    units of Python work (compaction operations, clustering groups)."""
    from engine.data.file_names import write_token
    from engine.runtime.jobs import job_group

    def task(index_and_item: tuple[int, T]) -> R:
        from pyspark.taskcontext import TaskContext

        tc = TaskContext.get()
        i, item = index_and_item
        token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId()) if tc else f"{i}-0-0"
        return work(item, token)

    sc = spark.sparkContext
    sc.setJobGroup(job_group(instant), description, interruptOnCancel=True)
    try:
        return sc.parallelize(list(enumerate(items)), scan_parallelism(spark, len(items))).map(task).collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def run_local(items: Sequence[T], work: Callable[[T, str], R], threads: int | None = None) -> list[R]:
    """`work(item, write token)` for each item on threads of this process (one per core), results
    in item order; after a failure no further item starts, and the error is raised once every
    running item has finished. A table service's units of work small enough for the driver."""
    import os
    import threading
    from concurrent.futures import ThreadPoolExecutor

    failed = threading.Event()

    def one(index_and_item: tuple[int, T]) -> R | None:
        i, item = index_and_item
        if failed.is_set():
            return None
        try:
            return work(item, f"{i}-0-0")
        except BaseException:
            failed.set()
            raise

    n = max(1, min(threads or os.cpu_count() or 1, len(items)))
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="hoodie-service") as pool:
        futures = [pool.submit(one, (i, item)) for i, item in enumerate(items)]
    out: list[R] = []
    for f in futures:
        r = f.result()  # the first failure raises here; None only for items skipped after it
        if r is not None or not failed.is_set():
            out.append(r)  # type: ignore[arg-type]
    return out


def read_bytes(metrics: Sequence[Mapping[str, float]]) -> int:
    """What a service plan's units read, from their `TOTAL_IO_READ_MB` metrics (Apache Hudi's)."""
    return int(sum(float(m.get("TOTAL_IO_READ_MB", 0.0)) for m in metrics) * 1024 * 1024)


def file_frame(spark: SparkSession, files: Sequence[ScanFile]) -> DataFrame:
    """A DataFrame of the slices to scan (one JSON string each, read back by `scan_files_of`),
    about two tasks per core."""
    rows = [(json.dumps([f.path, f.partition, f.file_id, f.base_instant, list(f.log_paths)]),) for f in files]
    return spark.sparkContext.parallelize(rows, scan_parallelism(spark, len(rows))).toDF(_FILE_LIST_SCHEMA)


def scan_files_of(batches: Iterator[pa.RecordBatch]) -> Iterator[ScanFile]:
    """The ScanFiles of a `file_frame` task's input."""
    for batch in batches:
        for text in batch.column(0).to_pylist():
            path, partition, file_id, base_instant, logs = json.loads(text)
            yield ScanFile(path, partition, file_id, tuple(logs), base_instant)


def _read_files_task(
    storage: Storage,
    schema: pa.Schema,
    commit_range: tuple[str | None, str | None] | None,
    keys: Broadcast | None = None,
):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        wanted = keys.value if keys is not None else None
        for file in scan_files_of(batches):
            assert file.path is not None
            table = conform(read_base_file(storage, file.path), schema, base_file_instant(file.path))
            if wanted is not None:
                table = table.filter(pc.is_in(table.column(RECORD_KEY_COL), value_set=wanted))
            yield from commit_filter(table, commit_range).to_batches(max_chunksize=65536)

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


def _read_keys_task(storage: Storage, wanted: Broadcast | None, merge: SliceMerge | None):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        lookup = wanted.value if wanted is not None else None
        for file in scan_files_of(batches):
            found = file_keys(storage, file, lookup, merge)
            if found is not None:
                yield found

    return run


def _read_slices_task(
    storage: Storage, schema: pa.Schema, slices: Broadcast, how: SliceRead, keys: Broadcast | None
):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        wanted = keys.value if keys is not None else None
        listed: list[SliceFiles] = slices.value
        for batch in batches:
            for i in batch.column(0).to_pylist():
                files = listed[i]
                table = read_slice(
                    storage,
                    files,
                    schema,
                    ordering_field=how.ordering_field,
                    mode=how.mode,
                    is_committed=how.committed,
                    as_of=how.as_of,
                    keys=wanted,
                )
                yield from commit_filter(table, how.commit_range).to_batches(max_chunksize=65536)

    return run


def scan_slices(
    spark: SparkSession,
    storage: Storage,
    slices: Sequence[SliceFiles],
    schema: pa.Schema,
    how: SliceRead,
    keys: pa.Array | None = None,
) -> DataFrame:
    """A DataFrame of the merged records of file slices (base file + log files, merged as
    `engine.data.slice_reader.read_slice` does), conformed to `schema`; only the keys `keys` when
    given, only records committed in `how.commit_range` when given."""
    spark_schema = from_arrow_schema(schema)
    if not slices:
        return spark.createDataFrame([], spark_schema)
    sc = spark.sparkContext
    shared = sc.broadcast(list(slices))
    wanted = sc.broadcast(keys) if keys is not None else None
    index = sc.parallelize([(i,) for i in range(len(slices))], scan_parallelism(spark, len(slices))).toDF(
        "i int"
    )
    return index.mapInArrow(_read_slices_task(storage, schema, shared, how, wanted), spark_schema)


def _read_ordering_task(
    storage: Storage, field: pa.Field, wanted: Broadcast | None, merge: SliceMerge | None
):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keys = wanted.value if wanted is not None else None
        for file in scan_files_of(batches):
            yield from file_ordering(storage, file, field, keys, merge).to_batches()

    return run


def scan_ordering(
    spark: SparkSession,
    storage: Storage,
    files: Sequence[ScanFile],
    field: pa.Field,
    keys: pa.Array | None = None,
    merge: SliceMerge | None = None,
) -> DataFrame:
    """(key, partition, file id, stored ordering value) of the records of `files` (only of `keys`
    when given): what a write compares incoming records with before it moves or deletes them."""
    schema = from_arrow_schema(ordering_schema(field.type))
    if not files:
        return spark.createDataFrame([], schema)
    shared = spark.sparkContext.broadcast(keys) if keys is not None else None
    return file_frame(spark, files).mapInArrow(_read_ordering_task(storage, field, shared, merge), schema)


def scan_keys(
    spark: SparkSession,
    storage: Storage,
    files: Iterable[ScanFile],
    wanted: Mapping[str, pa.Array] | None = None,
    merge: SliceMerge | None = None,
) -> DataFrame:
    """(record key, partition, file id) of the live records of `files` (slices: merge-on-read log
    files merged with `merge`), reading only the key column.

    With `wanted` (partition -> candidate keys, or ANY_PARTITION -> keys), only records whose
    key is a candidate come back: the filter runs in the scan task, so a lookup of a small
    batch against a big table moves little data.
    """
    files = list(files)
    spark_schema = from_arrow_schema(KEYS_SCHEMA)
    if not files:
        return spark.createDataFrame([], spark_schema)
    shared = spark.sparkContext.broadcast(dict(wanted)) if wanted is not None else None
    return file_frame(spark, files).mapInArrow(_read_keys_task(storage, shared, merge), spark_schema)
