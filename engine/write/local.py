"""The local write: small work stays small. A batch planned on the driver (`engine.write.one_job`)
whose rows plus the file slices it rewrites come within `hoodie.write.local.max.bytes` (default
512 MB) is merged and written by threads of the driver process, one per core, with no Spark job:
the same buckets, the same `write_one` per bucket as the one Spark job runs, hence the same files,
footers, bloom filters, commit metadata, index updates and crash behaviour.

Input needs no Spark either: `Table.upsert(pyarrow.Table | pandas.DataFrame)` keys the rows with
pyarrow (`engine.keygen.keys.record_keys` / `partition_paths`, the renderings the Spark expressions
compute) after typing them as `spark.createDataFrame` would. Such a write starts no JVM unless it
must: a batch above the bound, an index without a driver lookup (HBASE), a global index moving
records between partitions, delete markers ordered against stored records, or an overwrite; then a
Spark session (`spark_source`) takes over, as for a Spark DataFrame.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.columns import KEY_COL, PART_COL
from engine.data import batch as lb
from engine.errors import InvalidConfigError, InvalidInputError
from engine.index.base import Index
from engine.keygen.keys import KeySpec, delete_columns, partition_paths, record_keys
from engine.write import bucket_work
from engine.write.operation import Operation
from engine.write.outcome import WriteOutcome

if TYPE_CHECKING:
    from engine.write.pipeline import Batch, Pipeline, Written
    from engine.write.planner import WritePlan

LOCAL_OPERATIONS = (Operation.UPSERT, Operation.INSERT, Operation.DELETE, Operation.BULK_INSERT)


def input_table(data: Any) -> pa.Table | None:
    """`data` as an Arrow table typed as `spark.createDataFrame(data)` types it (a pyarrow Table or
    RecordBatch, or a pandas DataFrame); None for anything else (a Spark DataFrame)."""
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    elif not isinstance(data, pa.Table):
        if type(data).__module__.split(".")[0] != "pandas" or type(data).__name__ != "DataFrame":
            return None
        data = pa.Table.from_pandas(data, preserve_index=False)
    return as_spark_types(data)


def as_spark_types(table: pa.Table) -> pa.Table:
    """`table` cast to the Arrow types of the Spark schema `spark.createDataFrame` infers for it
    (timestamps in UTC microseconds, large strings as strings, dictionaries decoded...)."""
    from pyspark.errors import PySparkException
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    try:
        spark_schema = from_arrow_schema(table.schema, prefer_timestamp_ntz=False)
    except (PySparkException, TypeError, NotImplementedError) as exc:
        raise InvalidInputError(f"input columns of a type Spark does not read: {exc}") from exc
    target = to_arrow_schema(spark_schema, timezone="UTC")
    if table.schema.equals(target):
        return table
    try:
        return table.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidInputError(f"input columns could not be read as {spark_schema.simpleString()}: {exc}") from exc


def plannable(job: Pipeline, columns: Sequence[str]) -> bool:
    """Whether a batch with these input columns can be planned on the driver (for either writer:
    local or one Spark job): not an overwrite, an index with a driver lookup, no global index moving
    records between partitions, no `_hoodie_is_deleted` rows ordered against stored records."""
    if job.operation not in LOCAL_OPERATIONS or not job.meta.config.populate_meta_fields:
        return False
    if job.operation.tags:
        if type(job.index).locate_batch is Index.locate_batch:
            return False
        if job.index.is_global and job.config.update_partition_path_for(job.index.name):
            return False  # a moved record is deleted in one group and inserted in another
        if job.meta.config.precombine_field in columns and lb.IS_DELETED_COL in columns and not job.is_delete:
            return False  # delete markers are ordered against stored records before writing
    return True


def index_on_driver(index: Index) -> bool:
    """Whether `index` takes a write's located records on the driver (or needs none): HBASE wants
    them as a Spark DataFrame, so its writes are never written locally."""
    return not index.wants_locations or index.updates_on_driver


def eligible(job: Pipeline, table: pa.Table) -> bool:
    """Whether the Arrow input `table` is planned on the driver with no Spark (see the module
    docstring for what is not); the local bound itself is decided after planning."""
    if job.config.local_mode == "never" or job.config.driver_plan == "never":
        return False
    if not plannable(job, table.column_names) or not index_on_driver(job.index):
        return False
    return job.config.local_mode == "always" or table.nbytes <= job.config.local_max_bytes


def keyed(job: Pipeline, table: pa.Table, spec: KeySpec, data_cols: list[str], pc_field: str | None) -> pa.Table:
    """The input's written columns with the record key and partition path, as `Pipeline.keyed`
    and `one_job.collect` give them on Spark (arrival order kept)."""
    missing = [f for f in (*spec.record_key_fields, *spec.partition_fields) if f not in table.column_names and not spec.auto]
    if missing:
        raise InvalidInputError(f"input has no column {', '.join(repr(m) for m in missing)} (the table's key fields)")
    names = data_cols if not job.is_delete else [c for c in delete_columns(spec, pc_field) if c in table.column_names]
    out = table.select(names)
    keys = record_keys(spec, table)
    parts = (
        partition_paths(spec, {f: table.column(f) for f in spec.partition_fields})
        if spec.partition_fields
        else pa.array([""] * table.num_rows, pa.string())
    )
    out = out.append_column(KEY_COL, pc.cast(keys, pa.string())).append_column(PART_COL, pc.cast(parts, pa.string()))
    return out.combine_chunks()


def session_for(job: Pipeline, spark_source: Callable[[], Any] | None, touched: int) -> Any:
    """A Spark session for a batch too big to write locally, or a clear error without one."""
    if spark_source is not None:
        spark = spark_source()
        if spark is not None:
            return spark
    raise InvalidConfigError(
        f"this write rewrites about {touched} bytes, above hoodie.write.local.max.bytes "
        f"({job.config.local_max_bytes}), and the table has no SparkSession: open it with one, or "
        "raise the bound (hoodie.write.local=always writes any size locally)"
    )


def threads(job: Pipeline, buckets: int) -> int:
    return max(1, min(job.config.local_threads or os.cpu_count() or 1, buckets))


def write_buckets(job: Pipeline, rows: pa.Table, plan: WritePlan, batch: Batch, instant: str) -> Written:
    """Every bucket of `plan` merged and written by the driver's threads (groups packed by weight,
    one per thread). After a failure no further bucket starts, and the error is raised once every
    running bucket has finished, so that nothing writes after the write is undone."""
    if not plan.buckets:
        return [], None
    n = threads(job, len(plan.buckets))
    work = bucket_work.prepare(job, rows, plan, batch, instant, n)
    job.progress(
        f"writing {sum(len(g) for g in work.groups)} file group(s) locally ({len(work.groups)} thread(s), "
        f"no Spark job) for instant {instant}"
    )
    failed = threading.Event()

    def run_group(task: int, group: list[tuple[int, pa.Table]]) -> list[WriteOutcome]:
        token = bucket_work.local_token(task)
        out = []
        for index, table in group:
            if failed.is_set():
                break
            try:
                out.append(bucket_work.write_one(work.ctx, work.actx, work.writes[index], table, index, token, task))
                pa.default_memory_pool().release_unused()
            except BaseException:
                failed.set()
                raise
        return out

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(work.groups), thread_name_prefix=f"hoodie-write-{instant}") as pool:
        futures = [pool.submit(run_group, i, g) for i, g in enumerate(work.groups)]
    outcomes: list[WriteOutcome] = []
    for f in futures:  # every thread has finished: the first error is raised
        outcomes.extend(f.result())
    job.debris_free = True  # each bucket written once, here: no retried task left a file behind
    job.progress(f"wrote {len(outcomes)} file(s) locally in {time.monotonic() - t0:.2f}s")
    if not job.index.wants_locations:
        return outcomes, None
    return outcomes, work.located


__all__ = ["LOCAL_OPERATIONS", "as_spark_types", "eligible", "index_on_driver", "input_table", "keyed", "plannable",
           "write_buckets"]
